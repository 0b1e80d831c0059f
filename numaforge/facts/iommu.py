"""IOMMU facts: groups present in /sys/kernel/iommu_groups and the IOMMU mode the command line asks for.

Sources: ``ls -1 /sys/kernel/iommu_groups`` (one group number per line; the directory exists whenever the
kernel has IOMMU support, and is empty when no IOMMU is active) and the kernel command line.
"""

from __future__ import annotations

from dataclasses import dataclass

from .captures import IOMMU_GROUPS, Captures
from .kernel import KernelFacts


@dataclass
class IommuFacts:
    groups: int | None = None  # number of IOMMU groups; None = unknown
    mode: str = "default"  # cmdline view: off | passthrough | translated | default
    cmdline_evidence: str = ""  # the parameters that decided `mode`
    missing: str | None = None

    def as_dict(self) -> dict:
        d = {"groups": self.groups, "mode": self.mode, "cmdline": self.cmdline_evidence}
        if self.missing:
            d["missing"] = self.missing
        return d


def iommu_mode(params: dict[str, str | None]) -> tuple[str, str]:
    """(mode, evidence) from kernel parameters: amd_iommu=off / intel_iommu=off / iommu=off -> off,
    iommu=pt or iommu.passthrough=1 -> passthrough, iommu=nopt or iommu.passthrough=0 -> translated."""
    ev = [
        f"{k}={v}"
        for k, v in params.items()
        if k in ("iommu", "amd_iommu", "intel_iommu", "iommu.passthrough") and v is not None
    ]
    p = params
    if p.get("iommu") == "off" or p.get("amd_iommu") == "off" or p.get("intel_iommu") == "off":
        return "off", " ".join(ev)
    if p.get("iommu") == "pt" or p.get("iommu.passthrough") in ("1", "on", "y"):
        return "passthrough", " ".join(ev)
    if p.get("iommu") == "nopt" or p.get("iommu.passthrough") in ("0", "off", "n"):
        return "translated", " ".join(ev)
    return "default", " ".join(ev)


def iommu_facts(cap: Captures, kernel: KernelFacts) -> IommuFacts:
    f = IommuFacts()
    f.mode, f.cmdline_evidence = iommu_mode(kernel.params)
    text = cap.get(IOMMU_GROUPS)
    if text is None:
        f.missing = cap.why(IOMMU_GROUPS)
    else:
        f.groups = len([x for x in text.split() if x.isdigit()])
    return f
