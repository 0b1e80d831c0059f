"""Registries collection with the BIOS AttributeRegistry file (its Location points at the registry JSON)."""

from __future__ import annotations

from ..http import collection_ok, json_ok, lit


def register(sim) -> None:
    f = sim.flavour
    base = "/redfish/v1/Registries"
    file_path = f"{base}/{f.registry_id}"

    def collection(req):
        return collection_ok(sim.link(base), "#MessageRegistryFileCollection.MessageRegistryFileCollection",
                             "Registry File Collection", [sim.link(file_path)])

    def registry_file(req):
        return json_ok({
            "@odata.id": sim.link(file_path),
            "@odata.type": "#MessageRegistryFile.v1_1_5.MessageRegistryFile",
            "Id": f.registry_id,
            "Name": "BIOS Attribute Registry File",
            "Description": "Location of the BIOS attribute registry",
            "Languages": ["en"],
            "Registry": f.registry_id,
            "Location": [{"Language": "en", "Uri": f.registry_uri}],
        })

    sim.router.add(lit(base), get=collection)
    sim.router.add(lit(file_path), get=registry_file)
