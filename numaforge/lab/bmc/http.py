"""Request/response plumbing shared by the resource modules: a tiny router, JSON responses with ETags, and
helpers for Redfish error answers."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field

from .messages import error_body, message


@dataclass
class Request:
    method: str
    path: str  # normalised: no query, no trailing slash (except the service root)
    raw_path: str
    headers: dict  # lower-case names
    body: object = None
    body_error: bool = False
    session_id: str | None = None
    fault: object = None  # a staging fault (numaforge.lab.bmc.faults.STAGING) the handler applies


@dataclass
class SimResponse:
    """What a simulator handler answers (the Redfish client's answer is numaforge.bios.redfish.Response)."""

    status: int = 200
    body: object = None  # dict -> JSON; bytes/str -> as is
    headers: dict = field(default_factory=dict)
    content_type: str = "application/json; charset=utf-8"

    def payload(self) -> bytes:
        if self.body is None:
            return b""
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode()
        return json.dumps(self.body, indent=1).encode()


def etag_of(body: dict) -> str:
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:20]
    return f'W/"{digest}"'


def json_ok(body: dict, status: int = 200, allow: str = "GET, HEAD", headers: dict | None = None) -> SimResponse:
    h = {"ETag": etag_of(body), "Allow": allow}
    h.update(headers or {})
    return SimResponse(status, body, h)


def collection_ok(path: str, odata_type: str, name: str, members: list[str], allow: str = "GET, HEAD") -> SimResponse:
    """A Redfish resource collection: its @odata.id/type, Name and Members (links given as paths)."""
    return json_ok(
        {
            "@odata.id": path,
            "@odata.type": odata_type,
            "Name": name,
            "Members@odata.count": len(members),
            "Members": [{"@odata.id": m} for m in members],
        },
        allow=allow,
    )


def error(status: int, *messages: dict, headers: dict | None = None) -> SimResponse:
    return SimResponse(status, error_body(list(messages)), dict(headers or {}))


def not_found(req: Request) -> SimResponse:
    return error(404, message("ResourceNotFound", "Resource", req.raw_path.split("?")[0]))


def method_not_allowed(allow: str) -> SimResponse:
    return error(405, message("OperationNotAllowed"), headers={"Allow": allow})


def normalise(path: str) -> str:
    path = path.split("?", 1)[0].split("#", 1)[0]
    path = re.sub(r"/{2,}", "/", path)
    if path in ("/redfish/v1", "/redfish/v1/"):
        return "/redfish/v1/"
    return path.rstrip("/") or "/"


class Router:
    """Routes (regex over the normalised path) -> {method: handler(req, **groups)}."""

    def __init__(self, case_insensitive: bool = False):
        self.flags = re.IGNORECASE if case_insensitive else 0
        self.routes: list[tuple[re.Pattern, dict]] = []

    def add(self, pattern: str, **handlers) -> None:
        methods = {m.upper(): h for m, h in handlers.items()}
        if "GET" in methods:
            methods.setdefault("HEAD", methods["GET"])
        self.routes.append((re.compile(pattern + r"\Z", self.flags), methods))

    def find(self, path: str):
        for pattern, methods in self.routes:
            m = pattern.match(path)
            if m:
                return methods, m.groupdict()
        return None, None


def lit(path: str) -> str:
    """A route pattern matching exactly this (normalised) path."""
    return re.escape(normalise(path))
