"""The build-kpatch task surface (fast: errors before any build)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from numaforge.paths import ROOT

INVOKE = str(Path(sys.executable).parent / "invoke")


def test_unknown_target_is_a_clear_error_with_exit_code_and_report(tmp_path):
    """An unknown --target is refused by the preflight of every task's options (issue 40): exit 2 naming the
    option, before anything runs; the --json report says "refused", with no host (as for every other bad option
    value: tests/hostile/test_refused_report.py)."""
    report = tmp_path / "r.json"
    proc = subprocess.run(
        [INVOKE, "build-kpatch", "--target", "nope", "--json", str(report)], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "--target:" in proc.stderr and "unknown kpatch target 'nope'" in proc.stderr and "fix:" in proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    doc = json.loads(report.read_text())
    assert doc["status"] == "refused" and doc["hosts"] == [] and "--target" in doc["error"]["where"], doc


def test_every_option_is_documented():
    out = subprocess.run([INVOKE, "--help", "build-kpatch"], cwd=ROOT, capture_output=True, text=True).stdout
    for opt in (
        "--target",
        "--series",
        "--jobs",
        "--cc-wrapper",
        "--preflight-only",
        "--check",
        "--force",
        "--inventory",
        "--host",
        "--group",
        "--limit",
        "--json",
    ):
        assert opt in out, opt
    assert "distcc" in out
