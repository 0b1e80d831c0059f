"""System (ComputerSystem): power state, the Reset action, its Bios and the managers that manage it."""

from __future__ import annotations

import re

from ..errors import NumaforgeError, RedfishError, RedfishNotFoundError
from .base import Resource, link_path
from .bios import Bios

LOCKDOWN = re.compile(r"^Lockdown\.\d+\.SystemLockdown$")  # iDRAC numbers its attribute groups: not always .1.
LOCKDOWN_FIX = (
    "disable System Lockdown for the change window (iDRAC web interface, racadm, or Redfish: "
    "Lockdown.1.SystemLockdown Disabled), re-run, then enable it again"
)


class System(Resource):
    @property
    def power_state(self) -> str:
        return str(self.body.get("PowerState") or "Unknown")

    @property
    def bios_path(self) -> str | None:
        return self.link("Bios")

    @property
    def manager_paths(self) -> list[str]:
        out = []
        for m in (self.body.get("Links") or {}).get("ManagedBy") or []:
            p = link_path(m)
            if p:
                out.append(p)
        return out

    def lockdown(self) -> str | None:
        """Where a refused write's cause is Dell's System Lockdown (issue 41 item 8): "Lockdown.1.SystemLockdown
        Enabled at <path>" from the first manager's DellAttributes documents (Links.Oem.Dell.DellAttributes, as
        the R750 capture links them; libredfish and Dell's OpenManage modules read the same key), else None (not
        enabled, not an iDRAC, or it cannot be read). Never raises."""
        try:
            for mgr_path in self.manager_paths[:1]:
                manager = Resource.load(self.client, mgr_path)
                links = (((manager.body.get("Links") or {}).get("Oem") or {}).get("Dell") or {}).get("DellAttributes")
                for link in links if isinstance(links, list) else []:
                    path = link_path(link)
                    attrs = Resource.load(self.client, path).body.get("Attributes") if path else None
                    for key, value in (attrs if isinstance(attrs, dict) else {}).items():
                        if LOCKDOWN.match(key) and value == "Enabled":
                            return f"{key} {value} at {path}"
        except NumaforgeError:
            return None
        return None

    def refused_by_lockdown(self, exc: RedfishError) -> RedfishError | None:
        """``exc`` (a write refused with a 4xx) said with its cause when System Lockdown is on, else None."""
        status = getattr(exc, "status", 0)
        cause = self.lockdown() if 400 <= status < 500 and status not in (401, 403, 404, 409, 412, 428) else None
        if cause is None:
            return None
        return RedfishError(
            f"{exc.what}: System Lockdown is enabled on this iDRAC ({cause}), which refuses every configuration "
            "change; nothing was changed",
            exc.where,
            LOCKDOWN_FIX,
        )

    @property
    def reset_types(self) -> list[str]:
        act = self.action("ComputerSystem.Reset") or {}
        return list(act.get("ResetType@Redfish.AllowableValues") or [])

    def bios(self) -> Bios:
        path = self.bios_path
        if not path:
            raise RedfishNotFoundError(
                "the system has no Bios resource", self.where, "this BMC does not expose BIOS settings through Redfish"
            )
        return Bios.load(self.client, path)
