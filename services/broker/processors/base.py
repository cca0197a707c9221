"""What every broker processor shares: typed reading of request headers and building responses.

Header fields arrive as strings in ``extFields``. Reading them here, with Java's int/long
ranges, turns every missing, ill-typed or out-of-range field into a ``RequestError`` that the
guard in ``registry`` answers with the protocol's own code and a clear remark, so a malformed
request can never crash a processor or the connection.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from orbitmq.remoting.codes import ResponseCode

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


class RequestError(Exception):
    """A request the broker refuses; carries the Remoting response code and remark."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = int(code)
        self.remark = remark


def _missing(name: str) -> RequestError:
    return RequestError(ResponseCode.SYSTEM_ERROR, f"the custom field <{name}> is null")


class Fields:
    """Typed, range-checked access to a request's extFields."""

    def __init__(self, ext_fields: Mapping[str, Any] | None) -> None:
        self._raw: Mapping[str, Any] = ext_fields or {}

    def raw(self) -> Mapping[str, Any]:
        return self._raw

    def has(self, name: str) -> bool:
        return self._raw.get(name) is not None

    def str(self, name: str, default: str | None = None, required: bool = True) -> str:
        value = self._raw.get(name)
        if value is None:
            if default is not None or not required:
                return default if default is not None else ""
            raise _missing(name)
        if not isinstance(value, str):
            value = str(value)
        return value

    def opt_str(self, name: str) -> str | None:
        value = self._raw.get(name)
        return None if value is None else str(value)

    def _number(self, name: str, lo: int, hi: int, kind: str, default: int | None) -> int:
        value = self._raw.get(name)
        if value is None or value == "":
            if default is not None:
                return default
            raise _missing(name)
        try:
            if value.__class__ is str:
                number = int(value.strip(), 10)
            elif isinstance(value, bool):
                raise ValueError
            else:
                number = int(str(value).strip(), 10)
        except (TypeError, ValueError):
            raise RequestError(ResponseCode.SYSTEM_ERROR,
                               f"the custom field <{name}> type is not {kind}: {str(value)[:64]!r}") from None
        if not lo <= number <= hi:
            raise RequestError(ResponseCode.SYSTEM_ERROR,
                               f"the custom field <{name}> is out of range for {kind}: {str(value)[:64]}")
        return number

    def int(self, name: str, default: int | None = None) -> int:
        return self._number(name, INT_MIN, INT_MAX, "int", default)

    def long(self, name: str, default: int | None = None) -> int:
        return self._number(name, LONG_MIN, LONG_MAX, "long", default)

    def bool(self, name: str, default: bool | None = None) -> bool:
        value = self._raw.get(name)
        if value is None or value == "":
            if default is not None:
                return default
            raise _missing(name)
        text = str(value).strip().lower()
        if text in ("true", "false"):
            return text == "true"
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"the custom field <{name}> type is not boolean: {text[:64]!r}")


def decode_json_body(body: bytes | None, what: str) -> Any:
    """Parses a JSON request body, refusing empty or malformed ones with SYSTEM_ERROR."""
    if not body:
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"{what} body is empty")
    try:
        return json.loads(bytes(body).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"{what} body is not valid JSON: {exc}") from None


def require_dict(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"{what} must be a JSON object")
    return value


def encode_json_body(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def ext(**fields: Any) -> dict[str, str]:
    """Response extFields: every value as a string (Java's header encoder does the same);
    booleans as true/false and None dropped."""
    out: dict[str, str] = {}
    for name, value in fields.items():
        if value is None:
            continue
        out[name] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return out
