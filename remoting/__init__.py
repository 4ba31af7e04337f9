"""RocketMQ's remoting protocol (4.x): the RemotingCommand frame in both header encodings, the request and
response codes, typed headers, the name server's bodies in fastjson's form, and an asyncio server and client
(with a blocking wrapper). Knows nothing of the store: the broker plugs processors in."""
from .blocking_client import BlockingRemotingClient
from .codes import LanguageCode, RequestCode, ResponseCode
from .command_header import CommandHeader, HeaderFieldError
from .remoting_client import RemotingClient, RemotingTimeoutError
from .remoting_command import FrameError, RemotingCommand, SerializeType
from .remoting_serializable import BodyError
from .remoting_server import RemotingServer

__all__ = ["RemotingCommand", "SerializeType", "FrameError", "RequestCode", "ResponseCode", "LanguageCode",
           "RemotingServer", "RemotingClient", "BlockingRemotingClient", "RemotingTimeoutError", "CommandHeader",
           "HeaderFieldError", "BodyError"]
