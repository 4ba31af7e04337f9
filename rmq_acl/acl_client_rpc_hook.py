"""AclClientRPCHook: signs every request a client sends with its SessionCredentials."""
from __future__ import annotations

from .acl_utils import cal_signature, combine_request_content
from .plain_access_resource import UNIQUE_MSG_QUERY_FLAG, V4_9_3
from .session_credentials import ACCESS_KEY, SECURITY_TOKEN, SIGNATURE, SessionCredentials


class AclClientRPCHook:
    def __init__(self, credentials: SessionCredentials):
        self.credentials = credentials

    def do_before_request(self, cmd) -> None:
        """Add AccessKey (and SecurityToken), then Signature over every other extField's value in key order and
        the body: the AccessKey is part of what is signed, as RocketMQ's hook does."""
        ext = cmd.ext_fields
        ext.pop(SIGNATURE, None)  # a request sent again is signed again
        ext[ACCESS_KEY] = self.credentials.access_key
        if self.credentials.security_token is not None:
            ext[SECURITY_TOKEN] = self.credentials.security_token
        # a QUERY_MESSAGE's _UNIQUE_KEY_QUERY is left out of what is signed, as brokers check it from clients of
        # our version (<= 4.9.3's: PlainAccessValidator.parse)
        excluded = (SIGNATURE, UNIQUE_MSG_QUERY_FLAG) if cmd.version <= V4_9_3 else (SIGNATURE,)
        ext[SIGNATURE] = cal_signature(combine_request_content(ext, excluded), cmd.body, self.credentials.secret_key)

    def __repr__(self) -> str:
        return f"AclClientRPCHook({self.credentials!r})"
