"""Outcome metrics of one traced workload run, from the run's own output (pure functions, tested on captures).

One run = the workload (numaforge/workload/numa_workload.c) while a private tracefs instance records
sched:sched_migrate_task, sched_move_numa, sched_swap_numa and sched_stick_numa (trace_clock mono), plus
/proc/vmstat before and after and the host's node -> CPUs map and SLIT. For the workload's tasks, in their
*unpinned* phases (where the scheduler, not the workload, decides where they run):

- cross-NUMA migration rate: sched_migrate_task events whose source and destination CPUs are on different
  nodes / all of their sched_migrate_task events (load balancer, wake-ups and NUMA balancing alike);
- unit latency: mean and p99 of the workload's unit of work (one pass over its buffer), and throughput
  (units per second of unpinned time), printed by the workload;
- local-access ratio: numa_hint_faults_local / numa_hint_faults and pages migrated (numa_pages_migrated), from
  /proc/vmstat (host-wide counters: the workload is the only busy process on a lab host);
- third-node moves: sched_move_numa whose destination is neither the source node nor the task's preferred
  node *at event time* (the workload's `pref` timeline), split by distance to that preferred node: closer
  (dist(dst, pref) < dist(src, pref)), same, farther; a move to a memory-only preferred node cannot happen;
- stick dst=-1 (sched_stick_numa with dst_cpu=-1: task_numa_migrate() found nothing), moves and swaps.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import asdict, dataclass, field, fields

EVENTS = ("sched_migrate_task", "sched_move_numa", "sched_swap_numa", "sched_stick_numa")
_TRACE_LINE = re.compile(
    r"^\s*(?P<task>.+?)-(?P<tpid>\d+)\s+(?:\(\s*[\d-]+\)\s+)?\[(?P<cpu>\d+)\]\s+(?:\S+\s+)?"
    r"(?P<ts>\d+\.\d+):\s+(?P<event>\w+):\s+(?P<rest>.*)$"
)
_KV = re.compile(r"(\w+)=(-?\d+)(?=\s|$)")
_PHASE = re.compile(r"^phase pid=(\d+) kind=(\w+) t=(\d+) preferred=(-?\d+)\s*$")
_PREF = re.compile(r"^pref pid=(\d+) t=(\d+) nid=(-?\d+)\s*$")
_UNITS = re.compile(r"^units n=(\d+) mean_ns=(\d+) p99_ns=(\d+) unpinned_ns=(\d+)\s*$")

# the metrics a run yields, in report order: (key, label, unit, lower is better?)
OUTCOMES = [
    ("cross_numa_rate", "cross-NUMA migration rate", "%", True),
    ("mean_latency_us", "mean unit latency", "us", True),
    ("p99_latency_us", "p99 unit latency", "us", True),
    ("throughput", "throughput", "units/s", False),
    ("local_ratio", "local NUMA hint faults", "%", False),
    ("pages_migrated", "pages migrated", "pages", None),
    ("third_node_moves", "third-node moves", "", None),
    ("third_closer", "third-node moves closer to preferred", "", None),
    ("third_not_closer", "third-node moves not closer", "", None),
    ("stick_local", "stick dst=-1", "", None),
]

# the primary endpoint of a report (judged at 5 %); every other outcome is secondary (Holm-adjusted)
PRIMARY = "third_not_closer"

# equivalence (TOST) margins of the "no regression" claims: ("abs", points/units) or ("rel", share of the base
# arm's mean). Stated in docs/numa-effect-protocol.md; an outcome without a margin never gets "equivalent".
MARGINS: dict[str, tuple[str, float]] = {
    "cross_numa_rate": ("abs", 5.0),
    "mean_latency_us": ("rel", 0.05),
    "p99_latency_us": ("rel", 0.10),
    "throughput": ("rel", 0.05),
    "local_ratio": ("abs", 5.0),
    "pages_migrated": ("rel", 0.25),
}


def margin(key: str, base_values, margins: dict[str, tuple[str, float]] | None = None) -> float | None:
    """The absolute TOST margin of `key` in `margins` (default MARGINS; relative margins scale the base arm's
    mean); None without one."""
    kind, val = (MARGINS if margins is None else margins).get(key, ("", 0.0))
    if kind == "abs":
        return val
    vals = [float(v) for v in base_values if v is not None]
    if kind == "rel" and vals and sum(vals) != 0:
        return abs(val * sum(vals) / len(vals))
    return None


@dataclass
class TraceEvent:
    event: str
    ts_ns: int
    fields: dict[str, int]


@dataclass
class Phase:
    kind: str  # warm | unpinned | pinned
    start_ns: int
    end_ns: int
    preferred: int  # numa_preferred_nid at the phase start (-1 unknown)


@dataclass
class Topo:
    """The host's NUMA shape as the run script reads it."""

    cpu_node: dict[int, int] = field(default_factory=dict)
    distance: dict[int, list[int]] = field(default_factory=dict)  # node -> its distance row

    def dist(self, a: int, b: int) -> int | None:
        row = self.distance.get(a)
        return row[b] if row is not None and 0 <= b < len(row) else None


@dataclass
class RunMetrics:
    label: str  # the arm: off | on | winner | alt-... | null
    round: int = 0
    tasks: list[int] = field(default_factory=list)
    unpinned_phases: int = 0
    migrations: int = 0  # sched_migrate_task of the workload's tasks, unpinned phases
    cross_node_migrations: int = 0
    cross_numa_rate: float | None = None  # %
    units: int = 0
    mean_latency_us: float | None = None
    p99_latency_us: float | None = None
    throughput: float | None = None  # units per second of unpinned time (all tasks)
    hint_faults: int | None = None
    hint_faults_local: int | None = None
    local_ratio: float | None = None  # %
    pages_migrated: int | None = None
    moves: int = 0
    third_node_moves: int = 0
    third_closer: int = 0
    third_same: int = 0
    third_farther: int = 0
    third_not_closer: int = 0
    stick_local: int = 0
    swaps: int = 0
    events_total: int = 0
    vmstat_delta: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "RunMetrics":
        """A run as stored in a measurement JSON (as_dict()); keys this version does not know are ignored."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


# ---------------------------------------------------------------------------------------------- parsers


def parse_trace(text: str) -> list[TraceEvent]:
    """tracefs `trace` text -> events (comment lines and unknown shapes skipped)."""
    out = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = _TRACE_LINE.match(line)
        if not m:
            continue
        sec, _, frac = m.group("ts").partition(".")
        ts_ns = int(sec) * 1_000_000_000 + int((frac + "000000000")[:9])
        out.append(TraceEvent(m.group("event"), ts_ns, {k: int(v) for k, v in _KV.findall(m.group("rest"))}))
    return out


def parse_phases(text: str) -> dict[int, list[Phase]]:
    """Workload stdout -> {tid: [Phase...]}, each phase ending where the next one of that task starts."""
    marks: dict[int, list[tuple[str, int, int]]] = {}
    for line in text.splitlines():
        m = _PHASE.match(line)
        if m:
            marks.setdefault(int(m.group(1)), []).append((m.group(2), int(m.group(3)), int(m.group(4))))
    phases: dict[int, list[Phase]] = {}
    for pid, ms in marks.items():
        ms.sort(key=lambda x: x[1])
        lst = []
        for i, (kind, t, pref) in enumerate(ms):
            if kind == "done":
                continue
            end = ms[i + 1][1] if i + 1 < len(ms) else t
            lst.append(Phase(kind, t, end, pref))
        phases[pid] = lst
    return phases


def parse_preferred(text: str) -> dict[int, list[tuple[int, int]]]:
    """Workload stdout -> {tid: [(t_ns, preferred nid), ...]} from phase and pref lines, time-sorted."""
    out: dict[int, list[tuple[int, int]]] = {}
    for line in text.splitlines():
        m = _PHASE.match(line)
        if m:
            out.setdefault(int(m.group(1)), []).append((int(m.group(3)), int(m.group(4))))
            continue
        m = _PREF.match(line)
        if m:
            out.setdefault(int(m.group(1)), []).append((int(m.group(2)), int(m.group(3))))
    return {k: sorted(v) for k, v in out.items()}


def preferred_at(timeline: list[tuple[int, int]], ts: int) -> int:
    """The preferred node last sampled at or before ts (-1 when none was)."""
    i = bisect_right(timeline, (ts, 1 << 30))
    return timeline[i - 1][1] if i else -1


def parse_units(text: str) -> dict | None:
    for line in text.splitlines():
        m = _UNITS.match(line)
        if m:
            n, mean, p99, unp = (int(x) for x in m.groups())
            return {"n": n, "mean_ns": mean, "p99_ns": p99, "unpinned_ns": unp}
    return None


def parse_vmstat(text: str) -> dict[str, int]:
    """/proc/vmstat text -> the numa_* and pgmigrate_* counters."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if (
            len(parts) == 2
            and (parts[0].startswith("numa_") or parts[0].startswith("pgmigrate_"))
            and parts[1].lstrip("-").isdigit()
        ):
            out[parts[0]] = int(parts[1])
    return out


def vmstat_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in after if k in before}


def parse_cpulist(text: str) -> list[int]:
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        a, _, b = part.partition("-")
        cpus.extend(range(int(a), int(b or a) + 1))
    return cpus


def parse_topo(text: str) -> Topo:
    """Lines `node <n> cpus <cpulist> dist <d0> <d1> ...` (the run script's `topo` section) -> Topo."""
    t = Topo()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 4 or parts[0] != "node" or "dist" not in parts:
            continue
        n = int(parts[1])
        di = parts.index("dist")
        cpus = parts[3] if di > 3 else ""
        for c in parse_cpulist(cpus):
            t.cpu_node[c] = n
        t.distance[n] = [int(x) for x in parts[di + 1 :]]
    return t


def split_sections(text: str) -> dict[str, str]:
    """Output of the run script: '=== name' lines start sections."""
    sections: dict[str, list[str]] = {}
    cur = None
    for line in text.splitlines():
        if line.startswith("=== "):
            cur = line[4:].strip()
            sections[cur] = []
        elif cur is not None:
            sections[cur].append(line)
    return {k: "\n".join(v) + ("\n" if v else "") for k, v in sections.items()}


# ---------------------------------------------------------------------------------------------- one run


def _phase_at(phases: list[Phase], ts: int) -> Phase | None:
    for ph in phases:
        if ph.start_ns <= ts < ph.end_ns:
            return ph
    return None


def _pct(num: int | None, den: int | None) -> float | None:
    return round(100.0 * num / den, 3) if num is not None and den else None


def run_metrics(
    label: str,
    events: list[TraceEvent],
    workload_out: str,
    topo: Topo,
    vmstat: dict[str, int] | None = None,
    home_node: int = 0,
    round_no: int = 0,
) -> RunMetrics:
    """Every outcome of one run (see the module docstring)."""
    phases = parse_phases(workload_out)
    prefs = parse_preferred(workload_out)
    vm = dict(vmstat or {})
    rm = RunMetrics(label, round_no, tasks=sorted(phases), events_total=len(events), vmstat_delta=vm)
    rm.unpinned_phases = sum(1 for lst in phases.values() for ph in lst if ph.kind == "unpinned")
    for ev in events:
        f = ev.fields
        pid = f.get("src_pid") if ev.event in ("sched_stick_numa", "sched_swap_numa") else f.get("pid")
        if pid not in phases:
            continue
        ph = _phase_at(phases[pid], ev.ts_ns)
        if ph is None or ph.kind != "unpinned":
            continue
        if ev.event == "sched_migrate_task":
            src, dst = topo.cpu_node.get(f.get("orig_cpu", -1)), topo.cpu_node.get(f.get("dest_cpu", -1))
            if src is None or dst is None:
                continue
            rm.migrations += 1
            rm.cross_node_migrations += src != dst
        elif ev.event == "sched_move_numa":
            rm.moves += 1
            src, dst = f.get("src_nid"), f.get("dst_nid")
            pref = preferred_at(prefs.get(pid, []), ev.ts_ns)
            if pref < 0:
                pref = ph.preferred if ph.preferred >= 0 else home_node
            if dst is None or dst == src or dst == pref:
                continue
            rm.third_node_moves += 1
            ds, dd = (None if src is None else topo.dist(src, pref)), topo.dist(dst, pref)
            if ds is not None and dd is not None:
                if dd < ds:
                    rm.third_closer += 1
                elif dd == ds:
                    rm.third_same += 1
                else:
                    rm.third_farther += 1
        elif ev.event == "sched_stick_numa":
            if f.get("dst_cpu") == -1:
                rm.stick_local += 1
        elif ev.event == "sched_swap_numa":
            rm.swaps += 1
    rm.third_not_closer = rm.third_node_moves - rm.third_closer  # same, farther or distance unknown
    rm.cross_numa_rate = _pct(rm.cross_node_migrations, rm.migrations)
    units = parse_units(workload_out)
    if units and units["n"]:
        rm.units = units["n"]
        rm.mean_latency_us = round(units["mean_ns"] / 1000, 3)
        rm.p99_latency_us = round(units["p99_ns"] / 1000, 3)
        if units["unpinned_ns"]:
            # units per second of one task's unpinned time, summed over tasks = all tasks' work rate
            rm.throughput = round(units["n"] / (units["unpinned_ns"] / 1e9) * max(1, len(phases)), 3)
    rm.hint_faults = vm.get("numa_hint_faults")
    rm.hint_faults_local = vm.get("numa_hint_faults_local")
    rm.local_ratio = _pct(rm.hint_faults_local, rm.hint_faults)
    rm.pages_migrated = vm.get("numa_pages_migrated")
    return rm
