"""SessionCredentials: an account's AccessKey and SecretKey (and optional SecurityToken), as a client signs with them.

The secret never shows in a repr, a str or an error. When it came from an environment variable (RMQ_SECRET_KEY), a
pickled copy (a Spark task) carries the variable's name instead of the secret and reads it again where it is
unpickled: an executor gets it from its own environment (spark.executorEnv.RMQ_SECRET_KEY)."""
from __future__ import annotations

import os
from typing import Mapping, Optional

# the extFields names (SessionCredentials.ACCESS_KEY and friends)
ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"

ENV_ACCESS_KEY = "RMQ_ACCESS_KEY"
ENV_SECRET_KEY = "RMQ_SECRET_KEY"


class SessionCredentials:
    __slots__ = ("access_key", "_secret_key", "security_token", "secret_env")

    def __init__(self, access_key: str, secret_key: str, security_token: Optional[str] = None,
                 secret_env: Optional[str] = None):
        """secret_env: the environment variable the secret came from (then a pickle carries its name only)."""
        if not isinstance(access_key, str) or not access_key.strip():
            raise ValueError("accessKey: empty; give the account's AccessKey from plain_acl.yml")
        if not isinstance(secret_key, str) or not secret_key:
            raise ValueError(f"secretKey: empty for accessKey {access_key!r}"
                             + (f" (environment variable {secret_env})" if secret_env else ""))
        self.access_key = access_key.strip()
        self._secret_key = secret_key
        self.security_token = security_token
        self.secret_env = secret_env

    @property
    def secret_key(self) -> str:
        return self._secret_key

    @classmethod
    def resolve(cls, access_key: Optional[str], secret_key: Optional[str], env: Optional[Mapping[str, str]] = None,
                names: tuple[str, str] = ("accessKey", "secretKey")) -> Optional["SessionCredentials"]:
        """Credentials from explicit values, else from RMQ_ACCESS_KEY / RMQ_SECRET_KEY; None when neither gives an
        access key. ValueError naming what is missing by `names` (the caller's option names)."""
        env = os.environ if env is None else env
        access_name, secret_name = names
        access_key = access_key or env.get(ENV_ACCESS_KEY) or None
        secret_env = None
        if not secret_key and env.get(ENV_SECRET_KEY):
            secret_key, secret_env = env[ENV_SECRET_KEY], ENV_SECRET_KEY
        if access_key is None:
            if secret_key and secret_env is None:
                raise ValueError(f"{secret_name} is given without {access_name} (or {ENV_ACCESS_KEY})")
            return None
        if not secret_key:
            raise ValueError(f"{secret_name}: none given for {access_name} {access_key!r}; give it, or set "
                             f"{ENV_SECRET_KEY}")
        return cls(access_key, secret_key, secret_env=secret_env)

    def __repr__(self) -> str:
        return f"SessionCredentials(accessKey={self.access_key!r}, secretKey=***)"

    __str__ = __repr__

    def __eq__(self, other) -> bool:
        return isinstance(other, SessionCredentials) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple:
        return self.access_key, self._secret_key, self.security_token

    def __getstate__(self) -> dict:
        state = {"access_key": self.access_key, "security_token": self.security_token, "secret_env": self.secret_env}
        if self.secret_env is None:
            state["secret_key"] = self._secret_key
        return state

    def __setstate__(self, state: dict) -> None:
        secret = state.get("secret_key")
        env = state.get("secret_env")
        if secret is None:
            secret = os.environ.get(env or ENV_SECRET_KEY)
            if not secret:
                raise ValueError(f"secretKey: the environment variable {env} is not set in this process (on "
                                 f"Spark executors: spark.executorEnv.{env})")
        self.__init__(state["access_key"], secret, state.get("security_token"), env)  # type: ignore[misc]
