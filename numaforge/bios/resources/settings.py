"""SettingsObject: the pending BIOS values (the resource @Redfish.Settings.SettingsObject names), its ETag,
the apply times it accepts, ``commit`` (PATCH with If-Match) and the vendor's clear-pending action.

ETags (DSP0266 "ETags"; DSP8010 Settings schema): the If-Match of a PATCH is this object's own ETag (its ETag
header, else its ``@odata.etag``), never the ETag in the Bios's ``@Redfish.Settings`` -- that one belongs to the
resource the settings were applied to. ``commit`` tells a concurrent change from a BMC's ETag quirk by what the
object holds: on 412 it re-reads the object; values that differ from the ones the caller planned against are a
concurrent change (RedfishPreconditionFailedError: re-read, re-plan); unchanged values mean the BMC refused an ETag
that still describes it (its own weak ETag, which some BMCs compare strongly; or an ETag that was not this
object's), and the PATCH is sent again with the object's ETag as just read, then its strong form, then -- only
after one more read shows the values unchanged -- without If-Match. On 428 Precondition Required (nothing sent,
the BMC insists) the object's ETag is fetched and the PATCH retried once. Each work-around is noted in the
client's warnings; a BMC that refuses every form raises BMCETagQuirkError, never a 412.
"""

from __future__ import annotations

from typing import Any

from ..errors import BMCETagQuirkError, RedfishPreconditionFailedError
from ..exchange import Response
from .base import Resource, check

# Dell iDRAC: POST {} to <settings>/Actions/Oem/DellManager.ClearPending discards the pending BIOS values
# (Dell's iDRAC Redfish API guide, "DellManager.ClearPending"); other BMCs have no such action.
CLEAR_PENDING_ACTIONS = ("DellManager.ClearPending",)


def strong_etag(etag: str | None) -> str | None:
    """``W/"x"`` -> ``"x"`` (RFC 9110 8.8.3: a weak ETag is the strong one with a W/ prefix)."""
    return etag[2:] if etag and etag[:2] in ("W/", "w/") else etag


def same_etag(a: str | None, b: str | None) -> bool:
    """RFC 9110's weak comparison: equal once any W/ prefix is dropped."""
    return a is not None and b is not None and strong_etag(a.strip()) == strong_etag(b.strip())


class SettingsObject(Resource):
    # the ETag in Bios' @Redfish.Settings: the *current* Bios resource's after the last apply (DSP8010 Settings
    # ETag), recorded for reports only -- never sent as If-Match for this object
    bios_etag: str | None = None
    bios_apply_times: list[str] = []  # Bios' @Redfish.Settings.SupportedApplyTimes

    @property
    def attributes(self) -> dict[str, Any]:
        return self.attributes_map("BIOS settings object")

    @property
    def etag(self) -> str | None:
        """This object's own ETag (header, else @odata.etag); None when it publishes none."""
        return self._etag or self.body.get("@odata.etag")

    @property
    def apply_time(self) -> str | None:
        """The ApplyTime requested with the pending values (@Redfish.SettingsApplyTime), if any."""
        return (self.body.get("@Redfish.SettingsApplyTime") or {}).get("ApplyTime")

    @property
    def apply_times(self) -> list[str]:
        """Every apply time the BMC accepts: SupportedApplyTimes, then ApplyTime@Redfish.AllowableValues."""
        out = list(self.bios_apply_times)
        sat = self.body.get("@Redfish.SettingsApplyTime") or {}
        for v in sat.get("ApplyTime@Redfish.AllowableValues") or []:
            if v not in out:
                out.append(v)
        return out

    def pending(self, current: dict[str, Any]) -> dict[str, Any]:
        """Values that differ from ``current`` (the Bios' values): some BMCs echo every attribute here."""
        return {k: v for k, v in self.attributes.items() if current.get(k, object()) != v}

    def commit(self, attributes: dict[str, Any], apply_time: str | None = None) -> Response:
        """PATCH ``attributes`` with If-Match: this object's ETag (when it has one). Returns the answer of a
        success; raises RedfishPreconditionFailedError when the object changed since it was read (the caller
        re-reads and re-plans), BMCETagQuirkError when the BMC refuses its own ETag in every form, and the typed
        error of any other status. A request is sent again only after a 412/428 (the BMC did not act) and only
        while the object holds the values it held when read (module docstring). A lost answer raises the
        transport's RedfishError: the caller re-reads, never re-sends blindly."""
        body: dict[str, Any] = {"Attributes": dict(attributes)}
        if apply_time:
            body["@Redfish.SettingsApplyTime"] = {"ApplyTime": apply_time}
        sent = self.etag
        r = self.client.patch(self.path, body, sent)
        if r.status == 428:
            r, sent = self._after_428(body, sent)
        if r.status == 412:
            r = self._after_412(body, sent)
        return check(self.client, r, "PATCH", "fix the attribute the BMC names, then re-run")

    # -- the 412 / 428 work-arounds (module docstring) --------------------------------------------------------
    def _reread_unchanged(self, why: str) -> Response:
        """GET this object; raise RedfishPreconditionFailedError if its values differ from the ones read before."""
        fresh = check(self.client, self.client.request("GET", self.path), "GET")
        now = SettingsObject(self.client, self.path, fresh.body).attributes
        before = self.attributes
        changed = sorted(k for k in set(now) | set(before) if now.get(k, object()) != before.get(k, object()))
        if changed:
            shown = ", ".join(changed[:8]) + (f" and {len(changed) - 8} more" if len(changed) > 8 else "")
            raise RedfishPreconditionFailedError(
                f"PATCH {self.path} answered {why}: the settings object changed since it was read ({shown})",
                self.where,
                "re-read and re-plan",
                status=412,
            )
        return fresh

    def _note(self, text: str) -> None:
        if text not in self.client.warnings:
            self.client.warnings.append(text)

    def _after_428(self, body: dict, sent: str | None) -> tuple[Response, str | None]:
        fresh = self._reread_unchanged("428")
        etag = fresh.etag
        if not etag or same_etag(etag, sent):
            raise BMCETagQuirkError(
                f"PATCH {self.path} answered 428 Precondition Required "
                + (f"with If-Match {sent}, its own current ETag" if sent else "(it takes a change only with If-Match)")
                + (", but the settings object publishes no ETag" if not etag else "")
                + "; nothing was written",
                self.where,
                "a BMC firmware fault (it demands If-Match but gives no usable ETag for it): update the BMC "
                "firmware, or report it to the vendor",
            )
        self._note(
            f"PATCH {self.path} answered 428 Precondition Required: fetched the settings object's ETag and sent "
            "it again once"
        )
        return self.client.patch(self.path, body, etag), etag

    def _after_412(self, body: dict, sent: str | None) -> Response:
        fresh = self._reread_unchanged("412")
        etag = fresh.etag
        forms: list[str | None] = []
        if etag and etag != sent:
            forms.append(etag)  # the one sent was not (or no longer) this object's, yet its values are the same
        if etag and strong_etag(etag) not in (etag, sent):
            forms.append(strong_etag(etag))  # the BMC compares its own weak ETag strongly
        if sent is not None:
            forms.append(None)  # last: no If-Match, right after one more read shows the values unchanged
        tried = [sent]
        for form in dict.fromkeys(forms):
            if form is None and len(tried) > 1:
                self._reread_unchanged("412")
            r = self.client.patch(self.path, body, form)
            tried.append(form)
            if r.status not in (412, 428):
                self._note(
                    f"PATCH {self.path} answered 412 to If-Match {sent} although the settings object had not "
                    "changed (a BMC ETag quirk, not a concurrent change); sent again with "
                    + (f"If-Match {form}" if form else "no If-Match, right after re-reading it unchanged")
                )
                return r
        raise BMCETagQuirkError(
            f"PATCH {self.path} answered 412 to every form of If-Match "
            f"({', '.join(t or 'none' for t in tried)}) although the settings object did not change "
            f"(ETag {etag or 'none'}, same values); nothing was written",
            self.where,
            "a BMC firmware fault, not someone else changing this BIOS: update the BMC firmware (or report it to "
            "the vendor), then re-run",
        )

    @property
    def clear_pending_action(self) -> str | None:
        for name in CLEAR_PENDING_ACTIONS:
            if self.action_target(name):
                return name
        return None

    def clear_pending(self, current: dict[str, Any]) -> str:
        """Discard the pending values: the vendor's action when offered, else (DSP0266 has no such action) one
        PATCH that writes the current value back for every pending attribute. Returns how it was done."""
        name = self.clear_pending_action
        if name:
            self.post_action(name, {})
            return f"POST {name}"
        pending = self.pending(current)
        self.commit({k: current[k] for k in pending if k in current})
        return "PATCH of the current values over the pending ones"
