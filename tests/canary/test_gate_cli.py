"""--gate slo's bad input through the CLI (`invoke ...` in a subprocess): each stops with exit 2 and says what,
where and how to fix it, before any host is contacted (the inventory's hosts do not exist)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def inv(tmp_path) -> Path:
    doc: dict[str, Any] = {
        "version": 1,
        "hosts": {n: {"ssh": {"address": "192.0.2.1", "user": "root"}} for n in ("a", "b", "c")},
    }
    doc["hosts"]["a"]["vars"] = {"slo_gate": {"metric": "svc_seconds", "window": 3}}
    p = tmp_path / "inv.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def _invoke(*args):
    return subprocess.run(
        [sys.executable, "-m", "invoke", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        timeout=120,
    )


@pytest.mark.parametrize(
    ("args", "what", "fix"),
    [
        (
            ["os-apply", "--all", "--canary", "1", "--gate", "slo"],
            "needs the prometheus setting",
            "--prometheus http://",
        ),
        (
            ["os-apply", "--all", "--canary", "1", "--gate", "slo", "--prometheus", "http://p", "--slo", "windw=3"],
            "unknown slo gate setting 'windw'",
            "known settings:",
        ),
        (
            ["os-apply", "--all", "--canary", "1", "--gate", "slo", "--prometheus", "http://p", "--slo", "window=0"],
            "window must be positive",
            "--slo window=",
        ),
        (
            [
                "os-apply",
                "--all",
                "--canary",
                "1",
                "--gate",
                "slo",
                "--prometheus",
                "http://p",
                "--slo",
                "widen_p99_ms=30",
            ],
            "widen P99 delta (30 ms) is above the rollback one",
            "stricter",
        ),
        (
            [
                "livepatch-install",
                "--module",
                "x.ko",
                "--all",
                "--canary",
                "3",
                "--gate",
                "slo",
                "--prometheus",
                "http://p",
            ],
            "3 host(s) selected, --canary 3",
            "select more hosts",
        ),
        (
            ["os-apply", "--all", "--canary", "1", "--prometheus", "http://p"],
            "settings of --gate slo",
            "add --gate slo",
        ),
        (
            ["validate", "--module", "x.ko", "--all", "--gate", "slo", "--prometheus", "http://p"],
            "validate unloads it without --keep",
            "add --keep",
        ),
        (
            ["livepatch-install", "--module", "x.ko", "--all", "--gate", "locality"],
            "unknown --gate 'locality'",
            "the gates here are: slo",
        ),
        (
            ["os-apply", "--all", "--canary", "1", "--gate", "latency"],
            "unknown --gate 'latency'",
            "the gates here are: slo, locality",
        ),
    ],
)
def test_bad_gate_input_exits_2_naming_the_fix(inv, args, what, fix):
    r = _invoke(*args, "-i", str(inv))
    out = " ".join((r.stdout + r.stderr).split())
    assert r.returncode == 2, out
    assert what in out and fix in out
    assert "Traceback" not in out


def test_a_literal_prometheus_token_is_refused_and_never_written(inv, tmp_path):
    report = tmp_path / "r.json"
    r = _invoke(
        "os-apply",
        "-i",
        str(inv),
        "--all",
        "--canary",
        "1",
        "--gate",
        "slo",
        "--prometheus",
        "http://p",
        "--slo",
        "prometheus_token=hunter2-not-a-ref",
        "--json",
        str(report),
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert "hunter2-not-a-ref" not in r.stdout + r.stderr
    assert "env:" in r.stdout + r.stderr  # the fix names the reference forms
    assert report.exists() and "hunter2-not-a-ref" not in report.read_text()
