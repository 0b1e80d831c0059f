"""Per-flavour data of the BMC simulator: resource ids, paths and the BIOS attribute registry.

Each ``<name>.yaml`` here is the spec of one vendor-shaped BMC (see docs/bmc-simulator.md). ``load_flavour``
turns it into a ``Flavour``: the short attribute list becomes a DSP0266/DSP8010 AttributeRegistry document.

The corpus flavours (``CORPUS``: one per vendor generation) take their registry from
numaforge/lab/bmc/registries/<name>.json (package data, shipped in the wheel) -- AttributeRegistry documents built
from public vendor facts (see SOURCES.md there; numaforge.lab.bmc.corpus builds them) -- and their paths from a
``base:`` flavour they name.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import yaml

from ..errors import BMCSimulatorError

HERE = Path(__file__).resolve().parent
FLAVOURS = ("dell", "hpe", "supermicro", "lenovo", "generic")
CORPUS = ("hpe-gen10p", "hpe-gen11", "dell-15g", "dell-16g", "smc-h12", "smc-h13", "lenovo-sr665", "lenovo-sr665v3")
ALL_FLAVOURS = FLAVOURS + CORPUS
CORPUS_DIR = HERE.parent / "registries"  # package data (pyproject.toml)


@dataclass(frozen=True)
class Flavour:
    name: str
    vendor: str
    model: str
    bios_version: str
    system_id: str
    manager_id: str
    manager_model: str
    manager_firmware: str
    settings_path: str  # canonical @odata.id of the settings (pending) object
    settings_link: str  # what @Redfish.Settings.SettingsObject says (may differ in case/slash)
    settings_shows: str  # "full" (current + pending) or "pending_only"
    registry_id: str
    registry_uri: str
    supported_apply_times: tuple
    jobs: str  # "dell" or "none"
    jobs_path: str | None
    trailing_slash: bool
    case_insensitive_paths: bool
    registry: dict = field(repr=False)  # the AttributeRegistry document
    defaults: dict = field(repr=False)  # AttributeName -> default value
    registry_member: str = ""  # the MessageRegistryFile's URI in the Registries collection
    publication_uri: str | None = None  # set: the file gives only this PublicationUri, no local Location
    # how the same registry is spelt elsewhere (real BMCs disagree with themselves): the Bios's AttributeRegistry,
    # the MessageRegistryFile's Id and Registry; "" = registry_id (the document's own Id), resp. the member URI's
    # last segment for the file's Id
    bios_registry_id: str = ""
    registry_file_id: str = ""
    registry_file_registry: str = ""
    # "display": the Bios and its settings object show an enumeration's ValueDisplayName, not its ValueName
    # (a Supermicro: "Enabled" for ValueName "1"); a PATCH still takes ValueNames only
    current_shows: str = "values"
    # how the System reports where the host is in its boot: "standard" (BootProgress), "hpe" (Oem.Hpe.PostState
    # only), "both", "none"
    boot_progress: str = "standard"

    @property
    def bios_registry(self) -> str:
        """What the Bios and its settings object name in AttributeRegistry."""
        return self.bios_registry_id or self.registry_id

    @property
    def system_path(self) -> str:
        return f"/redfish/v1/Systems/{self.system_id}"

    @property
    def manager_path(self) -> str:
        return f"/redfish/v1/Managers/{self.manager_id}"

    @property
    def bios_path(self) -> str:
        return f"{self.system_path}/Bios"

    def shown(self, attributes: dict) -> dict:
        """Attribute values as the Bios shows them (``current_shows``)."""
        if self.current_shows != "display":
            return dict(attributes)
        out = {}
        for name, value in attributes.items():
            entry = self.attribute(name) or {}
            labels = {v["ValueName"]: v.get("ValueDisplayName") or v["ValueName"] for v in entry.get("Value") or []}
            out[name] = labels.get(value, value) if isinstance(value, str) else value
        return out

    def stored(self, attributes: dict) -> dict:
        """Attribute values written in the form the Bios shows them (``current_shows: display``: ValueDisplayNames,
        as public Supermicro clients write them) as the ValueNames the state holds; anything else unchanged."""
        if self.current_shows != "display":
            return dict(attributes)
        out = {}
        for name, value in attributes.items():
            entry = self.attribute(name) or {}
            names = {v["ValueName"] for v in entry.get("Value") or []}
            codes = {v.get("ValueDisplayName"): v["ValueName"] for v in entry.get("Value") or []}
            out[name] = codes[value] if isinstance(value, str) and value not in names and value in codes else value
        return out

    def attribute(self, name: str) -> dict | None:
        for entry in self.registry["RegistryEntries"]["Attributes"]:
            if entry["AttributeName"] == name:
                return entry
        return None


_TYPES = {"Enumeration", "String", "Integer", "Boolean", "Password"}


def _entry(raw: dict, order: int, where: str) -> dict:
    try:
        name, display, kind = raw["name"], raw["display"], raw["type"]
    except KeyError as exc:
        raise BMCSimulatorError(
            f"attribute entry lacks '{exc.args[0]}'", where, "give every attribute name, display and type"
        ) from None
    if kind not in _TYPES:
        raise BMCSimulatorError(f"attribute {name} has unknown type {kind!r}", where, f"use one of {sorted(_TYPES)}")
    entry = {
        "AttributeName": name,
        "DisplayName": display,
        "HelpText": raw.get("help", f"{display}."),
        "MenuPath": raw.get("menu", "./"),
        "DisplayOrder": order,
        "Type": kind,
        "ReadOnly": bool(raw.get("read_only", False)),
        "Hidden": False,
        "ResetRequired": True,
        "CurrentValue": None,
    }
    if raw.get("default") not in (None, ""):
        entry["DefaultValue"] = raw["default"]
    if kind == "Enumeration":
        values = raw.get("values") or []
        if not values:
            raise BMCSimulatorError(f"enumeration {name} has no values", where, "list its values")
        entry["Value"] = [{"ValueName": str(v), "ValueDisplayName": str(v)} for v in values]
        if str(raw.get("default")) not in [str(v) for v in values]:
            raise BMCSimulatorError(f"default of {name} is not one of its values", where, "fix the default")
    if kind == "Integer":
        entry["LowerBound"] = int(raw["lower"])
        entry["UpperBound"] = int(raw["upper"])
        entry["ScalarIncrement"] = int(raw.get("increment", 1))
    if kind == "String":
        entry["MinLength"] = int(raw.get("min_length", 0))
        entry["MaxLength"] = int(raw.get("max_length", 255))
    return entry


def _dependency(raw: dict, where: str) -> dict:
    return {
        "DependencyFor": raw["for"],
        "Type": "Map",
        "Dependency": {
            "MapFrom": [
                {
                    "MapFromAttribute": raw["from"],
                    "MapFromCondition": raw.get("condition", "EQU"),
                    "MapFromProperty": "CurrentValue",
                    "MapFromValue": raw["value"],
                }
            ],
            "MapToAttribute": raw["for"],
            "MapToProperty": raw.get("property", "ReadOnly"),
            "MapToValue": raw.get("to", True),
        },
    }


def _corpus_registry(name: str, data: dict, where: str) -> tuple[dict, dict]:
    path = CORPUS_DIR / name
    try:
        registry = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise BMCSimulatorError(
            f"cannot read registry file {name}: {exc}",
            str(path),
            "reinstall numaforge (the corpus is package data: numaforge/lab/bmc/registries, SOURCES.md there)",
        ) from None
    if registry.get("Id") != data["registry_id"]:
        raise BMCSimulatorError(
            f"registry file {name} has Id {registry.get('Id')!r}, the flavour says {data['registry_id']!r}",
            where,
            "make registry_id match the file's Id",
        )
    defaults = {}
    for a in registry["RegistryEntries"]["Attributes"]:
        value = a.get("DefaultValue", a.get("CurrentValue"))
        if a.get("Type") == "Enumeration" and value not in [v["ValueName"] for v in a.get("Value") or []]:
            raise BMCSimulatorError(
                f"default of {a['AttributeName']} is not one of its values", str(path), "fix DefaultValue"
            )
        defaults[a["AttributeName"]] = value
    return registry, defaults


def build_flavour(data: dict, where: str) -> Flavour:
    if data.get("base"):  # a corpus flavour: the base flavour's shape, its own registry
        base = yaml.safe_load((HERE / f"{data['base']}.yaml").read_text())
        for key in ("attributes", "slot_aspm", "dependencies"):
            base.pop(key, None)
        data = {**base, **{k: v for k, v in data.items() if k != "base"}}
    if data.get("registry_file"):
        registry, defaults = _corpus_registry(data["registry_file"], data, where)
        return _flavour(data, registry, defaults)
    raw_attrs = list(data.get("attributes") or [])
    slot = data.get("slot_aspm")
    if slot:
        for n in range(1, int(slot["slots"]) + 1):
            raw_attrs.append(
                {
                    "name": f"PciSlot{n}Aspm",
                    "display": f"PCIe Slot {n} ASPM",
                    "type": "Enumeration",
                    "values": slot["values"],
                    "default": slot["default"],
                    "menu": "./PciOptions/PcieSlotOptions",
                }
            )
    entries = [_entry(raw, i + 1, f"{where}: attribute #{i + 1}") for i, raw in enumerate(raw_attrs)]
    names = [e["AttributeName"] for e in entries]
    if len(set(names)) != len(names):
        raise BMCSimulatorError("duplicate attribute names", where, "make every AttributeName unique")
    deps = [_dependency(d, where) for d in data.get("dependencies") or []]
    for d in deps:
        for ref in (d["DependencyFor"], d["Dependency"]["MapFrom"][0]["MapFromAttribute"]):
            if ref not in names:
                raise BMCSimulatorError(f"dependency names unknown attribute {ref}", where, "fix the dependency")
    registry = registry_document(
        data["registry_id"],
        data["model"],
        "BIOS attribute registry of the numaforge BMC simulator",
        data["vendor"],
        data["registry_id"].split(".", 1)[-1].lstrip("v").replace("_", "."),
        data["bios_version"],
        entries,
        deps,
    )
    defaults = {raw["name"]: raw.get("default") for raw in raw_attrs}
    return _flavour(data, registry, defaults)


def registry_document(
    rid: str, model: str, description: str, owner: str, version: str, firmware: object, entries: list, deps: list
) -> dict:
    """A DSP8010 AttributeRegistry of ``entries`` and ``deps``, with one menu per MenuPath the entries name: the
    simulator's flavours and the registry corpus (numaforge.lab.bmc.corpus) build theirs with it."""
    menus = sorted({e["MenuPath"] for e in entries})
    return {
        "@odata.type": "#AttributeRegistry.v1_3_8.AttributeRegistry",
        "Id": rid,
        "Name": f"{model} BIOS Attribute Registry",
        "Description": description,
        "Language": "en",
        "OwningEntity": owner,
        "RegistryVersion": version,
        "SupportedSystems": [
            {"ProductName": model, "SystemId": re.sub(r"[^A-Za-z0-9]", "", model), "FirmwareVersion": str(firmware)}
        ],
        "RegistryEntries": {
            "Attributes": entries,
            "Dependencies": deps,
            "Menus": [
                {
                    "MenuName": m.strip("./").replace("/", "_") or "Main",
                    "DisplayName": m.strip("./") or "Main",
                    "MenuPath": m,
                    "DisplayOrder": i + 1,
                    "ReadOnly": False,
                    "Hidden": False,
                }
                for i, m in enumerate(menus)
            ],
        },
    }


def _flavour(data: dict, registry: dict, defaults: dict) -> Flavour:
    return Flavour(
        name=data["name"],
        vendor=data["vendor"],
        model=data["model"],
        bios_version=str(data["bios_version"]),
        system_id=str(data["system_id"]),
        manager_id=str(data["manager_id"]),
        manager_model=data["manager_model"],
        manager_firmware=str(data["manager_firmware"]),
        settings_path=data["settings_path"],
        settings_link=data["settings_link"],
        settings_shows=data.get("settings_shows", "full"),
        registry_id=data["registry_id"],
        registry_uri=data["registry_uri"],
        supported_apply_times=tuple(data["supported_apply_times"]),
        jobs=data.get("jobs", "none"),
        jobs_path=data.get("jobs_path"),
        trailing_slash=bool(data.get("trailing_slash")),
        case_insensitive_paths=bool(data.get("case_insensitive_paths")),
        registry=registry,
        defaults=defaults,
        registry_member=data.get("registry_member") or f"/redfish/v1/Registries/{data['registry_id']}",
        bios_registry_id=str(data.get("bios_registry_id") or ""),
        registry_file_id=str(data.get("registry_file_id") or ""),
        registry_file_registry=str(data.get("registry_file_registry") or ""),
        current_shows=str(data.get("current_shows") or "values"),
        boot_progress=str(data.get("boot_progress") or "standard"),
    )


def vendor_of(name: str) -> str:
    """The inventory's ``bmc.vendor`` (a vendor map of bios/vendors/) for a flavour: a base flavour is named after
    its vendor map, a corpus flavour takes its ``base:``."""
    if name not in ALL_FLAVOURS:
        raise BMCSimulatorError(f"unknown BMC flavour {name!r}", "--flavour", f"use one of: {', '.join(ALL_FLAVOURS)}")
    if name in FLAVOURS:
        return name
    return str(yaml.safe_load((HERE / f"{name}.yaml").read_text())["base"])


@lru_cache(maxsize=None)
def load_flavour(name: str) -> Flavour:
    if name not in ALL_FLAVOURS:
        raise BMCSimulatorError(f"unknown BMC flavour {name!r}", "--flavour", f"use one of: {', '.join(ALL_FLAVOURS)}")
    path = HERE / f"{name}.yaml"
    return build_flavour(yaml.safe_load(path.read_text()), str(path))
