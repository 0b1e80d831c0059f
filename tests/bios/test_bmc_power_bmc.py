"""bmc-power (issue 39 item 2): status / on / off / graceful-restart / force-restart through ComputerSystem.Reset,
with bios-apply's POST safety -- nothing is sent to a host in POST, a forced reset only while the BMC shows the OS
running, only reset types the BMC allows.

Real HTTPS simulators on 127.0.0.1 in every flavour the simulator has (its flavour list), DMTF's `redfish` library
as the client; nothing mocked. The pure decision (numaforge.bios.power.power_decision) is walked over every action
and every boot phase."""

from __future__ import annotations

import dataclasses
import json
import time

import pytest

from numaforge.bios.apply import RegistryCache
from numaforge.bios.operations import OpOptions, operate_host
from numaforge.bios.power import (
    FORCED,
    POWER_ACTIONS,
    BootView,
    action_info_reset_types,
    in_post,
    phase,
    power_decision,
)
from numaforge.cli import bios as cli_bios
from numaforge.lab.bmc import BMCSimulator, flavours
from numaforge.lab.bmc.flavours import ALL_FLAVOURS, load_flavour
from numaforge.report import HostResult

from .test_bios_apply_bmc import PASSWORD, _bmc_password, host_for, opts, sim_factory  # noqa: F401 (fixtures)
from .test_bios_cli_bmc import PASSWORD as CLI_PASSWORD
from .test_bios_cli_bmc import invoke

pytestmark = pytest.mark.bmc

VIEWS = {
    "os": BootView("On", "OSRunning", stamp="t0"),
    "hpe-finished": BootView("On", post_state="FinishedPost"),
    "unknown": BootView("On"),
    "os-loading": BootView("On", "OSBootStarted", stamp="t0"),
    "post": BootView("On", "MemoryInitializationStarted", stamp="t1"),
    "hpe-post": BootView("On", post_state="InPost"),
    "job-running": BootView("On", "OSRunning", job="Running"),
    "powering-on": BootView("PoweringOn"),
    "off": BootView("Off", "None"),
}


def power(h, action, **kw) -> HostResult:
    r = HostResult(h.name)
    operate_host("power", h, opts(), OpOptions(power=action, **kw), RegistryCache(), r)
    return r


def test_every_flavour_the_simulator_has_data_for_is_walked():
    """ALL_FLAVOURS (what the tests below walk) is every flavour file of the simulator."""
    assert set(ALL_FLAVOURS) == {p.name.removesuffix(".yaml") for p in flavours.HERE.glob("*.yaml")}


def test_the_cli_names_every_power_action():
    assert tuple(cli_bios.POWER_ACTIONS) == tuple(POWER_ACTIONS)


@pytest.mark.parametrize("action", list(POWER_ACTIONS))
@pytest.mark.parametrize("view", list(VIEWS))
def test_power_decision_never_resets_in_post_and_forces_only_a_running_os(action, view):
    now = VIEWS[view]
    d = power_decision(action, now, [], "h1")
    if in_post(now):
        assert d.reset in ("", "On"), d
        assert d.reset != "On" or now.power not in ("On", "PoweringOn")
    if d.reset in FORCED:
        assert phase(now) == "os", d
    if d.status == "failed":
        assert d.reset == "" and d.fix, d
        assert f"bmc-power --host h1 {action}`" not in d.fix, "a refusal never advises the request it refused"
    if action == "status":
        assert d.reset == "" and d.status == "unchanged"


def test_power_decision_sends_only_what_the_bmc_allows():
    d = power_decision("off", VIEWS["os"], ["On", "ForceOff"])
    assert d.reset == "ForceOff"
    refused = power_decision("off", VIEWS["unknown"], ["On", "ForceOff"])
    assert refused.status == "failed" and "may be in POST" in refused.why
    none = power_decision("graceful-restart", VIEWS["os"], ["On", "ForceOff"])
    assert none.status == "failed" and "does not offer GracefulRestart" in none.why and "On, ForceOff" in none.why


def test_reset_types_from_an_action_info_document():
    doc = {
        "@odata.type": "#ActionInfo.v1_3_0.ActionInfo",
        "Parameters": [{"Name": "ResetType", "Required": True, "AllowableValues": ["On", "ForceOff"]}],
    }
    assert action_info_reset_types(doc) == ["On", "ForceOff"]
    assert action_info_reset_types({"Parameters": [{"Name": "Other"}]}) == []
    assert action_info_reset_types(["not", "a", "document"]) == []


def _wait_post(sim, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        sim.state.advance()
        if sim.state.in_post():
            return
        time.sleep(0.05)
    raise AssertionError("the simulator never entered POST")


@pytest.mark.parametrize("flavour", ALL_FLAVOURS)
def test_bmc_power_in_every_flavour(sim_factory, flavour):
    sim = sim_factory(flavour)
    h = host_for(sim)

    status = power(h, "status")
    assert status.status == "unchanged", status.message
    assert "PowerState On" in status.message and sim.count("POST", "Reset") == 0

    on = power(h, "on")
    assert on.status == "unchanged" and "already on" in on.message and sim.count("POST", "Reset") == 0

    dry = power(h, "graceful-restart", dry_run=True)
    assert dry.status == "ok" and "would send GracefulRestart" in dry.message
    assert sim.count("POST", "Reset") == 0

    # the next restart is warm (PowerState stays On) and its POST lasts: the host is in POST after it
    sim.state.warm_restart, sim.state.post_seconds = True, 60.0
    sent = power(h, "graceful-restart")
    assert sent.status == "changed", sent.message
    assert sim.state.resets == {"GracefulRestart": 1}
    assert sent.data["operation"]["allowed_from"] == "ResetType@Redfish.AllowableValues"

    _wait_post(sim)
    for action in ("graceful-restart", "force-restart", "off"):
        refused = power(h, action)
        assert refused.status == "failed" and "in POST" in refused.message, (action, refused.message)
        assert f"bmc-power --host {h.name} {action}`" not in refused.message
    assert sim.state.resets == {"GracefulRestart": 1}, "nothing is sent to a host in POST"


@pytest.mark.parametrize("flavour", ALL_FLAVOURS)
def test_force_restart_needs_the_os_running_and_on_powers_an_off_host(sim_factory, flavour):
    """A BMC that reports no boot progress at all (the flavour made silent): a forced reset is refused; the same
    flavour reporting OSRunning takes it; off then on."""
    silent = sim_factory(dataclasses.replace(load_flavour(flavour), boot_progress="none"))
    refused = power(host_for(silent), "force-restart")
    assert refused.status == "failed" and "may be in POST" in refused.message
    assert silent.state.resets == {}

    sim = sim_factory(flavour)
    h = host_for(sim)
    forced = power(h, "force-restart")
    assert forced.status == "changed" and sim.state.resets == {"ForceRestart": 1}, forced.message
    time.sleep(0.5)
    off = power(h, "off")
    assert off.status == "changed" and sim.state.resets.get("GracefulShutdown") == 1, off.message
    end = time.monotonic() + 10
    while sim.power_state() != "Off" and time.monotonic() < end:
        time.sleep(0.05)
    again = power(h, "off")
    assert again.status == "unchanged" and "already off" in again.message
    restart = power(h, "graceful-restart")
    assert restart.status == "failed" and f"bmc-power --host {h.name} on`" in restart.message
    on = power(h, "on")
    assert on.status == "changed" and sim.state.resets.get("On") == 1, on.message


def test_bmc_power_cli_refuses_to_guess_hosts_and_dry_run_sends_nothing(tmp_path):
    sims = [
        BMCSimulator(flavour="dell", tls=True, username="admin", password=CLI_PASSWORD, power_delay=0.3).start()
        for _ in range(2)
    ]
    try:
        inv = tmp_path / "inv.yaml"
        lines = ["version: 1", "hosts:"]
        for i, s in enumerate(sims):
            lines += [
                f"  h{i}:",
                f"    bmc: {{url: '{s.url}', username: admin, password: 'env:NF_CLI_BMC_PW', ca_bundle: '{s.ca_file}'}}",
            ]
        inv.write_text("\n".join(lines) + "\n")
        guessed = invoke("bmc-power", "-i", str(inv), "graceful-restart")
        assert guessed.returncode == 2 and "no host was selected" in guessed.stderr + guessed.stdout
        bad = invoke("bmc-power", "-i", str(inv), "--host", "h0", "reboot")
        assert bad.returncode == 2 and "unknown action 'reboot'" in bad.stderr + bad.stdout
        dry = invoke(
            "bmc-power",
            "-i",
            str(inv),
            "--host",
            "h0",
            "graceful-restart",
            "--dry-run",
            "--json",
            str(tmp_path / "r.json"),
        )
        assert dry.returncode == 0, dry.stderr + dry.stdout
        doc = json.loads((tmp_path / "r.json").read_text())
        assert doc["hosts"][0]["data"]["operation"]["reset"] == "GracefulRestart"
        status = invoke("bmc-power", "-i", str(inv), "--host", "h1", "status")
        assert status.returncode == 0 and "PowerState On" in status.stdout + status.stderr
        assert all(s.state.resets == {} for s in sims)
    finally:
        for s in sims:
            s.stop()
