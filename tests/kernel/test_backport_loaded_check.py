"""The series' LOADED check script, run with the real /bin/sh against a directory shaped like
/sys/kernel/livepatch.

Boundary fake: a real livepatch sysfs exists only on a kernel with the module loaded; the lab_vm tier runs this
same script on the lab VM. Here the script's LIVEPATCH_SYSFS override points it at a tmp copy of that layout
(enabled / transition files, vmlinux/<func,sympos> dirs) as 5.10 lays it out.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = (
    Path(__file__).resolve().parents[2]
    / "patches"
    / "sched-numa-prefer-local-fallback"
    / "sched-numa-prefer-local-fallback-LOADED.test"
)
MOD = "livepatch_sched_numa_prefer_local_fallback"


def sysfs(tmp_path: Path, enabled="1", transition="0", func="task_numa_migrate.isra.0,1", mod=MOD) -> Path:
    root = tmp_path / "livepatch"
    d = root / mod
    (d / "vmlinux" / func).mkdir(parents=True)
    (d / "enabled").write_text(enabled + "\n")
    (d / "transition").write_text(transition + "\n")
    return root


def run(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["sh", str(SCRIPT), *args], capture_output=True, text=True, env={**os.environ, "LIVEPATCH_SYSFS": str(root)}
    )


def test_loaded_enabled_and_patching_task_numa_migrate(tmp_path):
    p = run(sysfs(tmp_path))
    assert p.returncode == 0 and p.stdout.startswith("LOADED:")


def test_module_name_with_dashes_is_the_same_module(tmp_path):
    assert run(sysfs(tmp_path), "livepatch-sched-numa-prefer-local-fallback").returncode == 0
    assert run(sysfs(tmp_path / "x", mod="my_build"), "my-build").returncode == 0


@pytest.mark.parametrize(
    "kw,why",
    [
        ({"enabled": "0"}, "enabled is not 1"),
        ({"transition": "1"}, "transition is not 0"),
        ({"func": "select_task_rq_fair,1"}, "no task_numa_migrate"),
        ({"mod": "livepatch_other"}, "not loaded"),
    ],
)
def test_not_loaded_states_fail_with_reason(tmp_path, kw, why):
    p = run(sysfs(tmp_path, **kw))
    assert p.returncode == 1 and why in p.stderr


def test_kernel_without_livepatch(tmp_path):
    p = run(tmp_path / "absent")
    assert p.returncode == 1 and "CONFIG_LIVEPATCH" in p.stderr
