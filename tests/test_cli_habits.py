"""Operator habits (issue 16): -h is help, chosen short flags only, write tasks never guess their hosts,
plain output without a terminal, --output json, --junit on host tasks, reports record the options,
doctor asks each pipeline only for what it runs, the lab inventory follows the ports lab-up used."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import yaml

from numaforge.cli.optionsets import SHORT
from numaforge.inventory.loader import load_inventory
from numaforge.lab import services

ROOT = Path(__file__).parents[1]
FLEET = "inventory/example-fleet.yaml"


def invoke(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "invoke", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "60", **(env or {})},
        timeout=120,
    )


def test_dash_h_is_help_for_every_host_task():
    for t in ("bios-apply", "bios-plan", "validate", "facts", "inventory-check"):
        r = invoke(t, "-h")
        assert r.returncode == 0, r.stderr
        assert "Usage:" in r.stdout and "--host" in r.stdout and "error" not in r.stderr.lower()


def test_only_chosen_short_flags_and_none_for_safety_or_reboot():
    for t in ("bios-apply", "bios-plan", "bios-verify", "validate", "facts", "backport", "build-kpatch", "lab-up"):
        out = invoke("--help", t).stdout
        shorts = set(re.findall(r"^\s+-([a-zA-Z])[ ,]", out, re.M))
        assert shorts <= set(SHORT.values()), (t, shorts)
        for line in out.splitlines():
            if re.search(r"--(insecure|reboot|no-compile-check|keep|install)\b", line):
                assert not re.match(r"^\s+-[a-zA-Z][ ,]", line), (t, line)


def test_write_task_without_selection_on_a_fleet_stops_and_says_how():
    r = invoke("bios-apply", "-i", FLEET, "--reboot")
    assert r.returncode == 2
    assert "bios-apply changes hosts and no host was selected" in r.stderr
    assert all(f in r.stderr for f in ("--host", "--group", "--limit", "--all"))
    r = invoke("validate", "-i", FLEET)
    assert r.returncode == 2 and "validate changes hosts" in r.stderr


def test_plain_output_without_a_terminal_is_unwrapped_one_row_per_line():
    r = invoke("inventory-check", "-i", FLEET, "--syntax-only")  # stdout is a pipe here, COLUMNS=60
    assert r.returncode == 0, r.stderr
    assert not set("┃━┏┡│─╭") & set(r.stdout)
    lines = r.stdout.splitlines()
    inv = load_inventory(ROOT / FLEET)
    for g in inv.groups.values():  # the groups table: one line per group, with every member on it
        (row,) = [line for line in lines if line.startswith(g.name + " ")]
        assert all(m in row for m in inv.group_members(g.name))
    assert max(len(line) for line in lines) > 60  # nothing wrapped at COLUMNS
    table = invoke("inventory-check", "-i", FLEET, "--syntax-only", "--output", "table").stdout
    assert "━" in table or "─" in table


def test_output_json_prints_the_report_with_every_option(tmp_path):
    r = invoke(
        "inventory-check",
        "-i",
        FLEET,
        "--syntax-only",
        "-g",
        "hpe-dl385",
        "-o",
        "json",
        "--junit",
        str(tmp_path / "j.xml"),
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["task"] == "inventory-check" and doc["ok"] is True
    opts = doc["options"]
    assert opts["group"] == ["hpe-dl385"] and opts["output"] == "json" and opts["inventory"] == FLEET
    assert opts["junit"] == str(tmp_path / "j.xml") and opts["all"] is False and "limit" in opts
    suite = ET.parse(tmp_path / "j.xml").getroot()
    assert suite.get("name") == "numaforge.inventory-check"
    assert int(suite.get("tests")) == len(doc["hosts"]) > 0 and suite.get("failures") == "0"


def test_output_rejects_an_unknown_mode():
    r = invoke("inventory-check", "-i", FLEET, "--syntax-only", "--output", "fancy")
    assert r.returncode == 2 and "plain, table, json" in r.stderr


def test_doctor_firmware_asks_only_for_what_the_firmware_pipeline_runs(tmp_path):
    r = invoke("doctor", "--pipeline", "firmware", "--json", str(tmp_path / "d.json"))
    assert r.returncode == 0, r.stdout + r.stderr
    names = {c["name"] for c in json.loads((tmp_path / "d.json").read_text())["data"]["checks"]}
    assert {"python:redfish", "python:jinja2", "data:bios/profiles", "data:bios/vendors"} <= names
    assert not names & {
        "gcc-10",
        "gcc-12",
        "kpatch-build",
        "make",
        "git",
        "disk:cache",
        "qemu-system-x86_64",
        "kvm",
        "python:gitpython",
        "openssl",
    }


def test_lab_ports_follow_into_the_lab_inventory(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        other = services.pick_port(taken)
        assert other != taken and services.pick_port(other) == other
    inv = services.write_lab_inventory(ssh_port=other, bmc_url="https://127.0.0.1:18443", state_dir=tmp_path)
    assert inv == tmp_path / "inventory.yaml"
    host = load_inventory(inv).hosts["lab-vm"]
    assert host.ssh.port == other and host.bmc.url == "https://127.0.0.1:18443"
    assert host.ssh.key_file == str(tmp_path / "ssh" / "id_ed25519")
    assert host.bmc.ca_bundle == str(tmp_path / "bmc" / "ca.pem")
    # starting only the VM later keeps the BMC side
    services.write_lab_inventory(ssh_port=2300, state_dir=tmp_path)
    doc = yaml.safe_load(inv.read_text())["hosts"]["lab-vm"]
    assert doc["ssh"]["port"] == 2300 and doc["bmc"]["url"] == "https://127.0.0.1:18443"
