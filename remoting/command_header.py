"""Typed request and response headers (RocketMQ's CommandCustomHeader): a dataclass whose fields travel as the
command's extFields, all strings on the wire.

A field without a default is required (RocketMQ's @CFNotNull); the others may be absent (None, left out when
sent). Field types: str, Int (32 bits), Long (64 bits), bool. The wire name is the field's name in camelCase
unless `field(metadata={WIRE: "clientID"})` says otherwise. Reading checks every field and raises
HeaderFieldError naming the header, the field and the value; fields the header does not define (a client's
AccessKey, Signature, OnsChannel...) are ignored, as RocketMQ ignores them.
"""
from __future__ import annotations

import dataclasses
import typing
from typing import Annotated, Any, Mapping, NamedTuple, Optional, TypeVar

Int = Annotated[int, 32]
Long = Annotated[int, 64]
WIRE = "wire"

_TRUE, _FALSE = ("true", "1"), ("false", "0", "")  # some clients write booleans as 1 and 0

H = TypeVar("H", bound="CommandHeader")


class HeaderFieldError(ValueError):
    """A header field missing or of the wrong form; answered with SYSTEM_ERROR and this message as the remark."""

    def __init__(self, header: str, field: str, value: Optional[str], reason: str):
        self.header, self.field, self.value = header, field, value
        shown = "missing" if value is None else f"{value[:80]!r}"
        super().__init__(f"{header}: field {field} is {shown}{', ' + reason if reason else ''}")


class _Field(NamedTuple):
    attr: str
    wire: str
    kind: Any  # str, bool or a bit width (32, 64)
    required: bool


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _kind(hint: Any) -> Any:
    if typing.get_origin(hint) is typing.Union:  # Optional[X]
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    if typing.get_origin(hint) is Annotated:
        return typing.get_args(hint)[1]
    if hint in (str, bool):
        return hint
    raise TypeError(f"a header field must be str, Int, Long or bool, not {hint!r}")


_specs: dict[type, tuple[_Field, ...]] = {}


def _spec(cls: type) -> tuple[_Field, ...]:
    spec = _specs.get(cls)
    if spec is None:
        hints = typing.get_type_hints(cls, include_extras=True)
        spec = tuple(_Field(f.name, f.metadata.get(WIRE, _camel(f.name)), _kind(hints[f.name]),
                            f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
                     for f in dataclasses.fields(cls))
        _specs[cls] = spec
    return spec


def _read(header: str, f: _Field, value: str) -> Any:
    if f.kind is str:
        return value
    if f.kind is bool:
        low = value.strip().lower()
        if low in _TRUE or low in _FALSE:
            return low in _TRUE
        raise HeaderFieldError(header, f.wire, value, "not a boolean (true or false)")
    digits = value[1:] if value[:1] in ("-", "+") else value
    if not (digits.isascii() and digits.isdigit()):  # what Java's parseLong takes (int() also takes " 1", "1_0")
        raise HeaderFieldError(header, f.wire, value, f"not an integer ({'int' if f.kind == 32 else 'long'})")
    number = int(value)
    if not -(1 << (f.kind - 1)) <= number < 1 << (f.kind - 1):
        raise HeaderFieldError(header, f.wire, value, f"out of range of a {f.kind}-bit integer")
    return number


# digits a non-negative number may have and still fit its field whatever they are (int's 2**31 has 10, long's 19)
_SAFE_DIGITS = {32: 10, 64: 19}


def _write(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclasses.dataclass
class CommandHeader:
    @classmethod
    def from_ext_fields(cls: type[H], ext: Mapping[str, str]) -> H:
        reader = _readers.get(cls)
        if reader is None:
            reader = _readers[cls] = make_reader(cls)
        return reader(ext)

    def required(self, attr: str) -> Any:
        """An optional field's value where the request needs it (an empty text counts as missing): HeaderFieldError
        naming it otherwise, as for a field the header always requires."""
        value = getattr(self, attr)
        if value is None or value == "":
            wire = next(f.wire for f in _spec(type(self)) if f.attr == attr)
            raise HeaderFieldError(type(self).__name__, wire, value, "empty" if value == "" else "")
        return value

    def to_ext_fields(self) -> dict[str, str]:
        writer = _writers.get(type(self))
        if writer is None:
            writer = _writers[type(self)] = _make_writer(type(self))
        return writer(self)


# Each header class's reader and writer, made once as straight-line code (every request reads one: a loop over the
# fields with a call per field cost more than the rest of the header's work)
_readers: dict[type, Any] = {}
_writers: dict[type, Any] = {}


def make_reader(cls: type, wires: Optional[Mapping[str, str]] = None, name: Optional[str] = None) -> Any:
    """cls's reader; wires (cls's wire names -> another's) and name: read it from another header's form (its names
    in the errors), as SEND_MESSAGE_V2's short fields."""
    spec = _spec(cls)
    if wires is not None:
        spec = tuple(f._replace(wire=wires[f.wire]) for f in spec)
    defaults = {f.name: f.default for f in dataclasses.fields(cls)}
    env: dict[str, Any] = {"cls": cls, "HeaderFieldError": HeaderFieldError, "_read": _read,
                           "NAME": name or cls.__name__}
    lines = ["def read(ext):", "    get = ext.get"]
    for i, f in enumerate(spec):
        env[f"F{i}"] = f
        lines.append(f"    v = get({f.wire!r})")
        if f.kind is str:
            conv = "v"
        elif f.kind is bool:
            conv = f"_read(NAME, F{i}, v)"
        else:  # the usual number inline: ASCII digits too few to leave the field's range; _read words the rest
            conv = (f"int(v) if len(v) < {_SAFE_DIGITS[f.kind]} and v.isdigit() and v.isascii() "
                    f"else _read(NAME, F{i}, v)")
        if f.required:
            lines.append(f"    if v is None: raise HeaderFieldError(NAME, {f.wire!r}, None, '')")
            lines.append(f"    a{i} = {conv}")
        else:
            env[f"D{i}"] = defaults[f.attr]
            lines.append(f"    a{i} = D{i} if v is None else {conv}")
    lines.append("    return cls(" + ", ".join(f"a{i}" for i in range(len(spec))) + ")")
    exec("\n".join(lines), env)
    return env["read"]


def _make_writer(cls: type) -> Any:
    spec = _spec(cls)
    env: dict[str, Any] = {"_write": _write}
    lines = ["def write(h):", "    out = {}"]
    for f in spec:
        lines.append(f"    v = h.{f.attr}")
        lines.append(f"    if v is not None: out[{f.wire!r}] = v if type(v) is str else _write(v)")
    lines.append("    return out")
    exec("\n".join(lines), env)
    return env["write"]
