"""mqadmin's ACL 2.0 commands (org.apache.rocketmq.tools.command.auth): createUser, updateUser,
deleteUser, getUser, listUser, createAcl, updateAcl, deleteAcl, getAcl, listAcl, over request
codes 3001-3010 (RequestCode#AUTH_CREATE_USER ... AUTH_LIST_ACL), and copyUser / copyAcl
(CopyUsersSubCommand, CopyAclsSubCommand), which copy users and ACLs from one broker to another.

Each targets one broker with ``-b`` or, with ``-c``, every master and slave of the cluster, as
upstream. When the cluster has authentication on, the CLI signs its requests with
``--accessKey``/``--secretKey`` (or ORBITMQ_ACCESS_KEY / ORBITMQ_SECRET_KEY).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any

from orbitmq.admin.admin_api import AdminError, MQAdminExt
from orbitmq.admin.output import render_table
from orbitmq.admin.registry import Result, command
from orbitmq.auth.model import (
    Action,
    Decision,
    Resource,
    UserStatus,
    UserType,
    parse_subject,
    valid_ip_or_cidr,
)
from orbitmq.remoting.codes import RequestCode


def _target(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", help="this broker (ip:port)")
    p.add_argument("-c", "--clusterName", dest="cluster", help="every master and slave of this cluster")


async def _addrs(admin: MQAdminExt, args: argparse.Namespace) -> list[str]:
    if args.broker_addr:
        return [args.broker_addr.strip()]
    if args.cluster:
        info = await admin.cluster_info()
        addrs = info.retrieve_all_addr_by_cluster(args.cluster.strip())
        if not addrs:
            raise AdminError(f"cluster {args.cluster} has no broker")
        return addrs
    raise AdminError("one of -b brokerAddr or -c clusterName is required")


async def _one(admin: MQAdminExt, addr: str, code: int, header: dict[str, str], body: Any = None) -> Any:
    """One broker's answer to one auth request: its JSON body, or None when it has none."""
    payload = b"" if body is None else json.dumps(body).encode()
    response = await admin.api.call(addr, code, header, payload)
    return json.loads(response.body) if response.body else None


async def _call(admin: MQAdminExt, args: argparse.Namespace, code: int, header: dict[str, str],
                body: Any = None) -> list[tuple[str, Any]]:
    """Send to every target; (address, parsed JSON body or None) each. A refusal raises."""
    return [(addr, await _one(admin, addr, code, header, body)) for addr in await _addrs(admin, args)]


def _done(what: str, results: list[tuple[str, Any]]) -> Result:
    addrs = [addr for addr, _ in results]
    return Result({"result": "success", "brokers": addrs},
                  "\n".join(f"{what} to {addr} success." for addr in addrs))


def _choice(parse: Any, what: str) -> Any:
    def convert(text: str) -> str:
        try:
            return parse(text, what).name
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return convert


# ---- users --------------------------------------------------------------------------------

def _user_options(p: argparse.ArgumentParser) -> None:
    _target(p)
    p.add_argument("-u", "--username", required=True)
    p.add_argument("-p", "--password")
    p.add_argument("-t", "--userType", dest="user_type", type=_choice(UserType.parse, "userType"),
                   help="Super or Normal")


def _update_user_options(p: argparse.ArgumentParser) -> None:
    _user_options(p)
    p.add_argument("-s", "--userStatus", dest="user_status", type=_choice(UserStatus.parse, "userStatus"),
                   help="enable or disable")


def _user_body(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {"username": args.username.strip()}
    if args.password:
        body["password"] = args.password
    if args.user_type:
        body["userType"] = args.user_type
    if getattr(args, "user_status", None):
        body["userStatus"] = args.user_status
    return body


@command("createUser", "Create a user (ACL 2.0)", _user_options)
async def create_user(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    if not args.password:
        raise AdminError("-p password is required")
    return _done("create user", await _call(admin, args, RequestCode.AUTH_CREATE_USER,
                                            {"username": args.username.strip()}, _user_body(args)))


@command("updateUser", "Update a user's password, type or status (ACL 2.0)", _update_user_options)
async def update_user(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    body = _user_body(args)
    if len(body) == 1:
        raise AdminError("nothing to update: give -p, -t or -s")
    return _done("update user", await _call(admin, args, RequestCode.AUTH_UPDATE_USER,
                                            {"username": args.username.strip()}, body))


def _username_options(p: argparse.ArgumentParser) -> None:
    _target(p)
    p.add_argument("-u", "--username", required=True)


@command("deleteUser", "Delete a user and its ACL (ACL 2.0)", _username_options)
async def delete_user(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    return _done("delete user", await _call(admin, args, RequestCode.AUTH_DELETE_USER,
                                            {"username": args.username.strip()}))


def _user_rows(users: list[dict[str, Any]]) -> list[list[Any]]:
    return [[u.get("username"), u.get("password"), u.get("userType"), u.get("userStatus")] for u in users]


_USER_HEADERS = ("#UserName", "#Password", "#UserType", "#UserStatus")


@command("getUser", "Show a user (ACL 2.0)", _username_options)
async def get_user(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    results = await _call(admin, args, RequestCode.AUTH_GET_USER, {"username": args.username.strip()})
    found = {addr: user for addr, user in results if user is not None}
    if not found:
        raise AdminError(f"user {args.username} not found")
    data = next(iter(found.values())) if len(results) == 1 else found
    return Result(data, render_table(_USER_HEADERS, _user_rows(list(found.values()))))


def _list_user_options(p: argparse.ArgumentParser) -> None:
    _target(p)
    p.add_argument("-f", "--filter", default="", help="substring of the username")


@command("listUser", "List users (ACL 2.0)", _list_user_options)
async def list_user(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    results = await _call(admin, args, RequestCode.AUTH_LIST_USER, {"filter": args.filter})
    rows: list[list[Any]] = []
    for _addr, users in results:
        rows.extend(_user_rows(users or []))
    data = results[0][1] if len(results) == 1 else dict(results)
    return Result(data, render_table(_USER_HEADERS, rows))


# ---- ACLs ---------------------------------------------------------------------------------

def _csv(text: str | None) -> list[str]:
    return [item.strip() for item in (text or "").split(",") if item.strip()]


def _acl_options(p: argparse.ArgumentParser) -> None:
    _target(p)
    p.add_argument("-s", "--subject", required=True, help="e.g. User:alice")
    p.add_argument("-r", "--resources", required=True, help="e.g. Topic:t1,Group:g*")
    p.add_argument("-a", "--actions", required=True, help="e.g. Pub,Sub")
    p.add_argument("-i", "--sourceIp", dest="source_ip", help="IPs or CIDRs, comma separated")
    p.add_argument("-d", "--decision", required=True, type=_choice(Decision.parse, "decision"), help="Allow or Deny")


def _acl_body(args: argparse.Namespace) -> dict[str, Any]:
    """AclInfo with one Custom policy; checked here so a typo fails before reaching any broker."""
    try:
        parse_subject(args.subject)
        resources = [Resource.of(r).key for r in _csv(args.resources)]
        actions = [Action.parse(a, "action").name for a in _csv(args.actions)]
    except ValueError as exc:
        raise AdminError(str(exc)) from None
    if not resources or not actions:
        raise AdminError("-r resources and -a actions must not be empty")
    ips = _csv(args.source_ip)
    for ip in ips:
        if not valid_ip_or_cidr(ip):
            raise AdminError(f"sourceIp {ip!r} is not a valid IP or CIDR")
    entries = [{"resource": r, "actions": actions, "sourceIps": ips, "decision": args.decision} for r in resources]
    return {"subject": args.subject.strip(), "policies": [{"policyType": "Custom", "entries": entries}]}


@command("createAcl", "Create an ACL, or add entries to a subject's ACL (ACL 2.0)", _acl_options)
async def create_acl(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    return _done("create acl", await _call(admin, args, RequestCode.AUTH_CREATE_ACL,
                                           {"subject": args.subject.strip()}, _acl_body(args)))


@command("updateAcl", "Update entries of a subject's ACL (ACL 2.0)", _acl_options)
async def update_acl(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    return _done("update acl", await _call(admin, args, RequestCode.AUTH_UPDATE_ACL,
                                           {"subject": args.subject.strip()}, _acl_body(args)))


def _delete_acl_options(p: argparse.ArgumentParser) -> None:
    _target(p)
    p.add_argument("-s", "--subject", required=True)
    p.add_argument("-r", "--resources", default="", help="entries to drop; all when omitted")


@command("deleteAcl", "Delete a subject's ACL or some of its entries (ACL 2.0)", _delete_acl_options)
async def delete_acl(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    try:
        resources = [Resource.of(r).key for r in _csv(args.resources)]
    except ValueError as exc:
        raise AdminError(str(exc)) from None
    header = {"subject": args.subject.strip(), "resource": ",".join(resources)}
    return _done("delete acl", await _call(admin, args, RequestCode.AUTH_DELETE_ACL, header))


def _acl_rows(acls: list[dict[str, Any]]) -> list[list[Any]]:
    rows = []
    for acl in acls:
        for policy in acl.get("policies") or ():
            for e in policy.get("entries") or ():
                rows.append([acl.get("subject"), policy.get("policyType"), e.get("resource"),
                             ",".join(e.get("actions") or ()), ",".join(e.get("sourceIps") or ()),
                             e.get("decision")])
    return rows


_ACL_HEADERS = ("#Subject", "#PolicyType", "#Resource", "#Actions", "#SourceIp", "#Decision")


def _get_acl_options(p: argparse.ArgumentParser) -> None:
    _target(p)
    p.add_argument("-s", "--subject", required=True)


@command("getAcl", "Show a subject's ACL (ACL 2.0)", _get_acl_options)
async def get_acl(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    results = await _call(admin, args, RequestCode.AUTH_GET_ACL, {"subject": args.subject.strip()})
    found = {addr: acl for addr, acl in results if acl is not None}
    if not found:
        raise AdminError(f"acl of {args.subject} not found")
    data = next(iter(found.values())) if len(results) == 1 else found
    return Result(data, render_table(_ACL_HEADERS, _acl_rows(list(found.values()))))


def _list_acl_options(p: argparse.ArgumentParser) -> None:
    _target(p)
    p.add_argument("-s", "--subject", default="", help="substring of the subject")
    p.add_argument("-r", "--resource", default="", help="substring of the resource")


@command("listAcl", "List ACLs (ACL 2.0)", _list_acl_options)
async def list_acl(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    results = await _call(admin, args, RequestCode.AUTH_LIST_ACL,
                          {"subjectFilter": args.subject, "resourceFilter": args.resource})
    rows: list[list[Any]] = []
    for _addr, acls in results:
        rows.extend(_acl_rows(acls or []))
    data = results[0][1] if len(results) == 1 else dict(results)
    return Result(data, render_table(_ACL_HEADERS, rows))


# ---- copying between brokers -----------------------------------------------------------------

def _copy_options(what: str, key: str, flag: str):
    def configure(p: argparse.ArgumentParser) -> None:
        p.add_argument("-f", "--fromBroker", dest="source", required=True,
                       help=f"the source broker that the {what} copy from")
        p.add_argument("-t", "--toBroker", dest="target", required=True,
                       help=f"the target broker that the {what} copy to")
        p.add_argument(f"-{flag}", f"--{key}", dest="names", help=f"the {key[:-1]} list of {what} to copy.")
    return configure


@dataclass(frozen=True)
class _Copied:
    """What copyUser / copyAcl copy: the key naming one, and the four requests that read and write them."""

    what: str  # "user" or "acl"
    key: str  # "username" or "subject"
    get: int
    list_code: int
    list_header: dict[str, str]
    create: int
    update: int


_USERS = _Copied("user", "username", RequestCode.AUTH_GET_USER, RequestCode.AUTH_LIST_USER, {"filter": ""},
                 RequestCode.AUTH_CREATE_USER, RequestCode.AUTH_UPDATE_USER)
_ACLS = _Copied("acl", "subject", RequestCode.AUTH_GET_ACL, RequestCode.AUTH_LIST_ACL,
                {"subjectFilter": "", "resourceFilter": ""}, RequestCode.AUTH_CREATE_ACL, RequestCode.AUTH_UPDATE_ACL)


async def _copy(admin: MQAdminExt, args: argparse.Namespace, kind: _Copied) -> Result:
    """The entries of -f (all, or the names given) created on -t, or updated where -t has them."""
    source, target = args.source.strip(), args.target.strip()
    if args.names:
        found = [await _one(admin, source, kind.get, {kind.key: name}) for name in _csv(args.names)]
        entries = [e for e in found if e]
    else:
        entries = await _one(admin, source, kind.list_code, kind.list_header) or []
    lines = []
    for entry in entries:
        name = entry[kind.key]
        exists = await _one(admin, target, kind.get, {kind.key: name})
        await _one(admin, target, kind.update if exists else kind.create, {kind.key: name}, entry)
        lines.append(f"copy {kind.what} of {name} from {source} to {target} success.")
    return Result({f"{kind.key}s": [e[kind.key] for e in entries], "from": source, "to": target}, "\n".join(lines))


@command("copyUser", "Copy user to cluster.", _copy_options("users", "usernames", "u"))
async def copy_user(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    return await _copy(admin, args, _USERS)


@command("copyAcl", "Copy acl to cluster.", _copy_options("acls", "subjects", "s"))
async def copy_acl(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    return await _copy(admin, args, _ACLS)
