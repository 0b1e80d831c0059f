"""The pre-registered probe scenario over live-patch arms on one host (docs/numa-effect-protocol.md).

``measure_scenario`` uploads the probe (numaforge/workload/numa_probe.c), then runs blocks: in every block,
for each case (the main scenario, and with ``control`` the "source node busy" control), every arm once in a
seeded random order, the arm switched with numaforge.livepatch.ArmSwitcher. Each case gets its own report
(numaforge.measure.scenario.report: paired verdicts per endpoint against "off").
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

from ..measure import metrics as mmetrics
from ..measure import runner as mrunner
from ..measure import scenario as msc
from ..measure import study
from ..workload import probe_binary
from .arms import ArmSwitcher, FeatureSwitcher
from .artifact import Artifact
from .errors import LivepatchError


def host_topo(remote) -> mmetrics.Topo:
    r = remote.run(
        'for n in /sys/devices/system/node/node[0-9]*; do echo "node ${n##*node} cpus $(cat $n/cpulist) '
        'dist $(cat $n/distance)"; done',
        timeout=30,
        check=False,
    )
    return mmetrics.parse_topo(r.stdout)


def cases(
    params: msc.ScenarioParams,
    control: bool,
    second: tuple[int, int] | None = None,
    knob: bool = False,
    pairs: list[tuple[int, int]] | None = None,
) -> dict[str, list[msc.ScenarioParams]]:
    """The cases of a study, each the probes of one run: the main case and (``control``) its source-busy control;
    with ``pairs`` ((P, S) of each configuration, issue 42 item 1: numaforge.measure.configs) one main case per
    pair (msc.pair_case), each followed by its source-busy control with ``control``;
    with ``second`` (P, S of a second probe) only the multi-instance control (amendment 4): both probes at once,
    sources spare; with params.threads > 1 only the two-thread control (amendment 5); with ``knob`` only the
    full-kernel knob control (amendment 7): the main case's probe, its arms states of a scheduler feature."""
    if knob:
        return {msc.KNOB_CASE: [dataclasses.replace(params, source_busy=False)]}
    if second:
        return {msc.MULTI_CASE: [params, dataclasses.replace(params, pref=second[0], src=second[1])]}
    if params.threads > 1:
        return {msc.THREADS_CASE: [params]}
    if pairs:
        out: dict[str, list[msc.ScenarioParams]] = {}
        for p, s in pairs:
            out[msc.pair_case(p, s)] = [dataclasses.replace(params, pref=p, src=s, source_busy=False)]
            if control:
                out[msc.pair_case(p, s, busy=True)] = [dataclasses.replace(params, pref=p, src=s, source_busy=True)]
        return out
    out = {msc.MAIN_CASE: [dataclasses.replace(params, source_busy=False)]}
    if control:
        out[msc.CONTROL_CASE] = [dataclasses.replace(params, source_busy=True)]
    return out


def measure_scenario(
    remote,
    arms: dict[str, Artifact | None],
    params: msc.ScenarioParams,
    rounds: int,
    control: bool = True,
    seed: int = 13,
    probe_binary: Path | None = None,
    log: Callable[[str], None] = lambda m: None,
    nudge: bool = False,
    done: dict[str, list[list[msc.ProbeMetrics]]] | None = None,
    on_block: Callable[[dict[str, list[list[msc.ProbeMetrics]]]], None] | None = None,
    second: tuple[int, int] | None = None,
    features: dict[str, str] | None = None,
    pairs: list[tuple[int, int]] | None = None,
) -> dict:
    """{'cases': {case name: scenario report + settings}} for `rounds` blocks on one booted host.

    ``done``: blocks of an earlier chunk of the same study (numaforge.measure.study), per case; the run goes on
    from the next block. ``on_block`` is called with every finished block so far after each block. ``second``:
    the multi-instance control instead (``cases``). ``features`` ({arm: FEATURE | NO_FEATURE}, `arms` empty):
    the knob control instead, its arms switched by FeatureSwitcher on a kernel with the series built in.
    ``pairs``: one case per (P, S) configuration instead of params' own P and S (``cases``)."""
    numa = mrunner.host_numa(remote)
    if numa["numa_balancing"] != "1":
        raise LivepatchError(
            f"automatic NUMA balancing is off on the host (kernel.numa_balancing={numa['numa_balancing']})",
            remote.where,
            "boot with numa_balancing=enable; numaforge does not change it",
        )
    todo = cases(params, control, second, knob=bool(features), pairs=pairs)
    names = list(features) if features else list(arms)
    blocks: dict[str, list[list[msc.ProbeMetrics]]] = {name: list((done or {}).get(name, [])) for name in todo}
    first = min(len(b) for b in blocks.values()) + 1
    sw = FeatureSwitcher(remote, features, log=log) if features else ArmSwitcher(remote, arms, log=log, nudge=nudge)
    try:
        sw.open()
        rdir = remote.run("mktemp -d /tmp/numaforge-probe.XXXXXX", sudo=True).stdout.strip()
        rpath = f"{rdir}/numa_probe"
        remote.put(probe_binary or _default_probe(), rpath, mode=0o700, sudo=True)
        for rnd in range(first, rounds + 1):
            for name, p in todo.items():
                block = []
                for arm in study.block_order(names, seed, name, rnd):
                    sw.set_arm(arm)
                    rm = msc.run_once(remote, rpath, p, arm, rnd)
                    log(
                        f"block {rnd}/{rounds} {name} {arm}: not-closer {rm.not_closer} closer {rm.closer} "
                        f"found-nothing {rm.found_nothing} of {rm.moves} moves, local (last 30 s) "
                        f"{rm.local_share_30s}%, 90 % local at {rm.time_to_90} s, ends on {_ends(rm)}, "
                        f"{rm.passes_per_s} passes/s, in a numa_group {rm.grouped_share}% of samples"
                    )
                    block.append(rm)
                blocks[name].append(block)
            if on_block:
                on_block(blocks)
        remote.run(f"rm -rf {rdir}", sudo=True, check=False)
    finally:
        sw.close()
    out = {}
    for name, p in todo.items():
        runs = [r for block in blocks[name] for r in block]
        rep = msc.report(runs, names, multi=len(msc.units(p)) > 1)
        if len(p) > 1:
            rep["probes"] = [dataclasses.asdict(q) for q in p]
        rep.update(
            {"case": name, "params": dataclasses.asdict(p[0]), "rounds": len(blocks[name]), "seed": seed, **numa}
        )
        out[name] = rep
    return {
        "cases": out,
        "modules": {n: (a.as_dict() if a else None) for n, a in arms.items()},
        **({"features": dict(features)} if features else {}),
    }


def _ends(rm: msc.ProbeMetrics) -> str:
    """Where the run's task ended ("node N"), or each traced task's node when they ended apart."""
    if rm.final_node is not None or not rm.instances:
        return f"node {rm.final_node}"
    return "nodes " + "/".join(str(i.get("final_node")) for i in rm.instances)


def _default_probe() -> Path:
    return probe_binary()
