"""The common part of every resource: its path, its last-read body and ETag, links and action targets."""

from __future__ import annotations

from typing import Any, Self

from ..errors import RedfishError, fix_for_status, http_error
from ..exchange import Response, path_of
from ..redfish import RedfishClient


def link_path(doc: Any, *keys: str) -> str | None:
    """The path a (nested) navigation property points at: doc[k1][k2]...["@odata.id"], or None."""
    cur: Any = doc
    for k in keys:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(k)
    if isinstance(cur, dict):
        cur = cur.get("@odata.id")
    return path_of(cur) if isinstance(cur, str) and cur else None


def check(client: RedfishClient, r: Response, method: str, fix: str | None = None) -> Response:
    """``r`` when its status is a success, else the typed error for that status (what, where, fix)."""
    if r.status >= 400:
        raise http_error(
            r.status,
            f"{method} {r.path} answered {r.status}: {r.error_text()}",
            f"{client.host} ({client.base_url})",
            fix or fix_for_status(r.status),
        )
    return r


_JSON_KIND = {list: "list", str: "string", bool: "boolean", int: "number", float: "number"}


def _json_kind(value: Any) -> str:
    """ "a JSON list", "a JSON string"...: what a BMC sent where an object belongs."""
    return f"a JSON {_JSON_KIND.get(type(value), 'value')}"


def document(client: RedfishClient, r: Response, method: str = "GET") -> dict:
    """The JSON object a successful answer carries; an answer that is JSON but no object (a list, a string, null:
    the client keeps it as {"value": ...}) is an error saying so -- never read as an empty resource."""
    body = r.body
    if set(body) == {"value"} and not isinstance(body["value"], dict):
        kind = "JSON null" if body["value"] is None else _json_kind(body["value"])
        raise RedfishError(
            f"{method} {r.path} answered {kind} (HTTP {r.status}) where a Redfish resource, a JSON object, "
            "belongs: this is not a Redfish answer",
            f"{client.host} ({client.base_url})",
            "check that bmc.url is the BMC's Redfish service (not a proxy or another web service) and the BMC's "
            "firmware; nothing was written",
        )
    return body


def etag_of(client: RedfishClient, path: str) -> str | None:
    """The ETag a HEAD of ``path`` answers now; None when the BMC refuses the HEAD or gives no ETag."""
    r = client.request("HEAD", path)
    return r.headers.get("etag") if r.status < 400 else None


class Resource:
    """One Redfish resource as last read. ``refresh()`` re-reads it; ``body`` is the JSON document."""

    def __init__(self, client: RedfishClient, path: str, body: dict | None = None, etag: str | None = None):
        self.client = client
        self.path = path_of(path)
        self.body: dict = body or {}
        self._etag = etag

    @classmethod
    def load(cls, client: RedfishClient, path: str) -> Self:
        """Read the resource; an error status raises its typed error (numaforge.bios.errors.http_error)."""
        r = check(client, client.request("GET", path_of(path)), "GET")
        return cls(client, path, document(client, r), r.etag)

    @classmethod
    def load_or_none(cls, client: RedfishClient, path: str) -> Self | None:
        """Read the resource; None when the BMC answers an error status (the caller has another way: e.g. full
        discovery when a cached path is gone). A lost answer or refused credentials still raise."""
        r = client.request("GET", path_of(path))
        return cls(client, path, document(client, r), r.etag) if r.status < 400 else None

    def refresh(self) -> Self:
        r = check(self.client, self.client.request("GET", self.path), "GET")
        self.body, self._etag = document(self.client, r), r.etag
        return self

    @property
    def etag(self) -> str | None:
        return self._etag or self.body.get("@odata.etag")

    def attributes_map(self, what: str) -> dict[str, Any]:
        """The document's ``Attributes`` object (absent: none). Anything but an object -- null, a list (which
        ``dict()`` would turn into attributes), text -- cannot tell what the BMC holds: a RedfishError naming it,
        never a default (issue 40: a list was accepted and written, null read as "nothing pending")."""
        if "Attributes" not in self.body:
            return {}
        attrs = self.body["Attributes"]
        if isinstance(attrs, dict):
            return dict(attrs)
        shown = "null" if attrs is None else _json_kind(attrs)
        raise RedfishError(
            f"the {what} at {self.path} answered Attributes as {shown}, not an object: what it holds cannot be "
            "told, so nothing is planned or written from it",
            self.where,
            "the BMC firmware answers a malformed document: check it (a BMC reset often helps, else update its "
            "firmware), then re-run",
        )

    @property
    def identity(self) -> str:
        return str(self.body.get("Id") or self.path.rstrip("/").rsplit("/", 1)[-1])

    @property
    def where(self) -> str:
        return f"{self.client.host} ({self.client.base_url}{self.path})"

    def link(self, *keys: str) -> str | None:
        return link_path(self.body, *keys)

    def action(self, name: str) -> dict | None:
        """The action object ``#name`` from Actions (standard) or Actions.Oem (vendor), or None."""
        actions = self.body.get("Actions") or {}
        for where in (actions, actions.get("Oem") or {}):
            act = where.get(f"#{name}") if isinstance(where, dict) else None
            if isinstance(act, dict) and act.get("target"):
                return act
        return None

    def action_target(self, name: str) -> str | None:
        act = self.action(name)
        return path_of(act["target"]) if act else None

    def action_body(self, name: str) -> dict[str, Any]:
        """The body a POST of action ``name`` must carry: each parameter the BMC says is required (its
        ``@Redfish.ActionInfo`` document, DSP0266 "Action info") with the one value it allows. An action that states
        no parameter gets ``{}`` (DSP8010's Bios.ResetBios has none). A required parameter offered with no value or
        several cannot be chosen here: a RedfishError names it and nothing is sent (issue 41 item 8: the AMI
        MegaRAC of NVIDIA/libredfish's nvidia_viking capture requires ResetType "Reset" for ResetBios)."""
        act = self.action(name) or {}
        info = act.get("@Redfish.ActionInfo")
        params = []
        if isinstance(info, str) and info:
            doc = check(self.client, self.client.request("GET", path_of(info)), "GET").body
            params = [p for p in doc.get("Parameters") or [] if isinstance(p, dict) and p.get("Required")]
        body: dict[str, Any] = {}
        for p in params:
            listed = p.get("AllowableValues")
            allowed: list = listed if isinstance(listed, list) else []
            if len(allowed) != 1:
                raise RedfishError(
                    f"{name} requires the parameter {p.get('Name')!r}, and its ActionInfo ({path_of(str(info))}) "
                    + (f"allows several values ({', '.join(map(str, allowed))})" if allowed else "lists no value")
                    + ": which one to send cannot be told, so nothing was sent",
                    self.where,
                    "run the action from the BMC's own interface, or report the BMC's ActionInfo to the project",
                )
            body[str(p["Name"])] = allowed[0]
        return body

    def post_action(self, name: str, body: dict | None = None, fix: str | None = None) -> Response:
        target = self.action_target(name)
        if target is None:
            raise http_error(
                405,
                f"{self.path} offers no {name} action",
                self.where,
                fix or "this BMC does not support the operation through Redfish",
            )
        return check(self.client, self.client.post(target, body or {}), "POST", fix)


class Collection(Resource):
    """A resource collection: its members' paths (members without a link are left out)."""

    @property
    def member_paths(self) -> list[str]:
        return [p for p in (link_path(m) for m in self.body.get("Members") or []) if p]
