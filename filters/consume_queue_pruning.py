"""Consume-queue pruning: which tag hash codes can possibly match.

From the tree we derive a set of TAGS texts such that the expression can be
TRUE only for a message whose TAGS is one of them (or ANY when no such finite
set follows).  Their String.hashCode() values are what the consume queue is
checked against, before any commit-log read.  Pruning is only a cheap first
pass: codes collide ("Aa" / "BB"), so the exact TAGS check still runs on the
record.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from store.tag_hash import tags_hash_code

from .expressions import STRING, And, Comparison, Expression, In, Literal, Or, Property
from .tag_selector import TAGS_PROPERTY
from .visitors import ExpressionVisitor, visit

ANY = None  # no restriction


Tags = Optional[frozenset[str]]


class _PossibleTags(ExpressionVisitor[Tags]):
    """TAGS texts outside which a node cannot be TRUE; ANY when a node does not restrict them."""

    def visit_in(self, node: In) -> Tags:
        if not node.negated and node.property.name == TAGS_PROPERTY:
            return frozenset(node.values)
        return ANY

    def visit_comparison(self, node: Comparison) -> Tags:
        if node.op == "=":
            for prop, lit in ((node.left, node.right), (node.right, node.left)):
                if isinstance(prop, Property) and prop.name == TAGS_PROPERTY and isinstance(lit, Literal) \
                        and lit.kind == STRING:
                    return frozenset([str(lit.value)])
        return ANY

    def visit_literal(self, node: Literal) -> Tags:
        if node.kind != STRING and node.value is not True:
            return frozenset()  # FALSE / NULL are never TRUE
        return ANY

    def visit_and(self, node: And) -> Tags:
        left, right = possible_tags(node.left), possible_tags(node.right)
        if left is ANY:
            return right
        if right is ANY:
            return left
        return left & right

    def visit_or(self, node: Or) -> Tags:
        left, right = possible_tags(node.left), possible_tags(node.right)
        if left is ANY or right is ANY:
            return ANY
        return left | right

    def _any(self, node: Expression) -> Tags:
        return ANY

    visit_property = visit_negate = visit_between = visit_string_match = visit_is_null = _any
    visit_as_condition = visit_not = _any


_POSSIBLE_TAGS = _PossibleTags()


def possible_tags(node: Expression) -> Tags:
    """TAGS texts outside which `node` cannot be TRUE; ANY (None) if unrestricted."""
    return visit(node, _POSSIBLE_TAGS)


_EQUALITY_PASSES_UP_TO = 4
_MASK_CHUNK = 1 << 20


def _perfect_hash(codes: np.ndarray) -> tuple[np.uint64, int, np.ndarray]:
    """A multiplicative hash without collisions on `codes`: (multiplier,
    shift, table).  Empty slots hold codes[0], so `table[slot(c)] == c`
    exactly when c is one of the codes."""
    rng = np.random.default_rng(0x5EED)
    bits = max(4, int(np.ceil(np.log2(len(codes) * 4))))
    keys = codes.view(np.uint64)
    for attempt in range(256):
        multiplier = np.uint64(int(rng.integers(1, 2**63)) * 2 + 1)
        shift = np.uint64(64 - bits)
        slots = (keys * multiplier) >> shift
        if len(np.unique(slots)) == len(codes):
            table = np.full(1 << bits, codes[0], dtype=np.int64)
            table[slots.astype(np.intp)] = codes
            return multiplier, int(shift), table
        if attempt % 16 == 15:
            bits += 1
    raise AssertionError("no collision-free hash found")  # pragma: no cover


class ConsumeQueuePruner:
    """is_matched / mask over consume-queue tag codes for one expression."""

    __slots__ = ("codes", "_code_set", "_sorted_codes", "_hash")

    def __init__(self, expression: Expression) -> None:
        tags = possible_tags(expression)
        self._hash = None
        if tags is ANY:
            self.codes: Optional[frozenset[int]] = None
            self._code_set: Optional[frozenset[int]] = None
            self._sorted_codes = None
        else:
            self.codes = frozenset(tags_hash_code(t) for t in tags)
            self._code_set = self.codes
            self._sorted_codes = np.array(sorted(self.codes), dtype=np.int64)
            if len(self._sorted_codes) > _EQUALITY_PASSES_UP_TO:
                self._hash = _perfect_hash(self._sorted_codes)

    @property
    def prunes(self) -> bool:
        return self.codes is not None

    def is_matched(self, tags_code: int) -> bool:
        if self._code_set is None:
            return True
        return int(tags_code) in self._code_set

    def mask(self, tags_codes: np.ndarray) -> np.ndarray:
        codes = np.ascontiguousarray(tags_codes, dtype=np.int64)
        if self._sorted_codes is None:
            return np.ones(codes.shape, dtype=bool)
        wanted = self._sorted_codes
        if len(wanted) == 0:
            return np.zeros(codes.shape, dtype=bool)
        if self._hash is None:
            # A few equality passes beat hashing for small sets.
            out = codes == wanted[0]
            for code in wanted[1:]:
                out |= codes == code
            return out
        multiplier, shift, table = self._hash
        shift_u = np.uint64(shift)
        flat = codes.reshape(-1)
        out = np.empty(flat.shape, dtype=bool)
        keys = flat.view(np.uint64)
        # In slices: the temporaries stay small and in cache.
        for start in range(0, len(flat), _MASK_CHUNK):
            stop = start + _MASK_CHUNK
            slots = (keys[start:stop] * multiplier) >> shift_u
            np.equal(table[slots.astype(np.intp)], flat[start:stop], out=out[start:stop])
        return out.reshape(codes.shape)
