"""The pre-registered probe scenario over live-patch arms on one host (docs/numa-effect-protocol.md).

``measure_scenario`` uploads the probe (numaforge/workload/numa_probe.c), then runs blocks: in every block,
for each case (the main scenario, and with ``control`` the "source node busy" control), every arm once in a
seeded random order, the arm switched with numaforge.livepatch.ArmSwitcher. Each case gets its own report
(numaforge.measure.scenario.report: paired verdicts per endpoint against "off").
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Callable

from ..measure import metrics as mmetrics
from ..measure import runner as mrunner
from ..measure import scenario as msc
from ..workload import probe_binary
from .arms import ArmSwitcher
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


def cases(params: msc.ScenarioParams, control: bool) -> dict[str, msc.ScenarioParams]:
    out = {"source spare": dataclasses.replace(params, source_busy=False)}
    if control:
        out["source busy (control)"] = dataclasses.replace(params, source_busy=True)
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
) -> dict:
    """{'cases': {case name: scenario report + settings}} for `rounds` blocks on one booted host."""
    numa = mrunner.host_numa(remote)
    if numa["numa_balancing"] != "1":
        raise LivepatchError(
            f"automatic NUMA balancing is off on the host (kernel.numa_balancing={numa['numa_balancing']})",
            remote.where,
            "boot with numa_balancing=enable; numaforge does not change it",
        )
    todo = cases(params, control)
    runs: dict[str, list[msc.ProbeMetrics]] = {name: [] for name in todo}
    rng = random.Random(seed)
    sw = ArmSwitcher(remote, arms, log=log, nudge=nudge)
    try:
        sw.open()
        rdir = remote.run("mktemp -d /tmp/numaforge-probe.XXXXXX", sudo=True).stdout.strip()
        rpath = f"{rdir}/numa_probe"
        remote.put(probe_binary or _default_probe(), rpath, mode=0o700, sudo=True)
        for rnd in range(1, rounds + 1):
            for name, p in todo.items():
                order = list(arms)
                rng.shuffle(order)
                for arm in order:
                    sw.set_arm(arm)
                    rm = msc.run_once(remote, rpath, p, arm, rnd)
                    log(
                        f"block {rnd}/{rounds} {name} {arm}: not-closer {rm.not_closer} closer {rm.closer} "
                        f"found-nothing {rm.found_nothing} of {rm.moves} moves, local (last 30 s) "
                        f"{rm.local_share_30s}%, 90 % local at {rm.time_to_90} s, ends on node {rm.final_node}"
                    )
                    runs[name].append(rm)
        remote.run(f"rm -rf {rdir}", sudo=True, check=False)
    finally:
        sw.close()
    out = {}
    for name, p in todo.items():
        rep = msc.report(runs[name], list(arms))
        rep.update({"case": name, "params": dataclasses.asdict(p), "rounds": rounds, "seed": seed, **numa})
        out[name] = rep
    return {"cases": out, "modules": {n: (a.as_dict() if a else None) for n, a in arms.items()}}


def _default_probe() -> Path:
    return probe_binary()
