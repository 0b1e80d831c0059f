"""Is each capture what its command prints? (pure; issue 40 item 5: garbage from a host was taken as facts).

A host is a peer: a capture that came back but is not what its tool prints (a wrapper script, a broken tool, a
hostile host) must not become facts by default -- the parsers would find "0 GPUs" or no nodes in it and the run
would say ok. :func:`unreadable` gives, per capture present, why it is not what its command prints (shape) or
holds a number out of range (a node id past the kernel's limit, a cpulist reaching past NR_CPUS, a NUMA
distance that is not one). Each capture name in numaforge.facts.collect.SPECS has a check (CHECKS); a capture
without one is a programming error (tests/facts/test_peer_data.py walks SPECS).
"""

from __future__ import annotations

import re
from typing import Callable

from ..textsafe import printable
from . import captures as C
from .captures import MAX_CPU, parse_head, try_cpulist, try_int

MAX_GROUP = 1 << 20  # IOMMU group ids: one per device at most, far below this
MAX_NODE = 1023  # CONFIG_NODES_SHIFT is at most 10 on x86_64
_EXCERPT = 60


def _excerpt(text: str) -> str:
    line = next((x for x in text.splitlines() if x.strip()), "")
    cut = line[:_EXCERPT] + ("..." if len(line) > _EXCERPT else "")
    return repr(printable(cut))


def _lines_match(pattern: str, what: str) -> Callable[[str], str | None]:
    rx = re.compile(pattern, re.M)

    def check(text: str) -> str | None:
        return None if rx.search(text) else f"no {what} in it (it begins {_excerpt(text)})"

    return check


def _in_range(value: int | None, lo: int, hi: int) -> bool:
    return value is not None and lo <= value <= hi


def _head_of(prefix: str, value_check: Callable[[str, str], str | None]) -> Callable[[str], str | None]:
    """A `head -v` dump: at least one ``==> path <==`` block, every path under ``prefix``, every value sane."""

    def check(text: str) -> str | None:
        files = parse_head(text)
        if not files:
            return f"no `==> file <==` blocks in it (it begins {_excerpt(text)})"
        for path, content in files.items():
            if not path.startswith(prefix):
                return f"a block for {printable(path)!r}, not a file under {prefix}"
            if (bad := value_check(path, content.strip())) is not None:
                return f"{printable(path)}: {bad}"
        return None

    return check


def _cpus_ok(value: str) -> str | None:
    cpus = try_cpulist(value)
    return None if cpus is not None else f"{_excerpt(value)} is not a cpulist (CPUs 0..{MAX_CPU})"


_NODE_PATH = re.compile(r"/node(\d+)/")


def _node_value(path: str, value: str) -> str | None:
    m = _NODE_PATH.search(path)
    if m and not _in_range(int(m.group(1)), 0, MAX_NODE):
        return f"node {m.group(1)} is past the kernel's limit ({MAX_NODE})"
    if path.endswith(("/cpulist", "/online", "/possible")):
        return _cpus_ok(value)  # node lists use the same format
    if path.endswith("/distance"):
        dist = [try_int(x) for x in value.split()]
        if not dist or any(not _in_range(d, 10, 255) for d in dist):
            return f"{_excerpt(value)} is not a list of NUMA distances (10..255)"
    return None


def _cpu_value(path: str, value: str) -> str | None:
    if path.endswith("/physical_package_id") and not _in_range(try_int(value), 0, MAX_CPU):
        return f"{_excerpt(value)} is not a package id"
    if path.endswith("/level") and not _in_range(try_int(value), 0, 9):
        return f"{_excerpt(value)} is not a cache level"
    if path.endswith(("_list", "/shared_cpu_list")):
        return _cpus_ok(value)
    return None


def _pci_value(path: str, value: str) -> str | None:
    name = path.rsplit("/", 1)[-1]
    if name == "class" and not re.fullmatch(r"0x[0-9a-fA-F]{6}", value):
        return f"{_excerpt(value)} is not a PCI class (0xCCSSPP)"
    if name in ("vendor", "device") and not re.fullmatch(r"0x[0-9a-fA-F]{4}", value):
        return f"{_excerpt(value)} is not a PCI id (0xNNNN)"
    if name == "numa_node" and not _in_range(try_int(value), -1, MAX_NODE):
        return f"{_excerpt(value)} is not a NUMA node (-1..{MAX_NODE})"
    if name == "sriov_totalvfs" and not _in_range(try_int(value), 0, 65535):
        return f"{_excerpt(value)} is not a VF count"
    return None


def _kernel_value(path: str, value: str) -> str | None:
    if path.endswith("/numa_balancing") and not _in_range(try_int(value), 0, 3):
        return f"{_excerpt(value)} is not a numa_balancing mode (0..3)"
    if path.endswith("/tainted") and not _in_range(try_int(value), 0, 2**64 - 1):
        return f"{_excerpt(value)} is not a taint mask"
    if path.endswith(("/enabled", "/transition")) and value not in ("0", "1"):
        return f"{_excerpt(value)} is not 0 or 1"
    return None


def _iommu_groups(text: str) -> str | None:
    bad = [w for w in text.split() if not (re.fullmatch(r"0|[1-9][0-9]{0,6}", w) and int(w) <= MAX_GROUP)]
    return f"{_excerpt(bad[0])} is not an IOMMU group number (0..{MAX_GROUP})" if bad else None


PCI_ADDR = r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]"

CHECKS: dict[str, Callable[[str], str | None]] = {
    C.LSPCI: _lines_match(rf"^{PCI_ADDR} ", "device line (DDDD:BB:DD.F ...)"),
    C.LSPCI_TREE: _lines_match(r"\[[0-9a-f]{4}:[0-9a-f]{2}\]", "bus in brackets ([DDDD:BB])"),
    C.NUMACTL: _lines_match(r"^available: \d+ nodes?", "'available: N nodes' line"),
    C.LSCPU: _lines_match(r"^(CPU\(s\)|Architecture):\s+\S", "'CPU(s):' or 'Architecture:' line"),
    C.CPUINFO: _lines_match(r"^processor\s*:\s*\d+", "'processor : N' line"),
    C.UNAME: _lines_match(r"\A\s*\d+\.\d+[0-9A-Za-z._+~-]*\s*\Z", "kernel release (N.N...)"),
    C.SYS_NODE: _head_of("/sys/devices/system/node/", _node_value),
    C.SYS_CPU: _head_of("/sys/devices/system/cpu/", _cpu_value),
    C.SYS_PCI: _head_of("/sys/bus/pci/devices/", _pci_value),
    C.PCI_LINKS: _lines_match(rf" {PCI_ADDR} -> \S*devices/pci", "'ADDR -> ../../../devices/pci...' link"),
    C.IOMMU_GROUPS: _iommu_groups,
    C.PROC_KERNEL: _head_of("/", _kernel_value),
}


def unreadable(cap: C.Captures) -> dict[str, str]:
    """{capture name: why it is not what its command prints} for every capture present in ``cap``."""
    out: dict[str, str] = {}
    for name, text in sorted(cap.files.items()):
        check = CHECKS.get(name)
        if check is None:
            continue  # a capture numaforge does not parse (an older corpus's extra file)
        if not text.strip():
            why = None if name == C.IOMMU_GROUPS else "empty output"  # no groups: no IOMMU active
        else:
            why = check(text)
        if why is not None:
            out[name] = why
    return out
