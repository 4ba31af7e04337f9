"""Subscriptions' selectors as the pull processor uses them: bounded in size and nesting, parsed once per (group,
topic, type, expression, version) off the event loop, the built filters (and refusals) kept for the pulls that
follow, so that one client's selector never holds the others' requests."""
from __future__ import annotations

import asyncio
import re
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Optional

import numpy as np

from filters import FilterParseError, MessageFilter
from remoting import ResponseCode

from .bad_request import BadRequest

MAX_SELECTOR_CHARS = 16384  # a TAG selector of about 1,500 tags, a SQL92 selector of about 1,000 terms
MAX_SQL_OPERATORS = 128  # AND, OR, NOT: deeper trees exhaust the evaluators' recursion
MAX_SQL_NESTING = 32  # parentheses
MAX_ENTRIES = 4096
_SQL_OPERATOR = re.compile(r"\b(and|or|not)\b", re.IGNORECASE)

Built = tuple[Optional[MessageFilter], bool]  # the filter (None: everything matches) and whether it is SQL92


def check_selector_type(kind: str, property_filter_enabled: bool) -> None:
    """Refuses a subscription type the broker cannot filter by, as the pull and CHECK_CLIENT_CONFIG both do: any
    non-TAG type while enablePropertyFilter is off (SYSTEM_ERROR, RocketMQ's remark), an unknown type
    (SUBSCRIPTION_PARSE_FAILED). Types are matched as written, as a stock broker's ExpressionType and
    FilterFactory match them: "sql92" or "tag" is not a type."""
    if kind != "TAG" and not property_filter_enabled:
        raise BadRequest(f"The broker does not support consumer to filter message by {kind} "
                         "(enablePropertyFilter is false)", ResponseCode.SYSTEM_ERROR)
    if kind not in ("TAG", "SQL92"):
        raise BadRequest(f"expressionType {kind!r} is not supported: the types are TAG and SQL92, written so",
                         ResponseCode.SUBSCRIPTION_PARSE_FAILED)


def build_selector(kind: str, expression: str) -> Built:
    """The filter for a subscription; BadRequest SUBSCRIPTION_PARSE_FAILED naming the bound a selector passes or
    why it does not parse. Runs in a worker thread: its cost (a large tag set hashed, a SQL92 parse) is paid once."""
    if len(expression) > MAX_SELECTOR_CHARS:
        raise BadRequest(f"the {kind} selector has {len(expression)} characters; this broker takes at most "
                         f"{MAX_SELECTOR_CHARS}", ResponseCode.SUBSCRIPTION_PARSE_FAILED)
    try:
        if kind == "TAG":
            if expression.strip() in ("", "*"):
                return None, False
            built = MessageFilter.by_tags(expression)
        else:
            _check_sql_complexity(expression)
            built = MessageFilter.by_sql(expression)
        built.consume_queue_mask(np.zeros(0, dtype=np.int64))  # the tag codes hashed here, not per pull
        return built, kind != "TAG"
    except FilterParseError as e:
        raise BadRequest(f"parse the consumer's subscription failed: {e}",
                         ResponseCode.SUBSCRIPTION_PARSE_FAILED) from None
    except RecursionError:
        raise BadRequest("parse the consumer's subscription failed: the selector is nested too deeply",
                         ResponseCode.SUBSCRIPTION_PARSE_FAILED) from None


def _check_sql_complexity(expression: str) -> None:
    operators = len(_SQL_OPERATOR.findall(expression))
    depth = max_depth = 0
    for ch in expression:
        if ch == "(":
            depth += 1
            max_depth = max(max_depth, depth)
        elif ch == ")":
            depth -= 1
    if operators > MAX_SQL_OPERATORS or max_depth > MAX_SQL_NESTING:
        raise BadRequest(f"the SQL92 selector has {operators} AND/OR/NOT and parentheses {max_depth} deep; this "
                         f"broker takes at most {MAX_SQL_OPERATORS} and {MAX_SQL_NESTING}",
                         ResponseCode.SUBSCRIPTION_PARSE_FAILED)


class SelectorCache:
    """The built selectors, least recently used dropped past MAX_ENTRIES; pulls asking for a selector being
    built wait for that one build."""

    def __init__(self, max_entries: int = MAX_ENTRIES):
        self.max_entries = max_entries
        self.built = 0  # selectors built (each key once while it stays cached)
        self._entries: OrderedDict[tuple, asyncio.Future] = OrderedDict()
        # one build at a time: a client sending selector after selector competes with the event loop through one
        # thread, never through a pool of them
        self._builder = ThreadPoolExecutor(1, thread_name_prefix="selector-build")

    def close(self) -> None:
        self._builder.shutdown(wait=False, cancel_futures=True)

    def get_now(self, group: str, topic: str, kind: str, expression: str, version: int) -> Optional[Built]:
        """The selector if it is built already (the usual pull), else None: `get` then builds or waits for it."""
        if kind == "TAG" and expression.strip() in ("", "*"):
            return None, False
        key = (group, topic, kind, expression, version)
        entry = self._entries.get(key)
        if entry is None or not entry.done() or entry.cancelled() or entry.exception() is not None:
            return None
        self._entries.move_to_end(key)
        return entry.result()

    async def get(self, group: str, topic: str, kind: str, expression: str, version: int) -> Built:
        built = self.get_now(group, topic, kind, expression, version)
        if built is not None:
            return built
        key = (group, topic, kind, expression, version)
        entry = self._entries.get(key)
        if entry is None:
            self.built += 1
            entry = self._entries[key] = asyncio.get_running_loop().run_in_executor(
                self._builder, build_selector, kind, expression)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(key)
        return await asyncio.shield(entry)  # a pull cancelled while waiting leaves the build to the others
