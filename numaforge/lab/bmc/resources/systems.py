"""Systems collection, the one ComputerSystem (PowerState with timed transitions) and its Reset action."""

from __future__ import annotations

import uuid

from ..http import SimResponse, collection_ok, error, json_ok, lit
from ..messages import message
from ..state import RESET_TYPES, iso

# HPE iLO's Oem.Hpe.PostState for a BootProgress.LastState (iLO reports both; some firmware only the Oem one)
_HPE_POST = {"None": "PowerOff", "OSRunning": "FinishedPost"}


def _boot_progress(how: str, state: str, when: str, power: str) -> dict:
    """BootProgress (standard) and/or Oem.Hpe.PostState as the flavour reports them ("none": neither)."""
    out: dict = {}
    if how in ("standard", "both"):
        out["BootProgress"] = {"LastState": state, "LastStateTime": when}
    if how in ("hpe", "both"):
        out["Oem"] = {"Hpe": {"PostState": _HPE_POST.get(state, "InPost") if power != "Off" else "PowerOff"}}
    return out


def register(sim) -> None:
    f = sim.flavour
    sys_path = f.system_path
    reset_target = f"{sys_path}/Actions/ComputerSystem.Reset"

    def collection(req):
        return collection_ok(
            sim.link("/redfish/v1/Systems"),
            "#ComputerSystemCollection.ComputerSystemCollection",
            "Computer System Collection",
            [sim.link(sys_path)] + [sim.link(p) for p in sim.extra_systems],
        )

    def system(req):
        sim.state.advance()
        st = sim.state
        power = st.power
        body = {
            "@odata.id": sim.link(sys_path),
            "@odata.type": "#ComputerSystem.v1_27_0.ComputerSystem",
            "Id": f.system_id,
            "Name": "System",
            "SystemType": "Physical",
            "Manufacturer": f.vendor,
            "Model": f.model,
            "SerialNumber": f"SIM{abs(hash(f.name)) % 10**7:07d}",
            "UUID": str(uuid.uuid5(uuid.NAMESPACE_URL, f"numaforge-bmc-sim/{f.name}/system")),
            "BiosVersion": f.bios_version,
            "PowerState": power,
            **_boot_progress(f.boot_progress, st.boot_state, iso(st.boot_state_time), power),
            "Status": {"State": "Enabled" if power == "On" else "StandbyOffline", "Health": "OK"},
            "ProcessorSummary": {"Count": 2, "Model": "AMD EPYC 7763 64-Core Processor"},
            "MemorySummary": {"TotalSystemMemoryGiB": 1024},
            "Bios": {"@odata.id": sim.link(f.bios_path)},
            "Links": {"ManagedBy": [{"@odata.id": sim.link(f.manager_path)}]},
            "Actions": {
                "#ComputerSystem.Reset": {
                    "target": reset_target,
                    "ResetType@Redfish.AllowableValues": list(RESET_TYPES),
                }
            },
        }
        return json_ok(body)

    def reset(req):
        body = req.body if isinstance(req.body, dict) else {}
        if "ResetType" not in body:
            return error(400, message("ActionParameterMissing", "ComputerSystem.Reset", "ResetType"))
        extra = [k for k in body if k != "ResetType"]
        if extra:
            return error(400, message("ActionParameterUnknown", "ComputerSystem.Reset", extra[0]))
        rt = body["ResetType"]
        if rt not in RESET_TYPES:
            return error(400, message("ActionParameterValueNotInList", str(rt), "ResetType", "ComputerSystem.Reset"))
        sim.state.reset(rt)
        return SimResponse(204)

    sim.router.add(lit("/redfish/v1/Systems"), get=collection)
    sim.router.add(lit(sys_path), get=system)
    sim.router.add(lit(reset_target), post=reset)
