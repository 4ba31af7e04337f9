"""AclException: a request the ACL refuses, or a plain_acl.yml that does not load."""
from __future__ import annotations


class AclException(Exception):
    """The message names the account, resource, field or value at fault, never a secret key."""
