"""The simulator's mockup mode (issue 41) on every capture in tests/data/captures: the tree served as captured
(nothing invented), and only the behaviour a capture cannot hold added, from the tree's own data. Real HTTPS on
127.0.0.1; the client is plain requests trusting only the simulator's CA."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from numaforge.lab.bmc import MockupSimulator
from numaforge.lab.bmc.errors import BMCSimulatorError
from numaforge.lab.bmc.mockup import DMTF_RESET_TYPES

from .conftest import PASSWORD, Client, wait_for

pytestmark = pytest.mark.bmc

CAPTURES = Path(__file__).resolve().parents[1] / "data" / "captures"
TREES = sorted(p for p in CAPTURES.iterdir() if (p / "redfish" / "v1" / "index.json").is_file())


@pytest.fixture(params=TREES, ids=lambda p: p.name)
def mock(request):
    sim = MockupSimulator(request.param, password=PASSWORD, power_delay=0.2).start()
    yield sim
    assert sim.errors == [], sim.errors
    sim.stop()


def _captured(sim) -> dict[str, dict]:
    """{URI: document} as the tree holds them (the URI is the directory)."""
    out = {}
    for f in sorted(sim.directory.rglob("index.json")):
        rel = f.parent.relative_to(sim.directory).as_posix()
        out["/" + rel] = json.loads(f.read_text())
    return out


def _overlaid(sim) -> set[str]:
    keys = set()
    for s in sim.systems.values():
        keys |= {s.path.strip("/").lower(), s.bios_path.strip("/").lower(), (s.settings_path or "").strip("/").lower()}
    for extra in (sim.job_queue, sim.sessions_path):
        if extra:
            keys.add(extra.strip("/").lower())
    return keys


def _enum_change(sim):
    """A writable enumeration of the first system's Bios and another value it allows, in the Bios's form."""
    s = sim.first
    for name, entry in sorted(s.registry.items()):
        if entry.get("Type") != "Enumeration" or entry.get("ReadOnly") or name not in s.current:
            continue
        values = entry.get("Value") or []
        names = [v.get("ValueName") for v in values]
        form = names if s.current[name] in names else [v.get("ValueDisplayName") for v in values]
        others = [v for v in form if v != s.current[name] and v]
        if s.current[name] in form and others:
            return name, others[0]
    return None, None


def test_every_captured_document_is_served_as_captured_and_nothing_else(mock):
    c = Client(mock)
    overlaid = _overlaid(mock)
    for uri, doc in _captured(mock).items():
        r = c.get(uri)
        assert r.status_code == 200, uri
        if uri.strip("/").lower() not in overlaid:
            assert r.json() == doc, uri
            assert r.headers.get("ETag") == doc.get("@odata.etag"), uri  # the tree's own ETag, or none
        else:  # the machine's state laid over it (a collection without the creator's session): an ETag if it had one
            assert ("ETag" in r.headers) == ("@odata.etag" in doc), uri
    assert c.get("/redfish/v1/Chassis/NotCaptured").status_code == 404
    assert c.get("/redfish/v1/UpdateService").status_code in (404, 200)
    if not (mock.directory / "redfish" / "v1" / "UpdateService").exists():
        assert c.get("/redfish/v1/UpdateService").status_code == 404  # captured elsewhere, left out: not invented


def test_the_bios_shows_its_captured_values_and_the_system_its_power_and_boot_progress(mock):
    c = Client(mock)
    s = mock.first
    tree = _captured(mock)
    system = next(d for u, d in tree.items() if u.strip("/").lower() == s.path.strip("/").lower())
    bios = next(d for u, d in tree.items() if u.strip("/").lower() == s.bios_path.strip("/").lower())
    assert c.get(s.bios_path).json()["Attributes"] == bios["Attributes"]
    got = c.get(s.path).json()
    assert got.get("PowerState") == system.get("PowerState")
    assert ("BootProgress" in got) == ("BootProgress" in system)


def test_a_reset_type_the_tree_does_not_allow_is_400_and_one_it_allows_boots_the_host(mock):
    c = Client(mock)
    s = mock.first
    assert s.reset_target, "every capture names its ComputerSystem.Reset target"
    refused = next(t for t in DMTF_RESET_TYPES if t not in s.reset_types)
    r = c.post(s.reset_target, json={"ResetType": refused})
    assert r.status_code == 400
    assert "ActionParameterValueNotInList" in r.json()["error"]["@Message.ExtendedInfo"][0]["MessageId"]
    restart = next(t for t in ("GracefulRestart", "ForceRestart", "PowerCycle") if t in s.reset_types)
    assert c.post(s.reset_target, json={"ResetType": restart}).status_code in (200, 202, 204)
    if s.power is not None:
        assert c.get(s.path).json()["PowerState"] == "Off"
        wait_for(lambda: c.get(s.path).json()["PowerState"] == "On", 10, "the host back on")
    if s.has_progress:
        wait_for(lambda: c.get(s.path).json()["BootProgress"]["LastState"] == s.booted_state, 10, "booted")
    assert mock.resets == {restart: 1}


def test_the_ami_capture_offers_no_graceful_restart():
    """Issue 41 item 5's evidence: the AMI MegaRAC's ActionInfo lists no GracefulRestart; the mockup refuses it."""
    sim = MockupSimulator(CAPTURES / "libredfish-ami-dgx-viking", password=PASSWORD).start()
    try:
        assert "GracefulRestart" not in sim.first.reset_types and "ForceRestart" in sim.first.reset_types
        r = Client(sim).post(sim.first.reset_target, json={"ResetType": "GracefulRestart"})
        assert r.status_code == 400
    finally:
        sim.stop()


def test_a_patch_stages_in_the_settings_object_and_applies_at_the_next_boot(mock):
    c = Client(mock)
    s = mock.first
    name, value = _enum_change(mock)
    if name is None:
        pytest.skip(f"{mock.directory.name}: its registry has no writable enumeration the Bios holds")
    target = s.settings_path or s.bios_path
    before = c.get(s.bios_path).json()["Attributes"][name]
    assert c.patch(target, json={"Attributes": {"NoSuchAttribute_x": 1}}).status_code == 400
    if s.settings_path:
        assert c.patch(s.bios_path, json={"Attributes": {name: value}}).status_code == 405
    tag = c.get(target).headers.get("ETag")
    if tag:
        assert c.patch(target, json={"Attributes": {name: value}}, headers={"If-Match": '"stale"'}).status_code == 412
    body = {"Attributes": {name: value}}
    if mock.job_queue:
        body["@Redfish.SettingsApplyTime"] = {"ApplyTime": "OnReset"}
    r = c.patch(target, json=body, headers={"If-Match": tag} if tag else {})
    assert r.status_code in (200, 202), r.text
    if mock.job_queue:
        assert r.status_code == 202 and r.headers["Location"].startswith(mock.job_queue)
    assert c.get(target).json()["Attributes"][name] == value
    assert c.get(s.bios_path).json()["Attributes"][name] == before  # pending until the host boots
    if tag:
        assert c.get(target).headers.get("ETag") != tag
    restart = next(t for t in ("GracefulRestart", "ForceRestart", "PowerCycle") if t in s.reset_types)
    c.post(s.reset_target, json={"ResetType": restart})
    wait_for(lambda: c.get(s.bios_path).json()["Attributes"][name] == value, 10, "the value current")
    assert mock.bios_pending() == {}


def _read_only_freed_by_a_dependency(sim):
    """(attribute, its other value, {attribute: value} that lifts it) of the first system: an enumeration the
    registry marks ReadOnly that one ReadOnly Map dependency of the tree explains on the current values, with
    the single-condition NEQ form (R750: PcieAspmL1 while SysProfile NEQ Custom); (None, None, None) if none."""
    s = sim.first
    for name, deps in sorted(s.read_only_deps.items()):
        entry = s.registry.get(name) or {}
        if not entry.get("ReadOnly") or entry.get("Type") != "Enumeration" or name not in s.current:
            continue
        for conds in deps:
            if len(conds) == 1 and conds[0].get("MapFromCondition") == "NEQ":
                frm, val = conds[0]["MapFromAttribute"], conds[0]["MapFromValue"]
                free = s.registry.get(frm) or {}
                if s.current.get(frm) != val and not free.get("ReadOnly"):
                    other = next(v["ValueName"] for v in entry["Value"] if v["ValueName"] != s.current[name])
                    return name, other, {frm: val}
    return None, None, None


def test_a_read_only_flag_the_trees_own_dependency_explains_lifts_with_the_value_that_frees_it():
    """Issue 41: the R750 registry marks PcieAspmL1 ReadOnly while SysProfile is not Custom (its own Map
    dependency): alone it is refused 400 as the capture says; in one PATCH with SysProfile=Custom it is staged.
    Every tree of the corpus that has such a flag is checked (the R750's at least)."""
    checked = []
    for tree in TREES:
        sim = MockupSimulator(tree, password=PASSWORD).start()
        try:
            name, value, freeing = _read_only_freed_by_a_dependency(sim)
            if name is None:
                continue
            s, c = sim.first, Client(sim)
            target = s.settings_path or s.bios_path
            alone = c.patch(target, json={"Attributes": {name: value}})
            assert alone.status_code == 400 and "PropertyNotWritable" in alone.text, (tree.name, alone.text)
            assert sim.bios_pending() == {}
            both = c.patch(target, json={"Attributes": {**freeing, name: value}})
            assert both.status_code in (200, 202), (tree.name, both.text)
            assert sim.bios_pending() == {**freeing, name: value}
            checked.append(tree.name)
        finally:
            assert sim.errors == [], sim.errors
            sim.stop()
    assert "libredfish-dell-r750" in checked, checked


def test_a_directory_that_is_no_mockup_is_a_clear_error(tmp_path):
    with pytest.raises(BMCSimulatorError) as err:
        MockupSimulator(tmp_path)
    assert "redfish/v1/index.json is missing" in str(err.value)
    tree = tmp_path / "t" / "redfish" / "v1"
    tree.mkdir(parents=True)
    (tree / "index.json").write_text(json.dumps({"@odata.id": "/redfish/v1/", "Systems": {"@odata.id": "/x"}}))
    with pytest.raises(BMCSimulatorError) as err:
        MockupSimulator(tmp_path / "t")
    assert "no system with a Bios" in str(err.value)


def test_a_restarted_daemon_keeps_its_values(tmp_path):
    """The lab daemon restarts on the same state dir: values made current stay current."""
    tree = CAPTURES / "libredfish-lenovo-sr670v2"
    sim = MockupSimulator(tree, password=PASSWORD, power_delay=0.1, state_dir=tmp_path).start()
    name, value = _enum_change(sim)
    c = Client(sim)
    assert c.patch(sim.settings_path, json={"Attributes": {name: value}}).status_code == 200
    c.post(sim.first.reset_target, json={"ResetType": "ForceRestart"})
    wait_for(lambda: sim.bios_current()[name] == value, 10, "applied")
    sim.stop()
    again = MockupSimulator(tree, password=PASSWORD, state_dir=tmp_path)
    assert again.bios_current()[name] == value
    assert copy.deepcopy(again.bios_pending()) == {}
