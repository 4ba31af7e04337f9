"""`rmq serve` and `rmq namesrv`: a broker on a store (with its own name server unless --namesrv names one), or a
name server alone. Each prints one JSON line with its addresses once it accepts, then logs to stderr; SIGTERM or
Ctrl-C stops it cleanly (held pulls answered, offsets persisted, unregistered, store closed), exit 0."""
from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import signal
import sys
from typing import Optional

from remoting import event_loop
from remoting.local_address import is_wildcard

log = logging.getLogger("rmq.serve")

DEFAULT_BROKER = "127.0.0.1:10911"
DEFAULT_NAMESRV = "127.0.0.1:9876"


def add_serve_commands(sub, common) -> None:
    p = sub.add_parser("serve", parents=[common], help="serve the store as a RocketMQ broker",
                       description="Serve the store to RocketMQ clients over RocketMQ's remoting protocol: a broker "
                                   "(send, pull with long polling, consumer offsets, heartbeats), registered with a "
                                   "name server: --namesrv names one; without it one runs in this process. Prints "
                                   '{"namesrv": ..., "broker": ..., "brokerName": ...} once both accept.')
    p.add_argument("--listen", metavar="HOST:PORT",
                   help=f"the address the broker is bound to (default {DEFAULT_BROKER}, or brokerIP1 and listenPort "
                        "from --config; 0.0.0.0 for every interface; port 0 picks a free one)")
    p.add_argument("--advertise", metavar="HOST",
                   help="the address registered with the name server and handed to clients (RocketMQ's brokerIP1; "
                        "default: brokerIP1 from --config, else the --listen host, or, listening on 0.0.0.0, the "
                        "host's first non-loopback address); the in-process name server's printed address too")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--namesrv", metavar="HOST:PORT",
                       help="register with this name server (default: namesrvAddr from --config, else one runs here)")
    group.add_argument("--namesrv-listen", default=DEFAULT_NAMESRV, metavar="HOST:PORT",
                       help=f"the in-process name server's address (default {DEFAULT_NAMESRV})")
    p.add_argument("--broker-name", help="brokerName (default: from --config, else broker-a)")
    p.add_argument("--cluster", help="brokerClusterName (default: from --config, else DefaultCluster)")
    p.set_defaults(run=cmd_serve)

    p = sub.add_parser("namesrv", help="run a RocketMQ name server alone",
                       description='A name server several brokers register with. Prints {"namesrv": ...}.')
    p.add_argument("--listen", default=DEFAULT_NAMESRV, metavar="HOST:PORT",
                   help=f"its address (default {DEFAULT_NAMESRV}; 0.0.0.0 for every interface; port 0 picks a free "
                        "one)")
    p.add_argument("--advertise", metavar="HOST",
                   help="the address printed for clients and brokers (default: the --listen host, or, listening on "
                        "0.0.0.0, the host's first non-loopback address)")
    p.add_argument("--scan-interval", type=int, default=5000, metavar="MS",
                   help="how often brokers silent too long are dropped from the routes (RocketMQ's "
                        "scanNotActiveBrokerInterval; default 5000); a broker is silent too long after its "
                        "brokerNotActiveTimeoutMillis, else 120 s")
    p.add_argument("--kv-config", metavar="FILE",
                   help="keep the KV settings (mqadmin updateKvConfig, order topics' configs) in this file, "
                        "RocketMQ's kvConfig.json (default: in memory)")
    p.set_defaults(run=cmd_namesrv)


def _logging() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s %(message)s")


def _stop_on_signals() -> asyncio.Event:
    """Set on SIGTERM or Ctrl-C; installed before the addresses are printed, so that a signal sent as soon as
    they are read stops cleanly too."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


def _warn_if_wide(address: str, what: str = "the name server", acl: bool = False) -> None:
    host = address.rpartition(":")[0]
    if host in ("127.0.0.1", "localhost", "::1") or acl:
        return
    if what == "the broker":
        log.warning("listening on %s with aclEnable=false: anyone who reaches it can read and write every topic "
                    "(set aclEnable=true in broker.conf, with the accounts in plain_acl.yml)", address)
    else:  # RocketMQ's name servers check no credentials either: routes are public
        log.warning("listening on %s: anyone who reaches it can read every topic's route", address)


@contextlib.contextmanager
def _binding(flag: str):
    """An address that cannot be listened on (taken, not this host's, a privileged port) as a usage error naming
    the flag that sets it."""
    try:
        yield
    except OSError as e:
        if e.errno not in (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES):
            raise
        from .common import UsageError
        raise UsageError(f"{flag}: cannot listen there ({e.strerror or e}: {e}); give a free address, e.g. {flag} "
                         f"127.0.0.1:0 (port 0 picks a free port; the JSON line says which)") from None


async def _serve(args, config, broker_config) -> None:
    from rmq_broker import Broker, NameServer
    namesrv: Optional[NameServer] = None
    address = args.namesrv or broker_config.namesrvAddr.split(";")[0] or None
    from .common import UsageError
    if args.advertise is not None and is_wildcard(args.advertise):
        raise UsageError(f"--advertise {args.advertise}: a wildcard is not an address a client can connect to; "
                         "give one of this host's addresses, or leave --advertise out to advertise the first "
                         "non-loopback one")
    if address is None:
        with _binding("--namesrv-listen"):
            namesrv = await NameServer(args.namesrv_listen, advertise=args.advertise).start()
        address = namesrv.address
    try:
        try:
            broker = Broker(args.store, args.listen, namesrv=address, config=config, broker_config=broker_config,
                            broker_name=args.broker_name, cluster=args.cluster, advertise=args.advertise)
        except ValueError as e:  # a setting of broker.conf (or its plain_acl.yml) that cannot be served
            raise UsageError(f"--config {args.config}: {e}" if args.config else str(e)) from None
        with _binding("--listen"):
            b = await broker.start()
        try:
            _warn_if_wide(b.listen_address, "the broker", b.acl is not None)
            stop = _stop_on_signals()
            ready = {"namesrv": address, "broker": b.address, "brokerName": b.broker_name,
                     "listen": b.listen_address}
            if namesrv is not None:
                ready["namesrvListen"] = namesrv.listen_address
            print(json.dumps(ready), flush=True)
            await stop.wait()
            log.info("stopping")
        finally:
            await broker.stop()
    finally:
        if namesrv is not None:
            await namesrv.stop()


def cmd_serve(args) -> int:
    from rmq_broker.broker_config import load_broker_conf

    from .common import UsageError, store_path
    store_path(args, must_exist=False)
    _logging()  # before the file is read: its ignored keys are logged
    try:
        broker_config, config = load_broker_conf(args.config)
    except FileNotFoundError:
        raise UsageError(f"--config {args.config}: no such file") from None
    except ValueError as e:
        raise UsageError(f"--config {args.config}: {e}") from None
    event_loop.run(_serve(args, config, broker_config))
    return 0


async def _namesrv(args) -> None:
    from rmq_broker import NameServer
    from store import StoreError

    from .common import UsageError
    try:
        ns = NameServer(args.listen, advertise=args.advertise, scan_interval_s=args.scan_interval / 1000,
                        kv_config=args.kv_config)
    except ValueError as e:
        raise UsageError(f"--advertise {args.advertise}: {e}") from None
    except (OSError, StoreError) as e:
        raise UsageError(f"--kv-config {args.kv_config}: {e}") from None
    with _binding("--listen"):
        await ns.start()
    try:
        _warn_if_wide(ns.listen_address)
        stop = _stop_on_signals()
        print(json.dumps({"namesrv": ns.address, "listen": ns.listen_address}), flush=True)
        await stop.wait()
    finally:
        await ns.stop()


def cmd_namesrv(args) -> int:
    _logging()
    event_loop.run(_namesrv(args))
    return 0
