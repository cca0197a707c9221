"""RocketMQ-style ``key=value`` configuration (broker.conf, namesrv.conf, ...).

Config classes are dataclasses with snake_case fields; their file keys are the camelCase
names RocketMQ users already write (``brokerClusterName``, ``mappedFileSizeCommitLog``), so an
existing broker.conf works unchanged.  Keys no class knows are reported rather than dropped,
because a misspelt key silently ignored is a misconfigured cluster.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import logging
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Self

log = logging.getLogger("orbitmq.common.config")

_NONE_TYPE = type(None)


def snake_to_camel(name: str) -> str:
    """broker_cluster_name -> brokerClusterName."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _strip_optional(tp: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not _NONE_TYPE]
        if len(args) == 1 and len(typing.get_args(tp)) == 2:
            return args[0], True
    return tp, False


def _coerce(key: str, raw: str, tp: Any) -> Any:
    """Turn a string from a file or the command line into the field's type."""
    text = raw.strip()
    tp, optional = _strip_optional(tp)
    if optional and text in ("", "null"):
        return None
    try:
        if tp is bool:
            low = text.lower()
            if low == "true":
                return True
            if low == "false":
                return False
            raise ValueError("expected true or false")
        if tp is int:
            return int(text)
        if tp is float:
            return float(text)
        if tp is str:
            return text
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            return _coerce_enum(tp, text)
        origin = typing.get_origin(tp)
        if origin in (list, tuple, set, frozenset):
            (item_tp, *_rest) = typing.get_args(tp) or (str,)
            items = [_coerce(key, part, item_tp) for part in text.split(",") if part.strip()]
            return origin(items)
    except ValueError as exc:
        raise ValueError(f"config key {key}: bad value {raw!r} ({exc})") from None
    raise ValueError(f"config key {key}: unsupported field type {tp!r}")


def _coerce_enum(tp: type[enum.Enum], text: str) -> enum.Enum:
    if text in tp.__members__:
        return tp[text]
    for name, member in tp.__members__.items():
        if name.lower() == text.lower() or (isinstance(member.value, str) and member.value == text):
            return member
    raise ValueError(f"expected one of {', '.join(tp.__members__)}")


def _format_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, (list, tuple, set, frozenset)):
        return ",".join(_format_value(v) for v in value)
    return str(value)


class ConfigBase:
    """Base for @dataclass config classes; maps fields to RocketMQ's camelCase keys.

    A field's key is its camelCase name unless ``field(metadata={"key": "..."})`` says
    otherwise.
    """

    _key_cache: ClassVar[dict[type, dict[str, dataclasses.Field]]] = {}

    @classmethod
    def config_fields(cls) -> dict[str, dataclasses.Field]:
        """File key -> dataclass field."""
        cached = ConfigBase._key_cache.get(cls)
        if cached is None:
            if not dataclasses.is_dataclass(cls):
                raise TypeError(f"{cls.__name__} must be a @dataclass to be a config class")
            cached = {
                f.metadata.get("key", snake_to_camel(f.name)): f for f in dataclasses.fields(cls) if f.init
            }
            ConfigBase._key_cache[cls] = cached
        return cached

    @classmethod
    def config_keys(cls) -> frozenset[str]:
        return frozenset(cls.config_fields())

    @classmethod
    def from_mapping(cls, values: Mapping[str, str]) -> Self:
        """Build from string values; keys of other classes are ignored here (see load_configs)."""
        hints = typing.get_type_hints(cls)
        kwargs: dict[str, Any] = {}
        for key, fld in cls.config_fields().items():
            if key in values:
                kwargs[fld.name] = _coerce(key, str(values[key]), hints[fld.name])
        return cls(**kwargs)

    def to_dict(self) -> dict[str, str]:
        """File key -> printed value, in field order."""
        return {key: _format_value(getattr(self, f.name)) for key, f in self.config_fields().items()}

    def to_properties(self) -> str:
        """The whole config as key=value lines, like ``mqbroker -p``."""
        return "".join(f"{k}={v}\n" for k, v in self.to_dict().items())


def load_properties(path: str | Path) -> dict[str, str]:
    """Read a Java-properties-like file: key=value (or key:value), # and ! comments."""
    result: dict[str, str] = {}
    text = Path(path).read_text(encoding="utf-8")
    for lineno, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        positions = [p for p in (stripped.find("="), stripped.find(":")) if p >= 0]
        if not positions:
            raise ValueError(f"{path}:{lineno}: expected key=value, got {stripped!r}")
        cut = min(positions)
        key = stripped[:cut].strip()
        if not key:
            raise ValueError(f"{path}:{lineno}: empty key in {stripped!r}")
        result[key] = stripped[cut + 1 :].strip()
    return result


def parse_properties_text(text: str) -> dict[str, str]:
    """java.util.Properties.load for the key=value / key:value lines of a config body.

    Lenient, unlike :func:`load_properties`: a line without a separator is a key with an empty
    value (what the updateConfig request bodies of the NameServer and the Controller expect).
    """
    result: dict[str, str] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        cuts = [p for p in (stripped.find("="), stripped.find(":")) if p >= 0]
        if cuts:
            cut = min(cuts)
            result[stripped[:cut].strip()] = stripped[cut + 1 :].strip()
        else:
            result[stripped] = ""
    return result


def parse_cli_overrides(pairs: list[str] | tuple[str, ...]) -> dict[str, str]:
    """Parse "key=value" / "--key=value" items given on a command line."""
    result: dict[str, str] = {}
    for item in pairs:
        body = item[2:] if item.startswith("--") else item
        key, sep, value = body.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"bad config override {item!r}: expected key=value")
        result[key] = value.strip()
    return result


class LoadedConfigs(tuple):
    """The config objects in the order asked for, plus the keys none of them knew."""

    unknown_keys: tuple[str, ...]
    values: dict[str, str]

    def __new__(
        cls, configs: typing.Iterable[Any], unknown_keys: typing.Iterable[str], values: dict[str, str]
    ):
        obj = super().__new__(cls, configs)
        obj.unknown_keys = tuple(unknown_keys)
        obj.values = values
        return obj


def load_configs(
    path: str | Path | None, overrides: Mapping[str, str] | None, *classes: type
) -> LoadedConfigs:
    """Build each config class from the file merged with overrides (overrides win).

    Keys known to none of the classes are logged as a warning and exposed as
    ``result.unknown_keys``.
    """
    merged: dict[str, str] = {}
    if path is not None:
        merged.update(load_properties(path))
    if overrides:
        merged.update({k: str(v) for k, v in overrides.items()})
    known: set[str] = set()
    built = []
    for cls in classes:
        if not (isinstance(cls, type) and issubclass(cls, ConfigBase)):
            raise TypeError(f"{cls!r} is not a ConfigBase subclass")
        known |= cls.config_keys()
        built.append(cls.from_mapping(merged))
    unknown = sorted(k for k in merged if k not in known)
    if unknown:
        log.warning(
            "unknown config keys ignored (no %s field): %s",
            "/".join(c.__name__ for c in classes),
            ", ".join(unknown),
        )
    return LoadedConfigs(built, unknown, merged)


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """The mqbroker/mqnamesrv config flags: -c configFile, -p printConfigItem.

    Individual keys can then be given after them as key=value or --key=value; read them
    with :func:`parse_args_with_overrides`.
    """
    parser.add_argument("-c", "--configFile", dest="config_file", help="key=value config file (broker.conf)")
    parser.add_argument(
        "-p",
        "--printConfigItem",
        dest="print_config",
        action="store_true",
        help="print all config items and exit",
    )


def parse_args_with_overrides(
    parser: argparse.ArgumentParser, argv: list[str] | None
) -> tuple[argparse.Namespace, dict[str, str]]:
    """Parse argv; whatever the parser does not know must be a key=value override."""
    args, rest = parser.parse_known_args(argv)
    try:
        overrides = parse_cli_overrides(rest)
    except ValueError as exc:
        parser.error(str(exc))
    return args, overrides


def format_configs(*configs: ConfigBase) -> str:
    """All items of several config objects as one key=value listing (for -p)."""
    return "".join(cfg.to_properties() for cfg in configs)
