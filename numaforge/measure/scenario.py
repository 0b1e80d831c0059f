"""The pre-registered "preferred node full, source node spare" scenario (docs/numa-effect-protocol.md).

One run on a host over SSH (numaforge.remote): the probe (numaforge/workload/numa_probe.c) first-touches
its buffer on node P, waits while a private tracefs instance is set up with event filters on its pid
(sched_migrate_task, sched_move_numa, sched_stick_numa, sched_swap_numa; trace_clock boot), then starts busy
loops pinned to every CPU of P (and of S with ``source_busy``, the control), moves itself to node S and lets the
scheduler decide. Once a second the script samples the probe's CPU (/proc/PID/stat), its pages per node
(/proc/PID/numa_maps), numa_preferred_nid and numa_group_id (/proc/PID/sched); /proc/vmstat before and after.

``probe_metrics`` turns one run's output into the protocol's endpoints (pure, tested on captures); ``report``
compares arms with numaforge.measure.paired like runner.report does for the generic workload.
"""

from __future__ import annotations

import re
import secrets
import shlex
from bisect import bisect_right
from dataclasses import asdict, dataclass, field

from ..errors import NumaforgeError
from . import metrics, runner

# (key, label, unit, lower is better?): the primary first, then the secondaries, then descriptive counts
OUTCOMES = [
    ("not_closer_per_min", "not-closer third-node moves of the probe per minute", "/min", True),
    ("local_share_30s", "pages on the probe's current node, last 30 s", "%", False),
    ("time_to_90", "time to 90 % local", "s", True),
    ("pages_migrated_per_min", "numa_pages_migrated per minute", "/min", True),
    ("closer_per_min", "closer third-node moves per minute", "/min", None),
    ("found_nothing_per_min", "searches that found nothing (stick dst_cpu=-1) per minute", "/min", None),
    # issue 42 item 3: proposed as a registered secondary (docs/numa-effect-protocol.md, "Proposed: load-balancer
    # returns"); descriptive, with no verdict, until an amendment registers it
    ("lb_returns_per_min", "load-balancer returns of the probe per minute (proposed secondary)", "/min", None),
    ("mem_distance", "mean SLIT distance to its pages at the end (10: all local)", "", None),
]
PRIMARY = "not_closer_per_min"
SECONDARY = ("local_share_30s", "time_to_90", "pages_migrated_per_min")
# TOST margins (docs/numa-effect-protocol.md); the primary's is for the controls (null, source busy, 2-node)
MARGINS: dict[str, tuple[str, float]] = {
    "not_closer_per_min": ("abs", 1.0),
    "local_share_30s": ("abs", 5.0),
    "time_to_90": ("abs", 10.0),
    "pages_migrated_per_min": ("rel", 0.25),
}
# the multi-instance control (amendment 4): the probes' CPU throughput is a fourth secondary there -- under TCG it
# shows CPU contention (probes crowding one node), not memory speed
MULTI_OUTCOMES = [*OUTCOMES, ("passes_per_s", "passes over the probe's buffer per second", "/s", False)]
MULTI_SECONDARY = (*SECONDARY, "passes_per_s")
MULTI_MARGINS = {**MARGINS, "passes_per_s": ("rel", 0.10)}
# protocol amendment 8 (issue 42's configuration matrix): load-balancer returns are a registered fourth secondary
# for its cases only (every earlier study keeps OUTCOMES, where they are descriptive), and every "no harm" claim is
# one-sided non-inferiority within NI_MARGINS (the primary's, where off makes no not-closer move, is MARGINS' +1
# /min); numaforge.measure.decision.judge_case applies its rule
CASE_OUTCOMES = [
    (k, "load-balancer returns of the probe per minute (registered secondary, amendment 8)", u, True)
    if k == "lb_returns_per_min"
    else (k, label, u, lower)
    for k, label, u, lower in OUTCOMES
]
CASE_SECONDARY = ("local_share_30s", "lb_returns_per_min", "time_to_90", "pages_migrated_per_min")
NI_MARGINS: dict[str, tuple[str, float]] = {
    "local_share_30s": ("abs", 5.0),
    "lb_returns_per_min": ("abs", 0.25),
    "time_to_90": ("abs", 10.0),
    "pages_migrated_per_min": ("rel", 0.25),
}
MAX_THREADS = 16  # numa_probe.c's MAX_THREADS
LOCAL_WINDOW_S = 30
MAIN_CASE, CONTROL_CASE = "source spare", "source busy (control)"  # the study file's case names
MULTI_CASE = "multi-instance (control)"
THREADS_CASE = "two threads (control)"
KNOB_CASE = "full kernel, knob on/off (control)"  # amendment 7: the main case's probe, arms of a sched_feat
UNIT_CASES = (MULTI_CASE, THREADS_CASE)  # cases whose runs trace several units (amendments 4 and 5)


def pair_case(pref: int, src: int, busy: bool = False) -> str:
    """The name of the case of configuration (P, S) in a study over several pairs (issue 42 item 1)."""
    return f"P={pref} S={src} " + (CONTROL_CASE if busy else MAIN_CASE)


def case_pair(case: str) -> tuple[int, int] | None:
    """(P, S) of a source-spare case named by ``pair_case``; None for any other case name (its source-busy
    control, or a study of one configuration)."""
    m = re.fullmatch(r"P=(\d+) S=(\d+) " + re.escape(MAIN_CASE), case)
    return (int(m.group(1)), int(m.group(2))) if m else None


def outcomes_of(case: str) -> list[tuple[str, str, str, bool | None]]:
    """The endpoints a case's report carries (the controls of amendments 4 and 5 add passes per second)."""
    return MULTI_OUTCOMES if case in UNIT_CASES else OUTCOMES


EVENTS = metrics.EVENTS
_KV = re.compile(r"(\w+)=(-?\d+)")
_NODE_PAGES = re.compile(r"\bN(\d+)=(\d+)")
_GROUP = re.compile(r"\bnuma_group_id=(-?\d+)")


class ScenarioError(NumaforgeError):
    """The scenario could not run (or its output was not what the probe prints)."""


def node_pair(text: str, option: str) -> tuple[int, int]:
    """P:S (two different node numbers) from an option's value, e.g. a second probe's nodes."""
    p, _, s = str(text).partition(":")
    if not (p.isdigit() and s.isdigit()) or p == s:
        raise ScenarioError(
            f"bad {option} {str(text)[:40]!r}", option, "give P:S, two different node numbers (e.g. 1:3)"
        )
    return int(p), int(s)


@dataclass
class ScenarioParams:
    pref: int = 0  # P: the node that holds the probe's memory (full: a pinned hog on each of its CPUs)
    src: int = 2  # S: where the probe starts (spare)
    mb: int = 64
    seconds: int = 60
    source_busy: bool = False  # the control: hogs on S's CPUs too
    fill_src: bool = True  # take S's free memory down to its low watermarks, so the pages cannot follow to S
    threads: int = 1  # > 1: the two-thread control (amendment 5): threads sharing the buffer, each traced (<= 16)

    def argv(self, go: str) -> list[str]:
        out = ["-P", str(self.pref), "-S", str(self.src), "-m", str(self.mb), "-d", str(self.seconds), "-g", go]
        out += ["-t", str(self.threads)] if self.threads > 1 else []
        return out + (["-B"] if self.source_busy else []) + (["-F"] if self.fill_src else [])


@dataclass
class Sample:
    t_ns: int
    cpu: int | None
    pref: int | None
    pages: dict[int, int] = field(default_factory=dict)  # node -> the probe's anonymous pages there
    group: int | None = None  # numa_group_id (0: in no numa_group); None: the kernel did not print it


@dataclass
class ProbeMetrics:
    label: str
    round: int = 0
    pid: int = 0
    seconds: float = 0.0  # the measured window (start -> done)
    samples: int = 0
    moves: int = 0
    third_moves: int = 0
    closer: int = 0
    not_closer: int = 0
    found_nothing: int = 0
    swaps: int = 0
    migrations: int = 0
    # every sched_migrate_task its tracefs instance recorded, before the window too: the move onto S at the go
    # file is always one, so a run of 0 traced nothing of its task (the machinery check; ``migrations`` is
    # the window's and may be 0 when the scheduler had no reason to move it)
    traced_migrations: int = 0
    not_closer_per_min: float | None = None
    closer_per_min: float | None = None
    found_nothing_per_min: float | None = None
    local_share_30s: float | None = None
    time_to_90: float | None = None
    reached_90: bool = False  # False: time_to_90 is the registered window (params.seconds; censored)
    pages_migrated_per_min: float | None = None
    final_node: int | None = None
    filled_pages: int | None = None  # pages the -F filler took on S (None: no filler)
    move_path: list[list[int]] = field(default_factory=list)  # [src_nid, dst_nid] of each NUMA move, in order
    vmstat_delta: dict[str, int] = field(default_factory=dict)
    passes_per_s: float | None = None  # passes over the buffer per second (CPU share; TCG: not memory speed)
    instances: list[dict] = field(default_factory=list)  # a multi-instance run: each probe's own record
    # % of the window's samples in which the task was in a numa_group (numa_group_id != 0; amendment 6: a design
    # that exempts grouped tasks runs 0001's code for a task that never is); None: no sample read it
    grouped_share: float | None = None
    # issue 42 item 3 (``lb_returns``): the probe taken off the node NUMA balancing last placed it on by a migration
    # that is not NUMA balancing's own, once per placement; of those, the ones back to the placement's source node
    lb_returns: int = 0
    lb_returns_to_source: int = 0
    lb_returns_per_min: float | None = None
    # mean SLIT distance from the node the task ends on to its pages at the last sample (10: all local; issue 42
    # item 5's "at least as close to its memory"); None: node or pages unknown
    mem_distance: float | None = None

    def as_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------------------------------------- the script


def units(probes: list[ScenarioParams]) -> list[tuple[int, int]]:
    """(probe, thread) of every traced task of a run: each probe's threads, in order."""
    return [(k, j) for k, p in enumerate(probes) for j in range(p.threads)]


def run_script(probe: str, probes: list[ScenarioParams], instance: str, go: str) -> str:
    """POSIX sh (busybox) for one traced run of one or more probes at once; prints sections for
    metrics.split_sections.

    Every traced task -- each probe (the multi-instance control: each with its own P, S, hogs and filler), each
    thread of a probe with ``threads`` > 1 (the two-thread control) -- is a unit with its own tracefs instance,
    filters on its own tid, and once-a-second samples of its CPU and preferred node (/proc/PID/task/TID) and of
    its process's pages per node. All probes wait for the same go file. One unit: sections topo, vmstat_before,
    vmstat_after, probe, samples, trace, tid, rc; more: probe.U, samples.U, trace.U, tid.U and rc.U per unit
    (``instance_sections`` picks one unit's)."""
    if not probes:
        raise ValueError("a run needs at least one probe")
    us = units(probes)
    sfx = [section_suffix(u, len(us)) for u in range(len(us))]
    lines = [
        *_script_setup(len(probes), len(us), instance, go),
        *_script_start_probes(probe, probes, go),
        *_script_wait_touched(probes, us, sfx),
        *_script_unit_filters(us),
        *_script_sample_loop(probes, us),
        *_script_report(probes, us, sfx),
    ]
    return "\n".join(lines) + "\n"


def _script_setup(nprobes: int, n: int, instance: str, go: str) -> list[str]:
    """Find tracefs; name each probe's output file and each unit's instance and samples file; a cleanup trap
    that stops the probes and removes the instances and files; make the instances; print the topo section."""
    return [
        "T=/sys/kernel/tracing",
        "[ -d $T/instances ] || T=/sys/kernel/debug/tracing",
        '[ -d $T/instances ] || { echo "no tracefs instances under /sys/kernel/tracing or /sys/kernel/debug/tracing"'
        " >&2; exit 90; }",
        f"G={shlex.quote(go)}",
        *(f"O{k}=$G.out{k}; PID{k}=" for k in range(nprobes)),
        *(f"I{u}=$T/instances/{instance}{'-' + str(u) if n > 1 else ''}; S{u}=$G.s{u}" for u in range(n)),
        "cleanup() {",
        *(f'  [ -n "$PID{k}" ] && kill $PID{k} 2>/dev/null' for k in range(nprobes)),
        *(f"  echo 0 > $I{u}/tracing_on 2>/dev/null; rmdir $I{u} 2>/dev/null" for u in range(n)),
        "  rm -f $G $G.out* $G.s*",
        "}",
        "trap cleanup EXIT INT TERM",
        "rm -f $G",
        *(
            f"mkdir $I{u} || exit 91; echo boot > $I{u}/trace_clock || exit 92; echo 4096 > $I{u}/buffer_size_kb"
            for u in range(n)
        ),
        'echo "=== topo"',
        'for n in /sys/devices/system/node/node[0-9]*; do echo "node ${n##*node} cpus $(cat $n/cpulist) dist '
        '$(cat $n/distance)"; done',
    ]


def _script_start_probes(probe: str, probes: list[ScenarioParams], go: str) -> list[str]:
    """Start every probe in the background, its output to its own file."""
    lines: list[str] = []
    for k, p in enumerate(probes):
        args = " ".join(shlex.quote(a) for a in p.argv(go))
        lines += [f"{shlex.quote(probe)} {args} > $O{k} 2>&1 &", f"PID{k}=$!"]
    return lines


def _script_wait_touched(probes: list[ScenarioParams], us: list[tuple[int, int]], sfx: list[str]) -> list[str]:
    """Wait (at most 120 s) until each probe has first-touched its buffer; a probe that exits before that ends the
    run with its output and rc 94 in its first unit's sections."""
    lines: list[str] = []
    for k in range(len(probes)):
        s0 = sfx[us.index((k, 0))]  # the probe's first unit: its sections carry an early exit
        lines += [
            "k=0",
            f"until grep -q '^touched' $O{k} 2>/dev/null; do",
            f'  kill -0 $PID{k} 2>/dev/null || {{ echo "=== probe{s0}"; cat $O{k}; echo "=== rc{s0}"; echo 94; exit 0; }}',
            '  k=$((k+1)); [ $k -gt 1200 ] && { echo "probe did not first-touch its buffer in 120 s" >&2; exit 95; }',
            "  sleep 0.1",
            "done",
        ]
    return lines


def _script_unit_filters(us: list[tuple[int, int]]) -> list[str]:
    """Each unit's tid, its instance's event filters on that tid, and the events enabled."""
    events = " ".join(EVENTS)
    lines: list[str] = []
    for u, (k, j) in enumerate(us):
        # thread j > 0: the j-th "thread tid=" line the probe printed before "touched"
        tid = f"$PID{k}" if j == 0 else f"$(grep '^thread tid=' $O{k} | sed -n {j}p | cut -d= -f2)"
        lines += [
            f"TID{u}={tid}",
            f'[ -n "$TID{u}" ] || {{ echo "the probe printed no tid for its thread {j}" >&2; exit 96; }}',
            f'echo "pid == $TID{u}" > $I{u}/events/sched/sched_migrate_task/filter || exit 93',
            f'echo "pid == $TID{u}" > $I{u}/events/sched/sched_move_numa/filter || exit 93',
            f'echo "src_pid == $TID{u} || dst_pid == $TID{u}" > $I{u}/events/sched/sched_stick_numa/filter || exit 93',
            f'echo "src_pid == $TID{u} || dst_pid == $TID{u}" > $I{u}/events/sched/sched_swap_numa/filter || exit 93',
            f"for e in {events}; do echo 1 > $I{u}/events/sched/$e/enable || exit 93; done",
        ]
    return lines


def _script_sample_loop(probes: list[ScenarioParams], us: list[tuple[int, int]]) -> list[str]:
    """vmstat_before, tracing on, the go file; once a second each unit's sample until every probe is done (or none
    runs, or the longest window plus 60 s passed); wait for the probes' rcs; tracing off."""
    running = " || ".join(f"kill -0 $PID{k} 2>/dev/null" for k in range(len(probes)))
    finished = " && ".join(f"grep -q '^done' $O{k} 2>/dev/null" for k in range(len(probes)))
    return [
        'echo "=== vmstat_before"; cat /proc/vmstat',
        *(f"echo 1 > $I{u}/tracing_on" for u in range(len(us))),
        "touch $G",
        "k=0",
        f"while ! {{ {finished}; }} && [ $k -le {max(p.seconds for p in probes) + 60} ]; do",
        f"  {{ {running}; }} || break",
        "  U=$(cut -d' ' -f1 /proc/uptime)",
        *(
            f'  {{ echo "@ $U"; cat /proc/$PID{k}/task/$TID{u}/stat 2>/dev/null; echo; grep -e numa_preferred_nid '
            f"-e numa_group_id= /proc/$PID{k}/task/$TID{u}/sched 2>/dev/null; grep anon= /proc/$PID{k}/numa_maps "
            f"2>/dev/null; }} >> $S{u}"
            for u, (k, _j) in enumerate(us)
        ),
        "  k=$((k+1)); sleep 1",
        "done",
        *(f"wait $PID{k}; rc{k}=$?; PID{k}=" for k in range(len(probes))),
        *(f"echo 0 > $I{u}/tracing_on" for u in range(len(us))),
    ]


def _script_report(probes: list[ScenarioParams], us: list[tuple[int, int]], sfx: list[str]) -> list[str]:
    """vmstat_after, then each unit's probe, samples, trace, tid and rc sections."""
    return [
        'echo "=== vmstat_after"; cat /proc/vmstat',
        *(
            f'echo "=== probe{sfx[u]}"; cat $O{k}; echo "=== samples{sfx[u]}"; cat $S{u} 2>/dev/null; '
            f'echo "=== trace{sfx[u]}"; cat $I{u}/trace; echo "=== tid{sfx[u]}"; echo $TID{u}; '
            f'echo "=== rc{sfx[u]}"; echo $rc{k}'
            for u, (k, _j) in enumerate(us)
        ),
    ]


def section_suffix(u: int, n: int) -> str:
    """The suffix of unit u's sections in a run of n units ("" for a run of one)."""
    return "" if n == 1 else f".{u}"


def instance_sections(sections: dict[str, str], u: int, n: int) -> dict[str, str]:
    """Unit u's sections of a run of n units (``units``), under the one-unit names probe_metrics reads."""
    sfx = section_suffix(u, n)
    out: dict[str, str] = {k: sections[k] for k in ("topo", "vmstat_before", "vmstat_after") if k in sections}
    out.update(
        {name: sections[name + sfx] for name in ("probe", "samples", "trace", "tid", "rc") if name + sfx in sections}
    )
    return out


# ---------------------------------------------------------------------------------------------- parsers


def parse_samples(text: str) -> list[Sample]:
    """The `samples` section: '@ <uptime s>' then /proc/PID/stat, the numa_preferred_nid line, the
    "current_node=N, numa_group_id=G" line and numa_maps lines with anon= (N<node>=<pages> summed per node)."""
    out: list[Sample] = []
    cur: Sample | None = None
    for line in text.splitlines():
        if line.startswith("@ "):
            sec, _, frac = line[2:].strip().partition(".")
            cur = Sample(int(sec) * 1_000_000_000 + int((frac + "000000000")[:9]), None, None)
            out.append(cur)
        elif cur is None or not line.strip():
            continue
        elif line.startswith("numa_preferred_nid"):
            cur.pref = int(line.split(":")[-1])
        elif line.startswith("current_node="):
            m = _GROUP.search(line)
            cur.group = int(m.group(1)) if m else None
        elif ") " in line and cur.cpu is None and " anon=" not in line:
            rest = line.rsplit(")", 1)[1].split()
            cur.cpu = int(rest[36]) if len(rest) > 36 else None  # field 39 (processor); rest starts at field 3
        else:
            for node, pages in _NODE_PAGES.findall(line):
                cur.pages[int(node)] = cur.pages.get(int(node), 0) + int(pages)
    return out


def parse_probe(text: str) -> dict[str, dict[str, int]]:
    """{'filled': {node, pages, free, low}, 'touched': {pid, t}, 'start': {t, cpu}, 'done': {t, passes}} from the
    probe's output ('filled' only with -F)."""
    out = {}
    for line in text.splitlines():
        word = line.split(" ", 1)[0]
        if word in ("filled", "touched", "start", "done"):
            out[word] = {k: int(v) for k, v in _KV.findall(line)}
    return out


def _share(s: Sample, cpu_node: dict[int, int]) -> float | None:
    total = sum(s.pages.values())
    node = cpu_node.get(s.cpu) if s.cpu is not None else None
    return None if not total or node is None else 100.0 * s.pages.get(node, 0) / total


def probe_metrics(
    label: str, round_no: int, sections: dict[str, str], params: ScenarioParams, where: str = "run"
) -> ProbeMetrics:
    """The protocol's endpoints of one run (of one traced task: the probe, or one of its threads, whose tid is
    the ``tid`` section) from its output sections (metrics.split_sections)."""
    marks = parse_probe(sections.get("probe", ""))
    if not {"touched", "start", "done"} <= set(marks):
        raise ScenarioError(
            f"the probe did not finish its run (saw {', '.join(sorted(marks)) or 'nothing'}): "
            f"{sections.get('probe', '').strip()[-300:]}",
            where,
            "see the probe's message; it needs nodes P and S with CPUs and MB of free memory on P",
        )
    topo = metrics.parse_topo(sections.get("topo", ""))
    start, done = marks["start"]["t"], marks["done"]["t"]
    tid = sections.get("tid", "").strip()
    pid = int(tid) if tid.isdigit() else marks["touched"]["pid"]
    rm = ProbeMetrics(label, round_no, pid, round((done - start) / 1e9, 3))
    rm.filled_pages = marks.get("filled", {}).get("pages")
    minutes = max(rm.seconds, 1e-9) / 60
    samples = [s for s in parse_samples(sections.get("samples", "")) if start <= s.t_ns <= done]
    rm.samples = len(samples)
    # a sample reading -1 (NUMA_NO_NODE: no preferred node yet) is no reading: before the first one that names a
    # node, the preferred node is P (the protocol), never -1, whose distances are undefined
    timeline = [(s.t_ns, s.pref) for s in samples if s.pref is not None and s.pref >= 0]
    _count_events(rm, metrics.parse_trace(sections.get("trace", "")), timeline, params.pref, topo, start, done)
    rm.not_closer_per_min = round(rm.not_closer / minutes, 3)
    rm.closer_per_min = round(rm.closer / minutes, 3)
    rm.found_nothing_per_min = round(rm.found_nothing / minutes, 3)
    window = [ev for ev in metrics.parse_trace(sections.get("trace", "")) if start <= ev.ts_ns <= done]
    rm.lb_returns, rm.lb_returns_to_source = lb_returns(window, pid, topo.cpu_node)
    rm.lb_returns_per_min = round(rm.lb_returns / minutes, 3)
    shares = [(s.t_ns, _share(s, topo.cpu_node)) for s in samples]
    last = [v for t, v in shares if v is not None and t >= done - LOCAL_WINDOW_S * 1_000_000_000]
    rm.local_share_30s = round(sum(last) / len(last), 3) if last else None
    read = [s.group for s in samples if s.group is not None]
    rm.grouped_share = round(100.0 * sum(1 for g in read if g) / len(read), 3) if read else None
    hit = next((t for t, v in shares if v is not None and v >= 90.0), None)
    rm.reached_90 = hit is not None
    # censored: the protocol counts a run that never gets there as the registered window, not the measured one
    # (whose milliseconds would otherwise give two never-local arms a "difference")
    rm.time_to_90 = round((hit - start) / 1e9, 3) if hit is not None else float(params.seconds)
    if "passes" in marks["done"]:
        rm.passes_per_s = round(marks["done"]["passes"] / max(rm.seconds, 1e-9), 3)
    rm.final_node = topo.cpu_node.get(samples[-1].cpu) if samples and samples[-1].cpu is not None else None
    rm.mem_distance = mem_distance(samples[-1], rm.final_node, topo) if samples else None
    rm.vmstat_delta = metrics.vmstat_delta(
        metrics.parse_vmstat(sections.get("vmstat_before", "")), metrics.parse_vmstat(sections.get("vmstat_after", ""))
    )
    if "numa_pages_migrated" in rm.vmstat_delta:
        rm.pages_migrated_per_min = round(rm.vmstat_delta["numa_pages_migrated"] / minutes, 3)
    return rm


def _count_events(rm: ProbeMetrics, events, timeline, pref0: int, topo: metrics.Topo, start: int, done: int) -> None:
    """Moves (third-node, closer / not closer to the preferred node at event time), stick dst=-1, swaps and
    migrations of the probe inside the window."""
    for ev in events:
        if ev.event == "sched_migrate_task":
            rm.traced_migrations += 1
        if not start <= ev.ts_ns <= done:
            continue
        f = ev.fields
        if ev.event == "sched_migrate_task":
            rm.migrations += 1
        elif ev.event == "sched_swap_numa":
            rm.swaps += 1
        elif ev.event == "sched_stick_numa" and f.get("src_pid") == rm.pid and f.get("dst_cpu") == -1:
            rm.found_nothing += 1
        elif ev.event == "sched_move_numa" and f.get("pid") == rm.pid:
            rm.moves += 1
            i = bisect_right(timeline, (ev.ts_ns, 1 << 30))
            pref = timeline[i - 1][1] if i else pref0
            src, dst = f.get("src_nid", -1), f.get("dst_nid", -1)
            rm.move_path.append([src, dst])
            if dst in (src, pref):
                continue
            rm.third_moves += 1
            d_dst, d_src = topo.dist(dst, pref), topo.dist(src, pref)
            if d_dst is not None and d_src is not None and d_dst < d_src:
                rm.closer += 1
            else:
                rm.not_closer += 1


def mem_distance(sample: Sample, node: int | None, topo: metrics.Topo) -> float | None:
    """The page-weighted mean SLIT distance from `node` to the task's pages in `sample` (None when the node, the
    pages or a distance is unknown)."""
    total = sum(sample.pages.values())
    if node is None or not total:
        return None
    weighted = 0
    for n, pages in sample.pages.items():
        d = topo.dist(node, n)
        if d is None:
            return None
        weighted += pages * d
    return round(weighted / total, 3)


def lb_returns(events: list[metrics.TraceEvent], pid: int, cpu_node: dict[int, int]) -> tuple[int, int]:
    """(returns, returns to the source): how often the load balancer undid NUMA balancing's placement of task
    `pid` (issue 42 item 3; the definition docs/numa-effect-protocol.md proposes), from 5.10's trace events in
    time order:

    - a *placement* is the task's ``sched_move_numa`` (it goes src_nid -> dst_nid) or a ``sched_swap_numa`` it is
      part of (src_pid: src_nid -> dst_nid; dst_pid: dst_nid -> src_nid). NUMA balancing carries it out with
      one ``sched_migrate_task`` of the task from the placement's CPU to its destination CPU (5.10 traces no node
      in that event: orig_cpu/dest_cpu, nodes from the host's cpulists); that migration is the placement's own;
    - a *return* is the first ``sched_migrate_task`` of the task after a placement that is not the placement's
      own, leaves the placement's destination node and lands on another node (a migration inside the node is
      not one). It ends the placement, so a placement is returned at most once; a *return to the source* lands
      on the placement's source node.

    In 5.10 a migration of a running task that NUMA balancing did not make is the load balancer's (periodic,
    idle or active balancing) or a wakeup's placement; the probe never sleeps in its window, so these are the
    load balancer's. Every move of a run's move path that does not start where the previous one ended is a
    return of the previous move (the count the issue made from the study's move paths); this count also sees a
    return after the last move and the returns of swaps. Events of other tasks are ignored."""
    returns = to_source = 0
    placed: tuple[int, int] | None = None  # (source node, destination node) of the live placement
    own: tuple[int, int] | None = None  # the (orig_cpu, dest_cpu) that carries the last placement out
    for ev in events:
        f = ev.fields
        if ev.event == "sched_move_numa" and f.get("pid") == pid:
            placed, own = (f.get("src_nid", -1), f.get("dst_nid", -1)), (f.get("src_cpu", -1), f.get("dst_cpu", -1))
        elif ev.event == "sched_swap_numa" and pid in (f.get("src_pid"), f.get("dst_pid")):
            a, b = ("src", "dst") if f.get("src_pid") == pid else ("dst", "src")
            placed = (f.get(f"{a}_nid", -1), f.get(f"{b}_nid", -1))
            own = (f.get(f"{a}_cpu", -1), f.get(f"{b}_cpu", -1))
        elif ev.event == "sched_migrate_task" and f.get("pid") == pid:
            cpus = (f.get("orig_cpu", -1), f.get("dest_cpu", -1))
            if cpus == own:
                own = None
                continue
            own = None
            here, there = cpu_node.get(cpus[0]), cpu_node.get(cpus[1])
            if placed is None or here == there:
                continue
            if here == placed[1]:
                returns += 1
                to_source += there == placed[0]
            placed = None  # returned, or the task was no longer where the placement put it
    return returns, to_source


# ---------------------------------------------------------------------------------------------- the host


def run_once(
    remote, probe: str, params: ScenarioParams | list[ScenarioParams], label: str, round_no: int = 0, sudo: bool = True
) -> ProbeMetrics:
    """One traced run on the host (the probe binary already uploaded to `probe`): one probe, or several at once
    (the multi-instance control), or a probe's threads (the two-thread control): the units' endpoints combined
    by ``combine``."""
    probes = params if isinstance(params, list) else [params]
    tag = secrets.token_hex(4)
    script = run_script(probe, probes, f"numaforge-probe-{tag}", f"/tmp/numaforge-probe-{tag}.go")
    r = remote.run(script, timeout=max(p.seconds for p in probes) + 300, sudo=sudo, check=False)
    if r.rc != 0:
        raise ScenarioError(
            f"the traced probe run failed (rc={r.rc}): {(r.stderr.strip() or r.stdout.strip()[-400:]) or 'no output'}",
            remote.where,
            "the host needs tracefs with instances and event filters, the sched tracepoints, /proc/PID/numa_maps "
            "(CONFIG_NUMA) and root or passwordless sudo",
        )
    s = metrics.split_sections(r.stdout)
    runs = []
    us = units(probes)
    for u, (k, _j) in enumerate(us):
        p = probes[k]
        mine = instance_sections(s, u, len(us))
        rc = mine.get("rc", "").strip()
        if rc != "0":
            out = mine.get("probe", "").strip()[-400:] or "no output"
            what = "ended before it first-touched its buffer" if rc == "94" else f"exited {rc or '?'}"
            raise ScenarioError(
                f"the probe (P={p.pref}, S={p.src}) {what}: {out}",
                remote.where,
                f"check that nodes {p.pref} and {p.src} exist and have CPUs (--pref-node/--src-node), and "
                "the host's dmesg (an OOM kill or a signal ends the probe early)",
            )
        runs.append(probe_metrics(label, round_no, mine, p, remote.where))
    return runs[0] if len(runs) == 1 else combine(runs)


def combine(runs: list[ProbeMetrics]) -> ProbeMetrics:
    """One record of a run of several traced tasks (docs/numa-effect-protocol.md, amendments 4 and 5): counts
    summed, each per-minute rate, locality, time to 90 % and passes per second the mean over the tasks (so margins
    keep their per-probe meaning), reached_90 only when every task got there, numa_pages_migrated host-wide as
    registered (every task reads the same /proc/vmstat); each task's own record is kept in ``instances``. The
    threads of one probe each carry the probe's passes (its "done" line counts all threads' passes)."""
    first = runs[0]
    out = ProbeMetrics(first.label, first.round, first.pid, max(r.seconds for r in runs))
    for key in (
        "samples",
        "moves",
        "third_moves",
        "closer",
        "not_closer",
        "found_nothing",
        "swaps",
        "migrations",
        "traced_migrations",
        "lb_returns",
        "lb_returns_to_source",
    ):
        setattr(out, key, sum(getattr(r, key) for r in runs))
    for key in (
        "not_closer_per_min",
        "closer_per_min",
        "found_nothing_per_min",
        "lb_returns_per_min",
        "mem_distance",
        "local_share_30s",
        "time_to_90",
        "passes_per_s",
        "grouped_share",
    ):
        vals = [getattr(r, key) for r in runs]
        setattr(out, key, None if None in vals else round(sum(vals) / len(vals), 3))
    out.reached_90 = all(r.reached_90 for r in runs)
    ends = {r.final_node for r in runs}
    out.final_node = ends.pop() if len(ends) == 1 else None  # the tasks ended on different nodes: see instances
    out.pages_migrated_per_min = first.pages_migrated_per_min
    out.vmstat_delta = dict(first.vmstat_delta)
    out.instances = [{k: v for k, v in r.as_dict().items() if k not in ("vmstat_delta", "instances")} for r in runs]
    return out


def choose_nodes(topo: metrics.Topo) -> tuple[int, int]:
    """(P, S) for a host: nodes with CPUs such that some third node with CPUs is closer to P than S is and
    another is not (the protocol's shape); the lowest such pair. Error when the host has no such shape."""
    cpu_nodes = sorted(set(topo.cpu_node.values()))
    for p in cpu_nodes:
        for s in cpu_nodes:
            d_sp = topo.dist(s, p)
            if s == p or d_sp is None:
                continue
            third = [n for n in cpu_nodes if n not in (p, s) and topo.dist(n, p) is not None]
            closer = [n for n in third if topo.dist(n, p) < d_sp]  # type: ignore[operator]
            if closer and len(closer) < len(third):
                return p, s
    raise ScenarioError(
        f"no node pair fits the scenario among nodes with CPUs {cpu_nodes}: it needs a preferred node P, a source "
        "node S and two more nodes, one closer to P than S and one not (distances from the SLIT)",
        "/sys/devices/system/node/node*/distance",
        "run it on a host with >= 4 NUMA nodes and non-uniform distances, or name --pref-node and --src-node",
    )


def report(
    runs: list[ProbeMetrics],
    arms: list[str] | None = None,
    base: str = "off",
    multi: bool = False,
    amendment8: bool = False,
) -> dict:
    """runner.report over the protocol's endpoints: per-arm medians and paired verdicts against `base`; Holm
    adjusts over the three registered secondaries (SECONDARY), the descriptive counts get no verdict. ``multi``:
    the multi-instance and two-thread controls' endpoints (MULTI_OUTCOMES: passes per second as a fourth
    secondary). ``amendment8``: a case of amendment 8 (CASE_OUTCOMES, Holm over CASE_SECONDARY's four, no TOST:
    its "no harm" claims are one-sided, judged by decision.judge_case). Without `base` among the arms (amendment
    6's check runs no `off`) the first arm is the base (runner.report)."""
    return runner.report(
        runs,  # type: ignore[arg-type]
        arms,
        base,
        primary=PRIMARY,
        outcomes=CASE_OUTCOMES if amendment8 else MULTI_OUTCOMES if multi else OUTCOMES,
        margins={} if amendment8 else MULTI_MARGINS if multi else MARGINS,
        secondary=CASE_SECONDARY if amendment8 else MULTI_SECONDARY if multi else SECONDARY,
    )
