"""The simulated machine (pure, fake clock): timed power transitions, pending values applied only when the host
boots, Dell-like config jobs, persistence."""

import pytest

from numaforge.lab.bmc.flavours import load_flavour
from numaforge.lab.bmc.state import BMCState


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def make(flavour="generic", tmp_path=None, clock=None):
    return BMCState(
        load_flavour(flavour),
        power_delay=5.0,
        state_file=(tmp_path / "state.json") if tmp_path else None,
        clock=clock or Clock(),
    )


def test_restart_goes_off_then_on_after_power_delay():
    clock = Clock()
    st = make(clock=clock)
    st.reset("GracefulRestart")
    st.advance()
    assert st.power == "Off"
    clock.t += 4.9
    st.advance()
    assert st.power == "Off"
    clock.t += 0.2
    st.advance()
    assert st.power == "On" and st.boot_count == 1


def test_pending_applies_on_host_boot_not_before():
    clock = Clock()
    st = make(clock=clock)
    st.stage({"Q0100": "NPS4"}, None)
    assert st.current["Q0100"] == "NPS1" and st.pending == {"Q0100": "NPS4"}
    st.reset("ForceRestart")
    st.advance()
    assert st.current["Q0100"] == "NPS1"  # still POSTing
    clock.t += 5
    st.advance()
    assert st.current["Q0100"] == "NPS4" and st.pending == {}
    assert st.settings_messages[0]["RelatedProperties"] == ["#/Attributes/Q0100"]


def test_manager_reset_does_not_apply_bios():
    st = make()
    st.stage({"Q0100": "NPS4"}, None)
    st.manager_reset()
    st.advance()
    assert st.pending == {"Q0100": "NPS4"} and st.current["Q0100"] == "NPS1"


def test_graceful_shutdown_then_on():
    clock = Clock()
    st = make(clock=clock)
    st.reset("GracefulShutdown")
    assert st.power == "PoweringOff"
    clock.t += 5
    st.advance()
    assert st.power == "Off"
    st.reset("On")
    assert st.power == "PoweringOn"
    clock.t += 5
    st.advance()
    assert st.power == "On"


def test_force_off_is_immediate_and_cancels_a_boot():
    clock = Clock()
    st = make(clock=clock)
    st.reset("ForceRestart")
    st.reset("ForceOff")
    clock.t += 10
    st.advance()
    assert st.power == "Off"


def test_hung_os_ignores_graceful_restart_but_not_force():
    clock = Clock()
    st = make(clock=clock)
    st.graceful_ignored = True
    st.stage({"Q0100": "NPS2"}, None)
    st.reset("GracefulRestart")
    clock.t += 10
    st.advance()
    assert st.power == "On" and st.boot_count == 0 and st.pending
    st.reset("ForceRestart")
    clock.t += 5
    st.advance()
    assert st.boot_count == 1 and st.current["Q0100"] == "NPS2"


def test_dell_pending_without_job_survives_reboot():
    """The #1 complaint: PATCH returned OK but the value stayed pending after reboot (no config job)."""
    clock = Clock()
    st = make("dell", clock=clock)
    st.stage({"NumaNodesPerSocket": "4"}, None)
    st.reset("ForceRestart")
    clock.t += 5
    st.advance()
    assert st.pending == {"NumaNodesPerSocket": "4"} and st.current["NumaNodesPerSocket"] == "1"


def test_dell_job_scheduled_running_completed():
    clock = Clock()
    st = make("dell", clock=clock)
    st.stage({"NumaNodesPerSocket": "4"}, "OnReset")
    job = st.create_job("/redfish/v1/Systems/System.Embedded.1/Bios/Settings")
    assert job["JobState"] == "Scheduled" and st.active_job()["Id"] == job["Id"]
    st.reset("GracefulRestart")
    assert st.jobs[job["Id"]]["JobState"] == "Running"
    clock.t += 5
    st.advance()
    assert st.jobs[job["Id"]]["JobState"] == "Completed" and st.jobs[job["Id"]]["PercentComplete"] == 100
    assert st.current["NumaNodesPerSocket"] == "4" and st.active_job() is None


def test_dell_deleting_a_scheduled_job_discards_pending():
    st = make("dell")
    st.stage({"NumaNodesPerSocket": "4"}, "OnReset")
    job = st.create_job("x")
    assert st.delete_job(job["Id"]) and st.pending == {} and not st.delete_job(job["Id"])


def test_reset_bios_stages_defaults():
    st = make()
    st.current["Q0100"] = "NPS4"
    st.reset_bios_defaults()
    assert st.pending == {"Q0100": "NPS1"}


def test_state_persists_across_restarts(tmp_path):
    clock = Clock()
    st = make("dell", tmp_path, clock)
    st.stage({"NumaNodesPerSocket": "2"}, "OnReset")
    st.create_job("x")
    again = make("dell", tmp_path, clock)
    assert again.pending == {"NumaNodesPerSocket": "2"} and again.active_job() is not None
    other = make("hpe", tmp_path, clock)  # a different flavour ignores the file
    assert other.pending == {}


def test_unknown_reset_type_is_rejected():
    with pytest.raises(ValueError):
        make().reset("Nmi")


@pytest.mark.parametrize("reset", ["GracefulRestart", "ForceRestart"])
def test_post_lasts_post_seconds_from_the_power_transition_whenever_the_bmc_is_asked(reset):
    """A warm restart's POST ends ``post_seconds`` after it began (power_delay after the reset), not
    ``post_seconds`` after the first request that looked: a client looking late must not lengthen POST (the
    reboot benchmark's 60 s POST was up to one poll longer: issue 43 item 5)."""
    clock = Clock()
    st = make(clock=clock)
    st.warm_restart, st.post_seconds = True, 60.0
    st.stage({"Q0100": "NPS4"}, None)
    st.reset(reset)
    clock.t += 5.0 + 30.0  # nobody looks during the power transition nor for 30 s of POST
    st.advance()
    assert st.in_post() and st.boot_state_time == 1005.0, st.boot_state_time
    clock.t = 1005.0 + 60.0 - 0.1
    st.advance()
    assert st.in_post()
    clock.t = 1005.0 + 60.0
    st.advance()
    assert not st.in_post() and st.current["Q0100"] == "NPS4" and st.boot_state_time == 1065.0
