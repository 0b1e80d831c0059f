"""numa-effect against a host it cannot reach (issue 40 item 7): the host is failed, with the reason, in the
table and in the --json report -- never "unchanged".

No VM and no fake: the inventory names a loopback port nothing listens on (tests/sshd_fixture.free_port), so
the real SSH connect is refused. `--scenario probe --knob` is the path that reaches the host without built
arms; the workload scenario goes through the same helper (numaforge.cli.measure._failed_on_error).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from sshd_fixture import free_port

ROOT = Path(__file__).resolve().parents[2]


def test_an_unreachable_host_is_failed_with_its_reason(tmp_path: Path) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        f"version: 1\nhosts:\n  h1:\n    ssh: {{address: 127.0.0.1, port: {free_port()}, user: root, agent: false}}\n"
    )
    report = tmp_path / "r.json"
    r = subprocess.run(
        [sys.executable, "-m", "invoke", "numa-effect", "-i", str(inv), "--host", "h1"]
        + ["--scenario", "probe", "--knob", "--json", str(report)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "unchanged" not in r.stdout, out
    rows = [line.split() for line in r.stdout.splitlines() if line.split()[:1] == ["h1"]]
    assert rows and rows[0][1] == "failed" and "cannot connect" in " ".join(rows[0]), out
    doc = json.loads(report.read_text())
    (host,) = doc["hosts"]
    assert host["status"] == "failed" and "cannot connect" in host["message"], host
    assert doc["ok"] is False and doc["status"] == "failed"
