"""Host facts: what the OS sees (NUMA, CPU, PCI, IOMMU, kernel), from read-only captures.

    caps = collect.collect_ssh(host)              # or collect.collect_local(), or Captures.load(DIR)
    facts = parse_facts(caps)                     # pure: HostFacts
    template_facts(facts)                         # -> dict for BIOS profile templates

Nothing here installs anything on a host; a missing tool or sysfs entry becomes a ``missing`` reason that
numaforge.bios.os_verify turns into "cannot tell, because ...".
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .captures import Captures
from .cpu import CpuFacts, cpu_facts
from .iommu import IommuFacts, iommu_facts
from .kernel import KernelFacts, kernel_facts
from .numa import NumaFacts, numa_facts
from .pci import PciFacts, pci_facts
from .sanity import unreadable

__all__ = ["HostFacts", "parse_facts", "template_facts", "Captures"]


@dataclass
class HostFacts:
    host: str
    numa: NumaFacts
    cpu: CpuFacts
    pci: PciFacts
    iommu: IommuFacts
    kernel: KernelFacts
    absent: dict[str, str] = field(default_factory=dict)  # capture -> why it is missing
    # capture -> why it is not what its command prints (numaforge.facts.sanity): not parsed, "cannot tell"
    unreadable: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "host": self.host,
            "numa": self.numa.as_dict(),
            "cpu": self.cpu.as_dict(),
            "pci": self.pci.as_dict(),
            "iommu": self.iommu.as_dict(),
            "kernel": self.kernel.as_dict(),
            "absent": dict(self.absent),
            "unreadable": dict(self.unreadable),
        }


def parse_facts(cap: Captures, host: str | None = None) -> HostFacts:
    """All facts from one capture set (pure). A capture that is not what its command prints (sanity.unreadable)
    is not parsed: it counts as absent ("cannot tell: ..."), and HostFacts.unreadable names it."""
    name = host or cap.source
    bad = unreadable(cap)
    if bad:
        absent = dict(cap.absent)
        for capture, why in bad.items():
            absent[capture] = f"cannot tell: what {name} sent for {capture} is not what its command prints: {why}"
        cap = replace(cap, files={k: v for k, v in cap.files.items() if k not in bad}, absent=absent)
    kernel = kernel_facts(cap)
    return HostFacts(
        name,
        numa_facts(cap),
        cpu_facts(cap),
        pci_facts(cap),
        iommu_facts(cap, kernel),
        kernel,
        dict(cap.absent),
        bad,
    )


def template_facts(facts: HostFacts) -> dict:
    """Facts for BIOS profile templates (numaforge.bios.profile): counts and addresses of what is really there.

    Keys: gpu_count, gpus (addresses), gpu_slots (physical slot names, where lspci reports them), nic_count,
    nics, nic_slots, numa_nodes, sockets, l3_domains, cpu_model. Unknown values are None, never guessed.
    """
    pci = facts.pci
    gpus = sorted(pci.gpus, key=lambda d: d.address)
    nics = sorted(pci.nics, key=lambda d: d.address)
    known_pci = pci.missing is None
    return {
        "gpu_count": len(gpus) if known_pci else None,
        "gpus": [g.address for g in gpus],
        "gpu_slots": [g.physical_slot for g in gpus if g.physical_slot is not None],
        "nic_count": len(nics) if known_pci else None,
        "nics": [n.address for n in nics],
        "nic_slots": [n.physical_slot for n in nics if n.physical_slot is not None],
        "numa_nodes": len(facts.numa.nodes) if facts.numa.missing is None else None,
        "sockets": facts.cpu.sockets,
        "l3_domains": facts.cpu.l3_count,
        "cpu_model": facts.cpu.model,
    }
