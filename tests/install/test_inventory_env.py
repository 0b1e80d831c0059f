"""NUMAFORGE_INVENTORY (issue 39 item 4): the operator's environment names the inventory. Precedence, on both
entry points: --inventory > $NUMAFORGE_INVENTORY > the config's numaforge.inventory > `lab`. An empty value is a
usage error naming the variable (never the lab inventory). Real subprocesses; inventory-check --syntax-only reads
the file and nothing else."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENTRY = {
    "invoke": [sys.executable, "-m", "invoke"],
    "numaforge": [sys.executable, "-c", "from numaforge.cli.main import main; main()"],
}


def _inv(path: Path, host: str) -> Path:
    path.write_text(f"version: 1\nhosts:\n  {host}:\n    ssh: {{address: 192.0.2.1}}\n")
    return path


def _run(entry: str, args: list[str], tmp_path: Path, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "NUMAFORGE_INVENTORY"}
    return subprocess.run(
        [*ENTRY[entry], "inventory-check", "--syntax-only", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**base, "COLUMNS": "200", "NUMAFORGE_STATE": str(tmp_path / "state"), **env},
    )


@pytest.mark.parametrize("entry", sorted(ENTRY))
def test_the_environment_names_the_inventory_and_the_option_wins(entry, tmp_path):
    env_inv = _inv(tmp_path / "from-env.yaml", "env-host")
    opt_inv = _inv(tmp_path / "from-option.yaml", "option-host")
    cwd = ROOT if entry == "invoke" else tmp_path
    r = _run(entry, [], tmp_path, {"NUMAFORGE_INVENTORY": str(env_inv)}, cwd)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "env-host" in r.stdout and "lab-vm" not in r.stdout
    r = _run(entry, ["--inventory", str(opt_inv)], tmp_path, {"NUMAFORGE_INVENTORY": str(env_inv)}, cwd)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "option-host" in r.stdout and "env-host" not in r.stdout


def test_the_environment_wins_over_the_config(tmp_path):
    env_inv = _inv(tmp_path / "from-env.yaml", "env-host")
    cfg_inv = _inv(tmp_path / "from-config.yaml", "config-host")
    (tmp_path / "numaforge.yaml").write_text(f"numaforge:\n  inventory: {cfg_inv}\n")
    r = _run("numaforge", [], tmp_path, {}, tmp_path)
    assert r.returncode == 0 and "config-host" in r.stdout, r.stdout + r.stderr
    r = _run("numaforge", [], tmp_path, {"NUMAFORGE_INVENTORY": str(env_inv)}, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "env-host" in r.stdout and "config-host" not in r.stdout


@pytest.mark.parametrize("entry", sorted(ENTRY))
def test_an_empty_environment_inventory_is_a_usage_error(entry, tmp_path):
    r = _run(entry, [], tmp_path, {"NUMAFORGE_INVENTORY": " "}, ROOT if entry == "invoke" else tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "NUMAFORGE_INVENTORY" in r.stderr and not (tmp_path / "state" / "lab").exists()
