"""NUMA effect of a live patch, counted (not timed) from tracepoints, so it means something under emulation.

One *run* = the shipped workload (numaforge/lab/workload/numa_workload.c) on the host while a private tracefs
instance records sched:sched_move_numa, sched_swap_numa and sched_stick_numa (trace_clock mono), plus the
/proc/vmstat numa_* counters before and after. For the workload's processes, during their *unpinned* phases:

- third-node moves: sched_move_numa whose dst node is neither the source node nor the task's preferred node
  (numa_preferred_nid the workload read at the start of that phase; its home node when unknown);
- stick dst=-1: sched_stick_numa with dst_cpu=-1 (the task stayed local: the patched path);
- swaps and all moves, for context.

A/B: ``run_ab`` interleaves runs with the patch off and on in one boot (off/on pairs), because vmstat
counters alone do not separate A from B (docs/lab.md has measured numbers).

Pure functions (``parse_trace``, ``parse_phases``, ``parse_vmstat``, ``count_run``, ``summarize``) are tested on
captured text; ``run_once``/``run_ab`` drive a host over an open numaforge.remote.ssh.Remote.
"""

from __future__ import annotations

import re
import secrets
import shlex
from dataclasses import asdict, dataclass, field
from typing import Callable

from .errors import NumaforgeError

EVENTS = ("sched_move_numa", "sched_swap_numa", "sched_stick_numa")
_TRACE_LINE = re.compile(r"^\s*(?P<task>.+?)-(?P<tpid>\d+)\s+(?:\(\s*[\d-]+\)\s+)?\[(?P<cpu>\d+)\]\s+(?:\S+\s+)?"
                         r"(?P<ts>\d+\.\d+):\s+(?P<event>\w+):\s+(?P<rest>.*)$")
_KV = re.compile(r"(\w+)=(-?\d+)")
_PHASE = re.compile(r"^phase pid=(\d+) kind=(\w+) t=(\d+) preferred=(-?\d+)\s*$")


class EffectError(NumaforgeError):
    """The NUMA effect measurement could not run on a host."""


@dataclass
class TraceEvent:
    event: str
    ts_ns: int
    fields: dict[str, int]


@dataclass
class Phase:
    kind: str           # warm | unpinned | pinned
    start_ns: int
    end_ns: int
    preferred: int      # numa_preferred_nid at the phase start (-1 unknown)


@dataclass
class WorkloadParams:
    procs: int = 3
    mb: int = 32
    warm: int = 6
    unpinned: int = 8
    pinned: int = 4
    duration: int = 60
    node: int = 0

    def argv(self) -> list[str]:
        return ["-p", str(self.procs), "-m", str(self.mb), "-w", str(self.warm), "-u", str(self.unpinned),
                "-r", str(self.pinned), "-d", str(self.duration), "-n", str(self.node)]


@dataclass
class RunCounts:
    label: str                      # off | on
    third_node_moves: int = 0
    stick_local: int = 0            # sched_stick_numa dst_cpu=-1
    moves: int = 0                  # every sched_move_numa of the workload in unpinned phases
    swaps: int = 0
    events_total: int = 0           # every traced event (any task, any phase)
    pids: list[int] = field(default_factory=list)
    vmstat_delta: dict[str, int] = field(default_factory=dict)
    unpinned_phases: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------------------------------------- pure

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
    """Workload stdout -> {pid: [Phase...]}, each phase ending where the next one of that pid starts."""
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


def parse_vmstat(text: str) -> dict[str, int]:
    """/proc/vmstat text -> the numa_* and pgmigrate_* counters."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and (parts[0].startswith("numa_") or parts[0].startswith("pgmigrate_")) \
                and parts[1].lstrip("-").isdigit():
            out[parts[0]] = int(parts[1])
    return out


def vmstat_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in after if k in before}


def _phase_at(phases: list[Phase], ts: int) -> Phase | None:
    for ph in phases:
        if ph.start_ns <= ts < ph.end_ns:
            return ph
    return None


def count_run(label: str, events: list[TraceEvent], phases: dict[int, list[Phase]], home_node: int = 0,
              vmstat: dict[str, int] | None = None) -> RunCounts:
    """Count the workload's NUMA decisions in its unpinned phases (see the module docstring)."""
    rc = RunCounts(label, events_total=len(events), pids=sorted(phases), vmstat_delta=dict(vmstat or {}))
    rc.unpinned_phases = sum(1 for lst in phases.values() for ph in lst if ph.kind == "unpinned")
    for ev in events:
        pid = ev.fields.get("pid") if ev.event == "sched_move_numa" else ev.fields.get("src_pid")
        if pid not in phases:
            continue
        ph = _phase_at(phases[pid], ev.ts_ns)
        if ph is None or ph.kind != "unpinned":
            continue
        if ev.event == "sched_move_numa":
            rc.moves += 1
            src, dst = ev.fields.get("src_nid"), ev.fields.get("dst_nid")
            preferred = ph.preferred if ph.preferred >= 0 else home_node
            if dst is not None and dst != src and dst != preferred:
                rc.third_node_moves += 1
        elif ev.event == "sched_stick_numa":
            if ev.fields.get("dst_cpu") == -1:
                rc.stick_local += 1
        elif ev.event == "sched_swap_numa":
            rc.swaps += 1
    return rc


def summarize(runs: list[RunCounts]) -> dict:
    """A/B evidence: per-label lists of counts (in run order) and totals."""
    out: dict = {"runs": [r.as_dict() for r in runs]}
    for key in ("third_node_moves", "stick_local", "moves", "swaps"):
        out[key] = {lab: [getattr(r, key) for r in runs if r.label == lab] for lab in ("off", "on")}
    for key in ("numa_hint_faults", "numa_pages_migrated"):
        out[key] = {lab: [r.vmstat_delta.get(key) for r in runs if r.label == lab] for lab in ("off", "on")}
    off, on = out["third_node_moves"]["off"], out["third_node_moves"]["on"]
    out["third_node_moves_total"] = {"off": sum(off), "on": sum(on)}
    out["stick_local_total"] = {"off": sum(out["stick_local"]["off"]), "on": sum(out["stick_local"]["on"])}
    return out


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


def run_script(workload: str, params: WorkloadParams, instance: str) -> str:
    """Shell script (POSIX sh / busybox) for one traced run; prints sections for split_sections."""
    args = " ".join(shlex.quote(a) for a in params.argv())
    events = " ".join(EVENTS)
    return f"""T=/sys/kernel/tracing
[ -d $T/instances ] || T=/sys/kernel/debug/tracing
[ -d $T/instances ] || {{ echo "no tracefs instances under /sys/kernel/tracing or /sys/kernel/debug/tracing" >&2; exit 90; }}
I=$T/instances/{instance}
mkdir $I || exit 91
cleanup() {{ echo 0 > $I/tracing_on 2>/dev/null; rmdir $I 2>/dev/null; }}
trap cleanup EXIT INT TERM
echo mono > $I/trace_clock || exit 92
echo 2048 > $I/buffer_size_kb
for e in {events}; do echo 1 > $I/events/sched/$e/enable || exit 93; done
echo "=== vmstat_before"; cat /proc/vmstat
echo 1 > $I/tracing_on
echo "=== workload"
{shlex.quote(workload)} {args} 2>&1
wrc=$?
echo 0 > $I/tracing_on
echo "=== vmstat_after"; cat /proc/vmstat
echo "=== trace"; cat $I/trace
echo "=== rc"; echo $wrc
"""


# ---------------------------------------------------------------------------------------------- remote

def host_numa(remote) -> dict:
    """{'nodes': N, 'numa_balancing': '1'|'0'|None} from the host."""
    r = remote.run("ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | wc -l; "
                   "cat /proc/sys/kernel/numa_balancing 2>/dev/null || echo none", timeout=30, check=False)
    lines = r.stdout.split()
    nodes = int(lines[0]) if lines and lines[0].isdigit() else 0
    bal = lines[1] if len(lines) > 1 and lines[1] != "none" else None
    return {"nodes": nodes, "numa_balancing": bal}


def run_once(remote, workload: str, params: WorkloadParams, label: str, sudo: bool = True) -> RunCounts:
    instance = f"numaforge-{secrets.token_hex(4)}"
    r = remote.run(run_script(workload, params, instance), timeout=params.duration + 180, sudo=sudo, check=False)
    if r.rc != 0:
        raise EffectError(f"the traced workload run failed (rc={r.rc}): "
                          f"{(r.stderr.strip() or r.stdout.strip()[-400:]) or 'no output'}", remote.where,
                          "the host needs tracefs (CONFIG_FTRACE, mounted at /sys/kernel/tracing) and the sched "
                          "NUMA tracepoints; run as root or with passwordless sudo")
    s = split_sections(r.stdout)
    wrc = s.get("rc", "").strip()
    if wrc != "0":
        raise EffectError(f"the workload exited {wrc or '?'}: {s.get('workload', '').strip()[-400:]}",
                          remote.where, "see the workload output; it needs /sys/devices/system/node and 32 MB per "
                          "process")
    delta = vmstat_delta(parse_vmstat(s.get("vmstat_before", "")), parse_vmstat(s.get("vmstat_after", "")))
    return count_run(label, parse_trace(s.get("trace", "")), parse_phases(s.get("workload", "")),
                     params.node, delta)


def run_ab(remote, workload: str, params: WorkloadParams, rounds: int, set_patch: Callable[[bool], None],
           sudo: bool = True, log: Callable[[str], None] | None = None) -> dict:
    """Interleave `rounds` off/on pairs in this boot; set_patch(False/True) disables/enables the live patch."""
    runs: list[RunCounts] = []
    for i in range(rounds):
        for label, on in (("off", False), ("on", True)):
            set_patch(on)
            rc = run_once(remote, workload, params, label, sudo=sudo)
            if log:
                log(f"round {i + 1}/{rounds} {label}: third-node moves {rc.third_node_moves}, "
                    f"stick dst=-1 {rc.stick_local}, moves {rc.moves}")
            runs.append(rc)
    out = summarize(runs)
    out["workload"] = asdict(params)
    out["rounds"] = rounds
    return out
