"""`invoke facts` as users run it (subprocess from the project root), on the saved corpus and on this machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema

from numaforge.facts import Captures, parse_facts
from numaforge.report import load_schema

from .helpers import CORPUS, MACHINES

ROOT = Path(__file__).resolve().parents[2]


def invoke(*args):
    return subprocess.run(
        [sys.executable, "-m", "invoke", "facts", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "250"},
        timeout=300,
    )


def test_load_with_profile_reports_mismatches_and_fails(tmp_path):
    r = invoke(
        "--load",
        str(CORPUS / "epyc-nps4-acs-enabled"),
        "--profile",
        "epyc-gpudirect",
        "--json",
        str(tmp_path / "r.json"),
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert "BIOS profile epyc-gpudirect as the OS sees it" in r.stdout
    doc = json.loads((tmp_path / "r.json").read_text())
    jsonschema.validate(doc, load_schema())
    [h] = doc["hosts"]
    assert h["status"] == "failed" and "pcie_acs" in h["message"]
    verdicts = {v["setting"]: v["verdict"] for v in h["data"]["os_verify"]["verdicts"]}
    assert verdicts["numa_nodes_per_socket"] == "ok"  # epyc-gpudirect asks for NPS4 on 2 sockets
    assert verdicts["pcie_acs"] == "mismatch"
    assert h["data"]["template_facts"]["gpu_count"] == 4


def test_load_whole_corpus_without_profile(tmp_path):
    r = invoke("--load", str(CORPUS), "--json", str(tmp_path / "r.json"))
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    assert [h["host"] for h in doc["hosts"]] == MACHINES
    no_lspci = next(h for h in doc["hosts"] if h["host"] == "epyc-no-lspci")
    assert "absent: lspci_-t_-D.txt, lspci_-vvv_-D_-nn.txt" in no_lspci["message"]
    assert "epyc-no-lspci: lspci_-vvv_-D_-nn.txt absent: lspci is not installed" in r.stdout


def test_load_of_a_directory_without_captures_is_a_clear_error(tmp_path):
    r = invoke("--load", str(tmp_path))
    assert r.returncode == 2
    assert "no capture.yaml here or in any subdirectory" in r.stderr and "Traceback" not in r.stderr


def test_local_capture_matches_this_machine(tmp_path):
    r = invoke("--local", "--save", str(tmp_path / "corpus"), "--json", str(tmp_path / "r.json"))
    assert r.returncode == 0, r.stdout + r.stderr
    caps = Captures.load(tmp_path / "corpus" / "localhost")
    f = parse_facts(caps)
    nodes = sorted(p.name for p in Path("/sys/devices/system/node").glob("node[0-9]*"))
    assert [f"node{n.id}" for n in f.numa.nodes] == nodes
    assert f.cpu.cpus == len(list(Path("/sys/devices/system/cpu").glob("cpu[0-9]*")))
    assert sorted(f.pci.devices) == sorted(p.name for p in Path("/sys/bus/pci/devices").iterdir())
    assert f.kernel.release == os.uname().release
    assert set(caps.files) | set(caps.absent) == set(caps.commands)  # every command is accounted for
