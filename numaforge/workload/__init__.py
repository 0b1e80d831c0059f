"""The static NUMA workload (numa_workload.c) and the scenario probe (numa_probe.c): built with gcc once per source hash into the cache.

A basic module: the lab VM puts it in its initramfs, live-patch validation and the measurement arms upload it to
real hosts, so it lives below both (a pipeline never imports the lab).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from ..errors import NumaforgeError, ToolMissingError
from ..paths import cache_dir

SOURCE = Path(__file__).with_name("numa_workload.c")
PROBE_SOURCE = Path(__file__).with_name("numa_probe.c")


class WorkloadBuildError(NumaforgeError):
    """gcc could not build the workload."""


def workload_binary() -> Path:
    """The static NUMA workload, built with gcc from numaforge/workload/ and cached by source hash."""
    return _static_binary(SOURCE, "numa_workload")


def probe_binary() -> Path:
    """The static probe of the pre-registered scenario (numaforge.measure.scenario), cached by source hash."""
    return _static_binary(PROBE_SOURCE, "numa_probe")


def _static_binary(src_path: Path, name: str) -> Path:
    src = src_path.read_bytes()
    out = cache_dir() / "lab" / "workload" / hashlib.sha256(src).hexdigest()[:16] / name
    if out.exists():
        return out
    if shutil.which("gcc") is None:
        raise ToolMissingError("gcc is not installed", str(src_path), "apt-get install gcc libc6-dev")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{name}.{os.getpid()}")
    cmd = ["gcc", "-O2", "-static", "-Wall", "-pthread", "-o", str(tmp), str(src_path)]
    proc = subprocess.run(cmd, text=True, capture_output=True)
    if proc.returncode != 0:
        raise WorkloadBuildError(
            f"`{' '.join(cmd)}` failed (rc={proc.returncode}): {(proc.stderr or proc.stdout).strip()[-1200:]}",
            str(src_path),
            "install libc6-dev (static libc) and gcc",
        )
    os.replace(tmp, out)
    return out
