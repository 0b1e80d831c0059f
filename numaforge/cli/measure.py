"""Task: numa-effect — the NUMA outcome measurement of the series' live patches on one host (numaforge.measure).

Thin: resolves the arms' built modules (numaforge.measure.arms), runs interleaved rounds on the host
(numaforge.livepatch.measure_arms), prints the table (numaforge.measure.render) and writes the measurement
JSON with its PNG beside it.
"""

from __future__ import annotations

import json as _json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from ..defaults import DEFAULT_SERIES
from ..errors import NumaforgeError
from ..lazy import lazy_module
from ..report import Report
from . import common, values
from .optionsets import task

if TYPE_CHECKING:
    from .. import livepatch
    from ..measure import arms as marms
    from ..measure import render
    from ..measure import runner as mrunner
    from ..remote import ssh
else:  # imported by the task that uses them (numaforge.lazy)
    livepatch = lazy_module("numaforge.livepatch")
    marms = lazy_module("numaforge.measure.arms")
    render = lazy_module("numaforge.measure.render")
    mrunner = lazy_module("numaforge.measure.runner")
    ssh = lazy_module("numaforge.remote.ssh")

HELP = {
    "target": "kpatch target whose arm modules to load (<build>/kpatch/TARGET[-ARM]/; default lab)",
    "series": f"patch series (default {DEFAULT_SERIES})",
    "arm": "arm to run (repeatable; default every built arm: off, winner, alt-*, null)",
    "rounds": "interleaved rounds per arm, in one boot (default 10)",
    "seconds": "workload run length in seconds (phases scale below 60; default 20)",
    "order": "run order within a round: random (seeded permutation per round) or abba",
    "seed": "seed of the random order (default 13)",
    "grouped": "grouped workload: threads of one process sharing one buffer (a numa_group)",
    "procs": "workload tasks (processes, or threads with --grouped; default 3)",
    "mb": "buffer MB per task (shared buffer with --grouped; default 16)",
    "mem_node": "first-touch node of the buffers (default: node 0, the tasks' home node)",
    "case": "name of this case in the output (default: <host> single|grouped)",
    "out": "measurement JSON to write (default reports/numa-effect-<host>-<UTC time>.json); the PNG goes beside it",
    "wake_cpus": "while a livepatch transition is pending, run a short busy loop on every CPU of the host (for "
    "emulated lab VMs, whose idle vCPUs hold transitions for a minute; not for production hosts)",
}


@task(iterable=["host", "arm"], help=HELP)
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
    accept_new_host_key=False,
    json=None,
    allow_plaintext_secrets=False,
):
    """Measure the series' live patches against upstream and a null patch on a host: table, JSON and PNG."""

    def body(report: Report):
        # numbers are parsed here (a clear exit 2 for `--seed x`, never invoke's ValueError traceback)
        n_rounds = values.positive_int(rounds, "--rounds", 10)
        n_seconds = values.positive_int(seconds, "--seconds", 20)
        n_seed = values.non_negative_int(seed, "--seed", 13)
        n_procs = values.positive_int(procs, "--procs", 3)
        n_mb = values.positive_int(mb, "--mb", 16)
        n_mem_node = -1 if mem_node is None else values.non_negative_int(mem_node, "--mem-node")
        select = values.Selection(
            inventory=inventory, host=tuple(host or ()), allow_plaintext_secrets=allow_plaintext_secrets
        )
        _inv, hosts = common.load_selected(c, report, select)
        if len(hosts) != 1:
            raise NumaforgeError(
                f"numa-effect measures one host at a time ({len(hosts)} selected)",
                "--host",
                "name exactly one host with --host",
            )
        (h,) = hosts
        built = marms.built_arms(series or DEFAULT_SERIES, target, list(arm or []) or None)
        arts = {
            a.name: (livepatch.load_artifact(a.module, functions=list(a.functions)) if a.module else None)
            for a in built
        }
        params = mrunner.WorkloadParams.for_seconds(
            n_seconds, procs=n_procs, mb=n_mb, grouped=bool(grouped), mem_node=n_mem_node
        )
        name = case or f"{h.name} {'grouped' if grouped else 'single'}"
        result = report.host(h.name)
        with result.step("measure") as s, ssh.connect(h.ssh, h.name, accept_new_host_key=accept_new_host_key) as r:
            data = livepatch.measure_arms(
                r,
                arts,
                params,
                n_rounds,
                order=order,
                seed=n_seed,
                log=lambda m: common.console.print(f"{escape(h.name)}: {escape(m)}"),
                nudge=bool(wake_cpus),
            )
            s.detail = {"arms": data["arms"], "rounds": data["rounds"]}
        data["case"] = name
        path = (
            Path(out)
            if out
            else common.project_root()
            / "reports"
            / (
                f"numa-effect-{re.sub(r'[^A-Za-z0-9._-]', '_', h.name)}-"
                f"{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}.json"
            )
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(_json.dumps({"cases": {name: data}}, indent=1) + "\n")
        tmp.replace(path)
        png = render.plot({name: data}, path.with_suffix(".png"))
        report.data.update({"measurement": str(path), "png": str(png), "verdicts": data["verdicts"]})
        tab = Table(title=f"{name}: median [95% bootstrap interval] over {n_rounds} rounds (verdict vs off)")
        tab.add_column("metric")
        for a in data["arms"]:
            tab.add_column(a)
        for row in render.table_rows(data):
            tab.add_row(*(escape(x) for x in row))
        common.console.print(tab)
        common.console.print(f"measurement: {path}\npicture: {png}")
        result.message = f"{len(data['runs'])} runs of {', '.join(data['arms'])}"

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
        },
    )


TASKS = [numa_effect]
