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

from .expressions import STRING, And, Between, Comparison, Expression, In, Literal, Or, Property
from .tag_hash import tags_hash_code
from .tag_selector import TAGS_PROPERTY

ANY = None  # no restriction


def possible_tags(node: Expression) -> Optional[frozenset[str]]:
    """TAGS texts outside which `node` cannot be TRUE; ANY (None) if unrestricted."""
    if isinstance(node, In) and not node.negated and node.property.name == TAGS_PROPERTY:
        return frozenset(node.values)
    if isinstance(node, Comparison) and node.op == "=":
        for prop, lit in ((node.left, node.right), (node.right, node.left)):
            if (
                isinstance(prop, Property)
                and prop.name == TAGS_PROPERTY
                and isinstance(lit, Literal)
                and lit.kind == STRING
            ):
                return frozenset([lit.value])
        return ANY
    if isinstance(node, Literal) and node.kind != STRING and node.value is not True:
        return frozenset()  # FALSE / NULL are never TRUE
    if isinstance(node, And):
        left, right = possible_tags(node.left), possible_tags(node.right)
        if left is ANY:
            return right
        if right is ANY:
            return left
        return left & right
    if isinstance(node, Or):
        left, right = possible_tags(node.left), possible_tags(node.right)
        if left is ANY or right is ANY:
            return ANY
        return left | right
    if isinstance(node, Between):
        return ANY
    return ANY


class ConsumeQueuePruner:
    """is_matched / mask over consume-queue tag codes for one expression."""

    __slots__ = ("codes", "_code_set", "_sorted_codes")

    def __init__(self, expression: Expression) -> None:
        tags = possible_tags(expression)
        if tags is ANY:
            self.codes: Optional[frozenset[int]] = None
            self._code_set: Optional[frozenset[int]] = None
            self._sorted_codes = None
        else:
            self.codes = frozenset(tags_hash_code(t) for t in tags)
            self._code_set = self.codes
            self._sorted_codes = np.array(sorted(self.codes), dtype=np.int64)

    @property
    def prunes(self) -> bool:
        return self.codes is not None

    def is_matched(self, tags_code: int) -> bool:
        if self._code_set is None:
            return True
        return int(tags_code) in self._code_set

    def mask(self, tags_codes: np.ndarray) -> np.ndarray:
        codes = np.asarray(tags_codes)
        if codes.dtype != np.int64:
            codes = codes.astype(np.int64)
        if self._sorted_codes is None:
            return np.ones(codes.shape, dtype=bool)
        wanted = self._sorted_codes
        if len(wanted) == 0:
            return np.zeros(codes.shape, dtype=bool)
        if len(wanted) <= 8:
            # A few equality passes beat hashing or sorting for small sets.
            out = codes == wanted[0]
            for code in wanted[1:]:
                out |= codes == code
            return out
        pos = np.searchsorted(wanted, codes)
        pos[pos == len(wanted)] = 0
        return wanted[pos] == codes
