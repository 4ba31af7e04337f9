"""Waiting for a broker that does not answer: the error when it stays silent past the timeout, and the retries'
log lines."""
from __future__ import annotations

import logging
import time

log = logging.getLogger(__name__)

DEFAULT_BROKER_TIMEOUT_MS = 60_000  # how long a broker that cannot be reached is waited for, unless the caller says
RETRY_LOG_EVERY_S = 5.0  # while a request is retried: one log line this often, not one per attempt


class BrokerUnavailableError(RuntimeError):
    """A broker did not answer within brokerTimeoutMs: names the broker and the queue or request."""


class RetryLog:
    """Retries logged compactly: the first failure, then one line every RETRY_LOG_EVERY_S while they go on."""

    def __init__(self, what: str):
        self.what, self.attempts, self.first, self.logged = what, 0, 0.0, 0.0

    def failed(self, e: Exception, then: str = "retrying") -> None:
        now = time.monotonic()
        self.attempts += 1
        if self.attempts == 1:
            self.first = self.logged = now
            log.warning("%s: %s; %s", self.what, e, then)
        elif now - self.logged >= RETRY_LOG_EVERY_S:
            self.logged = now
            log.warning("%s: still no answer after %.0f s (%d attempts; last: %s); %s", self.what, now - self.first,
                        self.attempts, e, then)
