"""Output paths and option values (issue 12, item 9): `--json -` is standard output, a symlink at the path is
refused (issue 40), option values parse with clear errors. Run as users run it where standard
output matters (a subprocess), in-process elsewhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from numaforge import safeio
from numaforge.cli import values

pytestmark = pytest.mark.hostile

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = "hosts:\n  h1:\n    bmc: {url: 'https://bmc.example', username: admin, password: 'env:NF_X_PW'}\n"


def test_json_dash_is_standard_output_and_creates_no_file(tmp_path):
    inv = tmp_path / "inv.yaml"
    inv.write_text(INVENTORY)
    r = subprocess.run(
        [sys.executable, "-m", "invoke", "-r", str(ROOT), "inventory-check", "--inventory", str(inv), "--json", "-"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NF_X_PW": "x-pw"},
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # nothing but the report on stdout
    assert doc["ok"] is True and [h["host"] for h in doc["hosts"]] == ["h1"]
    assert "1 of 1 hosts selected" in r.stderr  # the human listing went to stderr
    assert not (tmp_path / "-").exists()


def test_symlink_to_a_regular_file_is_refused_and_both_kept(tmp_path):
    """Issue 40 item 4 reversed issue 12's "followed": a link planted at a report path made numaforge overwrite
    the link's target (tests/hostile/test_links_and_caps.py has the dangling case and --junit)."""
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    with pytest.raises(safeio.OutputPathError, match="symbolic link"):
        safeio.write_output(link, "new\n")
    assert link.is_symlink() and real.read_text() == "old"


def test_symlink_to_a_device_is_refused_and_left_alone(tmp_path):
    link = tmp_path / "out.json"
    link.symlink_to("/dev/null")
    with pytest.raises(safeio.OutputPathError, match="/dev"):
        safeio.write_output(link, "x")
    assert os.readlink(link) == "/dev/null"


def test_missing_parent_is_not_created(tmp_path):
    with pytest.raises(safeio.OutputPathError, match="does not exist"):
        safeio.write_output(tmp_path / "a" / "b.json", "x")
    assert not (tmp_path / "a").exists()


def test_a_failed_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError):
        safeio.write_output(tmp_path / "r.json", "x")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "fn,raw,want",
    [
        (values.max_fail, "12.5", 12.5),
        (values.max_fail, "0", 0.0),
        (values.max_fail, 100, 100.0),
        (values.max_fail, None, 100.0),
        (values.positive_int, "8", 8),
        (values.positive_int, 3, 3),
        (values.non_negative_int, "0", 0),
        (values.positive_float, "0.5", 0.5),
        (values.non_negative_float, "0", 0.0),
    ],
)
def test_values_accept(fn, raw, want):
    assert fn(raw, "--opt", want if raw is None else None) == want


@pytest.mark.parametrize(
    "fn,raw",
    [
        (values.max_fail, "12,5"),
        (values.max_fail, "-0.1"),
        (values.positive_int, "1e3"),
        (values.positive_int, True),
        (values.non_negative_int, "-1"),
        (values.positive_float, "0"),
        (values.positive_float, "nan"),
        (values.non_negative_float, "-inf"),
    ],
)
def test_values_refuse_with_the_option_name(fn, raw):
    with pytest.raises(values.OptionValueError) as ei:
        fn(raw, "--opt")
    assert ei.value.where == "--opt" and "--opt must be" in ei.value.what and ei.value.fix
