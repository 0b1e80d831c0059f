"""Issue 39 item 8: `--check` meant a check script in validate and "preflight only" in build-kpatch. They are
`validate --check-script PATH` and `build-kpatch --preflight-only` now; the old spelling still works (it is in
docs/kpatch.md and in scripts) with a deprecation note on stderr and in -h; both spellings with different values
are a usage error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]


def invoke(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "invoke", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200", "PYTHONPATH": str(ROOT)},
    )


def test_help_names_the_new_options_and_marks_the_old_spelling_deprecated():
    for task, new in (("validate", "--check-script"), ("build-kpatch", "--preflight-only")):
        out = " ".join(invoke(task, "-h").stdout.split())
        assert new in out, (task, out)
        assert f"--check=STRING deprecated: the old name of {new}" in out or (
            f"--check deprecated: the old name of {new}" in out
        ), (task, out)


def test_build_kpatch_preflight_only_and_its_old_spelling(tmp_path):
    for flag, note in (("--preflight-only", False), ("--check", True)):
        r = invoke("build-kpatch", "--target", "nope", flag, "--json", str(tmp_path / "r.json"))
        assert r.returncode == 2 and "unknown kpatch target 'nope'" in r.stderr, r.stderr  # accepted, then --target
        assert ("note: --check is deprecated: use --preflight-only" in r.stderr) is note, (flag, r.stderr)
    r = invoke("build-kpatch", "--target", "nope", "--check", "--preflight-only")  # the same meaning twice: fine
    assert "old name of" not in r.stderr and "unknown kpatch target 'nope'" in r.stderr, r.stderr


def test_validate_check_script_and_its_old_spelling(tmp_path):
    inv = tmp_path / "inv.yaml"
    inv.write_text("hosts:\n  h1: {ssh: {address: 127.0.0.1, port: 1, user: root, agent: false}}\n")
    (tmp_path / "m.ko").write_bytes(b"\x7fELF")
    for flag, note in (("--check-script", False), ("--check", True)):
        report = tmp_path / f"{flag}.json"
        r = invoke(
            "validate", "-i", str(inv), "--module", str(tmp_path / "m.ko"), flag, "/bin/true", "--json", str(report)
        )
        assert r.returncode == 2 and "no vermagic" in r.stderr, r.stdout + r.stderr  # the task ran to its checks
        options = json.loads(report.read_text())["options"]
        assert options["check_script"] == "/bin/true", options  # the old spelling reached the task as the new
        assert ("note: --check is deprecated: use --check-script" in r.stderr) is note, r.stderr
    a, b = tmp_path / "a.sh", tmp_path / "b.sh"
    a.write_text("true\n")
    b.write_text("true\n")
    r = invoke(
        "validate", "-i", str(inv), "--check", str(a), "--check-script", str(b), "--json", str(tmp_path / "x.json")
    )
    assert r.returncode == 2 and "--check is the old name of --check-script" in r.stderr and "fix:" in r.stderr
    doc = json.loads((tmp_path / "x.json").read_text())  # refused before any host: the report says so
    assert doc["status"] == "refused" and doc["hosts"] == [] and "--check" in doc["error"]["where"], doc
