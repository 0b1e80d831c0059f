"""Service root, /redfish version document, OData service document and $metadata."""

from __future__ import annotations

import uuid

from ..http import SimResponse, json_ok

# namespaces the simulator serves -> the schema file that defines them (for $metadata)
SCHEMAS = {
    "ServiceRoot": "ServiceRoot.v1_20_0",
    "ComputerSystemCollection": None,
    "ComputerSystem": "ComputerSystem.v1_27_0",
    "Bios": "Bios.v1_2_3",
    "ManagerCollection": None,
    "Manager": "Manager.v1_24_0",
    "SessionService": "SessionService.v1_2_0",
    "SessionCollection": None,
    "Session": "Session.v1_8_0",
    "MessageRegistryFileCollection": None,
    "MessageRegistryFile": "MessageRegistryFile.v1_1_5",
    "Settings": "Settings.v1_4_0",
    "Resource": "Resource.v1_23_0",
    "Message": "Message.v1_3_0",
}


def metadata_xml() -> str:
    refs = []
    for ns, versioned in SCHEMAS.items():
        inc = f'    <edmx:Include Namespace="{ns}"/>\n'
        if versioned:
            inc += f'    <edmx:Include Namespace="{versioned}"/>\n'
        refs.append(
            f'  <edmx:Reference Uri="http://redfish.dmtf.org/schemas/v1/{ns}_v1.xml">\n{inc}  </edmx:Reference>\n'
        )
    refs.append(
        '  <edmx:Reference Uri="http://redfish.dmtf.org/schemas/v1/RedfishExtensions_v1.xml">\n'
        '    <edmx:Include Namespace="RedfishExtensions.v1_0_0" Alias="Redfish"/>\n'
        "  </edmx:Reference>\n"
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<edmx:Edmx xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx" Version="4.0">\n'
        + "".join(refs)
        + "  <edmx:DataServices>\n"
        '    <Schema xmlns="http://docs.oasis-open.org/odata/ns/edm" Namespace="Service">\n'
        '      <EntityContainer Name="Service" Extends="ServiceRoot.v1_20_0.ServiceContainer"/>\n'
        "    </Schema>\n"
        "  </edmx:DataServices>\n"
        "</edmx:Edmx>\n"
    )


def register(sim) -> None:
    f = sim.flavour
    service_uuid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"numaforge-bmc-sim/{f.name}"))

    def redfish(req):
        return json_ok({"v1": "/redfish/v1/"})

    def service_root(req):
        body = {
            "@odata.id": "/redfish/v1/",
            "@odata.type": "#ServiceRoot.v1_20_0.ServiceRoot",
            "Id": "RootService",
            "Name": "Root Service",
            "RedfishVersion": "1.20.0",
            "UUID": service_uuid,
            "Vendor": f.vendor,
            "Product": f"{f.model} (numaforge BMC simulator, {f.name} flavour)",
            "ProtocolFeaturesSupported": {
                "ExpandQuery": {"ExpandAll": False, "Levels": False, "Links": False, "NoLinks": False},
                "SelectQuery": False,
                "FilterQuery": False,
                "OnlyMemberQuery": False,
                "ExcerptQuery": False,
            },
            "Systems": {"@odata.id": sim.link("/redfish/v1/Systems")},
            "Managers": {"@odata.id": sim.link("/redfish/v1/Managers")},
            "SessionService": {"@odata.id": sim.link("/redfish/v1/SessionService")},
            "Registries": {"@odata.id": sim.link("/redfish/v1/Registries")},
            "Links": {"Sessions": {"@odata.id": sim.link("/redfish/v1/SessionService/Sessions")}},
        }
        return json_ok(body)

    def odata(req):
        body = {
            "@odata.context": "/redfish/v1/$metadata",
            "value": [
                {"name": "Service", "kind": "Singleton", "url": "/redfish/v1/"},
                {"name": "Systems", "kind": "Singleton", "url": "/redfish/v1/Systems"},
                {"name": "Managers", "kind": "Singleton", "url": "/redfish/v1/Managers"},
                {"name": "SessionService", "kind": "Singleton", "url": "/redfish/v1/SessionService"},
                {"name": "Registries", "kind": "Singleton", "url": "/redfish/v1/Registries"},
            ],
        }
        return json_ok(body)

    def metadata(req):
        return SimResponse(200, metadata_xml(), {"Allow": "GET, HEAD"}, content_type="application/xml")

    sim.router.add(r"/redfish", get=redfish)
    sim.router.add(r"/redfish/v1/", get=service_root)
    sim.router.add(r"/redfish/v1/odata", get=odata)
    sim.router.add(r"/redfish/v1/\$metadata", get=metadata)
