"""Issue 26 item 3: never force-reset a host in POST. A warm restart keeps PowerState "On" (as real BMCs report
it), so after the graceful timeout numaforge used to send a ForceRestart into POST. The simulator here keeps the
host in POST (BootProgress between reset and OSRunning) for longer than the graceful timeout and counts every
ComputerSystem.Reset it receives: no ForceRestart may arrive. A host still in POST when the wait runs out gets a
"still booting" verdict, a Dell host is rebooted only once its config job is Scheduled, and a reset answered with
an error is followed by re-reading the boot state, never by another reset.

Real HTTPS simulators on 127.0.0.1, DMTF's `redfish` library as the client; nothing mocked. The pure decisions
(numaforge.bios.power) are tested on plain documents."""

from __future__ import annotations

import dataclasses
import time

import pytest

from numaforge.bios.apply import Timeouts, apply_host, plan_host
from numaforge.bios.power import BootView, boot_view, force_verdict, phase, restarted, waits
from numaforge.lab.bmc import load_flavour

from .test_bios_apply_bmc import _bmc_password, host_for, opts, run, sim_factory  # noqa: F401 (fixtures)

SHORT = Timeouts(graceful=1.0, power_on=20.0, job=3.0, poll=0.1, settle=5.0)


def _reboot_step(r):
    return next(s for s in r.steps if s.name == "reboot")


# -- pure --------------------------------------------------------------------------------------------------------
def test_phase_reads_bootprogress_hpe_poststate_and_dell_jobs():
    assert phase(boot_view({"PowerState": "On", "BootProgress": {"LastState": "OSRunning"}})) == "os"
    assert (
        phase(boot_view({"PowerState": "On", "BootProgress": {"LastState": "MemoryInitializationStarted"}}))
        == "booting"
    )
    assert (
        phase(boot_view({"PowerState": "On", "BootProgress": {"LastState": "OEM", "OemLastState": "x"}})) == "booting"
    )
    assert phase(boot_view({"PowerState": "On", "Oem": {"Hpe": {"PostState": "InPostDiscoveryComplete"}}})) == "booting"
    assert phase(boot_view({"PowerState": "On", "Oem": {"Hpe": {"PostState": "FinishedPost"}}})) == "os"
    assert phase(boot_view({"PowerState": "On"})) == "unknown"  # says nothing: not "os"
    assert phase(BootView("On", "OSRunning", job="Running")) == "booting"  # iDRAC applying the job in POST
    assert phase(boot_view({"PowerState": "Off"})) == "off"


def test_force_is_allowed_only_for_an_os_that_never_went_down():
    before = BootView("On", "OSRunning", stamp="t0", settings="s0")
    assert force_verdict(before, before, False, False) == ""  # a hung OS: may be forced
    assert "booting" in force_verdict(before, BootView("On", "SetupEntered", stamp="t1"), False, False)
    assert "restarted" in force_verdict(before, BootView("On", "OSRunning", stamp="t2", settings="s0"), False, False)
    assert restarted(before, BootView("On", "OSRunning", stamp="t0", settings="s1"))  # POST applied settings
    assert "does not say the OS is running" in force_verdict(BootView("On"), BootView("On"), False, False)
    assert "answered with an error" in force_verdict(before, before, False, True)


def test_waits_come_from_the_command_line_else_the_vendor_map():
    assert waits(Timeouts(), {"power_on": 1200.0}) == (300.0, 1200.0)
    assert waits(Timeouts(graceful=5.0, power_on=7.0), {"power_on": 1200.0}) == (5.0, 7.0)
    assert waits(Timeouts(), None) == (300.0, 900.0)


# -- on the simulator ---------------------------------------------------------------------------------------------
def _flavour(name: str, boot_progress: str | None):
    f = load_flavour(name)
    return dataclasses.replace(f, boot_progress=boot_progress) if boot_progress else f


@pytest.mark.bmc
@pytest.mark.parametrize(
    "name, boot_progress",
    [
        ("lenovo", None),  # BootProgress.LastState
        ("hpe-gen11", "hpe"),  # only Oem.Hpe.PostState
        ("generic", "none"),  # nothing: the settings time stamps tell when POST applied the values
        ("dell", None),  # BootProgress and the config job Running during POST
    ],
)
def test_a_host_in_post_longer_than_the_graceful_timeout_is_never_forced(sim_factory, name, boot_progress):
    sim = sim_factory(_flavour(name, boot_progress))
    sim.state.warm_restart = True  # PowerState stays "On" through the restart
    sim.state.post_seconds = 3.0  # POST lasts 3 s; the graceful timeout is 1 s
    r = run(apply_host, host_for(sim), opts(reboot=True, timeouts=SHORT))
    assert r.status == "changed", r.message
    assert sim.state.resets == {"GracefulRestart": 1}, "a host in POST must never get a ForceRestart"
    assert [x["type"] for x in _reboot_step(r).detail["resets"]] == ["GracefulRestart"]
    assert r.data["mismatches"] == [] and sim.bios_pending() == {}


@pytest.mark.bmc
def test_a_host_still_in_post_when_the_wait_runs_out_gets_a_verdict_not_a_reset(sim_factory):
    sim = sim_factory("hpe-gen11")
    sim.state.warm_restart = True
    sim.state.post_seconds = 60.0
    r = run(apply_host, host_for(sim), opts(reboot=True, timeouts=dataclasses.replace(SHORT, power_on=3.0)))
    assert r.status == "failed"
    assert "still booting after" in r.message and "it was not reset again" in r.message, r.message
    assert "PostState InPost" in r.message and "BootProgress MemoryInitializationStarted" in r.message
    assert "do not reset a host in POST" in r.message
    assert sim.state.resets == {"GracefulRestart": 1}


@pytest.mark.bmc
def test_a_hung_os_is_still_forced_after_the_graceful_timeout(sim_factory):
    sim = sim_factory("lenovo")
    sim.state.warm_restart = True
    sim.graceful_ignored = True  # the OS ignores the request: BootProgress stays OSRunning, same stamp
    r = run(apply_host, host_for(sim), opts(reboot=True, timeouts=SHORT))
    assert r.status == "changed", r.message
    assert sim.state.resets == {"GracefulRestart": 1, "ForceRestart": 1}


@pytest.mark.bmc
def test_a_dell_host_whose_job_is_not_scheduled_is_not_rebooted(sim_factory):
    sim = sim_factory("dell-16g")
    sim.state.new_job_state = "New"  # the iDRAC never schedules the job
    r = run(apply_host, host_for(sim), opts(reboot=True, timeouts=SHORT))
    assert r.status == "failed"
    assert "is New, not Scheduled" in r.message and "the host was not rebooted" in r.message, r.message
    assert sim.state.resets == {} and sim.count("POST", "Reset") == 0


@pytest.mark.bmc
def test_a_reset_answered_with_an_error_after_the_bmc_acted_is_not_sent_again(sim_factory):
    sim = sim_factory("lenovo")
    sim.state.warm_restart = True
    sim.state.post_seconds = 2.0
    sim.inject("5xx", r"ComputerSystem\.Reset$", method="POST", after=True, status=500)
    r = run(apply_host, host_for(sim), opts(reboot=True, timeouts=SHORT))
    assert r.status == "changed", r.message
    assert sim.state.resets == {"GracefulRestart": 1} and sim.count("POST", "Reset") == 1
    assert any("answered 500" in w and "the BMC acted on it" in w for w in r.data["warnings"]), r.data["warnings"]


@pytest.mark.bmc
def test_a_reset_refused_before_the_bmc_acted_says_so_without_resetting_again(sim_factory):
    sim = sim_factory("lenovo")
    sim.inject("5xx", r"ComputerSystem\.Reset$", method="POST", status=500)
    r = run(apply_host, host_for(sim), opts(reboot=True, timeouts=SHORT))
    assert r.status == "failed"
    assert "ComputerSystem.Reset GracefulRestart answered 500" in r.message
    assert "the host did not restart (PowerState On, BootProgress OSRunning" in r.message, r.message
    assert "reset the host" not in r.message.lower()
    assert sim.state.resets == {} and sim.count("POST", "Reset") == 1


@pytest.mark.bmc
def test_a_host_whose_last_state_is_os_boot_started_is_back_once_the_values_show(sim_factory):
    """Where no OS agent reports OSRunning the last BootProgress state stays OSBootStarted: the host is back
    once it restarted and the BMC shows the new values (never forced: OSBootStarted counts as booting)."""
    sim = sim_factory("dell-16g")
    sim.state.warm_restart, sim.state.post_seconds, sim.state.booted_state = True, 2.0, "OSBootStarted"
    r = run(apply_host, host_for(sim), opts(reboot=True, timeouts=SHORT))
    assert r.status == "changed", r.message
    assert sim.state.resets == {"GracefulRestart": 1} and r.data["mismatches"] == []


@pytest.mark.bmc
def test_a_force_restart_that_did_not_take_is_not_called_not_forced(sim_factory):
    """Issue 41 item 8: the OS ignored the GracefulRestart, the BMC accepted the ForceRestart and never carried it
    out. The verdict said the host "was not forced (it may be in POST)": it was forced, and nothing happened."""
    sim = sim_factory("lenovo")
    sim.state.warm_restart = True
    sim.graceful_ignored = True
    sim.state.force_ignored = True
    r = run(apply_host, host_for(sim), opts(reboot=True, timeouts=dataclasses.replace(SHORT, power_on=2.0)))
    assert r.status == "failed"
    assert sim.state.resets == {"GracefulRestart": 1, "ForceRestart": 1}
    assert "not forced" not in r.message, r.message
    assert "ForceRestart the BMC accepted" in r.message and "it was not reset again" in r.message, r.message


@pytest.mark.bmc
@pytest.mark.parametrize("flavour", ["lenovo", "hpe-gen11"])
def test_no_reset_of_any_kind_is_sent_to_a_host_in_post(sim_factory, flavour):
    """Issue 41 item 8: a host already in POST (BootProgress MemoryInitializationStarted, HPE PostState InPost:
    someone else restarted it) with values pending got a GracefulRestart. Nothing may be sent; the host fails
    with what the BMC shows and the values stay pending."""
    sim = sim_factory(flavour)
    h = host_for(sim)
    assert run(apply_host, h).status == "changed"  # staged, no reset
    pending = sim.bios_pending()
    sim.state.warm_restart = True
    sim.state.post_seconds = 60.0
    sim.state.reset("ForceRestart")  # another operator's reset: POST for a minute
    t0 = time.monotonic()
    # the simulator's state moves only when asked (advance(), as each request does): without it this loop read
    # the same "None" for its whole 10 s and the host entered POST at apply_host's first request
    while sim.state.boot_state != "MemoryInitializationStarted" and time.monotonic() - t0 < 10:
        time.sleep(0.05)
        sim.state.advance()
    assert sim.state.boot_state == "MemoryInitializationStarted", "the host never reached POST"
    sim.reset_counts()
    r = run(apply_host, h, opts(reboot=True, timeouts=SHORT))
    assert r.status == "failed"
    assert sim.count("POST", "Reset") == 0, "no reset into POST"
    assert "booting" in r.message and "was not sent" in r.message and "MemoryInitializationStarted" in r.message
    assert sim.bios_pending() == pending


@pytest.mark.bmc
def test_a_host_without_boot_progress_is_judged_once_its_values_are_current(sim_factory):
    """Issue 41 item 8 (the R750 and SR670 V2 captures show no BootProgress): the host goes Off, then On, and runs
    POST for 3 s with nothing to show it; the values become current only when POST ends. Main took "On" after
    the Off as "back", waited the settle time (1 s here) and judged the host on values not current yet."""
    sim = sim_factory(_flavour("generic", "none"))
    sim.state.post_seconds = 3.0
    r = run(apply_host, host_for(sim), opts(reboot=True, timeouts=dataclasses.replace(SHORT, settle=1.0)))
    assert r.status == "changed", r.message
    assert r.data["mismatches"] == [] and sim.bios_pending() == {}
    assert sim.state.resets == {"GracefulRestart": 1}


@pytest.mark.bmc
@pytest.mark.parametrize("flavour", ["generic", "lenovo", "hpe"])
def test_a_value_post_refused_is_reported_with_the_bmcs_own_message(sim_factory, flavour):
    """Issue 41 item 8: POST refuses one value and says so in the Bios's @Redfish.Settings Messages (the BMC's
    per-attribute failure); main reported only "X is 'a', wanted 'b'". The mismatch carries the BMC's message."""
    sim = sim_factory(flavour)
    h = host_for(sim)
    plan = [i for i in run(plan_host, h).data["plan"] if i["action"] == "change"]
    refused = plan[-1]["attribute"]
    sim.state.apply_refused = {refused}
    r = run(apply_host, h, opts(reboot=True, timeouts=dataclasses.replace(SHORT, settle=1.0)))
    assert r.status == "failed", r.message
    (m,) = r.data["mismatches"]
    assert m["attribute"] == refused and "PropertyValueIncorrect" in m.get("bmc_message", ""), m
    assert f"{refused} is" in r.message and "(the BMC: " in r.message and "PropertyValueIncorrect" in r.message
