"""The bios-* tasks as users run them: `invoke ...` in a subprocess, against simulator BMCs on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from numaforge.bios.presets import UNVERIFIED_VAR
from numaforge.lab.bmc import BMCSimulator
from numaforge.report import load_schema

pytestmark = pytest.mark.bmc

ROOT = Path(__file__).parents[2]
PASSWORD = "cli-Bmc-pw-7"


def invoke(*args):
    return subprocess.run(
        [sys.executable, "-m", "invoke", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "250", "NF_CLI_BMC_PW": PASSWORD},
        timeout=300,
    )


@pytest.fixture
def fleet(tmp_path):
    sims = {
        name: BMCSimulator(flavour=flavour, tls=True, username="admin", password=PASSWORD, power_delay=0.3).start()
        for name, flavour in (("gpu-dell", "dell"), ("gpu-hpe", "hpe"))
    }
    lines = ["version: 1", "hosts:"]
    for name, sim in sims.items():
        lines += [
            f"  {name}:",
            f"    bmc: {{url: '{sim.url}', username: admin, password: 'env:NF_CLI_BMC_PW', "
            f"ca_bundle: '{sim.ca_file}'}}",
            "    hardware: {sockets: 2, gpus: ['0000:41:00.0']}",
            "    bios_profile: epyc-gpudirect",
            f"    vars: {{{UNVERIFIED_VAR}: allow}}  # the write path under test; the policy: its own test",
        ]
    inv = tmp_path / "inv.yaml"
    inv.write_text("\n".join(lines) + "\n")
    yield inv, sims
    for s in sims.values():
        s.stop()


def report(path: Path) -> dict:
    doc = json.loads(path.read_text())
    jsonschema.validate(doc, load_schema())
    return doc


def test_plan_apply_reboot_verify_through_invoke(fleet, tmp_path):
    inv, sims = fleet
    r = invoke("bios-plan", "-i", str(inv), "--json", str(tmp_path / "plan.json"))
    assert r.returncode == 0, r.stderr
    assert "by display name: /memory interleav/ matched 'Memory Interleaving'" in r.stdout
    doc = report(tmp_path / "plan.json")
    assert {h["host"]: h["status"] for h in doc["hosts"]} == {"gpu-dell": "unchanged", "gpu-hpe": "unchanged"}
    assert all(s.count("PATCH") == 0 for s in sims.values())
    assert doc["data"]["registry_fetches"] == 2  # one per distinct registry id

    # a write task on a 2-host inventory never guesses its hosts: no selection -> exit 2, nothing written
    r = invoke("bios-apply", "-i", str(inv), "--reboot")
    assert r.returncode == 2 and "bios-apply changes hosts and no host was selected" in r.stderr
    assert "--all" in r.stderr and all(s.count("PATCH") == 0 for s in sims.values())

    r = invoke("bios-apply", "-i", str(inv), "--all", "--reboot", "--json", str(tmp_path / "apply.json"))
    assert r.returncode == 0, r.stdout + r.stderr
    doc = report(tmp_path / "apply.json")
    for h in doc["hosts"]:
        assert h["status"] == "changed" and h["data"]["mismatches"] == [] and h["data"]["changed"]
        assert set(h["data"]["verified"]) == {i["attribute"] for i in h["data"]["plan"]}
    text = (tmp_path / "apply.json").read_text()
    assert PASSWORD not in text
    # the plan run left both registries in the discovery cache (numaforge.bios.discovery): none fetched again
    assert (doc["data"]["registry_fetches"], doc["data"]["registry_loaded"]) == (0, 2)

    for s in sims.values():
        s.reset_counts()
    r = invoke("bios-apply", "-i", str(inv), "--all", "--no-discovery-cache", "--json", str(tmp_path / "again.json"))
    assert r.returncode == 0
    doc = report(tmp_path / "again.json")
    assert [h["status"] for h in doc["hosts"]] == ["unchanged", "unchanged"]
    assert all(s.count("PATCH") == 0 for s in sims.values())
    assert (doc["data"]["registry_fetches"], doc["data"]["registry_loaded"]) == (2, 0)  # nothing reused

    r = invoke("bios-verify", "-i", str(inv), "--host", "gpu-hpe", "--json", str(tmp_path / "verify.json"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "settings verified on the BMC" in r.stdout and "bios-verify (profile" in r.stdout
    (hpe,) = report(tmp_path / "verify.json")["hosts"]
    assert all(row["bmc_ok"] for row in hpe["data"]["verify_rows"])
    # these inventory hosts have no ssh side: the OS half says so instead of guessing
    assert {row["why"] for row in hpe["data"]["verify_rows"]} == {"the host has no ssh section: no OS facts to check"}


def test_invalid_profile_value_exits_nonzero_without_traceback_or_write(fleet, tmp_path):
    inv, sims = fleet
    prof = tmp_path / "bad.yaml.j2"
    prof.write_text("settings:\n  numa_nodes_per_socket: 0\n")  # HPE has no NPS0
    r = invoke("bios-apply", "-i", str(inv), "--host", "gpu-hpe", "--profile", str(prof), "--reboot")
    assert r.returncode == 1
    assert "Traceback" not in r.stdout + r.stderr
    assert "numa_nodes_per_socket=0" in r.stdout and "failed" in r.stderr
    assert sims["gpu-hpe"].count("PATCH") == 0


def test_unverifiable_tls_fails_and_insecure_is_loud(fleet, tmp_path):
    inv, sims = fleet
    text = inv.read_text()
    sim = sims["gpu-dell"]
    inv.write_text(text.replace(f"ca_bundle: '{sim.ca_file}'", f"ca_bundle: '{sims['gpu-hpe'].ca_file}'"))
    r = invoke("bios-plan", "-i", str(inv), "--host", "gpu-dell")
    assert r.returncode == 1 and "TLS certificate" in r.stdout and "Traceback" not in r.stderr
    r = invoke("bios-plan", "-i", str(inv), "--host", "gpu-dell", "--insecure")
    assert r.returncode == 0
    assert "WARNING: --insecure" in r.stderr and "TLS verification is OFF" in r.stderr
