"""NUMA facts: nodes, their CPUs, memory and distances, and the numa_balancing setting (pure parsers).

Sources, best first: the node sysfs files (``/sys/devices/system/node/node*/{cpulist,distance,meminfo}``, read
with ``head -v``), then ``numactl --hardware``. Either one alone is enough.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .captures import NUMACTL, PROC_KERNEL, SYS_NODE, Captures, parse_head, try_cpulist, try_int


@dataclass
class Node:
    id: int
    cpus: list[int] = field(default_factory=list)
    mem_kb: int | None = None
    distances: list[int] = field(default_factory=list)  # to node 0, 1, ... in node order

    def as_dict(self) -> dict:
        from .captures import cpulist

        return {
            "id": self.id,
            "cpus": cpulist(self.cpus),
            "cpu_count": len(self.cpus),
            "mem_mb": None if self.mem_kb is None else self.mem_kb // 1024,
            "distances": self.distances,
        }


@dataclass
class NumaFacts:
    nodes: list[Node] = field(default_factory=list)
    source: str = ""  # "sysfs" | "numactl --hardware"
    balancing: int | None = None  # /proc/sys/kernel/numa_balancing (0 off, 1 on, 2 tiering)
    missing: str | None = None  # why there are no NUMA facts

    @property
    def cpu_nodes(self) -> list[Node]:
        """Nodes that have CPUs (memory-only nodes do not count toward NPS)."""
        return [n for n in self.nodes if n.cpus]

    def node_of_cpu(self, cpu: int) -> int | None:
        for n in self.nodes:
            if cpu in n.cpus:
                return n.id
        return None

    def as_dict(self) -> dict:
        if self.missing:
            return {"missing": self.missing}
        return {
            "source": self.source,
            "node_count": len(self.nodes),
            "cpu_node_count": len(self.cpu_nodes),
            "numa_balancing": self.balancing,
            "nodes": [n.as_dict() for n in self.nodes],
        }


_NODE_FILE = re.compile(r"^/sys/devices/system/node/node(\d+)/(cpulist|distance|meminfo)$")
_MEMTOTAL = re.compile(r"^Node\s+\d+\s+MemTotal:\s+(\d+)\s*kB", re.M)


def parse_node_sysfs(head_text: str | None) -> list[Node]:
    """Nodes from `head -v /sys/devices/system/node/node*/{cpulist,distance,meminfo}` output."""
    nodes: dict[int, Node] = {}
    for path, content in parse_head(head_text).items():
        m = _NODE_FILE.match(path)
        if not m:
            continue
        node = nodes.setdefault(int(m.group(1)), Node(int(m.group(1))))
        kind = m.group(2)
        if kind == "cpulist":
            node.cpus = try_cpulist(content) or []
        elif kind == "distance":
            dist = [try_int(x) for x in content.split()]
            node.distances = [x for x in dist if x is not None] if None not in dist else []
        else:
            mm = _MEMTOTAL.search(content)
            node.mem_kb = int(mm.group(1)) if mm else None
    return [nodes[k] for k in sorted(nodes)]


_AVAILABLE = re.compile(r"^available:\s+(\d+) nodes?")
_CPUS = re.compile(r"^node (\d+) cpus:(.*)$")
_SIZE = re.compile(r"^node (\d+) size:\s+(\d+) MB")
_DIST_ROW = re.compile(r"^\s*(\d+):\s+([\d\s]+)$")


def parse_numactl_hardware(text: str | None) -> list[Node]:
    """Nodes from `numactl --hardware` output ("available: N nodes", "node K cpus:", sizes, distance table)."""
    nodes: dict[int, Node] = {}
    in_dist = False
    for line in (text or "").splitlines():
        if m := _CPUS.match(line):
            nodes.setdefault(int(m.group(1)), Node(int(m.group(1)))).cpus = [int(x) for x in m.group(2).split()]
        elif m := _SIZE.match(line):
            nodes.setdefault(int(m.group(1)), Node(int(m.group(1)))).mem_kb = int(m.group(2)) * 1024
        elif line.startswith("node distances:"):
            in_dist = True
        elif in_dist and (m := _DIST_ROW.match(line)):
            nid = int(m.group(1))
            if nid in nodes:
                nodes[nid].distances = [int(x) for x in m.group(2).split()]
    return [nodes[k] for k in sorted(nodes)]


def numa_facts(cap: Captures) -> NumaFacts:
    balancing = None
    proc = parse_head(cap.get(PROC_KERNEL))
    if (v := proc.get("/proc/sys/kernel/numa_balancing")) is not None and v.strip().isdigit():
        balancing = int(v.strip())
    nodes = parse_node_sysfs(cap.get(SYS_NODE))
    if nodes:
        return NumaFacts(nodes, "sysfs", balancing)
    nodes = parse_numactl_hardware(cap.get(NUMACTL))
    if nodes:
        return NumaFacts(nodes, "numactl --hardware", balancing)
    why = [
        f"node sysfs: {cap.why(SYS_NODE)}" if cap.get(SYS_NODE) is None else "node sysfs: no node directories",
        f"numactl: {cap.why(NUMACTL)}" if cap.get(NUMACTL) is None else "numactl: no nodes in its output",
    ]
    return NumaFacts([], "", balancing, "; ".join(why))
