"""Registries collection (MessageRegistryFile members): the BIOS AttributeRegistry file, whose Location points at
the registry JSON (or, with ``publication_uri``, only a PublicationUri), and DMTF's Base message registry, which
BMCs list with its public PublicationUri only. The BIOS file sits at the flavour's ``registry_member`` URI, which
need not be Registries/<registry id> (iLO 6 lists it lower case, with a dotted version; iDRAC without the
version): its Id is that URI's last segment, its Registry the registry document's Id -- unless the flavour spells
them as a captured BMC does (``registry_file_id``/``registry_file_registry``: an iDRAC9 lists
"BiosAttributeRegistry.v1_0_0" / "BiosAttributeRegistry1.0" for a document whose Id, like the Bios's
AttributeRegistry, is "BiosAttributeRegistry.v1_0_3")."""

from __future__ import annotations

from ..http import collection_ok, json_ok, lit

BASE_ID = "Base.1.16.0"


def register(sim) -> None:
    f = sim.flavour
    base = "/redfish/v1/Registries"
    file_path = f.registry_member
    base_file = f"{base}/Base"

    def collection(req):
        return collection_ok(
            sim.link(base),
            "#MessageRegistryFileCollection.MessageRegistryFileCollection",
            "Registry File Collection",
            [sim.link(base_file), sim.link(file_path)],
        )

    def registry_file(req):
        where = (
            {"Language": "en", "PublicationUri": f.publication_uri}
            if f.publication_uri
            else {"Language": "en", "Uri": f.registry_uri}
        )
        return json_ok(
            {
                "@odata.id": sim.link(file_path),
                "@odata.type": "#MessageRegistryFile.v1_1_5.MessageRegistryFile",
                "Id": f.registry_file_id or file_path.rstrip("/").rsplit("/", 1)[-1],  # the URI's last segment
                "Name": "BIOS Attribute Registry File",
                "Description": "Location of the BIOS attribute registry",
                "Languages": ["en"],
                "Registry": f.registry_file_registry or f.registry_id,
                "Location": [where],
            }
        )

    def base_registry_file(req):
        return json_ok(
            {
                "@odata.id": sim.link(base_file),
                "@odata.type": "#MessageRegistryFile.v1_1_5.MessageRegistryFile",
                "Id": "Base",
                "Name": "Base Message Registry File",
                "Description": "DMTF Base message registry",
                "Languages": ["en"],
                "Registry": BASE_ID,
                "Location": [
                    {"Language": "en", "PublicationUri": f"https://redfish.dmtf.org/registries/{BASE_ID}.json"}
                ],
            }
        )

    sim.router.add(lit(base), get=collection)
    sim.router.add(lit(base_file), get=base_registry_file)
    sim.router.add(lit(file_path), get=registry_file)
