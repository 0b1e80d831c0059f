"""`invoke validate` bad input: a clear error, exit 2, before any host is contacted (no VM needed)."""

from __future__ import annotations

import json
import subprocess

from numaforge.paths import ROOT

INVOKE = str(ROOT / ".venv/bin/invoke")


def validate(*args, tmp_path):
    r = subprocess.run(
        [INVOKE, "validate", "--json", str(tmp_path / "r.json"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    r.stderr = " ".join(r.stderr.split())  # rich wraps long lines
    return r, json.loads((tmp_path / "r.json").read_text())


def test_missing_module_file(tmp_path):
    r, rep = validate("--module", str(tmp_path / "nope.ko"), tmp_path=tmp_path)
    assert r.returncode == 2
    assert "nope.ko does not exist" in r.stderr and "fix:" in r.stderr and "Traceback" not in r.stderr
    assert rep["error"]["kind"] == "ArtifactError" and rep["hosts"] == []


def test_target_without_a_build(tmp_path):
    r, rep = validate("--target", "no-such-target", tmp_path=tmp_path)
    assert r.returncode == 2 and "invoke build-kpatch --target no-such-target" in r.stderr
    assert rep["error"]["where"] == "--target"


def test_a_file_that_is_not_a_live_patch(tmp_path):
    ko = tmp_path / "plain.ko"
    ko.write_bytes(b"\x7fELF\0vermagic=5.10.262 SMP mod_unload \0name=plain\0")
    r, rep = validate("--module", str(ko), "--junit", str(tmp_path / "j.xml"), tmp_path=tmp_path)
    assert r.returncode == 2 and "is not a live patch" in r.stderr
    assert 'errors="1"' in (tmp_path / "j.xml").read_text()
