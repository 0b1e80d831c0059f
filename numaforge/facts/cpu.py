"""CPU facts: model, sockets, CPU count and L3 domains (pure parsers).

L3 domains are what tells NPS and LLC-as-NUMA apart: with "LLC as NUMA node" on, every L3 (a CCX on EPYC)
becomes its own NUMA node. Sources, best first: sysfs (``cpu*/topology/physical_package_id``,
``cpu*/cache/index3/{level,shared_cpu_list}``), then ``lscpu``, then the first block of /proc/cpuinfo.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .captures import CPUINFO, LSCPU, SYS_CPU, Captures, cpulist, parse_head, try_cpulist, try_int


@dataclass
class CpuFacts:
    model: str | None = None
    cpus: int | None = None
    sockets: int | None = None
    l3_domains: list[list[int]] | None = None  # CPU sets sharing one L3, when sysfs tells
    l3_count: int | None = None  # number of L3 instances (sysfs, else lscpu "(N instances)")
    threads_per_core: int | None = None
    sources: dict[str, str] = field(default_factory=dict)  # fact -> where it came from
    missing: dict[str, str] = field(default_factory=dict)  # fact -> why unknown

    def as_dict(self) -> dict:
        d: dict[str, Any] = {
            "model": self.model,
            "cpus": self.cpus,
            "sockets": self.sockets,
            "l3_count": self.l3_count,
            "threads_per_core": self.threads_per_core,
            "sources": self.sources,
        }
        if self.l3_domains is not None:
            d["l3_domains"] = [cpulist(s) for s in self.l3_domains]
        if self.missing:
            d["missing"] = self.missing
        return d


def parse_lscpu(text: str | None) -> dict[str, str]:
    """`lscpu` "Key:   value" lines -> {key: value} (keys as printed, e.g. "Socket(s)", "L3 cache")."""
    out: dict[str, str] = {}
    for line in (text or "").splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            out.setdefault(k.strip(), v.strip())
    return out


_INSTANCES = re.compile(r"\((\d+) instances?\)")


def lscpu_l3_instances(fields: dict[str, str]) -> int | None:
    """ "L3 cache: 256 MiB (8 instances)" (util-linux >= 2.37; older versions print no count) -> 8."""
    for key in ("L3 cache", "L3"):
        if key in fields and (m := _INSTANCES.search(fields[key])):
            return int(m.group(1))
    return None


def parse_cpuinfo(text: str | None) -> dict[str, str]:
    """First processor block of /proc/cpuinfo -> {key: value}."""
    out: dict[str, str] = {}
    for line in (text or "").splitlines():
        if not line.strip():
            if out:
                break
            continue
        if ":" in line:
            k, v = line.split(":", 1)
            out.setdefault(k.strip(), v.strip())
    return out


_PKG = re.compile(r"^/sys/devices/system/cpu/cpu(\d+)/topology/physical_package_id$")
_CORE_SIB = re.compile(r"^/sys/devices/system/cpu/cpu(\d+)/topology/thread_siblings_list$")
_L3 = re.compile(r"^/sys/devices/system/cpu/cpu(\d+)/cache/index(\d+)/(level|shared_cpu_list)$")


def parse_cpu_sysfs(head_text: str | None) -> dict:
    """{"packages": {cpu: pkg}, "l3": [cpu sets], "threads_per_core": n} from the cpu sysfs head dump."""
    pkgs: dict[int, int] = {}
    caches: dict[tuple[int, int], dict[str, str]] = {}
    siblings: dict[int, int] = {}
    for path, content in parse_head(head_text).items():
        if m := _PKG.match(path):
            if (pkg := try_int(content)) is not None:
                pkgs[int(m.group(1))] = pkg
        elif m := _L3.match(path):
            caches.setdefault((int(m.group(1)), int(m.group(2))), {})[m.group(3)] = content.strip()
        elif m := _CORE_SIB.match(path):
            if sib := try_cpulist(content):
                siblings[int(m.group(1))] = len(sib)
    l3: list[list[int]] = []
    for (_cpu, _idx), c in sorted(caches.items()):
        if c.get("level") == "3" and "shared_cpu_list" in c:
            s = try_cpulist(c["shared_cpu_list"])
            if s and s not in l3:
                l3.append(s)
    tpc = max(siblings.values()) if siblings else None
    return {"packages": pkgs, "l3": sorted(l3), "threads_per_core": tpc}


def cpu_facts(cap: Captures) -> CpuFacts:
    f = CpuFacts()
    sysfs = parse_cpu_sysfs(cap.get(SYS_CPU))
    ls = parse_lscpu(cap.get(LSCPU))
    ci = parse_cpuinfo(cap.get(CPUINFO))

    if ls.get("Model name"):
        f.model, f.sources["model"] = ls["Model name"], "lscpu"
    elif ci.get("model name"):
        f.model, f.sources["model"] = ci["model name"], "/proc/cpuinfo"
    else:
        f.missing["model"] = f"lscpu: {cap.why(LSCPU)}; /proc/cpuinfo: {cap.why(CPUINFO)}"

    if sysfs["packages"]:
        f.cpus, f.sources["cpus"] = len(sysfs["packages"]), "sysfs"
        f.sockets, f.sources["sockets"] = len(set(sysfs["packages"].values())), "sysfs physical_package_id"
    if f.sockets is None and ls.get("Socket(s)", "").isdigit():
        f.sockets, f.sources["sockets"] = int(ls["Socket(s)"]), "lscpu"
    if f.cpus is None and ls.get("CPU(s)", "").isdigit():
        f.cpus, f.sources["cpus"] = int(ls["CPU(s)"]), "lscpu"
    if f.sockets is None:
        f.missing["sockets"] = f"cpu sysfs: {cap.why(SYS_CPU)}; lscpu: {cap.why(LSCPU)}"

    if sysfs["threads_per_core"]:
        f.threads_per_core = sysfs["threads_per_core"]
    elif ls.get("Thread(s) per core", "").isdigit():
        f.threads_per_core = int(ls["Thread(s) per core"])

    if sysfs["l3"]:
        f.l3_domains, f.l3_count = sysfs["l3"], len(sysfs["l3"])
        f.sources["l3"] = "sysfs cache/index3/shared_cpu_list"
    elif (n := lscpu_l3_instances(ls)) is not None:
        f.l3_count, f.sources["l3"] = n, "lscpu L3 instances"
    else:
        why = [f"cpu sysfs: {cap.why(SYS_CPU)}" if cap.get(SYS_CPU) is None else "cpu sysfs: no level-3 cache"]
        why.append(f"lscpu: {cap.why(LSCPU)}" if cap.get(LSCPU) is None else "lscpu: prints no L3 instance count")
        f.missing["l3"] = "; ".join(why)
    return f
