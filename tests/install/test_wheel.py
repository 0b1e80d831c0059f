"""The installed tool, as an operator gets it: `pip install` of the wheel into a fresh venv outside the repository,
by an unprivileged user (numaforge-ci, created by scripts/setup.d/55-install-user.sh), then `numaforge` run from
/tmp against the Redfish BMC simulator. Proves the console script, the package data (built-in profiles, vendor
maps, series, targets), a project directory overriding them (--root), and outputs in the user's XDG dirs.

Nothing is faked: a real wheel build (setuptools, setup.py copies the data), a real venv and pip, a real user.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from numaforge.lab.bmc import BMCSimulator
from numaforge.paths import CHECKOUT

# one xdist group: its module venv is built once, on one worker (scripts/test.sh: the bmc tier with --dist loadgroup)
pytestmark = [pytest.mark.bmc, pytest.mark.xdist_group("install-user-venv")]

USER = "numaforge-ci"
PASSWORD = "wh33l-Pa55word"


def _as_user(cmd: list[str], cwd: Path, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k.startswith("PIP_")}
    base.update(PATH="/usr/local/bin:/usr/bin:/bin", HOME=pwd.getpwnam(USER).pw_dir, LANG="C.UTF-8", **(env or {}))
    return subprocess.run(
        ["runuser", "-u", USER, "--", "env", "-i", *[f"{k}={v}" for k, v in base.items()], *cmd],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def installed():
    if os.geteuid() != 0 or subprocess.run(["id", "-u", USER], capture_output=True).returncode != 0:
        pytest.fail(f"needs root and the user {USER}: run scripts/setup.sh (scripts/setup.d/55-install-user.sh)")
    work = Path(tempfile.mkdtemp(prefix="numaforge-wheel-", dir="/tmp"))
    try:
        dist = work / "dist"
        # setuptools builds in the checkout's build/ (build/lib, build/bdist.*): both xdist workers can start this
        # module's fixture at once, and one build removing its bdist dir broke the other's (ENOENT in
        # install_lib, seen in CI); one build at a time
        with open(Path(tempfile.gettempdir()) / "numaforge-wheel-build.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            r = subprocess.run(
                [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(CHECKOUT)],
                capture_output=True,
                text=True,
                timeout=600,
            )
        assert r.returncode == 0, r.stdout + r.stderr
        (wheel,) = dist.glob("numaforge-*.whl")
        shutil.chown(work, USER)
        os.chmod(work, 0o755)
        venv = work / "venv"
        r = _as_user(["python3", "-m", "venv", str(venv)], cwd=work)
        assert r.returncode == 0, r.stderr
        r = _as_user([str(venv / "bin" / "pip"), "install", "-q", str(wheel)], cwd=work, timeout=900)
        assert r.returncode == 0, r.stdout + r.stderr
        yield work, venv / "bin" / "numaforge"
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_numaforge_list_from_tmp(installed):
    work, exe = installed
    r = _as_user([str(exe), "--list"], cwd=Path("/tmp"))
    assert r.returncode == 0, r.stderr
    for t in ("bios-apply", "bios-plan", "inventory-check", "validate", "build-kpatch", "lab-up", "lab-status"):
        assert t in r.stdout
    r = _as_user([str(exe), "bios-apply", "-h"], cwd=Path("/tmp"))
    assert r.returncode == 0 and "--reboot" in r.stdout and "--host" in r.stdout


def test_inventory_check_and_bios_plan_against_the_simulator(installed):
    work, exe = installed
    sim = BMCSimulator(flavour="dell", username="admin", password=PASSWORD, power_delay=0.3).start()
    try:
        ca = work / "ca.pem"
        shutil.copy(sim.ca_file, ca)
        os.chmod(ca, 0o644)
        inv = work / "fleet.yaml"
        inv.write_text(
            "version: 1\nhosts:\n  gpu-01:\n"
            f"    bmc: {{url: '{sim.url}', username: admin, password: 'env:NF_WHEEL_PW', "
            f"ca_bundle: '{ca}', vendor: dell}}\n"
            "    hardware: {sockets: 2, gpus: ['0000:41:00.0']}\n    bios_profile: epyc-gpudirect\n"
        )
        env = {"NF_WHEEL_PW": PASSWORD}
        r = _as_user([str(exe), "inventory-check", "-i", str(inv)], cwd=Path("/tmp"), env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "gpu-01" in r.stdout and "password=env:NF_WHEEL_PW" in r.stdout and PASSWORD not in r.stdout

        # the built-in profile and vendor map come from the wheel's package data
        r = _as_user(
            [str(exe), "bios-plan", "-i", str(inv), "--json", str(work / "plan.json")], cwd=Path("/tmp"), env=env
        )
        assert r.returncode == 0, r.stdout + r.stderr
        assert "NumaNodesPerSocket" in r.stdout and "┃" not in r.stdout  # plain output: not a terminal
        assert sim.count("PATCH") == 0

        # a project directory's own profile is found with --root; without it the name is unknown
        proj = work / "project" / "bios" / "profiles"
        proj.mkdir(parents=True)
        (proj / "mine.yaml.j2").write_text(
            "description: one NUMA node per socket\nsettings:\n  numa_nodes_per_socket: 1\n"
        )
        shutil.chown(work / "project", USER)
        r = _as_user(
            [str(exe), "--root", str(work / "project"), "bios-plan", "-i", str(inv), "--profile", "mine"],
            cwd=Path("/tmp"),
            env=env,
        )
        assert r.returncode == 0, r.stdout + r.stderr
        r = _as_user([str(exe), "bios-plan", "-i", str(inv), "--profile", "mine"], cwd=Path("/tmp"), env=env)
        assert r.returncode == 2 and "unknown BIOS profile 'mine'" in r.stdout + r.stderr  # the preflight's usage error

        # outputs went to the user's own XDG dirs, nothing into the install tree
        site = list((work / "venv" / "lib").glob("python3*/site-packages/numaforge"))[0]
        assert not (site / "build").exists() and not (site.parent / "build").exists()
        assert (Path(pwd.getpwnam(USER).pw_dir) / ".cache" / "numaforge").is_dir()
    finally:
        sim.stop()
