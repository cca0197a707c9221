"""The persistent broker id of controller mode (RocketMQ 5.1.1+: ReplicasManager#register, BrokerMetadata).

A broker in controller mode does not configure its id: the controller assigns one, and the
broker keeps it on disk so a restart comes back as the same replica.

- ``<storePathBrokerIdentity>-temp`` = ``cluster#brokerName#brokerId#registerCheckCode`` is
  written before CONTROLLER_APPLY_BROKER_ID (1013), so a crash between the apply and the final
  write retries the same (idempotent) apply instead of taking a second id.
- ``<storePathBrokerIdentity>`` = ``cluster#brokerName#brokerId`` once the controller agreed; the
  previous content is kept in ``.bak``; then the temp file is deleted.

A file naming another cluster or broker name, or one that cannot be parsed, refuses the start
(``BrokerIdentityError``): guessing would make this store a replica of the wrong broker set.
All functions here do blocking disk I/O; callers on the event loop use ``asyncio.to_thread``.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from orbitmq.common.atomic_file import BAK_SUFFIX, write_file_atomically

log = logging.getLogger(__name__)

TEMP_SUFFIX = "-temp"
SEPARATOR = "#"


class BrokerIdentityError(RuntimeError):
    """The identity file on disk is unusable for this broker; the broker must not start."""


@dataclass(frozen=True)
class TempBrokerIdentity:
    """What the temp file holds: the id being applied for and its registerCheckCode."""

    cluster_name: str
    broker_name: str
    broker_id: int
    register_check_code: str


def register_check_code(broker_addr: str, now_millis: int) -> str:
    """``"<brokerAddr>;<epochMillis>"``: the controller takes the address from it (split on ';')."""
    return f"{broker_addr};{now_millis}"


class BrokerIdentityStore:
    """The metadata file and its temp file for one (cluster, brokerName)."""

    def __init__(self, path: str, cluster_name: str, broker_name: str) -> None:
        self.path = path
        self.temp_path = path + TEMP_SUFFIX
        self.cluster_name = cluster_name
        self.broker_name = broker_name

    # ---- reading --------------------------------------------------------------------------

    def _read(self, path: str) -> str | None:
        try:
            with open(path, encoding="utf-8") as f:
                return f.read().strip()
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise BrokerIdentityError(f"broker identity file {path} cannot be read: {exc}") from exc

    def _parse(self, path: str, text: str, fields: int) -> list[str]:
        parts = text.split(SEPARATOR)
        if len(parts) != fields:
            raise BrokerIdentityError(
                f"broker identity file {path} is malformed: expected {fields} '#'-separated fields "
                f"({'cluster#brokerName#brokerId' + ('#registerCheckCode' if fields == 4 else '')}), "
                f"found {text[:200]!r}")
        cluster, name, raw_id = parts[0], parts[1], parts[2]
        if cluster != self.cluster_name or name != self.broker_name:
            raise BrokerIdentityError(
                f"broker identity file {path} belongs to cluster={cluster!r} brokerName={name!r}, but this "
                f"broker is configured as brokerClusterName={self.cluster_name!r} "
                f"brokerName={self.broker_name!r}; fix the config or remove the file")
        try:
            broker_id = int(raw_id)
        except ValueError:
            raise BrokerIdentityError(f"broker identity file {path}: brokerId {raw_id!r} is not a number") from None
        if broker_id <= 0:
            raise BrokerIdentityError(f"broker identity file {path}: brokerId {broker_id} must be >= 1 "
                                      f"(controller ids start at 1)")
        return parts

    def load_broker_id(self) -> int | None:
        """The persisted id, or None when this broker never completed registration.

        The main file is written atomically, so it is never half-written; a missing main file
        with a ``.bak`` present (an operator removed it) falls back to the ``.bak``.
        """
        text = self._read(self.path)
        source = self.path
        if text is None:
            text = self._read(self.path + BAK_SUFFIX)
            source = self.path + BAK_SUFFIX
            if text is None:
                return None
            log.warning("broker identity file %s is missing, using %s", self.path, source)
        if not text:
            raise BrokerIdentityError(f"broker identity file {source} is empty; remove it to register anew")
        return int(self._parse(source, text, 3)[2])

    def load_temp(self) -> TempBrokerIdentity | None:
        text = self._read(self.temp_path)
        if text is None:
            return None
        if not text:
            # A crash while the temp file was being created: nothing was applied under it yet.
            log.warning("broker identity temp file %s is empty, discarding it", self.temp_path)
            self.delete_temp()
            return None
        parts = self._parse(self.temp_path, text, 4)
        return TempBrokerIdentity(parts[0], parts[1], int(parts[2]), parts[3])

    # ---- writing --------------------------------------------------------------------------

    def write_temp(self, broker_id: int, check_code: str) -> None:
        text = SEPARATOR.join((self.cluster_name, self.broker_name, str(broker_id), check_code))
        write_file_atomically(self.temp_path, text.encode("utf-8"))

    def write_broker_id(self, broker_id: int) -> None:
        """The final file (previous content to ``.bak``), then the temp file goes."""
        text = SEPARATOR.join((self.cluster_name, self.broker_name, str(broker_id)))
        write_file_atomically(self.path, text.encode("utf-8"), keep_backup=True)
        self.delete_temp()

    def delete_temp(self) -> None:
        try:
            os.unlink(self.temp_path)
        except FileNotFoundError:
            pass
