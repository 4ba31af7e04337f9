"""Bodies as RocketMQ's RemotingSerializable writes them: fastjson, which writes a map's integer keys bare
({0:"127.0.0.1:10911"}, a BrokerData's brokerAddrs) and leaves null fields out. `encode` writes that form, or with
`standard=True` the standard JSON a name server answers clients that ask for it (quoted keys, non-ASCII escaped);
`decode` reads both.
"""
from __future__ import annotations

import json
import re
from typing import Any

# A string token, or a key right after { or , (outside strings, since strings are matched whole first) that is an
# integer or a flat object (fastjson writes a map keyed by MessageQueue with the object as the key).
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|([{,]\s*)(-?\d+|\{(?:[^{}"]|"(?:[^"\\]|\\.)*")*\})(\s*:)', re.DOTALL)


class BodyError(ValueError):
    """A body that does not decode, or a field in it of the wrong type; names the field."""


def encode(obj: Any, standard: bool = False) -> bytes:
    parts: list[str] = []
    _write(obj, parts, standard)
    return "".join(parts).encode("utf-8")


def _write(obj: Any, out: list[str], standard: bool) -> None:
    if isinstance(obj, dict):
        out.append("{")
        first = True
        for key, value in obj.items():
            if value is None:
                continue  # fastjson leaves null fields and map values out
            if not first:
                out.append(",")
            first = False
            if isinstance(key, int) and not isinstance(key, bool) and not standard:
                out.append(str(key))
            elif hasattr(key, "to_json"):  # an object as the key, as fastjson writes it
                _write(key.to_json(), out, standard)
            else:
                out.append(json.dumps(str(key), ensure_ascii=standard))
            out.append(":")
            _write(value, out, standard)
        out.append("}")
    elif isinstance(obj, (list, tuple, set, frozenset)):
        out.append("[")
        for i, value in enumerate(sorted(obj) if isinstance(obj, (set, frozenset)) else obj):
            if i:
                out.append(",")
            _write(value, out, standard)
        out.append("]")
    elif isinstance(obj, str):
        out.append(json.dumps(obj, ensure_ascii=standard))
    else:
        out.append(json.dumps(obj))  # numbers, booleans, null


def _quote_key(m: re.Match) -> str:
    if m.group(2) is None:
        return m.group(0)
    return f'{m.group(1)}{json.dumps(m.group(2))}{m.group(3)}'


def decode(data: bytes | bytearray | str) -> Any:
    """A body's JSON, bare integer keys and object keys read as strings (the typed bodies turn them back into
    numbers and objects)."""
    try:
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray, memoryview)) else data
    except UnicodeDecodeError as e:
        raise BodyError(f"the body is not UTF-8: {e}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    except RecursionError:
        raise BodyError("the body nests too deeply") from None
    try:
        return json.loads(_TOKEN.sub(_quote_key, text))
    except json.JSONDecodeError as e:
        raise BodyError(f"the body is not JSON: {e}") from None
    except RecursionError:
        raise BodyError("the body nests too deeply") from None


_REQUIRED: Any = object()
_INTEGER = re.compile(r"[+-]?\d+")


def as_object(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise BodyError(f"{where} is {_short(value)}, not an object")
    return value


def as_list(value: Any, where: str) -> list:
    if not isinstance(value, list):
        raise BodyError(f"{where} is {_short(value)}, not an array")
    return value


def field_or(obj: dict, name: str, default: Any) -> Any:
    """obj[name], or `default` when absent or null (an empty value stays, to be checked for its type)."""
    value = obj.get(name)
    return default if value is None else value


def read_field(obj: dict, name: str, kind: type, where: str, default: Any = _REQUIRED) -> Any:
    """obj[name] as `kind` (str, int or bool; fastjson also reads numbers and booleans written as strings)."""
    value = obj.get(name)
    if value is None:
        if default is _REQUIRED:
            raise BodyError(f"{where}.{name} is missing")
        return default
    if kind is str and isinstance(value, str):
        return value
    if kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and _INTEGER.fullmatch(value):
            return int(value)
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
    raise BodyError(f"{where}.{name} is {_short(value)}, not {'a' if kind is str else 'an'} {kind.__name__}")


def read_int_key(key: str, where: str) -> int:
    """A map key fastjson wrote bare ({0:...}), or quoted."""
    if isinstance(key, str) and _INTEGER.fullmatch(key):
        return int(key)
    raise BodyError(f"{where} has key {_short(key)}, not an integer")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
