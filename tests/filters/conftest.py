"""Fixtures for the filter tests."""

from __future__ import annotations

import pytest
from filters_testkit import decide_all

from filters import MessageFilter


@pytest.fixture
def decide():
    """decide(selector, props) -> bool, through both evaluators, which must agree."""

    def _decide(selector, props):
        f = selector if isinstance(selector, MessageFilter) else MessageFilter.by_sql(selector)
        return decide_all(f, [props])[0]

    return _decide
