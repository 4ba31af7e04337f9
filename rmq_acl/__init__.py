"""RocketMQ's plain ACL (4.x acl module): the client's request signing (AclClientRPCHook, SessionCredentials) and
the broker's check of every request against plain_acl.yml (PlainAccessValidator, PlainPermissionManager, Permission,
RemoteAddressStrategyFactory). Depends on remoting only; the broker, the client, the CLI and Spark use it."""
from typing import TYPE_CHECKING, Any

from .acl_exception import AclException
from .session_credentials import SessionCredentials

if TYPE_CHECKING:
    from .acl_client_rpc_hook import AclClientRPCHook


def __getattr__(name: str) -> Any:
    """AclClientRPCHook on first use: it loads the remoting protocol, which a reader of the credentials (Spark's
    option parsing in every planner process) does without."""
    if name == "AclClientRPCHook":
        from .acl_client_rpc_hook import AclClientRPCHook
        return AclClientRPCHook
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["AclClientRPCHook", "AclException", "SessionCredentials"]
