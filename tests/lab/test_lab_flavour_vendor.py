"""lab-up writes the vendor of the BMC it started into the lab inventory (issue 39 item 4): `lab-up --bmc-flavour
hpe` wrote `vendor: dell`, so every BIOS task used Dell's vendor map on an HPE-shaped BMC. The mapping is checked
for every flavour (pure); lab-up itself runs the real simulator daemon for a base and a corpus flavour."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from sshd_fixture import free_port

from numaforge import paths
from numaforge.inventory.loader import load_inventory
from numaforge.lab import services
from numaforge.lab.bmc import ALL_FLAVOURS, flavours

VENDOR_MAPS = set(paths.data_names("bios", "vendors", suffix=".yaml"))


@pytest.mark.parametrize("name", ALL_FLAVOURS)
def test_every_flavour_names_a_vendor_map_and_the_lab_inventory_carries_it(name, tmp_path):
    vendor = flavours.vendor_of(name)
    assert vendor in VENDOR_MAPS, f"{name}: {vendor} is no vendor map ({sorted(VENDOR_MAPS)})"
    assert flavours.load_flavour(vendor).vendor == flavours.load_flavour(name).vendor  # same maker as its base
    out = services.write_lab_inventory(bmc_url="https://127.0.0.1:9", state_dir=tmp_path, vendor=vendor)
    host = load_inventory(str(out)).hosts["lab-vm"]
    assert host.bmc.vendor == vendor and host.hardware.vendor == vendor
    # a later write that restarts only the VM keeps the BMC side's vendor
    services.write_lab_inventory(ssh_port=2299, state_dir=tmp_path)
    assert yaml.safe_load(out.read_text())["hosts"]["lab-vm"]["bmc"]["vendor"] == vendor


@pytest.mark.bmc
@pytest.mark.parametrize("name", ["hpe", "smc-h13"])
def test_lab_up_writes_the_flavours_vendor(name, tmp_path):
    env = {**os.environ, "NUMAFORGE_STATE": str(tmp_path / "state"), "COLUMNS": "200"}
    run = [sys.executable, "-m", "invoke"]
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run(
        [*run, "lab-up", "--no-vm", "--bmc-flavour", name, "--bmc-port", str(free_port())],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    try:
        assert r.returncode == 0, r.stdout + r.stderr
        inv = yaml.safe_load((tmp_path / "state" / "lab" / "inventory.yaml").read_text())
        assert inv["hosts"]["lab-vm"]["bmc"]["vendor"] == flavours.vendor_of(name) != "dell"
    finally:
        subprocess.run([*run, "lab-down"], cwd=root, env=env, capture_output=True, timeout=120)
