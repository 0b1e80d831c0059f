"""Interleaved rounds of traced workload runs on one booted host, one run per arm per round.

``schedule(arms, rounds, order)`` is the run order: "random" (every round a seeded random permutation of the
arms) or "abba" (two arms alternating off/on, on/off, ...; more arms: each round reversed from the previous).
``run_rounds(remote, workload, params, arms, rounds, set_arm)`` switches the host to each arm with the caller's
``set_arm(name)`` (numaforge.livepatch.ArmSwitcher loads/unloads the live patches) and records a
metrics.RunMetrics per run. ``report(...)`` turns the runs into per-arm medians with 95% bootstrap intervals
(numaforge.measure.stats) and each arm's verdict against "off" from paired per-round differences
(numaforge.measure.paired; no verdict below paired.MIN_BLOCKS rounds).
"""

from __future__ import annotations

import random
import secrets
import shlex
from dataclasses import asdict, dataclass
from typing import Callable

from ..errors import NumaforgeError
from . import metrics, paired, stats


class EffectError(NumaforgeError):
    """The NUMA outcome measurement could not run on a host."""


@dataclass
class WorkloadParams:
    procs: int = 3
    mb: int = 32
    warm: int = 6
    unpinned: int = 8
    pinned: int = 4
    duration: int = 60
    node: int = 0
    grouped: bool = False  # threads of one process sharing one buffer (a numa_group)
    mem_node: int = -1  # first-touch node (-1: the home node)

    def argv(self) -> list[str]:
        out = ["-g"] if self.grouped else []
        if self.mem_node >= 0:
            out += ["-M", str(self.mem_node)]
        return out + [
            "-p",
            str(self.procs),
            "-m",
            str(self.mb),
            "-w",
            str(self.warm),
            "-u",
            str(self.unpinned),
            "-r",
            str(self.pinned),
            "-d",
            str(self.duration),
            "-n",
            str(self.node),
        ]

    @classmethod
    def for_seconds(cls, secs: int, **kw) -> "WorkloadParams":
        """Phases scaled to the run length (60 s: the default phases; shorter runs scale them down)."""
        if secs >= 60:
            return cls(duration=secs, **kw)
        return cls(warm=max(1, secs // 10), unpinned=max(1, secs // 7), pinned=max(1, secs // 15), duration=secs, **kw)


def run_script(workload: str, params: WorkloadParams, instance: str) -> str:
    """Shell script (POSIX sh / busybox) for one traced run; prints sections for metrics.split_sections."""
    args = " ".join(shlex.quote(a) for a in params.argv())
    events = " ".join(metrics.EVENTS)
    return f"""T=/sys/kernel/tracing
[ -d $T/instances ] || T=/sys/kernel/debug/tracing
[ -d $T/instances ] || {{ echo "no tracefs instances under /sys/kernel/tracing or /sys/kernel/debug/tracing" >&2; exit 90; }}
I=$T/instances/{instance}
mkdir $I || exit 91
cleanup() {{ echo 0 > $I/tracing_on 2>/dev/null; rmdir $I 2>/dev/null; }}
trap cleanup EXIT INT TERM
echo mono > $I/trace_clock || exit 92
echo 4096 > $I/buffer_size_kb
for e in {events}; do echo 1 > $I/events/sched/$e/enable || exit 93; done
echo "=== topo"
for n in /sys/devices/system/node/node[0-9]*; do echo "node ${{n##*node}} cpus $(cat $n/cpulist) dist $(cat $n/distance)"; done
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


def host_numa(remote) -> dict:
    """{'nodes': N, 'numa_balancing': '1'|'0'|None} from the host."""
    r = remote.run(
        "ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | wc -l; "
        "cat /proc/sys/kernel/numa_balancing 2>/dev/null || echo none",
        timeout=30,
        check=False,
    )
    lines = r.stdout.split()
    nodes = int(lines[0]) if lines and lines[0].isdigit() else 0
    bal = lines[1] if len(lines) > 1 and lines[1] != "none" else None
    return {"nodes": nodes, "numa_balancing": bal}


def run_once(
    remote, workload: str, params: WorkloadParams, label: str, round_no: int = 0, sudo: bool = True
) -> metrics.RunMetrics:
    instance = f"numaforge-{secrets.token_hex(4)}"
    r = remote.run(run_script(workload, params, instance), timeout=params.duration + 300, sudo=sudo, check=False)
    if r.rc != 0:
        raise EffectError(
            f"the traced workload run failed (rc={r.rc}): "
            f"{(r.stderr.strip() or r.stdout.strip()[-400:]) or 'no output'}",
            remote.where,
            "the host needs tracefs (CONFIG_FTRACE, mounted at /sys/kernel/tracing) and the sched "
            "tracepoints; run as root or with passwordless sudo",
        )
    s = metrics.split_sections(r.stdout)
    wrc = s.get("rc", "").strip()
    if wrc != "0":
        raise EffectError(
            f"the workload exited {wrc or '?'}: {s.get('workload', '').strip()[-400:]}",
            remote.where,
            "see the workload output; it needs /sys/devices/system/node and the buffer size (-m) per task",
        )
    delta = metrics.vmstat_delta(
        metrics.parse_vmstat(s.get("vmstat_before", "")), metrics.parse_vmstat(s.get("vmstat_after", ""))
    )
    return metrics.run_metrics(
        label,
        metrics.parse_trace(s.get("trace", "")),
        s.get("workload", ""),
        metrics.parse_topo(s.get("topo", "")),
        delta,
        params.node,
        round_no,
    )


def schedule(arms: list[str], rounds: int, order: str = "random", seed: int = 13) -> list[tuple[int, str]]:
    """[(round, arm), ...]: every arm once per round, interleaved (see the module docstring)."""
    if rounds < 1 or not arms:
        raise ValueError("need at least one round and one arm")
    if order not in ("random", "abba"):
        raise ValueError(f"unknown order {order!r} (random or abba)")
    rng = random.Random(seed)
    out = []
    for i in range(rounds):
        if order == "random":
            seq = list(arms)
            rng.shuffle(seq)
        else:
            seq = list(arms) if i % 2 == 0 else list(reversed(arms))
        out += [(i + 1, a) for a in seq]
    return out


def run_rounds(
    remote,
    workload: str,
    params: WorkloadParams,
    arms: list[str],
    rounds: int,
    set_arm: Callable[[str], None],
    order: str = "random",
    seed: int = 13,
    sudo: bool = True,
    log: Callable[[str], None] | None = None,
) -> list[metrics.RunMetrics]:
    runs = []
    for rnd, arm in schedule(arms, rounds, order, seed):
        set_arm(arm)
        rm = run_once(remote, workload, params, arm, rnd, sudo=sudo)
        if log:
            log(
                f"round {rnd}/{rounds} {arm}: cross-NUMA {rm.cross_numa_rate}% of {rm.migrations} migrations, "
                f"mean {rm.mean_latency_us} us, local {rm.local_ratio}%, third-node moves {rm.third_node_moves} "
                f"({rm.third_closer} closer)"
            )
        runs.append(rm)
    return runs


def report(
    runs: list[metrics.RunMetrics],
    arms: list[str] | None = None,
    base: str = "off",
    primary: str = metrics.PRIMARY,
    outcomes: list[tuple[str, str, str, bool | None]] = metrics.OUTCOMES,
    margins: dict[str, tuple[str, float]] = metrics.MARGINS,
    secondary: tuple[str, ...] | None = None,
) -> dict:
    """{'arms', 'base', 'primary', 'metrics': {key: {arm: summary}}, 'verdicts': {key: {arm: verdict}},
    'paired': {key: {arm: paired.Comparison dict + 'line'}}, 'runs'}.

    Summaries are per-arm medians with bootstrap intervals (for tables and pictures); verdicts come only from
    paired differences against `base` over the rounds (numaforge.measure.paired): the primary endpoint at 5 %,
    the others Holm-adjusted per arm, TOST against `margins`, and "no verdict" below paired.MIN_BLOCKS.
    outcomes/margins: another set of endpoints (numaforge.measure.scenario) over runs with those attributes;
    secondary: the endpoints Holm adjusts over (None: all but the primary; the rest are descriptive).
    Without `base` among the arms (e.g. a probe study that ran no `off`) the first arm is the base."""
    arms = arms or list(dict.fromkeys(r.label for r in runs))
    base = base if base in arms else arms[0]
    out: dict = {
        "arms": arms,
        "base": base,
        "primary": primary,
        "metrics": {},
        "verdicts": {},
        "paired": {},
        "runs": [r.as_dict() for r in runs],
    }
    lower = {key: lo for key, _label, _unit, lo in outcomes}
    units = {key: unit for key, _label, unit, _lo in outcomes}
    for key in lower:
        out["metrics"][key] = {a: stats.summary([getattr(r, key) for r in runs if r.label == a]) for a in arms}
        out["verdicts"][key], out["paired"][key] = {}, {}
    seen: set[tuple[str, int]] = set()
    for r in runs:
        if (r.label, r.round) in seen:
            raise ValueError(f"arm {r.label} ran twice in round {r.round}: a paired comparison needs one run per block")
        seen.add((r.label, r.round))
    by_block = {a: {key: {r.round: getattr(r, key) for r in runs if r.label == a} for key in lower} for a in arms}
    for a in arms:
        if a == base:
            continue
        diffs = {key: paired.differences(by_block[base][key], by_block[a][key]) for key in lower}
        abs_margins = {key: metrics.margin(key, by_block[base][key].values(), margins) for key in lower}
        for key, c in paired.family(diffs, primary, lower, abs_margins, secondary).items():
            out["verdicts"][key][a] = c.verdict
            out["paired"][key][a] = {**c.as_dict(), "line": paired.describe(c, units[key])}
    return out


def legacy_counts(runs: list[metrics.RunMetrics]) -> dict:
    """Per-arm lists (in run order) of the counts validate's report has always carried."""
    labels = list(dict.fromkeys(r.label for r in runs))
    out = {}
    for key in ("third_node_moves", "stick_local", "moves", "swaps"):
        out[key] = {lab: [getattr(r, key) for r in runs if r.label == lab] for lab in labels}
    for key in ("numa_hint_faults", "numa_pages_migrated"):
        out[key] = {lab: [r.vmstat_delta.get(key) for r in runs if r.label == lab] for lab in labels}
    return out


def params_dict(params: WorkloadParams) -> dict:
    return asdict(params)
