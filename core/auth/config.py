"""AuthConfig: the ACL 2.0 keys of broker.conf, rmq-proxy.json, namesrv and controller configs.

Upstream's key names and defaults (RocketMQ's AuthConfig), plus ``authenticationMaxClockSkewMillis``
(not upstream): how far ``x-mq-date-time`` may be from the server's clock before a gRPC request
is refused as a replay; 0 or less turns the check off.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from orbitmq.auth.model import User, UserType
from orbitmq.common.config import ConfigBase

DEFAULT_AUTHENTICATION_PROVIDER = "org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider"
DEFAULT_AUTHORIZATION_PROVIDER = "org.apache.rocketmq.auth.authorization.provider.DefaultAuthorizationProvider"
# Where users/ACLs come from: the broker's own store, or (proxy) a broker. OrbitMQ does exactly
# that whichever of upstream's class names is given; any other class is refused.
AUTHENTICATION_METADATA_PROVIDERS = frozenset({
    "", "org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider",
    "org.apache.rocketmq.proxy.auth.ProxyAuthenticationMetadataProvider"})
AUTHORIZATION_METADATA_PROVIDERS = frozenset({
    "", "org.apache.rocketmq.auth.authorization.provider.LocalAuthorizationMetadataProvider",
    "org.apache.rocketmq.proxy.auth.ProxyAuthorizationMetadataProvider"})


@dataclass
class AuthConfig(ConfigBase):
    authentication_enabled: bool = False
    authentication_provider: str = ""
    authentication_metadata_provider: str = ""
    authentication_whitelist: str = ""
    init_authentication_user: str = ""
    inner_client_authentication_credentials: str = ""
    authentication_max_clock_skew_millis: int = 15 * 60 * 1000
    authorization_enabled: bool = False
    authorization_provider: str = ""
    authorization_metadata_provider: str = ""
    authorization_whitelist: str = ""
    # The proxy's cache of users/ACLs fetched from brokers: an entry older than this is re-read.
    user_cache_refresh_second: int = 60
    acl_cache_refresh_second: int = 60

    @property
    def auth_enabled(self) -> bool:
        return self.authentication_enabled or self.authorization_enabled

    def validate_auth(self) -> None:
        """Refuse at start-up what would otherwise be silently ignored."""
        if self.authentication_provider.strip() not in ("", DEFAULT_AUTHENTICATION_PROVIDER):
            raise ValueError(f"authenticationProvider {self.authentication_provider!r} is not supported: "
                             f"only {DEFAULT_AUTHENTICATION_PROVIDER}")
        if self.authorization_provider.strip() not in ("", DEFAULT_AUTHORIZATION_PROVIDER):
            raise ValueError(f"authorizationProvider {self.authorization_provider!r} is not supported: "
                             f"only {DEFAULT_AUTHORIZATION_PROVIDER}")
        if self.authentication_metadata_provider.strip() not in AUTHENTICATION_METADATA_PROVIDERS:
            raise ValueError(f"authenticationMetadataProvider {self.authentication_metadata_provider!r} is not "
                             "supported: users are kept on the brokers (Local...) and read by the proxy (Proxy...)")
        if self.authorization_metadata_provider.strip() not in AUTHORIZATION_METADATA_PROVIDERS:
            raise ValueError(f"authorizationMetadataProvider {self.authorization_metadata_provider!r} is not "
                             "supported: ACLs are kept on the brokers (Local...) and read by the proxy (Proxy...)")
        self.init_user()
        self.inner_credentials()

    def init_user(self) -> User | None:
        """initAuthenticationUser as a Super user, or None."""
        text = self.init_authentication_user.strip()
        if not text:
            return None
        try:
            obj = json.loads(text)
            return User(str(obj["username"]), str(obj["password"]), UserType.Super)
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"initAuthenticationUser must be JSON {{\"username\":..,\"password\":..}}: {exc}") from None

    def inner_credentials(self) -> tuple[str, str] | None:
        """innerClientAuthenticationCredentials -> (accessKey, secretKey), or None."""
        text = self.inner_client_authentication_credentials.strip()
        if not text:
            return None
        try:
            obj = json.loads(text)
            return str(obj["accessKey"]), str(obj["secretKey"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError("innerClientAuthenticationCredentials must be JSON "
                             f"{{\"accessKey\":..,\"secretKey\":..}}: {exc}") from None

    def bootstrap_users(self) -> list[User]:
        """The Super users every server knows from its own config (init user, inner client)."""
        users = []
        init = self.init_user()
        if init is not None:
            users.append(init)
        inner = self.inner_credentials()
        if inner is not None:
            users.append(User(inner[0], inner[1], UserType.Super))
        return users


def whitelist(text: str) -> frozenset[str]:
    """Comma-separated rpc codes (decimal Remoting codes or gRPC full request names)."""
    return frozenset(item.strip() for item in text.split(",") if item.strip())
