"""PlainPermissionManager: the accounts of one plain_acl.yml (RocketMQ's format), reloaded when the file changes
(a file that does not load keeps the accounts in force and logs why), and the check of a request against them."""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import os
from dataclasses import dataclass, field
from typing import Optional

from .acl_exception import AclException
from .acl_utils import cal_signature
from .permission import (
    DENY,
    PUB,
    check_permission,
    need_admin_perm,
    parse_perm_from_string,
    parse_resource_perms,
    perm_text,
)
from .plain_access_resource import RMQ_SYS_TRACE_TOPIC, PlainAccessResource, is_retry_topic, print_str, retry_topic
from .remote_address_strategy import Strategy, remote_address_strategy

log = logging.getLogger(__name__)

ACCESS_KEY_MIN_LENGTH = 6  # AclConstants: a key must be longer than this
SECRET_KEY_MIN_LENGTH = 6
_ACCOUNT_KEYS = {"accessKey", "secretKey", "whiteRemoteAddress", "admin", "defaultTopicPerm", "defaultGroupPerm",
                 "topicPerms", "groupPerms"}
_FILE_KEYS = {"globalWhiteRemoteAddresses", "accounts", "dataVersion"}


@dataclass
class PlainAccount:
    """One account of plain_acl.yml (PlainAccessConfig, as PlainPermissionManager builds its resource)."""
    access_key: str
    secret_key: str = field(repr=False)
    white: Strategy = field(repr=False)
    admin: bool = False
    default_topic_perm: int = DENY
    default_group_perm: int = DENY
    perms: Optional[dict[str, int]] = None  # topics by name, groups as %RETRY%<group>; None: none listed


@dataclass
class AclRules:
    path: str
    global_white: list[Strategy]
    accounts: dict[str, PlainAccount]


def _text(value, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise AclException(f"{where}: {value!r} is not text")
    return str(value)


def _list(value, where: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise AclException(f"{where}: expected a list (- item lines), got {type(value).__name__}")
    return value


def _account(entry, n: int) -> PlainAccount:
    if not isinstance(entry, dict):
        raise AclException(f"accounts[{n}]: expected accessKey, secretKey, ... keys, got {entry!r:.60}")
    where = f"accounts[{n}]"
    access_key = entry.get("accessKey")
    if access_key is None or len(_text(access_key, f"{where}.accessKey")) <= ACCESS_KEY_MIN_LENGTH:
        raise AclException(f"{where}.accessKey: missing or not longer than {ACCESS_KEY_MIN_LENGTH} characters")
    access_key = str(access_key)
    where = f"account {access_key!r}"
    secret = entry.get("secretKey")
    if secret is None or len(_text(secret, f"{where} secretKey (value not shown)")) <= SECRET_KEY_MIN_LENGTH:
        raise AclException(f"{where}: secretKey missing or not longer than {SECRET_KEY_MIN_LENGTH} characters")
    for key in sorted(set(entry) - _ACCOUNT_KEYS):
        log.warning("plain_acl.yml %s: key %r is not one of RocketMQ's account keys (ignored)", where, key)
    admin = entry.get("admin", False)
    if isinstance(admin, str) and admin.strip().lower() in ("true", "false"):
        admin = admin.strip().lower() == "true"
    if not isinstance(admin, bool):
        raise AclException(f"{where}.admin: {admin!r} is not true or false")
    white = entry.get("whiteRemoteAddress")
    perms = {**parse_resource_perms(_list(entry.get("topicPerms"), f"{where}.topicPerms"), f"{where}.topicPerms"),
             **{retry_topic(group) or "": perm for group, perm in parse_resource_perms(
                 _list(entry.get("groupPerms"), f"{where}.groupPerms"), f"{where}.groupPerms").items()}}
    return PlainAccount(
        access_key, str(secret), remote_address_strategy(None if white is None else _text(white, where)), admin,
        parse_perm_from_string(entry.get("defaultTopicPerm"), f"{where}.defaultTopicPerm"),
        parse_perm_from_string(entry.get("defaultGroupPerm"), f"{where}.defaultGroupPerm"),
        perms or None)


def parse_rules(text: bytes, path: str) -> AclRules:
    import yaml  # the broker's only YAML: clients never need it

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise AclException(f"{path} is not YAML: {e}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise AclException(f"{path}: expected globalWhiteRemoteAddresses and accounts keys, got a "
                           f"{type(data).__name__}")
    for key in sorted(set(data) - _FILE_KEYS):
        log.warning("%s: key %r is not one of RocketMQ's plain_acl.yml keys (ignored)", path, key)
    try:
        white = [remote_address_strategy(_text(w, "globalWhiteRemoteAddresses"))
                 for w in _list(data.get("globalWhiteRemoteAddresses"), "globalWhiteRemoteAddresses")]
        accounts: dict[str, PlainAccount] = {}
        for n, entry in enumerate(_list(data.get("accounts"), "accounts")):
            account = _account(entry, n)
            if account.access_key in accounts:
                raise AclException(f"accounts[{n}]: accessKey {account.access_key!r} is given twice")
            accounts[account.access_key] = account
    except AclException as e:
        raise AclException(f"{path}: {e}") from None
    return AclRules(path, white, accounts)


class PlainPermissionManager:
    def __init__(self, path: str):
        self.path = os.path.abspath(path)
        text = self._read()
        self.rules = parse_rules(text, self.path)  # AclException: the broker does not start
        self._digest = hashlib.sha256(text).digest()
        log.info("ACL: %s in force (%d accounts, %d global white addresses)", self.path, len(self.rules.accounts),
                 len(self.rules.global_white))

    def _read(self) -> bytes:
        try:
            with open(self.path, "rb") as f:
                return f.read()
        except OSError as e:
            raise AclException(f"aclFilePath {self.path}: {e.strerror or e}") from None

    def reload_if_changed(self) -> bool:
        """Load the file again if its content changed; True if new rules are in force. A file that does not load
        keeps the rules in force (logged once per change of the file)."""
        try:
            text = self._read()
        except AclException as e:
            text = b""
            error: Optional[AclException] = e
        else:
            error = None
        digest = hashlib.sha256(text).digest()
        if digest == self._digest:
            return False
        self._digest = digest
        try:
            if error is not None:
                raise error
            rules = parse_rules(text, self.path)
        except AclException as e:
            log.error("ACL: %s changed but does not load; the previous accounts stay in force: %s", self.path, e)
            return False
        self.rules = rules  # one assignment: a request sees the old rules or the new, never a mix
        log.info("ACL: %s reloaded (%d accounts, %d global white addresses)", self.path, len(rules.accounts),
                 len(rules.global_white))
        return True

    async def watch(self, interval_s: float = 1.0) -> None:
        """RocketMQ's AclFileWatchService, in the broker's event loop: the file is re-read every interval."""
        while True:
            await asyncio.sleep(interval_s)
            self.reload_if_changed()

    def validate(self, need: PlainAccessResource) -> None:
        """PlainPermissionManager.validate: AclException naming what is missing, never a secret."""
        rules = self.rules
        if any(match(need.host) for match in rules.global_white):
            return
        if not need.access_key:  # the C++ client sends an empty AccessKey when it has no credentials
            raise AclException("No accessKey is configured (the request is not signed and "
                               f"{need.host or 'its address'} is not in globalWhiteRemoteAddresses)")
        owned = rules.accounts.get(need.access_key)
        if owned is None:
            raise AclException(f"No acl config for {need.access_key}")
        if owned.white(need.host):
            return
        expected = cal_signature(need.content, need.body, owned.secret_key)
        if not hmac.compare_digest(expected.encode(), (need.signature or "").encode("utf-8", "replace")):
            raise AclException(f"Check signature failed for accessKey={need.access_key}")
        if need.resources.get(RMQ_SYS_TRACE_TOPIC) == PUB:  # message traces go through whatever the account
            return
        self.check_perm(need, owned)

    @staticmethod
    def check_perm(need: PlainAccessResource, owned: PlainAccount) -> None:
        if need_admin_perm(need.request_code) and not owned.admin:
            raise AclException(f"Need admin permission for request code={need.request_code}, but accessKey="
                               f"{owned.access_key} is not")
        if not need.resources or (owned.perms is None and owned.admin):
            return
        for resource, needed in need.resources.items():
            group = is_retry_topic(resource)
            if owned.perms is None or resource not in owned.perms:
                has = owned.default_group_perm if group else owned.default_topic_perm
                source = "defaultGroupPerm" if group else "defaultTopicPerm"
            else:
                has, source = owned.perms[resource], "groupPerms" if group else "topicPerms"
            if not check_permission(needed, has):
                raise AclException(f"No permission for {print_str(resource)}: {perm_text(needed)} needed, accessKey="
                                   f"{owned.access_key} has {perm_text(has)} ({source})")
