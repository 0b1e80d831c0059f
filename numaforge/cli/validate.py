"""Task: validate — load, verify, measure and unload a live patch on hosts over SSH (numaforge.livepatch)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..defaults import FORKS_LIVEPATCH
from ..display import esc
from ..errors import NumaforgeError
from ..fleet import FleetOptionError
from ..lazy import lazy_module
from ..report import Report
from . import common, gateopts, values
from .optionsets import RolloutSpec, task

if TYPE_CHECKING:
    from .. import livepatch
    from ..livepatch import fleet as lpfleet
    from ..measure import render as mrender
    from ..measure import runner as mrunner
else:  # imported by the task that uses them (numaforge.lazy)
    livepatch = lazy_module("numaforge.livepatch")
    lpfleet = lazy_module("numaforge.livepatch.fleet")
    mrender = lazy_module("numaforge.measure.render")
    mrunner = lazy_module("numaforge.measure.runner")

HELP = {
    "gate": gateopts.GATE_HELP + "; needs --keep",
    "module": "live-patch .ko to validate (its manifest.json next to it is used when present)",
    "target": "kpatch target whose built module to use (its build-kpatch manifest); default: each "
    "host's kernel.target from the inventory",
    "check_script": "LOADED check script run on the host after loading (default: the series' *-LOADED.test)",
    "keep": "leave the patch loaded after validation (default: unload it)",
    "install": "with --keep: also persist it across reboots like livepatch-install (kpatch install, else module dir + unit)",
    "accept_new_host_key": "trust and record an unknown host key (a changed key is always refused)",
    "host_timeout": "seconds of budget per host (default: none); a host past it stops before its next SSH "
    "command, rolls back (unload/revert) and fails",
    "measure": "run the A/B NUMA effect step (A/B outcomes and tracepoint counts, numaforge.measure; CPU-burning "
    "workload, patch unloaded and reloaded) on every host with >= 3 NUMA nodes; default: only hosts in "
    "inventory group 'lab'. The numa-effect task is the full interleaved measurement",
    "no_measure": "no A/B step on any host, not even the lab group",
    "replace": "allow a replace-mode module to supersede (disable) the other live patches loaded on a host",
    "effect_seconds": "workload run length per A/B run, in seconds (default 60, which shows the effect on the lab VM)",
    "rounds": "A/B rounds (each = one run with the patch off and one with it on, ABBA order, in one boot; default 1, "
    "which gives no verdict: a verdict needs >= 6 rounds of paired differences)",
    "signal_after": "seconds of unfinished transition before stalled tasks are signalled (default 15)",
    "revert_after": "seconds of unfinished transition before the patch is reverted and the host fails (default 60)",
}


# the live-patch options every task that loads one takes, checked before any host is asked
# (numaforge.cli.values.preflight)
MODULE_CHECKS: dict[str, values.Check] = {
    # its existence and contents are the task's own first check (numaforge.livepatch), before any host
    "module": values.path_name("--module", "live-patch module (.ko)"),
    "target": values.name("--target", "kpatch target name"),
}


@task(
    hosts=True,
    write=True,
    rollout=RolloutSpec(forks=FORKS_LIVEPATCH, canary=1, max_fail=0.0, gate=True),
    help=HELP,
    renamed={"check": "check_script"},  # build-kpatch's --check meant something else (issue 39)
    checks={
        **MODULE_CHECKS,
        "check_script": values.existing_file("--check-script", "LOADED check script"),
        "effect_seconds": lambda v: values.positive_int(v, "--effect-seconds"),
        "rounds": lambda v: values.positive_int(v, "--rounds"),
        "signal_after": lambda v: values.positive_float(v, "--signal-after"),
        "revert_after": lambda v: values.positive_float(v, "--revert-after"),
    },
)
def validate(
    c,
    select,
    rollout,
    module=None,
    target=None,
    check_script=None,
    keep=False,
    install=False,
    accept_new_host_key=False,
    measure=False,
    no_measure=False,
    replace=False,
    effect_seconds=None,
    rounds=None,
    signal_after=None,
    revert_after=None,
    json=None,
):
    """Validate a built live patch on hosts: preflight, load, transition, verify, NUMA A/B effect, unload/keep."""

    def body(report: Report):
        try:
            opts = _options(keep, install, replace, effect_seconds, rounds, signal_after, revert_after)
            _inv, hosts = common.load_selected(c, report, select)
            report.expect_hosts(h.name for h in hosts)
            measured = _measure_choice(measure, no_measure)
            log = lambda m: common.console.print(esc(m))
            slo_gate = gateopts.livepatch_slo_gate(
                report, rollout, hosts, module=module, target=target, accept_new_host_key=accept_new_host_key, log=log
            )
            outcome = lpfleet.validate_hosts(
                hosts,
                module=module,
                target=target,
                check=check_script,
                opts=opts,
                accept_new_host_key=accept_new_host_key,
                rollout=rollout,
                progress=len(hosts) > 1,
                measure=measured,
                log=log,
                gate=slo_gate,
            )
            _record(report, outcome, slo_gate)
        except NumaforgeError as exc:
            report.error = exc  # execute() records it (report, --junit) and reports it as usual
            raise

    common.execute(
        "validate",
        body,
        json=json,
        options={
            "module": module,
            "target": target,
            "check_script": check_script,
            "keep": keep,
            "effect_seconds": effect_seconds,
            "rounds": rounds,
            "measure": measure,
            "no_measure": no_measure,
            "replace": replace,
            "gate": rollout.gate,
        },
    )


def _options(keep, install, replace, effect_seconds, rounds, signal_after, revert_after) -> livepatch.Options:
    """The per-host validation options, parsed (a clear exit 2 for a bad number)."""
    work = mrunner.WorkloadParams.for_seconds(values.positive_int(effect_seconds, "--effect-seconds", 60))
    return livepatch.Options(
        keep=keep,
        install=install,
        signal_after=values.positive_float(signal_after, "--signal-after", 15.0),
        revert_after=values.positive_float(revert_after, "--revert-after", 60.0),
        replace=replace,
        effect_rounds=values.positive_int(rounds, "--rounds", 1),
        workload=work,
    )


def _measure_choice(measure: bool, no_measure: bool) -> bool | None:
    """--measure (True, with a warning), --no-measure (False), neither (None: the lab group only)."""
    if measure and no_measure:
        raise FleetOptionError(
            "--measure and --no-measure contradict each other",
            "--measure/--no-measure",
            "give one of them (or neither: the A/B step runs on group lab only)",
        )
    if measure:
        common.err_console.print(f"[yellow]warning[/]: {lpfleet.MEASURE_WARNING}")
        return True
    return False if no_measure else None


def _record(report: Report, outcome, slo_gate) -> None:
    """The hosts' results, the gate's record and the rollout into the report; the gate, rollout and A/B effects
    printed."""
    report.hosts.extend(outcome.results)
    if slo_gate is not None:
        gateopts.print_gate(slo_gate.record)
    report.data["fleet"] = outcome.as_dict()
    if outcome.reason:
        common.console.print(f"rollout: {esc(outcome.summary())}")
    _print_effects(outcome.results)


def _print_effects(results) -> None:
    for h in results:
        eff = h.data.get("numa_effect") or {}
        if "third_node_moves" in eff:
            common.console.print(
                f"{h.host}: third-node moves off {eff['third_node_moves']['off']} / on "
                f"{eff['third_node_moves']['on']}; stick dst=-1 off {eff['stick_local']['off']} / on "
                f"{eff['stick_local']['on']}; cross-NUMA migration rate (%) "
                f"off {[r['cross_numa_rate'] for r in eff['runs'] if r['label'] == 'off']} / on "
                f"{[r['cross_numa_rate'] for r in eff['runs'] if r['label'] == 'on']}"
            )
            for line in mrender.verdict_lines(eff, "on"):
                common.console.print(f"{h.host}: on vs off: {esc(line)}")


TASKS = [validate]
