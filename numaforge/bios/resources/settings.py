"""SettingsObject: the pending BIOS values (the resource @Redfish.Settings.SettingsObject names), its ETag,
the apply times it accepts, ``commit`` (PATCH with If-Match) and the vendor's clear-pending action."""

from __future__ import annotations

from typing import Any

from ..errors import RedfishPreconditionFailedError
from ..redfish import Response
from .base import Resource, check

# Dell iDRAC: POST {} to <settings>/Actions/Oem/DellManager.ClearPending discards the pending BIOS values
# (Dell's iDRAC Redfish API guide, "DellManager.ClearPending"); other BMCs have no such action.
CLEAR_PENDING_ACTIONS = ("DellManager.ClearPending",)


class SettingsObject(Resource):
    bios_etag: str | None = None  # the ETag Bios' @Redfish.Settings announced for this object
    bios_apply_times: list[str] = []  # Bios' @Redfish.Settings.SupportedApplyTimes

    @property
    def attributes(self) -> dict[str, Any]:
        return dict(self.body.get("Attributes") or {})

    @property
    def etag(self) -> str | None:
        return self._etag or self.body.get("@odata.etag") or self.bios_etag

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
        """One PATCH of ``attributes`` with If-Match: this object's ETag (when it has one). Returns the answer
        of a success; raises RedfishPreconditionFailedError on 412 and the typed error of any other status.
        A lost answer raises the transport's RedfishError: the caller re-reads, never re-sends blindly."""
        body: dict[str, Any] = {"Attributes": dict(attributes)}
        if apply_time:
            body["@Redfish.SettingsApplyTime"] = {"ApplyTime": apply_time}
        r = self.client.patch(self.path, body, self.etag)
        if r.status == 412:
            raise RedfishPreconditionFailedError(
                f"PATCH {self.path} answered 412: the settings object changed since it was read",
                self.where,
                "re-read and re-plan",
                status=412,
            )
        return check(self.client, r, "PATCH", "fix the attribute the BMC names, then re-run")

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
