"""Users and ACLs kept on the broker beside its other metadata.

Upstream keeps them in RocksDB under ``<storePathRootDir>/config/{users,acls}``; here they are two
JSON files in the same directory, replaced atomically (with a ``.bak``) like topics.json and
subscriptionGroup.json, so a crash leaves either the old or the new table. Reads are plain dict
lookups on the event loop; writes are persisted off it, newest snapshot last.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

from orbitmq.auth.model import Acl, Policy, PolicyType, Resource, User, UserStatus, UserType, parse_subject
from orbitmq.common.atomic_file import BAK_SUFFIX, NewestSnapshotWriter, write_file_atomically

log = logging.getLogger(__name__)

USERS_FILE = "users.json"
ACLS_FILE = "acls.json"


class AuthStoreError(ValueError):
    """Bad admin input or a missing/duplicate entry; the message goes back to the caller."""


class AuthMetadataStore:
    def __init__(self, config_dir: str | Path) -> None:
        self.dir = Path(config_dir)
        self.users: dict[str, User] = {}
        self.acls: dict[str, Acl] = {}
        self._writer = NewestSnapshotWriter()

    # ---- loading / persisting ---------------------------------------------------------------

    def load(self) -> None:
        """Read both files (falling back to their .bak); a missing file is an empty table."""
        self.users = {u.username: u for u in (User.from_json(o) for o in self._read(USERS_FILE))}
        self.acls = {a.subject: a for a in (Acl.from_json(o) for o in self._read(ACLS_FILE))}

    def _read(self, name: str) -> list[dict[str, Any]]:
        for path in (self.dir / name, self.dir / (name + BAK_SUFFIX)):
            if not path.exists():
                continue
            try:
                data = json.loads(path.read_text(encoding="utf-8") or "[]")
                if not isinstance(data, list):
                    raise ValueError("expected a JSON list")
                return data
            except ValueError as exc:
                log.error("cannot read %s (%s), trying its backup", path, exc)
        return []

    def _users_bytes(self) -> bytes:
        return json.dumps([u.to_json() for u in self.users.values()], indent=1).encode()

    def _acls_bytes(self) -> bytes:
        return json.dumps([a.to_json() for a in self.acls.values()], indent=1).encode()

    async def persist_users(self) -> None:
        await self._writer.write_async(str(self.dir / USERS_FILE), _write, self._users_bytes())

    async def persist_acls(self) -> None:
        await self._writer.write_async(str(self.dir / ACLS_FILE), _write, self._acls_bytes())

    def persist(self) -> None:
        """Blocking (shutdown, start-up)."""
        self._writer.write(self._writer.number(), str(self.dir / USERS_FILE), _write, self._users_bytes())
        self._writer.write(self._writer.number(), str(self.dir / ACLS_FILE), _write, self._acls_bytes())

    # ---- lookups (the ACL guard) --------------------------------------------------------------

    def get_user(self, username: str) -> User | None:
        return self.users.get(username)

    def get_acl(self, subject: str) -> Acl | None:
        return self.acls.get(subject)

    # ---- users ----------------------------------------------------------------------------------

    def ensure_super_users(self, users: list[User]) -> bool:
        """initAuthenticationUser / innerClientAuthenticationCredentials: created when missing."""
        changed = False
        for user in users:
            if user.username not in self.users:
                self.users[user.username] = user
                changed = True
        return changed

    def create_user(self, info: dict[str, Any]) -> User:
        user = User.from_json(info)
        if not user.password:
            raise AuthStoreError("password can not be blank")
        if user.username in self.users:
            raise AuthStoreError("The user is existed")
        self.users[user.username] = user
        return user

    def update_user(self, info: dict[str, Any]) -> User:
        username = str(info.get("username") or "").strip()
        if not username:
            raise AuthStoreError("username can not be blank")
        old = self.users.get(username)
        if old is None:
            raise AuthStoreError("The user is not exist")
        new = User(old.username, old.password, old.user_type, old.user_status)
        if info.get("password"):
            new.password = str(info["password"])
        if info.get("userType") not in (None, ""):
            new.user_type = UserType.parse(info["userType"], "userType")
        if info.get("userStatus") not in (None, ""):
            new.user_status = UserStatus.parse(info["userStatus"], "userStatus")
        self.users[username] = new
        return new

    def delete_user(self, username: str) -> None:
        """Deleting a user also drops its ACL (AuthenticationMetadataManagerImpl.deleteUser)."""
        if not username.strip():
            raise AuthStoreError("username can not be blank")
        if self.users.pop(username, None) is None:
            raise AuthStoreError("The user is not exist")
        self.acls.pop(f"User:{username}", None)

    def list_users(self, filter_text: str = "") -> list[User]:
        return [u for u in self.users.values() if not filter_text or filter_text in u.username]

    # ---- ACLs ------------------------------------------------------------------------------------

    def _check_subject(self, subject: str) -> None:
        username = parse_subject(subject)
        if username not in self.users:
            raise AuthStoreError(f"The subject of {subject} is not exist")

    def create_acl(self, info: dict[str, Any]) -> Acl:
        """A new ACL, or merged into the subject's existing one (upstream's createAcl)."""
        acl = Acl.from_json(info)
        if not any(p.entries for p in acl.policies):
            raise AuthStoreError("The policies can not be empty")
        self._check_subject(acl.subject)
        old = self.acls.get(acl.subject)
        if old is None:
            self.acls[acl.subject] = acl
            return acl
        old.merge(acl)
        return old

    def update_acl(self, info: dict[str, Any]) -> Acl:
        acl = Acl.from_json(info)
        self._check_subject(acl.subject)
        old = self.acls.get(acl.subject)
        if old is None:
            raise AuthStoreError(f"The acl of {acl.subject} is not exist")
        old.merge(acl)
        return old

    def delete_acl(self, subject: str, policy_type: str | None, resources: list[str]) -> None:
        parse_subject(subject)
        acl = self.acls.get(subject)
        if acl is None:
            raise AuthStoreError(f"The acl of {subject} is not exist")
        ptype = PolicyType.parse(policy_type, "policyType") if policy_type else None
        parsed = [Resource.of(r) for r in resources if r.strip()]
        acl.delete(ptype, parsed)
        if not acl.policies:
            del self.acls[subject]

    def list_acls(self, subject_filter: str = "", resource_filter: str = "") -> list[Acl]:
        out = []
        for acl in self.acls.values():
            if subject_filter and subject_filter not in acl.subject:
                continue
            if resource_filter:
                policies = [Policy(p.policy_type, [e for e in p.entries if resource_filter in e.resource.key])
                            for p in acl.policies]
                policies = [p for p in policies if p.entries]
                if not policies:
                    continue
                acl = Acl(acl.subject, policies)
            out.append(acl)
        return out

    # ---- slave copy ----------------------------------------------------------------------------

    def replace_all(self, users: list[User], acls: list[Acl]) -> bool:
        """Install the master's tables; True when anything differed."""
        new_users = {u.username: u for u in users}
        new_acls = {a.subject: a for a in acls}
        if new_users == self.users and new_acls == self.acls:
            return False
        self.users, self.acls = new_users, new_acls
        return True


def _write(path: str, data: bytes) -> None:
    write_file_atomically(path, data, keep_backup=True)


async def persist_both(store: AuthMetadataStore) -> None:
    await asyncio.gather(store.persist_users(), store.persist_acls())
