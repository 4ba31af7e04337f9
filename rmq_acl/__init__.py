"""RocketMQ's plain ACL (4.x acl module): the client's request signing (AclClientRPCHook, SessionCredentials) and
the broker's check of every request against plain_acl.yml (PlainAccessValidator, PlainPermissionManager, Permission,
RemoteAddressStrategyFactory). Depends on remoting only; the broker, the client, the CLI and Spark use it."""
from .acl_client_rpc_hook import AclClientRPCHook
from .acl_exception import AclException
from .session_credentials import SessionCredentials

__all__ = ["AclClientRPCHook", "AclException", "SessionCredentials"]
