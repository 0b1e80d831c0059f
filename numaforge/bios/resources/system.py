"""System (ComputerSystem): power state, the Reset action, its Bios and the managers that manage it."""

from __future__ import annotations

from ..errors import RedfishNotFoundError
from .base import Resource, link_path
from .bios import Bios


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
