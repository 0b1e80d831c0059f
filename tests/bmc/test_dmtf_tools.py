"""Third-party proof: DMTF's own tools accept the simulator.

- rf_service_validator (redfish-service-validator) walks every flavour's resource tree (the registry corpus
  flavours included) against DMTF's CSDL schemas (offline: the subset vendored in numaforge/lab/bmc/dmtf/csdl,
  --skipschema) and must report no failure (deliberate exceptions live in
  tests/data/bmc/validator_known_failures.yaml, with reasons).
- rf_bios_settings (redfish-utilities) reads BIOS, changes an attribute through the settings object, and
  rf_power_reset's host reset applies it (Dell: a config job posted with rf_raw_request, as on a real iDRAC).

TLS: both tools build their client with the `redfish` library, which passes verify=False to requests when no CA
file is given, and neither tool has an option to give one; they therefore talk to the simulator's real TLS
endpoint WITHOUT verifying its certificate. Our own client's verification is tested in test_server.py.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from numaforge.lab.bmc import ALL_FLAVOURS, FLAVOURS, load_flavour

from .conftest import DMTF, PASSWORD, Client, wait_for

pytestmark = pytest.mark.bmc

BIN = Path(sys.executable).parent
KNOWN = yaml.safe_load((Path(__file__).parents[1] / "data" / "bmc" / "validator_known_failures.yaml").read_text()) or {}
# (attribute, new value) per flavour for rf_bios_settings
CHANGE = {
    "dell": ("SriovGlobalEnable", "Enabled"),
    "hpe": ("PciSlot2Aspm", "AspmL1Enabled"),
    "supermicro": ("PCIeASPMSupport", "L0s"),
    "lenovo": ("SRIOV", "Enabled"),
    "generic": ("Q0105", "Enabled"),
}

SECOND = {
    "dell": ("IommuSupport", "Enabled"),
    "hpe": ("Sriov", "Disabled"),
    "supermicro": ("IOMMU", "Enabled"),
    "lenovo": ("IOMMU", "Disabled"),
    "generic": ("Q0106", "Enabled"),
}


def _writable_changes(flavour: str) -> list[tuple[str, str]]:
    """For a corpus flavour: (attribute, a value other than its default) for its first writable enumerations."""
    f = load_flavour(flavour)
    out = []
    for a in f.registry["RegistryEntries"]["Attributes"]:
        if a["Type"] == "Enumeration" and not a["ReadOnly"]:
            other = [v["ValueName"] for v in a["Value"] if v["ValueName"] != f.defaults[a["AttributeName"]]]
            if other and not any(
                d["Dependency"]["MapToAttribute"] == a["AttributeName"]
                for d in f.registry["RegistryEntries"]["Dependencies"]
            ):
                out.append((a["AttributeName"], other[0]))
    return out


for _name in ALL_FLAVOURS:
    if _name not in CHANGE:
        CHANGE[_name], SECOND[_name] = _writable_changes(_name)[:2]


def _tool(name: str) -> str:
    path = BIN / name
    assert path.exists(), f"{path} missing: run scripts/setup.sh (installs the test extras)"
    return str(path)


def _exercise(sim, flavour):
    """Apply one change through a reboot, then leave another pending with an apply time."""
    c = Client(sim)
    uri = c.get(sim.bios_path).json()["@Redfish.Settings"]["SettingsObject"]["@odata.id"]
    attr, value = CHANGE[flavour]
    apply = {"@Redfish.SettingsApplyTime": {"ApplyTime": "OnReset"}}
    assert c.patch(uri, json={"Attributes": {attr: value}, **apply}).status_code in (200, 202)
    c.post(f"{sim.system_path}/Actions/ComputerSystem.Reset", json={"ResetType": "ForceRestart"})
    wait_for(lambda: sim.power_state() == "On" and sim.bios_pending() == {}, what="applied")
    attr2, value2 = SECOND[flavour]
    assert c.patch(uri, json={"Attributes": {attr2: value2}, **apply}).status_code in (200, 202)
    assert c.get(sim.bios_path).json()["@Redfish.Settings"]["Messages"]


@pytest.mark.parametrize("flavour", ALL_FLAVOURS)
def test_redfish_service_validator_passes(make_sim, flavour, tmp_path):
    assert (DMTF / "csdl" / "Bios_v1.xml").exists(), f"DMTF schemas expected in {DMTF / 'csdl'}"
    sim = make_sim(flavour)
    _exercise(sim, flavour)  # so the validator also sees Settings Messages, a pending ApplyTime, a job
    proc = subprocess.run(
        [
            _tool("rf_service_validator"),
            "-r",
            sim.url,
            "-u",
            "admin",
            "-p",
            PASSWORD,
            "--schema_directory",
            str(DMTF / "csdl"),
            "--skipschema",
            "--logdir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    logs = list(tmp_path.glob("*/RedfishServiceValidatorDebug_*.log"))
    assert len(logs) == 1, proc.stdout + proc.stderr
    log = logs[0].read_text()
    fails = [line for line in log.splitlines() if " - FAIL - " in line]
    excused = KNOWN.get(flavour, [])
    unexpected = [line for line in fails if not any(k in line for k in excused)]
    assert unexpected == [], "\n".join(unexpected)
    m = re.search(r"\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|", proc.stdout)
    passed, failed = int(m.group(1)), int(m.group(3))
    assert passed > 300 and failed == len(fails)
    if not excused:
        assert proc.returncode == 0 and failed == 0
    # it walked the BIOS resources, the settings object and the registry
    for uri in (sim.bios_path, sim.flavour.settings_link, sim.flavour.registry_member, sim.flavour.registry_uri):
        assert f"Validating {sim.link(uri)}..." in proc.stdout, uri


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_rf_bios_settings_reads_changes_and_a_reset_applies(make_sim, flavour):
    sim = make_sim(flavour)
    attr, value = CHANGE[flavour]
    base = ["-u", "admin", "-p", PASSWORD, "-r", sim.url]

    def run(tool, *args):
        return subprocess.run([_tool(tool), *base, *args], capture_output=True, text=True, timeout=120)

    before = sim.bios_current()[attr]
    listing = run("rf_bios_settings.py")
    assert listing.returncode == 0, listing.stdout + listing.stderr
    assert re.search(rf"^\s+{re.escape(attr)}\s+\|\s+{re.escape(str(before))}\s+\|", listing.stdout, re.M)

    bad = run("rf_bios_settings.py", "-a", attr, "NotAValue")
    assert bad.returncode == 1 and "PropertyValueNotInList" in bad.stdout and sim.bios_pending() == {}

    change = run("rf_bios_settings.py", "-a", attr, value)
    assert change.returncode == 0, change.stdout + change.stderr
    assert sim.bios_pending() == {attr: value} and sim.bios_current()[attr] == before
    listing = run("rf_bios_settings.py")
    assert re.search(
        rf"^\s+{re.escape(attr)}\s+\|\s+{re.escape(str(before))}\s+\|\s+{re.escape(value)}\s*$", listing.stdout, re.M
    ), listing.stdout

    if flavour == "dell":  # iDRAC applies pending BIOS values only through a config job
        job = run(
            "rf_raw_request.py",
            "-m",
            "POST",
            "-req",
            "/redfish/v1/Managers/iDRAC.Embedded.1/Jobs",
            "-b",
            '{"TargetSettingsURI": "/redfish/v1/Systems/System.Embedded.1/Bios/Settings"}',
        )
        assert job.returncode == 0 and len(sim.jobs()) == 1, job.stdout + job.stderr

    reset = run("rf_power_reset.py", "-t", "GracefulRestart")
    assert reset.returncode == 0, reset.stdout + reset.stderr
    wait_for(lambda: sim.power_state() == "On" and sim.state.boot_count == 1, what="host reboot")
    listing = run("rf_bios_settings.py")
    assert re.search(
        rf"^\s+{re.escape(attr)}\s+\|\s+{re.escape(value)}\s+\|\s+{re.escape(value)}\s*$", listing.stdout, re.M
    ), listing.stdout
    assert sim.bios_current()[attr] == value and sim.bios_pending() == {}
