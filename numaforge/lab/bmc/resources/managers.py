"""Managers collection and the one Manager (the BMC). Its Reset restarts the BMC: sessions are dropped and the
service answers 503 for a moment, but BIOS pending values are NOT applied (only a host reset does that)."""

from __future__ import annotations

from ..http import SimResponse, collection_ok, error, json_ok, lit
from ..messages import message

MANAGER_RESET_TYPES = ("GracefulRestart", "ForceRestart")


def register(sim) -> None:
    f = sim.flavour
    path = f.manager_path
    target = f"{path}/Actions/Manager.Reset"
    attributes_path = f"{path}/Oem/Dell/DellAttributes/{f.manager_id}"

    def collection(req):
        return collection_ok(
            sim.link("/redfish/v1/Managers"),
            "#ManagerCollection.ManagerCollection",
            "Manager Collection",
            [sim.link(path)],
        )

    def manager(req):
        links = {"ManagerForServers": [{"@odata.id": sim.link(f.system_path)}]}
        if f.jobs == "dell":  # where iDRAC publishes its job queue and its own attributes (DellOemLinks)
            links["Oem"] = {
                "Dell": {
                    "@odata.type": "#DellOem.v1_3_0.DellOemLinks",
                    "Jobs": {"@odata.id": f.jobs_path},
                    "DellAttributes": [{"@odata.id": sim.link(attributes_path)}],
                }
            }
        return json_ok(
            {
                "@odata.id": sim.link(path),
                "@odata.type": "#Manager.v1_24_0.Manager",
                "Id": f.manager_id,
                "Name": "Manager",
                "ManagerType": "BMC",
                "Manufacturer": f.vendor,
                "Model": f.manager_model,
                "FirmwareVersion": f.manager_firmware,
                "PowerState": "On",
                "Status": {"State": "Enabled", "Health": "OK"},
                "Links": links,
                "Actions": {
                    "#Manager.Reset": {"target": target, "ResetType@Redfish.AllowableValues": list(MANAGER_RESET_TYPES)}
                },
            }
        )

    def reset(req):
        body = req.body if isinstance(req.body, dict) else {}
        rt = body.get("ResetType")
        if rt is None:
            return error(400, message("ActionParameterMissing", "Manager.Reset", "ResetType"))
        if rt not in MANAGER_RESET_TYPES:
            return error(400, message("ActionParameterValueNotInList", str(rt), "ResetType", "Manager.Reset"))
        sim.state.manager_reset()
        seconds = sim.manager_reset_seconds
        sim.bmc_rebooting(min(sim.power_delay, 2.0) if seconds is None else seconds)
        return SimResponse(204)

    def dell_attributes(req):
        """iDRAC's own attributes (the R750 capture links three DellAttributes documents); only the one that
        matters here: Lockdown.1.SystemLockdown, the System Lockdown switch (``state.lockdown``)."""
        return json_ok(
            {
                "@odata.id": sim.link(attributes_path),
                "@odata.type": "#DellAttributes.v1_0_0.DellAttributes",
                "Id": f.manager_id,
                "Name": "OEMAttributeRegistry",
                "AttributeRegistry": "ManagerAttributeRegistry.v1_0_0",
                "Attributes": {"Lockdown.1.SystemLockdown": "Enabled" if sim.state.lockdown else "Disabled"},
            }
        )

    sim.router.add(lit("/redfish/v1/Managers"), get=collection)
    if f.jobs == "dell":
        sim.router.add(lit(attributes_path), get=dell_attributes)
    sim.router.add(lit(path), get=manager)
    sim.router.add(lit(target), post=reset)
