"""Advice never undoes the operator's intent (issue 39 item 2): after bios-reset-defaults the message told the
operator to reboot with `invoke bios-apply --reboot` (which writes the profile back over the defaults), and a Dell
job queued made bios-apply advise `invoke bios-apply --reboot`, the very command it refused.

Walked here: every BIOS operation (numaforge.bios.operations.OPERATIONS, each power action, --dry-run or not) and
bios-apply, on one simulator flavour of each job-queue kind the flavours have, in each BMC state that changes the
outcome (clean, values pending, a queued config job, a running one). No message may name, as a command to run,
the refused command or one of numaforge.bios.operations.UNDONE_BY's commands for that operation. Real HTTPS
simulators on 127.0.0.1; nothing mocked."""

from __future__ import annotations

import re

import pytest

from numaforge.bios.apply import RegistryCache, apply_host
from numaforge.bios.operations import OPERATIONS, TASK_OF, UNDONE_BY, OpOptions, operate_host
from numaforge.bios.power import POWER_ACTIONS
from numaforge.lab.bmc.flavours import ALL_FLAVOURS, load_flavour
from numaforge.report import HostResult

from .test_bios_apply_bmc import _bmc_password, admin_session, host_for, opts, sim_factory  # noqa: F401 (fixtures)

pytestmark = pytest.mark.bmc

# one flavour per job-queue kind the simulator's flavours have (derived from their data)
KINDS: dict[str, str] = {}
for _name in ALL_FLAVOURS:
    KINDS.setdefault(load_flavour(_name).jobs, _name)
COMMAND = re.compile(r"`(?:invoke|numaforge) ([a-z][a-z-]*)([^`]*)`")


def commands(text: str) -> list[str]:
    """The commands a message advises: "task" and "task action" for each `invoke task ...` (or `numaforge task ...`) in it."""
    out = []
    for task, args in COMMAND.findall(text):
        words = args.split()
        action = next((w for w in words if w in POWER_ACTIONS), "")
        out.append(f"{task} {action}".strip())
    return out


def forbidden(op: str, failed: bool, action: str = "") -> set[str]:
    own = f"{TASK_OF[op]} {action}".strip()
    return set(UNDONE_BY[op]) | ({own} if failed else set())


def named(advised: list[str], banned: set[str]) -> list[str]:
    return [c for c in advised if c in banned or c.split()[0] in banned]


def stage_pending(sim) -> None:
    entry = next(
        a
        for a in sim.flavour.registry["RegistryEntries"]["Attributes"]
        if a["Type"] == "Enumeration" and not a.get("ReadOnly") and len(a.get("Value") or []) > 1
    )
    other = next(v["ValueName"] for v in entry["Value"] if v["ValueName"] != sim.bios_current()[entry["AttributeName"]])
    admin_session(sim).patch(
        sim.url + sim.settings_path, json={"Attributes": {entry["AttributeName"]: other}}
    ).raise_for_status()


def queue_job(sim, running: bool) -> None:
    stage_pending(sim)
    jobs = sim.flavour.jobs_path
    admin_session(sim).post(sim.url + jobs, json={"TargetSettingsURI": sim.settings_path}).raise_for_status()
    if running:
        sim.state.reset("ForceRestart")  # the host runs POST (power_delay is long): the job is Running


SCENARIOS = {
    "clean": lambda sim: None,
    "pending": stage_pending,
    "queued-job": lambda sim: queue_job(sim, False),
    "running-job": lambda sim: queue_job(sim, True),
}


def runs():
    """(op, OpOptions or None for bios-apply, action) for every operation, every power action, dry run or not."""
    for op in OPERATIONS:
        if op == "power":
            for action in POWER_ACTIONS:
                yield op, OpOptions(power=action), action
                yield op, OpOptions(power=action, dry_run=True), action
        else:
            yield op, OpOptions(), ""
            yield op, OpOptions(dry_run=True), ""
    yield "apply", None, ""


def test_every_operation_has_an_undo_row():
    assert set(UNDONE_BY) == set(OPERATIONS) | {"apply"}
    assert set(TASK_OF) == set(UNDONE_BY)


# every BMC kind x scenario that exists: a kind with no job queue has no job scenario
CASES = [(k, sc) for sc in SCENARIOS for k in sorted(KINDS) if not (sc.endswith("job") and k == "none")]


@pytest.mark.parametrize(("kind", "scenario"), CASES)
def test_no_outcome_advises_the_refused_command_or_one_that_undoes_it(sim_factory, kind, scenario):
    seen, bad = 0, []
    for op, oopts, action in runs():
        sim = sim_factory(KINDS[kind], power_delay=30)
        SCENARIOS[scenario](sim)
        h = host_for(sim)
        r = HostResult(h.name)
        if oopts is None:
            apply_host(h, opts(), RegistryCache(), r)
        else:
            operate_host(op, h, opts(), oopts, RegistryCache(), r)
        sim.stop()
        advised = commands(r.message)
        wrong = named(advised, forbidden(op, r.status == "failed", action))
        if wrong:
            bad.append(f"{TASK_OF[op]} {action} ({r.status}): advises {wrong}: {r.message}")
        seen += 1
    assert not bad, "\n".join(bad)
    assert seen == sum(1 for _ in runs())


def test_reset_defaults_advises_a_restart_not_an_apply(sim_factory):
    sim = sim_factory(KINDS["dell"])
    r = HostResult("gpu-01")
    operate_host("reset-defaults", host_for(sim), opts(), OpOptions(), RegistryCache(), r)
    assert r.status == "changed", r.message
    assert commands(r.message) == ["bmc-power graceful-restart"], r.message


def test_a_queued_dell_job_refusal_advises_a_restart_or_a_delete_never_bios_apply(sim_factory):
    sim = sim_factory(KINDS["dell"])
    queue_job(sim, False)
    r = HostResult("gpu-01")
    apply_host(host_for(sim), opts(), RegistryCache(), r)
    assert r.status == "failed" and "already queued" in r.message
    assert sorted(commands(r.message)) == ["bios-job-delete", "bmc-power graceful-restart"], r.message
