"""ACL 2.0 data model: User, Acl, Policy, PolicyEntry, Resource, with upstream's names and codes.

JSON uses the string names the admin protocol carries (``"userType": "Super"``); reading also
accepts the numeric codes upstream may store, so either form loads.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, NamedTuple

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"


class AuthError(Exception):
    """A refused request or bad admin input; ``code`` is the Remoting response code to answer."""

    def __init__(self, message: str, code: int = 16) -> None:  # NO_PERMISSION
        super().__init__(message)
        self.code = code


def denial_reason(exc: AuthError) -> str:
    """The ``reason`` label of rocketmq_auth_denied_total: who could not be established, or what
    they may not do."""
    return "authentication" if isinstance(exc, AuthenticationError) else "authorization"


class AuthenticationError(AuthError):
    """Who is calling could not be established (bad/missing signature, unknown or disabled user)."""


class AuthorizationError(AuthError):
    """The caller is known but may not do this."""


class _NamedEnum(IntEnum):
    @classmethod
    def parse(cls, value: Any, what: str) -> Any:
        """Name (any case) or numeric code -> member; ValueError naming ``what`` otherwise."""
        if isinstance(value, cls):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            try:
                return cls(value)
            except ValueError:
                pass
        elif isinstance(value, str):
            text = value.strip()
            for member in cls:
                if member.name.lower() == text.lower():
                    return member
            if text.isdigit():
                return cls.parse(int(text), what)
        raise ValueError(f"The {what} {value!r} is illegal, expected one of {', '.join(m.name for m in cls)}")


class UserType(_NamedEnum):
    Super = 1
    Normal = 2


class UserStatus(_NamedEnum):
    enable = 1
    disable = 2


class Decision(_NamedEnum):
    Allow = 1
    Deny = 2


class PolicyType(_NamedEnum):
    Custom = 1
    Default = 2


class Action(_NamedEnum):
    Unknown = 0
    All = 1
    Any = 2
    Pub = 3
    Sub = 4
    Create = 5
    Update = 6
    Delete = 7
    Get = 8
    List = 9


class ResourceType(_NamedEnum):
    Unknown = 0
    Any = 1
    Cluster = 2
    Namespace = 3
    Topic = 4
    Group = 5


class ResourcePattern(_NamedEnum):
    ANY = 1
    LITERAL = 2
    PREFIXED = 3


@dataclass
class User:
    username: str
    password: str = ""
    user_type: UserType = UserType.Normal
    user_status: UserStatus = UserStatus.enable

    @property
    def subject_key(self) -> str:
        return f"User:{self.username}"

    def to_json(self, *, with_password: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"username": self.username}
        if with_password:
            out["password"] = self.password
        out["userType"] = self.user_type.name
        out["userStatus"] = self.user_status.name
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> User:
        """A stored or admin-supplied user; missing type/status default as upstream (Normal, enable)."""
        if not isinstance(obj, dict):
            raise ValueError("user info must be a JSON object")
        username = str(obj.get("username") or "").strip()
        if not username:
            raise ValueError("username can not be blank")
        user_type = obj.get("userType")
        status = obj.get("userStatus")
        return cls(username, str(obj.get("password") or ""),
                   UserType.parse(user_type, "userType") if user_type not in (None, "") else UserType.Normal,
                   UserStatus.parse(status, "userStatus") if status not in (None, "") else UserStatus.enable)


class Resource(NamedTuple):
    """``Topic:orders``, ``Group:g*``, ``Cluster:*`` or ``*`` (Resource.of).

    A NamedTuple, not a dataclass: the proxy builds one or two per request, and this is the cheap
    immutable, hashable record.
    """

    type: ResourceType
    name: str  # "" for ANY; the prefix without '*' for PREFIXED
    pattern: ResourcePattern

    @classmethod
    def of(cls, text: str) -> Resource:
        text = (text or "").strip()
        if text == "*":
            return cls(ResourceType.Any, "", ResourcePattern.ANY)
        type_name, sep, name = text.partition(":")
        if not sep:
            raise ValueError(f"The resource {text!r} is illegal, expected Type:name (Topic:t1, Group:g*, *)")
        rtype = ResourceType.parse(type_name, "resource type")
        if rtype in (ResourceType.Unknown, ResourceType.Any):
            raise ValueError(f"The resource type {type_name!r} is illegal")
        if not name:
            raise ValueError(f"The resource {text!r} has no name")
        if name == "*":
            return cls(rtype, "", ResourcePattern.ANY)
        if name.endswith("*"):
            return cls(rtype, name[:-1], ResourcePattern.PREFIXED)
        return cls(rtype, name, ResourcePattern.LITERAL)

    @classmethod
    def topic(cls, name: str) -> Resource:
        return cls(ResourceType.Topic, name, ResourcePattern.LITERAL)

    @classmethod
    def group(cls, name: str) -> Resource:
        """Resource.ofGroup: a retry/DLQ topic name is authorised as its group."""
        for prefix in (RETRY_PREFIX, DLQ_PREFIX):
            if name.startswith(prefix):
                name = name[len(prefix):]
        return cls(ResourceType.Group, name, ResourcePattern.LITERAL)

    @classmethod
    def cluster(cls, name: str) -> Resource:
        return cls(ResourceType.Cluster, name, ResourcePattern.LITERAL)

    @property
    def key(self) -> str:
        if self.type == ResourceType.Any:
            return "*"
        if self.pattern == ResourcePattern.ANY:
            return f"{self.type.name}:*"
        if self.pattern == ResourcePattern.PREFIXED:
            return f"{self.type.name}:{self.name}*"
        return f"{self.type.name}:{self.name}"

    def matches(self, requested: Resource) -> bool:
        """Does this (ACL-side) resource cover the requested literal one?"""
        if self.type == ResourceType.Any:
            return True
        if self.type != requested.type:
            return False
        if self.pattern == ResourcePattern.ANY:
            return True
        if self.pattern == ResourcePattern.PREFIXED:
            return requested.name.startswith(self.name)
        return requested.name == self.name


def valid_ip_or_cidr(text: str) -> bool:
    try:
        ipaddress.ip_network(text.strip(), strict=False)
    except ValueError:
        return False
    return True


def ip_in_ranges(ip: str, ranges: tuple[str, ...]) -> bool:
    """IPAddressUtils.isIPInRange over a list of IPs/CIDRs; an unparsable source IP matches none."""
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        return False
    for item in ranges:
        try:
            if addr in ipaddress.ip_network(item, strict=False):
                return True
        except (ValueError, TypeError):
            continue
    return False


@dataclass
class PolicyEntry:
    resource: Resource
    actions: tuple[Action, ...]
    decision: Decision
    source_ips: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"resource": self.resource.key, "actions": [a.name for a in self.actions]}
        if self.source_ips:
            out["sourceIps"] = list(self.source_ips)
        out["decision"] = self.decision.name
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> PolicyEntry:
        if not isinstance(obj, dict):
            raise ValueError("a policy entry must be a JSON object")
        resource = Resource.of(str(obj.get("resource") or ""))
        raw_actions = obj.get("actions") or []
        if isinstance(raw_actions, str):
            raw_actions = [a for a in raw_actions.split(",") if a.strip()]
        actions = tuple(Action.parse(a, "action") for a in raw_actions)
        if not actions:
            raise ValueError("The actions can not be empty")
        if Action.Any in actions or Action.Unknown in actions:
            raise ValueError("The actions can not be Any")
        decision_raw = obj.get("decision")
        if decision_raw in (None, ""):
            raise ValueError("The decision can not be null")
        decision = Decision.parse(decision_raw, "decision")
        env = obj.get("environment") if isinstance(obj.get("environment"), dict) else {}
        ips_raw = obj.get("sourceIps", env.get("sourceIps")) or []
        if isinstance(ips_raw, str):
            ips_raw = ips_raw.split(",")
        ips = tuple(str(ip).strip() for ip in ips_raw if str(ip).strip())
        for ip in ips:
            if not valid_ip_or_cidr(ip):
                raise ValueError(f"The sourceIp {ip!r} is not a valid IP or CIDR")
        return cls(resource, actions, decision, ips)

    def covers_action(self, wanted: tuple[Action, ...]) -> bool:
        """All matches anything; a request lists the actions any one of which suffices."""
        if Action.All in self.actions:
            return True
        return any(a in self.actions for a in wanted)

    def covers_ip(self, source_ip: str) -> bool:
        return not self.source_ips or ip_in_ranges(source_ip, self.source_ips)


@dataclass
class Policy:
    policy_type: PolicyType = PolicyType.Custom
    entries: list[PolicyEntry] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"policyType": self.policy_type.name, "entries": [e.to_json() for e in self.entries]}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Policy:
        if not isinstance(obj, dict):
            raise ValueError("a policy must be a JSON object")
        ptype = obj.get("policyType")
        entries = obj.get("entries") or []
        if not isinstance(entries, list):
            raise ValueError("policy entries must be a list")
        return cls(PolicyType.parse(ptype, "policyType") if ptype not in (None, "") else PolicyType.Custom,
                   [PolicyEntry.from_json(e) for e in entries])

    def merge(self, other: Policy) -> None:
        """Policy.updateEntry: an entry for the same resource is replaced, a new one added."""
        by_key = {e.resource.key: i for i, e in enumerate(self.entries)}
        for entry in other.entries:
            index = by_key.get(entry.resource.key)
            if index is None:
                by_key[entry.resource.key] = len(self.entries)
                self.entries.append(entry)
            else:
                self.entries[index] = entry


@dataclass
class Acl:
    subject: str  # "User:alice"
    policies: list[Policy] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"subject": self.subject, "policies": [p.to_json() for p in self.policies]}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Acl:
        if not isinstance(obj, dict):
            raise ValueError("acl info must be a JSON object")
        subject = str(obj.get("subject") or "").strip()
        parse_subject(subject)
        policies = obj.get("policies") or []
        if not isinstance(policies, list):
            raise ValueError("policies must be a list")
        return cls(subject, [Policy.from_json(p) for p in policies])

    def policy(self, policy_type: PolicyType) -> Policy | None:
        for p in self.policies:
            if p.policy_type == policy_type:
                return p
        return None

    def merge(self, other: Acl) -> None:
        """Acl.updatePolicy: merge entry by entry into the policy of the same type."""
        for incoming in other.policies:
            mine = self.policy(incoming.policy_type)
            if mine is None:
                self.policies.append(Policy(incoming.policy_type, list(incoming.entries)))
            else:
                mine.merge(incoming)

    def delete(self, policy_type: PolicyType | None, resources: list[Resource]) -> None:
        """Drop the entries for ``resources`` (all of them when empty) from the given policy type(s)."""
        keys = {r.key for r in resources}
        for p in self.policies:
            if policy_type is not None and p.policy_type != policy_type:
                continue
            p.entries = [e for e in p.entries if keys and e.resource.key not in keys]
        self.policies = [p for p in self.policies if p.entries]


def parse_subject(subject: str) -> str:
    """``User:alice`` -> ``alice``; the only subject type is User."""
    kind, sep, name = (subject or "").partition(":")
    if not sep or kind.strip().lower() != "user" or not name.strip():
        raise ValueError(f"The subject {subject!r} is illegal, expected User:<username>")
    return name.strip()
