"""bios-verify judges the values bios-plan planned (issue 39 item 3): on lab-vm the plan showed PcieAcsCtl desired
Enabled (pcie_acs=True, rendered over the inventory) while verify said "pcie_acs | desired False" -- it rendered
the profile again over the OS's facts, where the VM's virtio NIC flips the GPUDirect profile's `pcie_acs: false`.

Real peers only: the BMC simulator over TLS in every flavour and an OpenSSH sshd on loopback whose "host" is this
build server (its facts differ from the inventories below: no GPU, one NIC)."""

from __future__ import annotations

import json

import pytest

from numaforge import paths
from numaforge.bios.apply import plan_host
from numaforge.bios.profile import host_facts, render_profile
from numaforge.bios.verify import VerifyOptions, run_verify
from numaforge.fleet import Rollout
from numaforge.lab.bmc import BMCSimulator
from numaforge.lab.bmc.flavours import ALL_FLAVOURS

from .test_bios_apply_bmc import PASSWORD, host_for, opts, run, sim_factory  # noqa: F401 (fixture)
from .test_bios_cli_bmc import PASSWORD as CLI_PASSWORD
from .test_bios_cli_bmc import invoke

pytestmark = pytest.mark.bmc

SHIPPED_PROFILES = paths.data_names("bios", "profiles", suffix=".yaml.j2")
# the inventory's hardware as written: with a GPU (the OS here shows none) and with none listed (the OS shows a NIC)
HARDWARE = {"gpu": ("0000:41:00.0",), "none": ()}


def test_the_shipped_profiles_and_flavours_are_there():
    assert {"epyc-baseline", "epyc-gpudirect"} <= set(SHIPPED_PROFILES)
    assert len(ALL_FLAVOURS) >= 13


@pytest.mark.ssh
def test_verify_desired_equals_plan_desired_for_every_profile_and_flavour(sim_factory, sshd_host, monkeypatch):
    monkeypatch.setenv("NF_TEST_BMC_PASSWORD", PASSWORD)
    checked = 0
    for flavour in ALL_FLAVOURS:
        sim = sim_factory(flavour)
        for profile in SHIPPED_PROFILES:
            for hw, gpus in HARDWARE.items():
                h = host_for(sim, name=f"{flavour}-{profile}-{hw}", profile=profile, gpus=gpus)
                h.ssh = sshd_host.spec()
                where = f"{flavour} / {profile} / inventory hardware {hw}"
                plan = run(plan_host, h)
                assert plan.status in ("ok", "unchanged"), f"{where}: {plan.message}"
                want = {
                    i["attribute"]: i["desired"] for i in plan.data["plan"] if i["action"] not in ("gap", "skipped")
                }
                facts = host_facts(h)
                facts["vendor"] = plan.data["vendor"]
                rendered = render_profile(profile, facts).settings

                r = run_verify([h], opts(), VerifyOptions(os_side=True), Rollout(forks=1)).results[0]
                rows = r.data["verify_rows"]
                assert rows, f"{where}: {r.message}"
                got = {i["attribute"]: i["desired"] for i in r.data["plan"] if i["action"] not in ("gap", "skipped")}
                assert got == want, where
                for row in rows:
                    if row["setting"] in rendered:
                        assert row["desired"] == rendered[row["setting"]], f"{where}: {row}"
                    for attr, value in (row.get("bmc_desired") or {}).items():
                        assert want[attr] == value, f"{where}: {row}"
                    if row["bmc_ok"] and row["os_verdict"] != "mismatch":
                        assert row["verdict"] != "mismatch", f"{where}: {row}"
                checked += 1
    assert checked == len(ALL_FLAVOURS) * len(SHIPPED_PROFILES) * len(HARDWARE)


@pytest.mark.ssh
def test_lab_vm_case_pcie_acs_desired_is_the_plans_and_the_render_difference_is_named(
    sim_factory, sshd_host, monkeypatch
):
    """lab-vm: no GPU or NIC in the inventory, so epyc-gpudirect leaves epyc-baseline's pcie_acs=True; the OS
    shows a NIC. verify's desired is the plan's (True), and the row says the OS's facts would render it False."""
    monkeypatch.setenv("NF_TEST_BMC_PASSWORD", PASSWORD)
    sim = sim_factory("dell")
    h = host_for(sim, name="lab-vm", profile="epyc-gpudirect", gpus=())
    h.ssh = sshd_host.spec()
    r = run_verify([h], opts(), VerifyOptions(os_side=True)).results[0]
    row = {x["setting"]: x for x in r.data["verify_rows"]}["pcie_acs"]
    assert row["desired"] is True, row
    assert row["bmc_desired"] == {"PcieAcsCtl": "Enabled"} or list(row["bmc_desired"].values()) == ["Enabled"], row
    assert "inventory" in row["why"] and "pcie_acs=False" in row["why"], row


def test_the_verify_table_shows_the_setting_and_the_attribute_values_desired(tmp_path):
    """The printed row: `pcie_acs | True (PcieAcsCtl=Enabled) | PcieAcsCtl=...` (issue 39 item 3's lab-vm case)."""
    sim = BMCSimulator(flavour="dell", tls=True, username="admin", password=CLI_PASSWORD, power_delay=0.3).start()
    try:
        inv = tmp_path / "inv.yaml"
        inv.write_text(
            "version: 1\nhosts:\n  lab-vm:\n"
            f"    bmc: {{url: '{sim.url}', username: admin, password: 'env:NF_CLI_BMC_PW', ca_bundle: '{sim.ca_file}'}}\n"
            "    hardware: {sockets: 4}\n    bios_profile: epyc-gpudirect\n"
        )
        r = invoke("bios-verify", "-i", str(inv), "--no-os", "--json", str(tmp_path / "v.json"))
        row = next(line for line in r.stdout.splitlines() if line.startswith("pcie_acs "))
        assert "True (PcieAcsCtl=Enabled)" in row, r.stdout
        doc = json.loads((tmp_path / "v.json").read_text())
        acs = next(x for x in doc["hosts"][0]["data"]["verify_rows"] if x["setting"] == "pcie_acs")
        assert acs["desired"] is True and acs["bmc_desired"] == {"PcieAcsCtl": "Enabled"}
    finally:
        sim.stop()
