"""PlainAccessValidator: the broker's check of every request (RocketMQ registers it as an RPCHook's
doBeforeRequest); a refusal is the remark of a NO_PERMISSION answer."""
from __future__ import annotations

from typing import Optional

from .acl_exception import AclException
from .plain_access_resource import PlainAccessResource, parse
from .plain_permission_manager import PlainPermissionManager


class PlainAccessValidator:
    def __init__(self, acl_file: str):
        self.manager = PlainPermissionManager(acl_file)

    def parse(self, cmd, remote_address: Optional[str]) -> PlainAccessResource:
        return parse(cmd, remote_address)

    def validate(self, resource: PlainAccessResource) -> None:
        self.manager.validate(resource)

    def refusal(self, cmd, remote_address: Optional[str]) -> Optional[str]:
        """None if the request may go on, else why not (names the account and resource, never a secret)."""
        try:
            self.validate(self.parse(cmd, remote_address))
        except AclException as e:
            return str(e)
        return None

    def refusal_for(self, cmd, remote_address: Optional[str], resource: str, perm: int) -> Optional[str]:
        """As refusal, for a resource the request reaches only through the store: the topic of the message a
        CONSUMER_SEND_MSG_BACK or VIEW_MESSAGE_BY_ID names by its offset (RocketMQ 4.x checks neither)."""
        need = self.parse(cmd, remote_address)
        need.resources = {resource: perm}
        try:
            self.validate(need)
        except AclException as e:
            return str(e)
        return None
