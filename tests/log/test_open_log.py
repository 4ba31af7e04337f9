"""open_log: the one choice between a store directory and a cluster of brokers, and the options each refuses."""
from __future__ import annotations

import pytest

from rmq_log import MessageLog, UsageError, open_log
from rmq_log.cluster_log import ClusterLog
from rmq_log.store_log import StoreLog


def test_a_name_server_chooses_the_brokers_and_a_store_path_the_directory(tmp_path):
    cluster = open_log(store=str(tmp_path), namesrv="127.0.0.1:9876", access_key="ak", secret_key="sk")
    assert isinstance(cluster, ClusterLog) and isinstance(cluster, MessageLog)
    assert cluster.names_brokers and cluster.where() == {"namesrv": "127.0.0.1:9876"}
    store = open_log(store=str(tmp_path), config=None)
    assert isinstance(store, StoreLog) and not store.names_brokers
    assert store.where() == {"store": str(tmp_path)}


def test_nothing_is_opened_until_asked_and_a_missing_store_is_a_usage_error(tmp_path):
    log = open_log(store=str(tmp_path / "none"))  # no error yet: the request says what it needs
    with pytest.raises(UsageError, match="no such store directory"):
        log.topics()
    with pytest.raises(UsageError, match="no store given"):
        open_log().topics()


@pytest.mark.parametrize("where, option, message", [
    ({"store": "s"}, "cluster", "--cluster is for --namesrv; a store is one broker's"),
    ({"namesrv": "127.0.0.1:9876"}, "follow", "--follow is not supported with --namesrv yet"),
])
def test_an_option_a_log_cannot_honour_is_refused_when_given_only(where, option, message):
    with pytest.raises(UsageError) as e:
        open_log(**where, options={option: "C" if option == "cluster" else True})
    assert str(e.value) == message
    assert isinstance(open_log(**where, options={option: None}), MessageLog)
    other = {"store": "s"} if "namesrv" in where else {"namesrv": "127.0.0.1:9876"}
    assert isinstance(open_log(**other, options={option: True}), MessageLog)


def test_a_half_given_account_is_a_usage_error_on_the_first_request():
    log = open_log(namesrv="127.0.0.1:1", access_key="ak")
    with pytest.raises(UsageError, match="--secret-key"):
        log.topics()
