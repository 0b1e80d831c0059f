"""Pure parsers for the kernel files numa-audit reads (formats as Linux 5.10 writes them; docs/numa-audit.md).

Every parser takes text and returns data; a line it does not understand is skipped, a file whose shape is wrong
raises ValueError naming what was expected (the caller adds host and file).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..facts.captures import parse_cpulist


# --------------------------------------------------------------------------------------------- sched debug
@dataclass
class CfsRq:
    cpu: int
    nr_running: int = 0
    load_avg: int = 0
    spread_ms: float | None = None  # max_vruntime - min_vruntime of this runqueue (ns in the file -> ms)
    nr_spread_over: int | None = None  # None: the kernel has no such field (EEVDF, 6.6+)


@dataclass
class SchedDebug:
    version: str = ""  # "v0.11, 5.10.0-28-amd64 #1 SMP ..."
    cpus: dict[int, CfsRq] = field(default_factory=dict)  # root cfs_rq ("cfs_rq[N]:/") of each CPU
    cpu_nr_running: dict[int, int] = field(default_factory=dict)  # the rq's .nr_running (all classes)


_CPU = re.compile(r"^cpu#(\d+)")
_CFS = re.compile(r"^cfs_rq\[(\d+)\]:(.*)$")
_FIELD = re.compile(r"^\s+\.([\w>-]+)\s*:\s*(-?[\d.]+)")


def parse_sched_debug(text: str) -> SchedDebug:
    """/proc/sched_debug (5.10, CONFIG_SCHED_DEBUG) or debugfs sched/debug (5.13+): the rq's nr_running and the
    root cfs_rq of each CPU (task-group cfs_rqs "cfs_rq[N]:/user.slice" are skipped: their spread is their own)."""
    out = SchedDebug()
    lines = text.splitlines()
    if not lines or not lines[0].startswith("Sched Debug Version"):
        raise ValueError("not scheduler debug output (no 'Sched Debug Version' first line)")
    out.version = lines[0].partition(":")[2].strip()
    section: tuple[str, int] | None = None
    for line in lines[1:]:
        if m := _CPU.match(line):
            section = ("cpu", int(m.group(1)))
            continue
        if m := _CFS.match(line):
            cpu = int(m.group(1))
            section = ("cfs", cpu) if m.group(2) == "/" else None
            if section:
                out.cpus[cpu] = CfsRq(cpu)
            continue
        if line and not line[0].isspace():
            section = None
            continue
        m = _FIELD.match(line)
        if not m or section is None:
            continue
        name, value = m.group(1), m.group(2)
        kind, cpu = section
        if kind == "cpu" and name == "nr_running":
            out.cpu_nr_running[cpu] = int(float(value))
        elif kind == "cfs":
            rq = out.cpus[cpu]
            if name == "nr_running":
                rq.nr_running = int(float(value))
            elif name == "load_avg":
                rq.load_avg = int(float(value))
            elif name == "spread":
                # 5.10 prints nanoseconds as "%Ld.%06ld" of ms (SPLIT_NS): the value is already milliseconds
                rq.spread_ms = float(value)
            elif name == "nr_spread_over":
                rq.nr_spread_over = int(float(value))
    return out


# --------------------------------------------------------------------------------------------- schedstat
@dataclass
class Schedstat:
    version: int
    lb_failed: int = 0  # summed over CPUs, domains and idle types
    lb_imbalance: int = 0
    lb_count: int = 0


def parse_schedstat(text: str) -> Schedstat:
    """/proc/schedstat version 15: "domainN MASK" then 3 idle types x 8 lb fields (lb_count, lb_balanced,
    lb_failed, lb_imbalance, lb_gained, lb_hot_gained, lb_nobusyq, lb_nobusyg), then more."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith("version "):
        raise ValueError("no 'version N' first line")
    st = Schedstat(int(lines[0].split()[1]))
    for line in lines:
        parts = line.split()
        if not parts or not parts[0].startswith("domain") or len(parts) < 2 + 24:
            continue
        nums = [int(p) for p in parts[2 : 2 + 24]]
        for t in range(3):
            st.lb_count += nums[t * 8]
            st.lb_failed += nums[t * 8 + 2]
            st.lb_imbalance += nums[t * 8 + 3]
    return st


# --------------------------------------------------------------------------------------------- softnet
@dataclass
class Softnet:
    processed: int
    dropped: int
    time_squeeze: int


def parse_softnet(text: str) -> dict[int, Softnet]:
    """/proc/net/softnet_stat: one line per CPU of hex columns (processed, dropped, time_squeeze, ...); 5.10
    prints the CPU index in column 13 -- lines are numbered by position when it is missing."""
    out: dict[int, Softnet] = {}
    for i, line in enumerate(x for x in text.splitlines() if x.strip()):
        cols = [int(c, 16) for c in line.split()]
        if len(cols) < 3:
            raise ValueError(f"softnet_stat line {i + 1}: {len(cols)} columns, expected at least 3")
        cpu = cols[12] if len(cols) >= 13 else i
        out[cpu] = Softnet(cols[0], cols[1], cols[2])
    return out


# --------------------------------------------------------------------------------------------- ethtool -S
def parse_ethtool_stats(text: str) -> dict[str, int]:
    """`ethtool -S IFACE`: "NIC statistics:" then "     name: value" lines."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        name, sep, value = line.strip().rpartition(":")
        if sep and value.strip().lstrip("-").isdigit():
            out[name.strip()] = int(value)
    return out


# the counters that mean "the NIC had nowhere to put a packet" (ixgbe/igb/i40e/mlx5/bnxt/virtio names)
NO_BUFFER_COUNTERS = (
    "rx_missed_errors",
    "rx_no_buffer_count",
    "rx_no_dma_resources",
    "rx_discards_phy",
    "rx_out_of_buffer",
    "rx_buf_errors",
    "rx_dropped",
)


# --------------------------------------------------------------------------------------------- processes
@dataclass
class ProcStatus:
    pid: int
    name: str
    cpus: list[int]
    mems: list[int]
    cgroup: dict[str, str] = field(default_factory=dict)  # cpuset cgroup: path, cpus, mems, cpus_file, mems_file


def parse_status(pid: int, text: str) -> ProcStatus:
    """/proc/PID/status: Name, Cpus_allowed_list, Mems_allowed_list."""
    kv = {}
    for line in text.splitlines():
        k, _, v = line.partition(":")
        kv[k.strip()] = v.strip()
    if "Cpus_allowed_list" not in kv or "Mems_allowed_list" not in kv:
        raise ValueError("no Cpus_allowed_list / Mems_allowed_list lines")
    return ProcStatus(
        pid, kv.get("Name", "?"), parse_cpulist(kv["Cpus_allowed_list"]), parse_cpulist(kv["Mems_allowed_list"])
    )


@dataclass
class Vma:
    addr: str
    policy: str  # "default", "bind:1", "interleave:0-1", "prefer:0", "local"
    pages: dict[int, int]  # node -> pages
    path: str = ""


def parse_numa_maps(text: str) -> list[Vma]:
    """/proc/PID/numa_maps: "ADDR POLICY [file=PATH] [anon=N] ... N0=pages N1=pages kernelpagesize_kB=4"."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        pages: dict[int, int] = {}
        path = ""
        for p in parts[2:]:
            k, _, v = p.partition("=")
            if len(k) > 1 and k[0] == "N" and k[1:].isdigit() and v.isdigit():
                pages[int(k[1:])] = int(v)
            elif k == "file":
                path = v
        out.append(Vma(parts[0], parts[1], pages, path))
    return out


def kernel_release(version: str) -> tuple[int, int] | None:
    """ "5.10.0-28-amd64" (uname -r or the sched_debug header) -> (5, 10)."""
    m = re.search(r"(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else None


# --------------------------------------------------------------------------------------------- PCI topology
@dataclass
class PciPlacement:
    """Where one PCI function sits: its root port and root complex (numaforge.facts.pci.PciDevice is the whole
    device record that facts reads with lspci)."""

    addr: str
    root_port: str | None  # the first bridge below the host bridge (None: on the root bus itself)
    root_complex: str  # "pci0000:00"
    pci_class: str = ""
    link: str = ""  # "16.0 GT/s PCIe x16"


def parse_pci_links(text: str) -> dict[str, tuple[str, str | None]]:
    """`ls -l /sys/bus/pci/devices` lines "... 0000:41:00.0 -> ../../../devices/pci0000:40/0000:40:01.1/0000:41:00.0"
    -> {addr: (root complex, root port or None)}."""
    out: dict[str, tuple[str, str | None]] = {}
    for line in text.splitlines():
        left, sep, target = line.partition(" -> ")
        if not sep:
            continue
        addr = left.split()[-1]
        parts = [p for p in target.split("/") if p and p != ".."]
        if "devices" in parts:
            parts = parts[parts.index("devices") + 1 :]
        if not parts or not parts[0].startswith("pci"):
            continue
        chain = parts[1:]
        out[addr] = (parts[0], chain[0] if len(chain) > 1 else None)
    return out
