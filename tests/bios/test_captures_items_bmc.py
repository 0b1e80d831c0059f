"""Issue 41 items 1, 5-7, on the captured trees that show them (tests/data/captures, served as captured by the
simulator's mockup mode; real HTTPS, DMTF's `redfish` library as the client; nothing mocked)."""

from __future__ import annotations

import json

import pytest

from numaforge.bios import power
from numaforge.bios.apply import Timeouts, apply_host, plan_host
from numaforge.bios.resources import jobs

from .conftest import capture_dirs
from .test_bios_apply_bmc import PASSWORD, _bmc_password, host_for, opts, run  # noqa: F401 (fixture)

pytestmark = pytest.mark.bmc

CAPTURES = {c.name: c for c in capture_dirs()}
TIMEOUTS = Timeouts(graceful=3.0, power_on=15.0, job=5.0, poll=0.1, settle=3.0)


def _host(sim, **kw):
    """The host of a capture; where the BMC manages several systems, the one with a Bios (as an operator would)."""
    several = len(sim.tree["redfish/v1/systems"].get("Members") or []) > 1
    return host_for(sim, system_id=sim.system_path.rstrip("/").rsplit("/", 1)[-1] if several else None, **kw)


def test_hpe_slot_patterns_resolve_against_the_hosts_bios_not_the_registry(mockup_factory):
    """Item 1: the DL385's A42 registry describes PciSlot<N>Aspm for slots this board lacks, and EmbNicAspm; its
    Bios has only some of them. Only those are planned, every one of them."""
    sim = mockup_factory(CAPTURES["libredfish-hpe-dl385-gen10p"], password=PASSWORD)
    bios = sim.bios_current()
    registry = next(d for k, d in sim.tree.items() if "RegistryEntries" in d and "A42" in str(d.get("Id")))
    described = {a["AttributeName"] for a in registry["RegistryEntries"]["Attributes"]}
    aspm = {a for a in described if a == "EmbNicAspm" or (a.startswith("PciSlot") and a.endswith("Aspm"))}
    assert aspm - set(bios), "the capture no longer shows the registry describing more slots than the Bios has"
    r = run(plan_host, _host(sim, profile="epyc-gpudirect"))
    assert r.status in ("ok", "unchanged"), r.message
    planned = {i["attribute"] for i in r.data["plan"] if i.get("setting") == "pcie_aspm"}
    assert planned == aspm & set(bios), json.dumps(r.data["plan"], indent=1)[:3000]


def _raw_profile(tmp_path, values: dict) -> str:
    """A profile of raw values only (for a board no vendor map covers), in a profiles directory of the test's."""
    lines = ["description: raw values only (test)", "settings: {}", "raw:", "  {{ vendor }}:"]
    lines += [f"    {k}: {json.dumps(v)}" for k, v in values.items()]
    (tmp_path / "raw-only.yaml.j2").write_text("\n".join(lines) + "\n")
    return str(tmp_path)


def test_ami_reboot_honours_the_reset_types_its_action_info_lists(mockup_factory, tmp_path):
    """Item 5: the AMI MegaRAC (DGX H100 capture) lists ForceOff, ForceRestart, GracefulShutdown and On in its
    @Redfish.ActionInfo -- no GracefulRestart, which it refuses with a 400. --reboot shuts the OS down gracefully,
    powers the host on, and says so; GracefulRestart is never sent."""
    sim = mockup_factory(CAPTURES["libredfish-ami-dgx-viking"], password=PASSWORD, power_delay=0.2)
    assert "GracefulRestart" not in sim.first.reset_types
    before = sim.bios_current()
    want = "Disabled" if before["SriovSupport"] == "Enabled" else "Enabled"
    h = _host(sim, profile="raw-only")
    o = opts(reboot=True, timeouts=TIMEOUTS, profiles_dir=_raw_profile(tmp_path, {"SriovSupport": want}))
    r = run(apply_host, h, o)
    assert r.status == "changed", r.message
    assert sim.resets == {"GracefulShutdown": 1, "On": 1}, sim.resets
    assert sim.bios_current()["SriovSupport"] == want and sim.bios_pending() == {}
    said = [w for w in r.data.get("warnings", []) if "does not offer GracefulRestart" in w]
    assert said and "GracefulShutdown, then On" in said[0] and "ActionInfo" in said[0], r.data.get("warnings")


def _systems(capture) -> list[dict]:
    docs = [json.loads(p.read_text()) for p in capture.glob("redfish/v1/*/*/index.json")]
    return [d for d in docs if str(d.get("@odata.type", "")).startswith("#ComputerSystem.")]


def test_boot_progress_vocabulary_is_dsp8010s():
    """Item 6: the states read as booting are DSP8010's (ComputerSystem BootProgressTypes), every LastState a
    capture shows is one of them, and a value DSP8010 does not define is "cannot tell", never booting."""
    assert power.BOOTING <= set(power.BOOT_PROGRESS)
    shown = {
        (c.name, str((s.get("BootProgress") or {}).get("LastState")))
        for c in CAPTURES.values()
        for s in _systems(c)
        if (s.get("BootProgress") or {}).get("LastState")
    }
    assert shown and {v for _, v in shown} <= set(power.BOOT_PROGRESS), shown
    invented = power.BootView(power="On", last_state="SystemHardwareInitializationStarted")
    assert power.phase(invented) == "unknown"


def test_a_running_supermicro_showing_hardware_initialization_complete_can_be_forced():
    """Item 6: the X13 capture is On and shows SystemHardwareInitializationComplete (its BMC sees nothing later):
    neither POST nor OS ("unknown"), but POST is over -- a graceful restart is not refused as "in POST", and a hung
    OS there can be forced (bmc-power force-restart; bios-apply after the graceful wait), where a host whose BMC
    says nothing at all still cannot."""
    (system,) = [s for s in _systems(CAPTURES["libredfish-supermicro-x13"]) if s.get("BootProgress")]
    view = power.boot_view(system)
    assert view.last_state == "SystemHardwareInitializationComplete" and view.power == "On"
    assert power.phase(view) == "unknown"
    allowed = list(power.RESTART_ORDER) + ["On", "ForceOff"]
    assert power.power_decision("graceful-restart", view, allowed).status != "failed"
    assert power.power_decision("force-restart", view, allowed).reset == "ForceRestart"
    assert power.force_verdict(view, view, seen_restart=False, errored=False) == ""
    silent = power.BootView(power="On")
    assert power.power_decision("force-restart", silent, allowed).status == "failed"
    assert "may be in POST" in power.force_verdict(silent, silent, seen_restart=False, errored=False)


@pytest.mark.parametrize(
    "offered,first",
    [
        (["GracefulRestart", "ForceRestart"], "GracefulRestart"),
        (["ForceOff", "ForceRestart", "GracefulShutdown", "On"], "GracefulShutdown"),  # the AMI capture's ActionInfo
        (["GracefulShutdown", "ForceRestart"], "ForceRestart"),  # no On: a shutdown could not be undone
        (["PowerCycle"], "PowerCycle"),
        ([], "GracefulRestart"),  # not stated: the usual one, the BMC refuses what it lacks
    ],
)
def test_the_first_reset_follows_the_documented_order(offered, first):
    assert power.first_reset("os", offered, "ActionInfo X")[0] == first
    said = power.first_reset("os", offered, "ActionInfo X")[1]
    assert bool(said) == (first != "GracefulRestart" and bool(offered)), said
    assert power.first_reset("off", ["On", "ForceOff"])[0] == "On"


def _profile(tmp_path, settings: dict) -> str:
    lines = ["description: settings only (test)", "settings:"] + [
        f"  {k}: {json.dumps(v)}" for k, v in settings.items()
    ]
    (tmp_path / "only.yaml.j2").write_text("\n".join(lines) + "\n")
    return str(tmp_path)


def test_a_preset_is_written_only_when_another_change_needs_it(mockup_factory, tmp_path):
    """Item 7: on the DL385 capture SR-IOV and the IOMMU are already on; a profile asking only for them changes
    nothing, so HPE's WorkloadProfile preset (which frees the settings it locks) is not written either: no PATCH,
    no reboot for nothing. With a setting that does change, the preset comes along."""
    sim = mockup_factory(CAPTURES["libredfish-hpe-dl385-gen10p"], password=PASSWORD)
    bios = sim.bios_current()
    assert bios["Sriov"] == "Enabled" and bios["ProcAmdIoVt"] == "Enabled" and bios["WorkloadProfile"] != "Custom"
    h = _host(sim, profile="only")
    o = opts(reboot=True, timeouts=TIMEOUTS, profiles_dir=_profile(tmp_path, {"sriov": True, "iommu": True}))
    r = run(apply_host, h, o)
    assert r.status == "unchanged", r.message
    assert sim.count("PATCH") == 0 and sum(sim.resets.values()) == 0
    changing = tmp_path / "changing"
    changing.mkdir()
    o = opts(profiles_dir=_profile(changing, {"sriov": False}))
    plan = run(plan_host, h, o)
    changes = {i["attribute"]: i["desired"] for i in plan.data["plan"] if i["action"] == "change"}
    assert changes == {"Sriov": "Disabled", "WorkloadProfile": "Custom"}, plan.data["plan"]


def test_supermicro_values_are_written_in_the_form_its_bios_shows_them(mockup_factory, tmp_path):
    """Item 3: the X13's Bios shows display strings ("Enabled") for the registry's codes ("1"); every public
    client writes the display strings and the replayed tree refuses codes. The PATCH carries what the Bios shows,
    and after the reboot the Bios shows the value written. (The board is Intel: the generic map and a raw value
    stand in for a map; bmc.vendor generic.)"""
    sim = mockup_factory(CAPTURES["libredfish-supermicro-x13"], password=PASSWORD)
    before = sim.bios_current()["SR_IOVSupport_0047"]
    want = "Disabled" if before == "Enabled" else "Enabled"
    h = _host(sim, profile="raw-only", vendor="generic")
    o = opts(reboot=True, timeouts=TIMEOUTS, profiles_dir=_raw_profile(tmp_path, {"SR_IOVSupport_0047": want}))
    r = run(apply_host, h, o)
    assert r.status == "changed", r.message
    assert sim.bios_current()["SR_IOVSupport_0047"] == want and sim.bios_pending() == {}
    assert sim.count("PATCH") == 1 and sum(sim.resets.values()) == 1
    sim.reset_counts()
    assert run(plan_host, h, o).data["would_change"] == [] and sim.count("PATCH") == 0


def test_a_preference_list_that_fails_says_why_never_an_empty_list(mockup_factory):
    """Item 8: on the AMI DGX capture the generic map finds no ASPM attribute; pcie_aspm's preference list
    [l0s, disabled] failed as "no preferred value is available ()". The reason is named -- since the generic map's
    entries say where they find nothing (a gap, issue 41), in the plan's gap for the setting."""
    sim = mockup_factory(CAPTURES["libredfish-ami-dgx-viking"], password=PASSWORD)
    r = run(plan_host, _host(sim, profile="epyc-gpudirect"))
    assert r.status == "unchanged", r.message
    (why,) = [g["why"] for g in r.data["gaps"] if g["setting"] == "pcie_aspm"]
    assert "()" not in why and "DisplayName matching it (looked for DisplayName /ASPM/)" in why, why


def test_every_job_state_is_known_dells_paused_and_pending_activation_too():
    """Item 8: iDRAC's job states Paused and PendingActivation are queued jobs (not unknown ones, so a second job is
    never created beside them); every JobState a capture shows is queued, running or final."""
    known = jobs.ACTIVE_STATES | jobs.FINAL_OK | jobs.FINAL_BAD
    assert {"Paused", "PendingActivation"} <= jobs.QUEUED_STATES
    seen = {
        str(doc["JobState"])
        for c in CAPTURES.values()
        for p in c.glob("redfish/v1/**/index.json")
        for doc in [json.loads(p.read_text())]
        if isinstance(doc, dict) and "JobState" in doc
    }
    assert seen and seen <= known, seen - known
