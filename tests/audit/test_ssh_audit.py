"""numa-audit over real OpenSSH sshd hosts (tests/sshd_fixture.py), through the CLI.

Boundary fake, as for the host OS pipeline's ssh tests: each host's /proc and /sys are a tree of the constructed
5.10 captures (``hostos_root``), because these "hosts" share the build server's kernel. SSH, the script, the
fleet runner, the CLI, --json (schema-validated) and --junit are the real ones. Both samples read the same tree,
so only the findings that need no growth between them can show.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.ssh
ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "audit"


def _tree(scenario: str, dst: Path) -> Path:
    for part in ("once", "sample1"):
        src = DATA / scenario / part
        for p in src.rglob("*"):
            if p.is_file() and not p.relative_to(src).as_posix().startswith("ethtool/"):
                out = dst / p.relative_to(src)
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(p, out)
    return dst


def test_cli_audits_a_faulty_and_a_clean_host(netns_lab, tmp_path: Path) -> None:
    hosts = [netns_lab.add_host(n) for n in ("faulty", "clean")]
    doc: dict = {"version": 1, "hosts": {}}
    for h in hosts:
        doc["hosts"][h.name] = {
            "ssh": {
                "address": h.address,
                "port": h.port,
                "user": "root",
                "key_file": str(h.client_key),
                "known_hosts": str(h.known_hosts),
                "agent": False,
            },
            "vars": {"hostos_root": str(_tree(h.name, tmp_path / h.name))},
        }
    inv = tmp_path / "inv.yaml"
    inv.write_text(yaml.safe_dump(doc))
    r = subprocess.run(
        [
            str(Path(sys.executable).with_name("invoke")),
            "numa-audit",
            "-i",
            str(inv),
            "--window",
            "0.5",
            "--output",
            "plain",
            "--json",
            str(tmp_path / "r.json"),
            "--junit",
            str(tmp_path / "r.xml"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1, r.stdout + r.stderr  # a host with findings fails
    report = json.loads((tmp_path / "r.json").read_text())
    status = {h["host"]: h["status"] for h in report["hosts"]}
    assert status == {"faulty": "failed", "clean": "unchanged"}
    data = {h["host"]: h.get("data", {}) for h in report["hosts"]}
    assert data["clean"]["findings"] == [] and data["faulty"]["kernel"] == "5.10.0-28-amd64"
    checks = {(f["check"], f["severity"]) for f in data["faulty"]["findings"]}
    assert {("zone-reclaim", "warn"), ("cpuset-membind", "warn"), ("sched-imbalance", "warn")} <= checks
    assert "numactl --cpunodebind=0 --membind=0" in r.stdout
    assert "fleet summary" in r.stdout and "clean: no findings" in r.stdout
    assert 'name="faulty"' in (tmp_path / "r.xml").read_text()


def test_host_timeout_bounds_the_audit_read_and_names_the_option(netns_lab, tmp_path: Path) -> None:
    """--host-timeout bounds the audit's one long SSH read (issue 40 item 2): with --window 30 the read sleeps
    30 s between its samples; --host-timeout 4 stops it after about 4 s, and the message names --host-timeout
    (an option that exists), not "raise the timeout". It used to run the whole read (window + 120 s cap)."""
    h = netns_lab.add_host("slow")
    doc = {
        "version": 1,
        "hosts": {
            h.name: {
                "ssh": {
                    "address": h.address,
                    "port": h.port,
                    "user": "root",
                    "key_file": str(h.client_key),
                    "known_hosts": str(h.known_hosts),
                    "agent": False,
                },
                "vars": {"hostos_root": str(_tree("clean", tmp_path / "clean"))},
            }
        },
    }
    inv = tmp_path / "inv.yaml"
    inv.write_text(yaml.safe_dump(doc))
    t0 = time.monotonic()
    r = subprocess.run(
        [str(Path(sys.executable).with_name("invoke")), "numa-audit", "-i", str(inv), "--window", "30"]
        + ["--host-timeout", "4", "--output", "plain", "--json", str(tmp_path / "r.json")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "300"},
    )
    took = time.monotonic() - t0
    out = " ".join((r.stdout + r.stderr).split())
    assert r.returncode == 1, out
    assert took < 25, f"took {took:.0f} s: {out}"
    (host,) = json.loads((tmp_path / "r.json").read_text())["hosts"]
    assert host["status"] == "failed" and "--host-timeout" in host["message"], host
    assert "raise the timeout" not in out
