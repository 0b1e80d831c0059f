"""Corpus access for the facts tests: one directory per machine under tests/data/facts/."""

from __future__ import annotations

from pathlib import Path

from numaforge.facts import Captures, HostFacts, parse_facts

CORPUS = Path(__file__).resolve().parents[1] / "data" / "facts"
MACHINES = sorted(p.name for p in CORPUS.iterdir() if p.is_dir())
REAL = ["this-build-server", "this-build-server-unprivileged"]  # captured, not written


def captures(machine: str) -> Captures:
    return Captures.load(CORPUS / machine)


def facts(machine: str) -> HostFacts:
    return parse_facts(captures(machine))


# What the GPUDirect profile asks for (numaforge.bios.profile vocabulary).
GPUDIRECT = {
    "numa_nodes_per_socket": 1,
    "llc_as_numa": False,
    "memory_interleaving": True,
    "pcie_acs": False,
    "pcie_aspm": "disabled",
    "iommu": True,
    "sriov": True,
    "determinism": "performance",
}
