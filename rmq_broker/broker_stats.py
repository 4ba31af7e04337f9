"""RocketMQ's BrokerStats and the store's put/get TPS, as GET_BROKER_RUNTIME_INFO reports them: messages put and
pulled since the start and since this morning, and their rate over the last 10 s, 1 min and 10 min."""
from __future__ import annotations

import collections
import datetime
import time


class BrokerStats:
    WINDOWS_S = (10, 60, 600)

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.put_total = self.get_total = 0
        self._day = datetime.date.today()
        self.put_this_morning = self.get_this_morning = 0  # the totals when today began
        self.put_yesterday_morning = self.get_yesterday_morning = 0
        self._samples: collections.deque = collections.deque()  # (when, put total, get total), one a second

    def put(self, count: int) -> None:
        self.put_total += count
        self._sample()

    def got(self, count: int) -> None:
        self.get_total += count
        self._sample()

    def _sample(self) -> None:
        """At most once a second (a send or pull pays one clock read otherwise): a sample, and the day's turn."""
        now = self.clock()
        if self._samples and now - self._samples[-1][0] < 1.0:
            return
        self._samples.append((now, self.put_total, self.get_total))
        while now - self._samples[0][0] > max(self.WINDOWS_S) + 1:
            self._samples.popleft()
        today = datetime.date.today()
        if today != self._day:
            self._day = today
            self.put_yesterday_morning, self.put_this_morning = self.put_this_morning, self.put_total
            self.get_yesterday_morning, self.get_this_morning = self.get_this_morning, self.get_total

    def tps(self, which: int) -> str:
        """'tps10s tps1min tps10min' as the store's runtime info writes putTps and getTransferedTps."""
        now = self.clock()
        total = (self.put_total, self.get_total)[which]
        out = []
        for window in self.WINDOWS_S:
            base = next((s for s in self._samples if now - s[0] <= window), None)
            if base is None or now - base[0] < 0.5:
                out.append(0.0)
            else:
                out.append((total - base[1 + which]) / (now - base[0]))
        return " ".join(f"{v:.2f}" for v in out)
