"""Stock Apache RocketMQ peers for the tests in this folder: one stock cluster (a name server, two brokers) per
version for the whole session, shared by the modules (each uses topics and groups of its own; a JVM cluster takes
15-60 s to boot on 2 cores). A version that is not fetched fails the test with a message naming `make peers`."""
from typing import Optional

import pytest
from stock_peers import VERSIONS, StockClients, StockCluster, compiled

_running: dict[str, StockCluster] = {}


@pytest.fixture(scope="session", params=VERSIONS, ids=[f"rocketmq-{v}" for v in VERSIONS])
def stock_version(request) -> str:
    return request.param


@pytest.fixture(scope="session")
def stock_cluster(stock_version, tmp_path_factory):
    """A stock name server and brokers broker-a and broker-b of `stock_version`, stopped after the session. A test
    that kills a broker starts it again before it ends."""
    with StockCluster(stock_version, tmp_path_factory.mktemp(f"stock-{stock_version}")) as cluster:
        _running[stock_version] = cluster
        try:
            yield cluster
        finally:
            _running.pop(stock_version, None)


def _stock_version(item) -> Optional[str]:
    callspec = getattr(item, "callspec", None) if item is not None else None
    return callspec.params.get("stock_version") if callspec is not None else None


def pytest_runtest_teardown(item, nextitem) -> None:
    """A version's tests run one after another (pytest groups them by the session parameter; the suite's scheduler
    gives them to one worker as one unit): after the last of them its cluster is stopped, not left idle until the
    worker ends (idle stock brokers take 4-6% of a core each, measured, for the rest of a 20-minute run)."""
    version = _stock_version(item)
    if version in _running and _stock_version(nextitem) != version:
        _running.pop(version).stop()


@pytest.fixture(scope="session")
def stock_java(stock_cluster) -> StockClients:
    """The stock Java client programs of the cluster's version, pointed at its name server."""
    return stock_cluster.java()


def stock_clients(version: str, namesrv: str, root) -> StockClients:
    """The stock Java clients of `version` against any name server (e.g. `rmq serve`'s)."""
    compiled(version)
    return StockClients(version, namesrv, root)


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "stock_versions(*versions): the stock versions a test runs against")


def pytest_collection_modifyitems(config, items) -> None:
    """A module of this folder may name the stock versions it runs against (STOCK_VERSIONS), a test too
    (@pytest.mark.stock_versions(...)); its tests of the other versions are deselected (not skipped: they are not
    part of the suite)."""
    keep, drop = [], []
    for item in items:
        marker = item.get_closest_marker("stock_versions")
        versions = marker.args if marker else getattr(getattr(item, "module", None), "STOCK_VERSIONS", None)
        callspec = getattr(item, "callspec", None)
        version = callspec.params.get("stock_version") if callspec is not None else None
        (drop if versions is not None and version is not None and version not in versions else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
