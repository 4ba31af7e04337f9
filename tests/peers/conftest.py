"""Stock Apache RocketMQ peers for the tests in this folder: one stock cluster (a name server, two brokers) per
version for the whole session, shared by the modules (each uses topics and groups of its own; a JVM cluster takes
15-60 s to boot on 2 cores). A version that is not fetched fails the test with a message naming `make peers`."""
import pytest
from stock_peers import VERSIONS, StockClients, StockCluster, compiled


@pytest.fixture(scope="session", params=VERSIONS, ids=[f"rocketmq-{v}" for v in VERSIONS])
def stock_version(request) -> str:
    return request.param


@pytest.fixture(scope="session")
def stock_cluster(stock_version, tmp_path_factory):
    """A stock name server and brokers broker-a and broker-b of `stock_version`, stopped after the session. A test
    that kills a broker starts it again before it ends."""
    with StockCluster(stock_version, tmp_path_factory.mktemp(f"stock-{stock_version}")) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def stock_java(stock_cluster) -> StockClients:
    """The stock Java client programs of the cluster's version, pointed at its name server."""
    return stock_cluster.java()


def stock_clients(version: str, namesrv: str, root) -> StockClients:
    """The stock Java clients of `version` against any name server (e.g. `rmq serve`'s)."""
    compiled(version)
    return StockClients(version, namesrv, root)


def pytest_collection_modifyitems(config, items) -> None:
    """A module of this folder may name the stock versions it runs against (STOCK_VERSIONS); its tests of the
    other versions are deselected (not skipped: they are not part of the suite)."""
    keep, drop = [], []
    for item in items:
        versions = getattr(getattr(item, "module", None), "STOCK_VERSIONS", None)
        callspec = getattr(item, "callspec", None)
        version = callspec.params.get("stock_version") if callspec is not None else None
        (drop if versions is not None and version is not None and version not in versions else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
