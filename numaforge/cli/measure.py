"""Task: numa-effect — the NUMA outcome measurement of the series' live patches on one host (numaforge.measure).

Thin: resolves the arms' built modules (numaforge.measure.arms), runs interleaved rounds on the host
(numaforge.livepatch.measure_arms), prints the table (numaforge.measure.render) and writes the measurement
JSON with its PNG beside it.
"""

from __future__ import annotations

import json as _json
import re
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from rich.markup import escape
from rich.table import Table

from .. import hostlock, safeio
from ..defaults import DEFAULT_SERIES
from ..errors import NumaforgeError
from ..fleet import FAILED
from ..lazy import lazy_module
from ..report import HostResult, Report
from . import common, values
from .optionsets import preflight_selection, task

if TYPE_CHECKING:
    from .. import livepatch
    from ..livepatch import arms as lparms
    from ..livepatch import probe as lprobe
    from ..measure import arms as marms
    from ..measure import configs, render
    from ..measure import runner as mrunner
    from ..measure import scenario as msc
    from ..remote import ssh
else:  # imported by the task that uses them (numaforge.lazy)
    livepatch = lazy_module("numaforge.livepatch")
    lparms = lazy_module("numaforge.livepatch.arms")
    lprobe = lazy_module("numaforge.livepatch.probe")
    msc = lazy_module("numaforge.measure.scenario")
    marms = lazy_module("numaforge.measure.arms")
    configs = lazy_module("numaforge.measure.configs")
    render = lazy_module("numaforge.measure.render")
    mrunner = lazy_module("numaforge.measure.runner")
    ssh = lazy_module("numaforge.remote.ssh")

HELP = {
    "target": "kpatch target whose arm modules to load (<build>/kpatch/TARGET[-ARM]/; default lab)",
    "series": f"patch series (default {DEFAULT_SERIES})",
    "arm": "arm to run (repeatable; default every built arm: off, winner, alt-*, null)",
    "rounds": "interleaved rounds (blocks) per arm, in one boot (default 10; verdicts need >= 6, the protocol 20)",
    "seconds": "workload run length in seconds (phases scale below 60; default 20)",
    "order": "run order within a round: random (seeded permutation per round) or abba",
    "seed": "seed of the random order (default 13)",
    "grouped": "grouped workload: threads of one process sharing one buffer (a numa_group)",
    "procs": "workload tasks (processes, or threads with --grouped; default 3)",
    "mb": "buffer MB per task (shared buffer with --grouped; default 16)",
    "mem_node": "first-touch node of the buffers (default: node 0, the tasks' home node)",
    "case": "name of this case in the output (default: <host> single|grouped)",
    "out": "measurement JSON to write (default reports/numa-effect-<host>-<UTC time>.json); the PNG goes beside it",
    "scenario": "workload (the generic multi-task workload) or probe (the pre-registered 'preferred node full, "
    "source node spare' scenario of docs/numa-effect-protocol.md, with its 'source node busy' control)",
    "pref_node": "probe: node P that holds the probe's memory and gets a pinned busy loop per CPU (default: chosen "
    "from the host's SLIT)",
    "src_node": "probe: node S where the probe starts (default: chosen with P)",
    "pairs": "probe: the configuration space (issue 42): all (every (P, S) of the host's nodes with CPUs), classes "
    "(one pair per class of the host's SLIT and 5.10's node scan order, numaforge.measure.configs) or P:S,P:S,...; "
    "each pair a case with its control; replaces --pref-node/--src-node",
    "no_control": "probe: skip the 'source node busy' control case",
    "probe_threads": "probe: threads sharing the probe's buffer (2: the two-thread control of the protocol's "
    "amendment 5; runs only that case; default 1)",
    "second_probe": "probe: P:S of a second probe running at once with its own hogs (the multi-instance control "
    "of the protocol's amendment 4; runs only that case)",
    "knob": "probe: the full-kernel knob control (protocol amendment 7) on a host booted with the whole series built "
    "in: arms knob-off/knob-on write NO_NUMA_PREFER_LOCAL/NUMA_PREFER_LOCAL to /sys/kernel/debug/sched_features "
    "before each run (no live patch); runs only the main case",
    "wake_cpus": "while a livepatch transition is pending, run a short busy loop on every CPU of the host (for "
    "emulated lab VMs, whose idle vCPUs hold transitions for a minute; not for production hosts)",
}


def _workload(seconds, procs, mb, mem_node, grouped) -> mrunner.WorkloadParams:
    """The workload options, parsed (a clear exit 2 for `--mb x`, never invoke's ValueError traceback)."""
    return mrunner.WorkloadParams.for_seconds(
        values.positive_int(seconds, "--seconds", 20),
        procs=values.positive_int(procs, "--procs", 3),
        mb=values.positive_int(mb, "--mb", 16),
        grouped=bool(grouped),
        mem_node=-1 if mem_node is None else values.non_negative_int(mem_node, "--mem-node"),
    )


def _out_path(out, host: str) -> Path:
    if out:
        return Path(out)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return common.project_root() / "reports" / f"numa-effect-{re.sub(r'[^A-Za-z0-9._-]', '_', host)}-{stamp}.json"


@task(
    iterable=["host", "arm"],
    help=HELP,
    checks={  # every option checked before a host is touched (numaforge.cli.values.preflight)
        "target": values.name("--target", "kpatch target name"),
        "series": values.name("--series", "series name"),
        "arm": values.name("--arm", "arm name"),
        "rounds": lambda v: values.positive_int(v, "--rounds"),
        "seconds": lambda v: values.positive_int(v, "--seconds"),
        "order": values.choice("--order", "random", "abba"),
        "seed": lambda v: values.non_negative_int(v, "--seed"),
        "procs": lambda v: values.positive_int(v, "--procs"),
        "mb": lambda v: values.positive_int(v, "--mb"),
        "mem_node": lambda v: values.non_negative_int(v, "--mem-node"),
        "out": values.output_path("--out"),
        "scenario": values.choice("--scenario", "workload", "probe"),
        "pref_node": lambda v: values.non_negative_int(v, "--pref-node"),
        "src_node": lambda v: values.non_negative_int(v, "--src-node"),
        "probe_threads": lambda v: _threads(v),
        "second_probe": lambda v: _second(v),
        "pairs": lambda v: _pairs_option(v, None, None, None, False),  # its form; the options it replaces below
        values.ALL_OPTIONS: lambda o, c: _preflight(o, c),
    },
)
def numa_effect(
    c,
    host=None,
    inventory=None,
    target="lab",
    series=None,
    arm=None,
    rounds=None,
    seconds=None,
    order="random",
    seed=None,
    grouped=False,
    procs=None,
    mb=None,
    mem_node=None,
    case=None,
    out=None,
    wake_cpus=False,
    scenario="workload",
    pref_node=None,
    src_node=None,
    pairs=None,
    no_control=False,
    probe_threads=None,
    second_probe=None,
    knob=False,
    accept_new_host_key=False,
    json=None,
    allow_plaintext_secrets=False,
):
    """Measure the series' live patches against upstream and a null patch on a host: table, JSON and PNG."""

    def body(report: Report):
        together = {"scenario": scenario, "pref_node": pref_node, "src_node": src_node, "pairs": pairs, "knob": knob}
        _together({**together, "arm": arm, "probe_threads": probe_threads, "second_probe": second_probe})
        n_rounds = values.positive_int(rounds, "--rounds", 10)
        n_seed = values.non_negative_int(seed, "--seed", 13)
        params = _workload(seconds, procs, mb, mem_node, grouped)
        opts = None
        if scenario == "probe":  # every option checked before a host is touched
            opts = _ProbeOptions(
                values.positive_int(seconds, "--seconds", 20),
                values.positive_int(mb, "--mb", 16),
                n_rounds,
                n_seed,
                _nodes(pref_node, src_node),
                bool(no_control),
                bool(wake_cpus),
                _threads(probe_threads),
                _second(second_probe),
                _knob(knob, arm, probe_threads, second_probe),
                _pairs_option(pairs, pref_node, probe_threads, second_probe, knob),
            )
        select = values.Selection(
            inventory=inventory, host=tuple(host or ()), allow_plaintext_secrets=allow_plaintext_secrets
        )
        h = _one_host(c, report, select)
        knob_arms = opts is not None and opts.knob
        arts = {} if knob_arms else lparms.loaded_arms(series or DEFAULT_SERIES, target, list(arm or []) or None)
        if opts is not None:
            return _probe(report, h, arts, opts, out)
        name = case or f"{h.name} {'grouped' if grouped else 'single'}"
        run = _Rounds(n_rounds, order, n_seed, bool(wake_cpus), accept_new_host_key)
        _measure_workload(report, h, arts, name, params, run, out)

    common.execute(
        "numa-effect",
        body,
        json=json,
        options={
            "host": host,
            "target": target,
            "arm": arm,
            "rounds": rounds,
            "seconds": seconds,
            "order": order,
            "grouped": grouped,
            "scenario": scenario,
        },
    )


def _preflight(options: dict, c) -> None:
    """numa-effect's options together, before a host is touched: --host against the inventory, then the arms the
    run would load, built for --target (numaforge.measure.arms.built_arms: every --arm known); the knob control
    loads none. The options' combinations come first: they need nothing but the command line."""
    try:
        _together(options)
    except NumaforgeError as exc:
        raise values.OptionValueError(exc.what, exc.where, exc.fix) from None
    preflight_selection(
        c,
        values.Selection(
            inventory=options.get("inventory"),
            host=tuple(options.get("host") or ()),
            allow_plaintext_secrets=bool(options.get("allow_plaintext_secrets")),
        ),
    )
    if options.get("scenario") == "probe" and options.get("knob"):
        return
    try:
        marms.built_arms(options.get("series") or DEFAULT_SERIES, options.get("target") or "lab", options.get("arm"))
    except NumaforgeError as exc:
        where = f" ({exc.where})" if exc.where else ""
        raise values.OptionValueError(exc.what + where, "--series/--target/--arm", exc.fix) from None


def _together(o: dict) -> None:
    """The options that only make sense together (pure: the command line alone), the same check in the preflight
    and the task body."""
    scenario = o.get("scenario") or "workload"
    if scenario not in ("workload", "probe"):
        raise NumaforgeError(f"unknown scenario {scenario!r}", "--scenario", "use workload or probe")
    if (o.get("pref_node") is None) != (o.get("src_node") is None):
        raise NumaforgeError("--pref-node and --src-node go together", "--pref-node/--src-node", "give both or neither")
    if scenario == "probe":
        _knob(o.get("knob"), o.get("arm"), o.get("probe_threads"), o.get("second_probe"))
        _pairs_option(o.get("pairs"), o.get("pref_node"), o.get("probe_threads"), o.get("second_probe"), o.get("knob"))
    elif o.get("pairs") is not None:
        raise NumaforgeError("--pairs is a probe option", "--pairs", "add --scenario probe")
    elif o.get("knob"):
        raise NumaforgeError("--knob is a probe control", "--knob", "add --scenario probe")


def _nodes(pref_node, src_node) -> tuple[int, int] | None:
    """--pref-node and --src-node, parsed (None: the probe chooses them from the host's SLIT)."""
    pref = values.non_negative_int(pref_node, "--pref-node")
    src = values.non_negative_int(src_node, "--src-node")
    return None if pref is None or src is None else (pref, src)


def _threads(value) -> int:
    """--probe-threads: 1..MAX_THREADS (numa_probe.c's limit)."""
    n = values.positive_int(value, "--probe-threads", 1)
    if n > msc.MAX_THREADS:
        raise NumaforgeError(
            f"--probe-threads {n}: the probe runs at most {msc.MAX_THREADS} threads",
            "--probe-threads",
            "use 2 for the two-thread control",
        )
    return n


def _second(text) -> tuple[int, int] | None:
    """--second-probe P:S, parsed."""
    return None if text is None else msc.node_pair(text, "--second-probe")


def _one_host(c, report: Report, select: values.Selection):
    """The one host --host selects (numa-effect measures one host at a time)."""
    _inv, hosts = common.load_selected(c, report, select)
    if len(hosts) != 1:
        raise NumaforgeError(
            f"numa-effect measures one host at a time ({len(hosts)} selected)",
            "--host",
            "name exactly one host with --host",
        )
    return hosts[0]


@dataclass
class _Rounds:
    """How the workload scenario's rounds run on the host."""

    rounds: int
    order: str
    seed: int
    wake_cpus: bool
    accept_new_host_key: bool


@contextmanager
def _failed_on_error(result: HostResult) -> Iterator[None]:
    """A host whose measurement stopped (unreachable, locked, a failed step, Ctrl-C) is failed, with the reason,
    in the table and the report -- never left "unchanged" (issue 40)."""
    try:
        yield
    except NumaforgeError as exc:
        result.status, result.message = FAILED, exc.render()
        raise
    except KeyboardInterrupt:
        result.status, result.message = FAILED, "interrupted before the measurement finished"
        raise
    except Exception as exc:
        result.status, result.message = FAILED, f"stopped by an unexpected {type(exc).__name__}"
        raise


def _measure_workload(report: Report, h, arts: dict, name: str, params, run: _Rounds, out) -> None:
    """The workload scenario on one host: interleaved rounds of every arm, JSON + PNG, the table and verdicts."""
    result = report.host(h.name)
    # it loads and unloads live patches: the host's write lock, like every task that changes hosts
    with (
        _failed_on_error(result),
        hostlock.held_host(h, h.name, "numa-effect"),
        result.step("measure") as s,
        ssh.connect(h.ssh, h.name, accept_new_host_key=run.accept_new_host_key) as r,
    ):
        data = livepatch.measure_arms(
            r, arts, params, run.rounds, order=run.order, seed=run.seed, log=_host_log(h.name), nudge=run.wake_cpus
        )
        s.detail = {"arms": data["arms"], "rounds": data["rounds"]}
    data["case"] = name
    path = _write(out, h.name, {"cases": {name: data}})
    png = render.plot({name: data}, path.with_suffix(".png"))
    report.data.update({"measurement": str(path), "png": str(png), "verdicts": data["verdicts"]})
    title = f"{name}: median [95% bootstrap interval] over {run.rounds} rounds (paired verdict vs off)"
    _print_table(title, "metric", data["arms"], render.table_rows(data))
    for a in data["arms"]:
        for line in render.verdict_lines(data, a):
            common.console.print(f"{escape(a)} vs {escape(data['base'])}: {escape(line)}")
    common.console.print(f"measurement: {path}\npicture: {png}")
    result.message = f"{len(data['runs'])} runs of {', '.join(data['arms'])}"


def _host_log(name: str):
    return lambda m: common.console.print(f"{escape(name)}: {escape(m)}")


def _print_table(title: str, first: str, arms, rows) -> None:
    """One column ``first`` (metric or endpoint), then one per arm."""
    tab = Table(title=title)
    tab.add_column(first)
    for a in arms:
        tab.add_column(a)
    for row in rows:
        tab.add_row(*(escape(x) for x in row))
    common.console.print(tab)


def _write(out, host: str, doc: dict) -> Path:
    """The measurement JSON at --out or reports/numa-effect-<host>-<UTC time>.json (written atomically)."""
    path = _out_path(out, host)
    safeio.ensure_dir(path.parent, what="--out directory", mode=0o777)
    return safeio.atomic_write(path, _json.dumps(doc, indent=1) + "\n", what="measurement (--out)")


@dataclass
class _ProbeOptions:
    """The probe scenario's options, parsed."""

    seconds: int
    mb: int
    rounds: int
    seed: int
    nodes: tuple[int, int] | None  # (P, S); None: chosen from the host's SLIT
    no_control: bool
    wake: bool
    threads: int
    second: tuple[int, int] | None
    knob: bool
    pairs: str | None = None  # all | classes | P:S,...: resolved against the host's SLIT once connected


def _pairs_option(text, pref_node, probe_threads, second_probe, knob) -> str | None:
    """--pairs, checked as far as it can be before a host is touched: its form, and no option it replaces."""
    if text is None:
        return None
    text = str(text)
    if pref_node is not None or probe_threads is not None or second_probe is not None or knob:
        raise NumaforgeError(
            "--pairs runs the main case per (P, S) pair",
            "--pairs",
            "drop --pref-node/--src-node, --probe-threads, --second-probe and --knob",
        )
    if text not in ("all", "classes"):
        for part in text.split(","):
            msc.node_pair(part.strip(), "--pairs")
    return text


def _host_pairs(text: str, topo) -> list[tuple[int, int]]:
    """--pairs against the host's SLIT and CPUs (numaforge.measure.configs)."""
    distances, cpus = configs.from_topo(topo)
    try:
        return configs.parse_pairs(text, distances, cpus)
    except ValueError as exc:
        raise NumaforgeError(str(exc), "--pairs", "name pairs of nodes with CPUs on this host") from None


def _knob(knob, arm, probe_threads, second_probe) -> bool:
    """--knob (protocol amendment 7): the knob control on a host running a full kernel with the series built in;
    it has its own two arms and only the main case."""
    if not knob:
        return False
    if arm or probe_threads is not None or second_probe is not None:
        raise NumaforgeError(
            "--knob runs its own two arms (knob-off, knob-on) on the main case",
            "--knob",
            "drop --arm, --probe-threads and --second-probe",
        )
    return True


def _probe(report: Report, h, arts, o: _ProbeOptions, out) -> None:
    """The probe scenario on one host: nodes from the options or the host's SLIT, blocks, JSON, tables."""
    result = report.host(h.name)
    with (
        _failed_on_error(result),
        hostlock.held_host(h, h.name, "numa-effect"),
        result.step("measure") as s,
        ssh.connect(h.ssh, h.name, accept_new_host_key=False) as r,
    ):
        pairs = _host_pairs(o.pairs, lprobe.host_topo(r)) if o.pairs else None
        p, src = o.nodes if o.nodes is not None else pairs[0] if pairs else msc.choose_nodes(lprobe.host_topo(r))
        params = msc.ScenarioParams(pref=p, src=src, mb=o.mb, seconds=o.seconds, threads=o.threads)
        data = lprobe.measure_scenario(
            r,
            arts,
            params,
            o.rounds,
            control=not o.no_control,
            seed=o.seed,
            log=_host_log(h.name),
            nudge=o.wake,
            second=o.second,
            features=dict(marms.KNOB_ARMS) if o.knob else None,
            pairs=pairs,
        )
        arms = list(marms.KNOB_ARMS) if o.knob else list(arts)
        s.detail = {"arms": arms, "rounds": o.rounds, "pref": p, "src": src}
        if pairs:
            s.detail["pairs"] = [list(q) for q in pairs]
    path = _write(out, h.name, data)
    report.data.update({"measurement": str(path), "verdicts": {n: c["verdicts"] for n, c in data["cases"].items()}})
    for name, case in data["cases"].items():
        where = "" if pairs else f" (P={p}, S={src})"  # a case of a study over pairs names its own
        title = f"{name}{where}: median [95% bootstrap interval] over {o.rounds} blocks"
        outcomes = msc.outcomes_of(name)
        _print_table(title, "endpoint", case["arms"], render.table_rows(case, outcomes=outcomes))
        for a in case["arms"]:
            for line in render.verdict_lines(case, a, outcomes=outcomes):
                common.console.print(f"{escape(name)}: {escape(a)} vs {escape(case['base'])}: {escape(line)}")
    common.console.print(f"measurement: {path}")
    result.message = f"{sum(len(c['runs']) for c in data['cases'].values())} probe runs of {', '.join(arms)}"


TASKS = [numa_effect]
