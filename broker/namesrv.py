"""The name server: RocketMQ's DefaultRequestProcessor over a RouteInfoManager, served by remoting.

`async with NameServer("127.0.0.1:0") as ns:` in-process; `python -m broker.namesrv --listen HOST:PORT` alone
(prints {"namesrv": "HOST:PORT"} on one line once it accepts; SIGTERM or Ctrl-C stops it, exit 0).
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import json
import logging
import signal
import sys
from typing import Optional

from remoting import RemotingCommand, RemotingServer, RequestCode, ResponseCode

from .route_info_manager import RouteInfoManager

log = logging.getLogger(__name__)

DEFAULT_LISTEN = "127.0.0.1:9876"  # RocketMQ's name server port


def _body(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode("utf-8")


class NameServer:
    def __init__(self, listen: str = DEFAULT_LISTEN, broker_expiry_s: float = 120.0, scan_interval_s: float = 10.0):
        host, _, port = listen.rpartition(":")
        self.routes = RouteInfoManager(expiry_s=broker_expiry_s)
        self.server = RemotingServer(host or "127.0.0.1", int(port))
        self.scan_interval_s = min(scan_interval_s, max(0.05, broker_expiry_s / 4))
        self.requests: collections.Counter = collections.Counter()  # by request code, for operators and tests
        self._scanner: Optional[asyncio.Task] = None
        for code, processor in ((RequestCode.REGISTER_BROKER, self._register_broker),
                                (RequestCode.UNREGISTER_BROKER, self._unregister_broker),
                                (RequestCode.GET_ROUTEINFO_BY_TOPIC, self._route_info),
                                (RequestCode.GET_BROKER_CLUSTER_INFO, self._cluster_info),
                                (RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, self._topic_list)):
            self.server.register(code, self._counted(processor))
        self.server.on_close.append(self._channel_closed)

    @property
    def address(self) -> str:
        return self.server.address

    async def start(self) -> "NameServer":
        await self.server.start()
        self._scanner = asyncio.ensure_future(self._scan())
        log.info("name server listening on %s", self.address)
        return self

    async def stop(self) -> None:
        if self._scanner is not None:
            self._scanner.cancel()
        await self.server.stop()

    async def __aenter__(self) -> "NameServer":
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    def _counted(self, processor):
        async def run(cmd: RemotingCommand, channel):
            self.requests[cmd.code] += 1
            return await processor(cmd, channel)
        return run

    async def _scan(self) -> None:
        while True:
            await asyncio.sleep(self.scan_interval_s)
            for addr in self.routes.scan_not_active_broker():
                log.warning("broker %s has not registered for %.0f s: removed from the routes", addr,
                            self.routes.expiry_s)

    def _channel_closed(self, channel) -> None:
        addr = self.routes.on_channel_destroy(channel)
        if addr is not None:
            log.info("broker %s closed its connection: removed from the routes", addr)

    # -- processors (RocketMQ's DefaultRequestProcessor) ---------------------------------------------------------

    async def _register_broker(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        ext = cmd.ext_fields
        missing = [k for k in ("brokerName", "brokerAddr", "clusterName", "brokerId") if not ext.get(k)]
        if missing:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"REGISTER_BROKER without {', '.join(missing)}")
        if ext.get("compressed", "false").lower() == "true":
            return cmd.response(ResponseCode.SYSTEM_ERROR, "compressed broker registrations are not supported; "
                                                           "set compressedRegister=false on the broker")
        try:
            broker_id = int(ext["brokerId"])
            body = json.loads(cmd.body) if cmd.body else {}
            wrapper = body.get("topicConfigSerializeWrapper") or {}
            table = wrapper.get("topicConfigTable") or {}
            if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
                raise ValueError("topicConfigTable is not an object of topic configs")
        except (ValueError, AttributeError) as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"REGISTER_BROKER body or brokerId: {e}")
        answer = self.routes.register_broker(ext["clusterName"], ext["brokerAddr"], ext["brokerName"], broker_id,
                                             ext.get("haServerAddr", ""), table, channel)
        return cmd.response(ResponseCode.SUCCESS, ext_fields=answer, body=_body({"table": {}}))

    async def _unregister_broker(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        ext = cmd.ext_fields
        try:
            broker_id = int(ext.get("brokerId", "0"))
        except ValueError:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"brokerId {ext.get('brokerId')!r} is not a number")
        self.routes.unregister_broker(ext.get("clusterName", ""), ext.get("brokerAddr", ""),
                                      ext.get("brokerName", ""), broker_id)
        return cmd.response(ResponseCode.SUCCESS)

    async def _route_info(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        topic = cmd.ext_fields.get("topic", "")
        route = self.routes.pick_topic_route_data(topic)
        if route is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST,
                                f"No topic route info in name server for the topic: {topic}")
        return cmd.response(ResponseCode.SUCCESS, body=_body(route))

    async def _cluster_info(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=_body(self.routes.cluster_info()))

    async def _topic_list(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=_body({"topicList": self.routes.all_topics()}))


async def _serve(listen: str) -> None:
    ns = await NameServer(listen).start()
    print(json.dumps({"namesrv": ns.address}), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await ns.stop()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m broker.namesrv", description="A RocketMQ name server.")
    ap.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT", help="port 0 picks a free port")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s")
    asyncio.run(_serve(args.listen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
