"""MessageFilter: what the store and the Spark source hold and call.

It wraps one expression tree and lazily builds the visitors it needs: the
consume-queue pruner (tag codes), the per-record evaluator and the vectorised
evaluator.  It pickles as its tree and description only (the lark parser and
compiled closures are rebuilt where it lands).
"""

from __future__ import annotations

from typing import Mapping, Optional, Union

import numpy as np
import pyarrow as pa

from rmq_common.numpy_arrow import from_numpy

from .arrow_evaluator import ArrowEvaluator
from .consume_queue_pruning import ConsumeQueuePruner
from .expressions import ALWAYS_TRUE, And, Expression, is_condition
from .row_evaluator import RowEvaluator
from .sql92_parser import parse_sql92
from .tag_selector import parse_tag_selector, tag_selector_text

TAG = "TAG"
SQL92 = "SQL92"
ALL = "ALL"
COMBINED = "COMBINED"
TREE = "TREE"


class MessageFilter:
    """A built filter.  Make one with by_tags / by_sql / all / both (or `a & b`)."""

    __slots__ = ("expression", "kind", "description", "_pruner", "_row", "_arrow")

    def __init__(self, expression: Expression, kind: str = TREE, description: Optional[str] = None) -> None:
        if not is_condition(expression):
            raise ValueError(f"a filter needs a condition, got {expression}")
        self.expression = expression
        self.kind = kind
        self.description = description if description is not None else str(expression)
        self._pruner: Optional[ConsumeQueuePruner] = None
        self._row: Optional[RowEvaluator] = None
        self._arrow: Optional[ArrowEvaluator] = None

    # ---- construction
    @classmethod
    def by_tags(cls, selector: Optional[str]) -> "MessageFilter":
        """`TagA || TagB`; `*`, empty or None match everything."""
        return cls(parse_tag_selector(selector), TAG, tag_selector_text(selector))

    @classmethod
    def by_sql(cls, selector: str) -> "MessageFilter":
        """A RocketMQ SQL92 selector; FilterParseError if it does not build."""
        expression = parse_sql92(selector)
        return cls(expression, SQL92, str(expression))

    @classmethod
    def all(cls) -> "MessageFilter":
        return cls(ALWAYS_TRUE, ALL, "*")

    @classmethod
    def both(cls, first: Optional["MessageFilter"], second: Optional["MessageFilter"]) -> Optional["MessageFilter"]:
        """Both must hold (a tag subscription plus a SQL92 selector); None is no filter."""
        if first is None or first.kind == ALL:
            return second
        if second is None or second.kind == ALL:
            return first
        return cls(
            And(first.expression, second.expression),
            COMBINED,
            f"({first.description}) AND ({second.description})",
        )

    def __and__(self, other: "MessageFilter") -> "MessageFilter":
        if not isinstance(other, MessageFilter):
            return NotImplemented
        return MessageFilter.both(self, other)  # type: ignore[return-value]

    # ---- the store's interface
    @property
    def pruner(self) -> ConsumeQueuePruner:
        if self._pruner is None:
            self._pruner = ConsumeQueuePruner(self.expression)
        return self._pruner

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        """Cheap first check on the consume-queue entry's tag hash code."""
        return self.pruner.is_matched(tags_code)

    def consume_queue_mask(self, tags_codes: np.ndarray) -> np.ndarray:
        return self.pruner.mask(tags_codes)

    def is_matched_by_commit_log(self, properties: Optional[Mapping[str, str]]) -> bool:
        """The exact decision on the message's properties (all of them)."""
        if self._row is None:
            self._row = RowEvaluator(self.expression)
        return self._row.matches(properties)

    def commit_log_mask(self, batch: Union[pa.RecordBatch, pa.Table]) -> pa.BooleanArray:
        """is_matched_by_commit_log for every row of a scan batch (its `properties` column)."""
        if self.expression == ALWAYS_TRUE:
            return from_numpy(np.ones(batch.num_rows, dtype=bool))
        return self.arrow_evaluator.mask(batch)

    @property
    def arrow_evaluator(self) -> ArrowEvaluator:
        if self._arrow is None:
            self._arrow = ArrowEvaluator(self.expression)
        return self._arrow

    def properties_text_mask(self, strings) -> pa.BooleanArray:
        """commit_log_mask straight from stored `k\\x01v\\x02` property texts."""
        return self.arrow_evaluator.mask_from_properties_text(strings)

    # ---- identity
    @property
    def matches_everything(self) -> bool:
        return self.expression == ALWAYS_TRUE

    def __str__(self) -> str:
        return self.description

    def __repr__(self) -> str:
        return f"MessageFilter.{self.kind.lower()}({self.description!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MessageFilter) and self.expression == other.expression

    def __hash__(self) -> int:
        return hash(self.expression)

    def __reduce__(self):
        return (MessageFilter, (self.expression, self.kind, self.description))
