"""failOnDataLoss, decided in one place (Spark's Kafka source has one reportDataLoss): messages a query was to read
are gone (retention, a lost commitlog file, an offset past a queue's end)."""
from __future__ import annotations

import logging
from typing import Callable, Union

from .errors import DataLossError

log = logging.getLogger(__name__)


def report_data_loss(text: str, fail: bool, instead: str, then: Union[str, Callable[[], str]],
                     error: Callable[[str], Exception] = DataLossError) -> None:
    """text: what was lost. fail (failOnDataLoss=true, the default): raise error(text and the advice to set
    failOnDataLoss=false to `instead`). Otherwise a warning saying it and `then`, where the query goes on (a
    function when working that out reads the store: called only then)."""
    if fail:
        raise error(f"{text}. Set failOnDataLoss=false to {instead}.") from None
    log.warning("%s; %s (failOnDataLoss=false)", error(text), then() if callable(then) else then)
