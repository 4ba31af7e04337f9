"""A place messages live in is one declaration in rmq_log (a place.Place in places.PLACES): a test place, "mirror"
(Spark option mirrorPath, `rmq` flag --mirror, a StoreLog over a directory), registered for a test's duration, is
read and written by the Spark source's and sink's option parsing and read by the `rmq` commands with no edit
outside rmq_log; two places' addresses together are refused naming both."""
from __future__ import annotations

import contextlib
import io
import json
from typing import Any, Mapping

import pytest

from rmq_cli.cli import main
from rmq_log import places
from rmq_log.message_log import MessageLog
from rmq_log.place import Place, ReadPlace, SinkBasics
from rmq_log.store_log import StoreLog
from rmq_log.writes import WriteOptions
from rmq_spark.backend import SourceBackend, sink_log
from rmq_spark.errors import RmqOptionError
from rmq_spark.options import parse_options
from rmq_spark.sink.sink_options import parse_sink_options
from store import MessageStore

MIRROR_PATH = "mirrorPath"


class MirrorPlace(Place):
    name = "mirror"
    setting = "mirror"
    address_option = MIRROR_PATH
    cli_flag = "--mirror"
    what = "a mirror directory"
    write_options = (MIRROR_PATH,)
    option_of = {"mirror": MIRROR_PATH}

    def reads(self, opts: Mapping[str, str]) -> ReadPlace:
        return ReadPlace(log_settings={self.setting: opts[MIRROR_PATH]}, tuning={},
                         identity=f"mirror://{opts[MIRROR_PATH]}")

    def writes(self, opts: Mapping[str, str], basics: SinkBasics) -> WriteOptions:
        path = opts[MIRROR_PATH]
        return WriteOptions(path=path, topic=basics.topic, sink_id=basics.sink_id or "mirror", batch_id=None,
                            checkpoint=basics.checkpoint, stream=basics.stream, log_settings={self.setting: path})

    def open(self, settings: Mapping[str, Any]) -> MessageLog:
        return StoreLog(settings[self.setting])

    def add_command_arguments(self, parser: Any) -> None:
        parser.add_argument(self.cli_flag, metavar="DIR", help="read and write the mirror directory DIR")


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    monkeypatch.setattr(places, "PLACES", places.PLACES + (MirrorPlace(),))
    monkeypatch.delenv("RMQ_STORE", raising=False)
    path = str(tmp_path / "mirror")
    with MessageStore(path) as store:
        store.put_batch("T", ["a", "b", "c"], tags=["X", "Y", "X"])
    return path


def test_the_source_reads_through_a_registered_place(mirror):
    opts = parse_options({"mirrorpath": mirror, "topic": "T"})
    assert opts.place.log_settings == {"mirror": mirror}
    backend = SourceBackend(opts)
    assert isinstance(backend.log, StoreLog) and backend.log.where() == {"store": mirror}
    with backend.open() as reads:
        queues = reads.queues("T")
        assert sum(hi - lo for lo, hi in reads.queue_bounds([("T", q) for q in queues]).values()) == 3
    # the default consumer group is named after the place read
    assert opts.consumer_group != parse_options({"path": mirror, "topic": "T"}).consumer_group


def test_the_sink_writes_through_a_registered_place(mirror):
    opts = parse_sink_options({"MIRRORPATH": mirror, "topic": "T"}, stream=False)
    assert (opts.log_settings, opts.topic, opts.sink_id) == ({"mirror": mirror}, "T", "mirror")
    log = sink_log(opts)
    assert isinstance(log, StoreLog) and log.where() == {"store": mirror}
    with pytest.raises(RmqOptionError, match="option 'batchid': unknown option for writing format"):
        parse_sink_options({"mirrorPath": mirror, "batchid": "1"}, stream=False)


def test_another_places_options_are_refused_naming_the_place_chosen(mirror):
    with pytest.raises(RmqOptionError, match=r"option 'readOnly': only for a store directory \(path\), not with "
                                             "mirrorPath"):
        parse_options({"mirrorPath": mirror, "topic": "T", "readOnly": "true"})
    with pytest.raises(RmqOptionError, match=r"option 'pullBatchSize': only for reads through brokers"):
        parse_options({"mirrorPath": mirror, "topic": "T", "pullBatchSize": "8"})


def test_two_places_addresses_are_refused_naming_both(mirror):
    with pytest.raises(RmqOptionError) as e:
        parse_options({"mirrorPath": mirror, "namesrvAddr": "127.0.0.1:9876", "topic": "T"})
    assert str(e.value) == (f"option 'mirrorPath': give name servers (namesrvAddr='127.0.0.1:9876') or a mirror "
                            f"directory (mirrorPath={mirror!r}), not both")
    with pytest.raises(RmqOptionError, match="option 'mirrorPath': give one of namesrvAddr and mirrorPath, not both"):
        parse_sink_options({"mirrorpath": mirror, "namesrvaddr": "127.0.0.1:9876", "topic": "T"}, stream=True)
    with pytest.raises(RmqOptionError, match="option 'mirrorPath': give a store directory .* or a mirror directory"):
        parse_options({"path": mirror, "mirrorPath": mirror, "topic": "T"})
    code, _, err = _rmq("topics", "--mirror", mirror, "--namesrv", "127.0.0.1:9876")
    assert code == 2 and "give one of --namesrv and --mirror, not both" in err


def test_the_cli_reads_through_a_registered_place(mirror):
    code, out, err = _rmq("consume", "--mirror", mirror, "--topic", "T", "--tags", "X", "--json")
    assert code == 0, err
    assert sorted((m["body"], m["tags"]) for m in map(json.loads, out.splitlines())) == [("a", "X"), ("c", "X")]
    code, out, err = _rmq("topics", "--mirror", mirror, "--json")
    assert code == 0 and [(t["topic"], t["messages"]) for t in json.loads(out)] == [("T", 3)], err


def _rmq(*argv: str) -> tuple[Any, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as e:  # argparse's own usage errors
            code = e.code
    return code, out.getvalue(), err.getvalue()
