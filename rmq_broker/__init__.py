"""The store served as RocketMQ over the wire: the name server (route_info_manager, namesrv). Imports store,
filters and remoting; nothing below imports it."""
from __future__ import annotations


def __getattr__(name: str):
    # imported on first use: `import rmq_broker` alone loads neither
    if name == "NameServer":
        from .namesrv import NameServer
        return NameServer
    if name == "Broker":
        from .broker import Broker
        return Broker
    raise AttributeError(name)


__all__ = ["NameServer", "Broker"]
