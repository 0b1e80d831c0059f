"""A captured tree (tests/data/captures) read as the simulator's mockup mode serves it: its BIOS attribute registry
and Bios attributes, for the pure tests that hold the vendor maps and the plan to the captures."""

from __future__ import annotations

from numaforge.bios.registry import Registry
from numaforge.lab.bmc.mockup import load_tree

from .conftest import CAPTURES


def capture_host(capture) -> tuple[Registry, dict]:
    """A capture's attribute registry and Bios attributes: the registry document the Bios names (by its Id, or
    the file it is listed under), else the only BIOS attribute registry in the tree."""
    tree = load_tree(capture)
    (bios,) = [d for k, d in tree.items() if k.rsplit("/", 1)[-1] == "bios" and "Attributes" in d]
    regs = [d for d in tree.values() if (d.get("RegistryEntries") or {}).get("Attributes")]
    named = str(bios.get("AttributeRegistry") or "")
    fit = [d for d in regs if named and (d.get("Id") == named or named.split(".")[0] == str(d.get("Id")).split(".")[0])]
    (doc,) = fit[:1] or regs
    return Registry.from_json(doc), dict(bios["Attributes"])


def capture_registry(name: str) -> Registry:
    """The registry of capture tests/data/captures/NAME (a map source's ``capture: {name: ...}``)."""
    return capture_host(CAPTURES / name)[0]
