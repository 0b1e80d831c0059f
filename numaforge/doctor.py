"""Build-server checks for `invoke doctor`: each check probes one tool or resource and carries its fix.

Pure data in, data out: ``run_checks`` returns a list of CheckResult; the task only prints them.
"""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
from dataclasses import dataclass

from . import paths
from .paths import cache_dir

SETUP = "bash scripts/setup.sh"


@dataclass
class CheckResult:
    name: str
    pipeline: str  # kernel | firmware | lab | core
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True


def _version(cmd: list[str], pattern: str = r"(\d+\.\d+(?:\.\d+)?)") -> str | None:
    exe = shutil.which(cmd[0])
    if not exe:
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(pattern, out.stdout + out.stderr)
    return m.group(1) if m else "present"


# (name, pipeline, command used to get a version, apt package / how to install). The pipeline is the one whose
# tasks run the tool: kernel (backport, build-kpatch: git, compilers, kpatch-build and what it calls), lab
# (lab-up/validate on the lab VM: qemu, the initramfs' busybox/dropbear/lspci, ssh-keygen for its keys).
# The firmware pipeline (bios-*) runs no external tool: Redfish over Python's TLS, SSH through paramiko.
TOOLS = [
    ("git", "kernel", ["git", "--version"], "apt-get install git"),
    ("gcc-12", "kernel", ["gcc-12", "--version"], "apt-get install gcc-12"),
    (
        "gcc-10",
        "kernel",
        ["gcc-10", "--version"],
        "python -m numaforge.debian_apt install bullseye gcc-10 (bullseye kernels are built with gcc-10)",
    ),
    ("make", "kernel", ["make", "--version"], "apt-get install make"),
    ("flex", "kernel", ["flex", "--version"], "apt-get install flex"),
    ("bison", "kernel", ["bison", "--version"], "apt-get install bison"),
    ("bc", "kernel", ["bc", "--version"], "apt-get install bc"),
    ("pahole", "kernel", ["pahole", "--version"], "apt-get install dwarves"),
    ("gawk", "kernel", ["gawk", "--version"], "apt-get install gawk"),
    ("filterdiff", "kernel", ["filterdiff", "--version"], "apt-get install patchutils"),
    ("rsync", "kernel", ["rsync", "--version"], "apt-get install rsync"),
    (
        "kpatch-build",
        "kernel",
        ["kpatch-build", "--help"],
        f"{SETUP} (builds kpatch 0.9.11 from Debian's source package)",
    ),
    ("qemu-system-x86_64", "lab", ["qemu-system-x86_64", "--version"], "apt-get install qemu-system-x86"),
    ("dropbear", "lab", ["dropbear", "-V"], "apt-get install dropbear-bin"),
    ("busybox", "lab", ["busybox"], "apt-get install busybox-static"),
    ("lspci", "lab", ["lspci", "--version"], "apt-get install pciutils"),
    ("ssh-keygen", "lab", ["ssh-keygen", "-V"], "apt-get install openssh-client"),
]
# Python distributions and the pipelines that import them (core = every task)
PY_DEPS = {
    "invoke": "core",
    "pyyaml": "core",
    "rich": "core",
    "jsonschema": "core",
    "paramiko": "core",
    "gitpython": "kernel",
    "jinja2": "firmware",
    "redfish": "firmware",
    "tenacity": "firmware",
}
MIN_FREE_GB = {"cache": 25.0}


def kvm_usable() -> bool:
    """True when /dev/kvm accepts KVM_CREATE_VM (the device node alone proves nothing)."""
    import fcntl
    import os

    try:
        fd = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        vm = fcntl.ioctl(fd, 0xAE01, 0)  # KVM_CREATE_VM
        os.close(vm)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _wanted(pipeline: str, pipe: str) -> bool:
    return pipeline == "all" or pipe in (pipeline, "core")


def run_checks(pipeline: str = "all", path_override: str | None = None) -> list[CheckResult]:
    """The checks of ``pipeline`` (all, kernel, firmware, lab) plus the core ones every task needs."""
    results: list[CheckResult] = []
    for name, pipe, cmd, fix in TOOLS:
        if not _wanted(pipeline, pipe):
            continue
        if path_override is not None and not shutil.which(cmd[0], path=path_override):
            ver = None
        else:
            ver = _version(cmd)
        results.append(
            CheckResult(
                name,
                pipe,
                ver is not None,
                f"version {ver}" if ver else "not found",
                "" if ver else fix,
                required=pipe != "lab" or pipeline == "lab",
            )
        )
    for dist, pipe in PY_DEPS.items():
        if not _wanted(pipeline, pipe):
            continue
        try:
            results.append(CheckResult(f"python:{dist}", pipe, True, importlib.metadata.version(dist)))
        except importlib.metadata.PackageNotFoundError:
            results.append(
                CheckResult(f"python:{dist}", pipe, False, "not installed", f"{SETUP} (or pip install numaforge)")
            )
    if _wanted(pipeline, "firmware"):
        for kind in ("profiles", "vendors"):
            found = paths.data_dirs("bios", kind)
            results.append(
                CheckResult(
                    f"data:bios/{kind}",
                    "firmware",
                    bool(found),
                    ", ".join(str(d) for d in found) or "not found",
                    "" if found else "reinstall numaforge, or add bios/ to the project (--root)",
                )
            )
    if _wanted(pipeline, "kernel"):
        cache = cache_dir()
        free = shutil.disk_usage(cache).free / 1e9
        need = MIN_FREE_GB["cache"]
        results.append(
            CheckResult(
                "disk:cache",
                "kernel",
                free >= need,
                f"{free:.1f} GB free in {cache}",
                ""
                if free >= need
                else f"free at least {need:.0f} GB there or point "
                "$NUMAFORGE_CACHE at a larger disk (a 5.10 tree with debug info and kpatch-build "
                "need ~20 GB)",
            )
        )
    if _wanted(pipeline, "lab"):
        kvm = kvm_usable()
        results.append(
            CheckResult(
                "kvm",
                "lab",
                kvm,
                "available" if kvm else "absent: qemu will use TCG (slower)",
                "" if kvm else "optional; the lab VM boots under TCG in ~10-50 s",
                required=False,
            )
        )
    return results
