"""The installed tool stands alone (issue 39, "Done when"): a wheel built from this tree, installed with its
dependencies into a clean venv outside the checkout (no system site-packages; the package index pip is
configured with), runs the BMC simulator in every flavour the installed package ships (one --fleet process),
and `numaforge bios-plan` plans every one of them from a project directory whose profile extends a built-in one.
Every hint printed names `numaforge` (never `invoke`), and no fix points into site-packages.

Nothing is faked: a real wheel, venv, pip, simulator fleet over TLS and console script. One venv per session.
"""

from __future__ import annotations

import fcntl
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from numaforge.paths import CHECKOUT

# one xdist group: its session venv is built once, on one worker (scripts/test.sh: the bmc tier with --dist loadgroup)
pytestmark = [pytest.mark.bmc, pytest.mark.xdist_group("install-venv")]


def _env(work: Path, **extra: str) -> dict[str, str]:
    """A clean environment: nothing of this checkout or its venv (no PYTHONPATH, no VIRTUAL_ENV)."""
    env = {k: v for k, v in os.environ.items() if k.startswith("PIP_")}
    env.update(PATH="/usr/local/bin:/usr/bin:/bin", HOME=str(work / "home"), LANG="C.UTF-8", COLUMNS="200")
    env.update(extra)
    return env


class Installed:
    def __init__(self, work: Path):
        self.work = work
        self.venv = work / "venv"
        self.python = self.venv / "bin" / "python"
        self.exe = self.venv / "bin" / "numaforge"

    def run(self, args: list[str], cwd: Path, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            args, cwd=cwd, env=_env(self.work, **env), capture_output=True, text=True, timeout=timeout
        )

    def numaforge(self, *args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
        return self.run([str(self.exe), *args], cwd, 300, **env)


@pytest.fixture(scope="session")
def installed() -> Iterator[Installed]:
    assert CHECKOUT is not None, "tests/install builds the wheel from a checkout"
    work = Path(tempfile.mkdtemp(prefix="numaforge-installed-", dir="/tmp"))  # outside the checkout
    assert CHECKOUT not in work.parents
    (work / "home").mkdir()
    inst = Installed(work)
    # setuptools builds in the checkout's build/: one build at a time (tests/install/test_wheel.py does the same)
    with open(Path(tempfile.gettempdir()) / "numaforge-wheel-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        r = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(work / "dist"), str(CHECKOUT)],
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert r.returncode == 0, r.stdout + r.stderr
    (wheel,) = (work / "dist").glob("numaforge-*.whl")
    r = inst.run(["/usr/bin/python3", "-m", "venv", str(inst.venv)], cwd=work)  # no --system-site-packages
    assert r.returncode == 0, r.stderr
    r = inst.run([str(inst.venv / "bin" / "pip"), "install", "-q", str(wheel)], cwd=work, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    r = inst.run([str(inst.python), "-c", "import numaforge, sys; print(numaforge.__file__); print(sys.prefix)"], work)
    assert r.returncode == 0 and "/site-packages/numaforge/" in r.stdout and str(CHECKOUT) not in r.stdout, r
    yield inst
    subprocess.run(["rm", "-rf", str(work)], check=False)


@pytest.fixture(scope="session")
def fleet(installed):
    """Every flavour the installed package ships, one BMC each, in one simulator process of the installed venv."""
    r = installed.run(
        [str(installed.python), "-c", "from numaforge.lab.bmc import ALL_FLAVOURS; print(','.join(ALL_FLAVOURS))"],
        installed.work,
    )
    assert r.returncode == 0, r.stderr
    flavours = r.stdout.strip().split(",")
    assert len(flavours) >= 13
    state = installed.work / "fleet"
    log = open(installed.work / "fleet.log", "w")
    proc = subprocess.Popen(
        [
            str(installed.python),
            "-m",
            "numaforge.lab.bmc",
            "--fleet",
            str(len(flavours)),
            "--flavours",
            ",".join(flavours),
            "--state-dir",
            str(state),
            "--power-delay",
            "0.2",
        ],
        cwd=installed.work,
        env=_env(installed.work),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        while not (state / "ready").exists():
            assert proc.poll() is None, (installed.work / "fleet.log").read_text()
            assert time.monotonic() < deadline, "the fleet was not ready in 120 s"
            time.sleep(0.2)
        yield flavours, state / "inventory.yaml"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        log.close()
    assert proc.returncode == 0, (installed.work / "fleet.log").read_text()


@pytest.fixture(scope="session")
def project(installed, fleet):
    """A project directory: a profile that extends the built-in epyc-gpudirect, and an inventory with one host
    whose vendor map fits no generation of its BMC (to see a fix that names a data file)."""
    flavours, inventory = fleet
    proj = installed.work / "project"
    (proj / "bios" / "profiles").mkdir(parents=True)
    (proj / "bios" / "profiles" / "mine.yaml.j2").write_text(
        "description: the built-in GPUDirect profile, one NUMA node per socket\n"
        "extends: epyc-gpudirect\nsettings:\n  numa_nodes_per_socket: 1\n"
    )
    doc = yaml.safe_load(inventory.read_text())
    generic = next(n for n, h in doc["hosts"].items() if h["vars"]["bmc_flavour"] == "generic")
    doc["hosts"]["misfit"] = {**doc["hosts"][generic], "bmc": {**doc["hosts"][generic]["bmc"], "vendor": "dell"}}
    (proj / "inventory").mkdir()
    (proj / "inventory" / "with-misfit.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return proj, proj / "inventory" / "with-misfit.yaml"


def _fixes(text: str) -> list[str]:
    return [m.group(1) for m in re.finditer(r"fix:\s*(.*)", text)]


def _hint_programs(text: str) -> set[str]:
    """The program each `PROGRAM TASK ...` hint names (backticked commands in the output)."""
    return {m.group(1) for m in re.finditer(r"`([A-Za-z][\w.-]*) [a-z][a-z0-9-]+[^`]*`", text)}


def test_the_simulator_runs_in_every_flavour_and_bios_plan_plans_each_from_a_project(installed, fleet, project):
    flavours, inventory = fleet
    proj, _ = project
    r = installed.numaforge("bios-plan", "--all", "-i", str(inventory), "--profile", "mine", cwd=proj)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    hosts = yaml.safe_load(inventory.read_text())["hosts"]
    assert sorted(h["vars"]["bmc_flavour"] for h in hosts.values()) == sorted(flavours)
    rows = {line.split()[0]: line for line in r.stdout.splitlines() if line.split()[:1] and line.split()[0] in hosts}
    for name in hosts:  # the project's profile, extending the built-in one, planned on every flavour
        assert name in rows and rows[name].split()[1] == "unchanged" and "profile mine" in rows[name], out
    assert "invoke" not in out and not [f for f in _fixes(out) if "site-packages" in f], out


def test_every_hint_names_numaforge_and_no_fix_points_into_site_packages(installed, fleet, project):
    proj, with_misfit = project
    runs = [
        # a host whose vendor map fits no generation: its fix names the map to edit
        installed.numaforge("bios-plan", "--all", "-i", str(with_misfit), "--profile", "mine", cwd=proj),
        # an unknown host: the fix names the task that lists hosts
        installed.numaforge("bios-plan", "-i", str(with_misfit), "--host", "nosuch", cwd=proj),
        # an unknown profile
        installed.numaforge("bios-plan", "--all", "-i", str(with_misfit), "--profile", "nosuch", cwd=proj),
    ]
    misfit, unknown_host, unknown_profile = (r.stdout + r.stderr for r in runs)
    assert runs[0].returncode == 1 and "misfit" in misfit, misfit
    assert f"{proj}/bios/vendors/dell.yaml" in misfit, misfit  # the project's copy, not the installed file
    assert runs[1].returncode == 2 and "`numaforge inventory-check`" in unknown_host, unknown_host
    assert runs[2].returncode == 2 and "unknown BIOS profile 'nosuch'" in unknown_profile, unknown_profile  # preflight
    for text in (misfit, unknown_host, unknown_profile):
        assert _hint_programs(text) <= {"numaforge"}, (_hint_programs(text), text)
        assert not re.search(r"\binvoke\b", text), text
        bad = [f for f in _fixes(text) if "site-packages" in f]
        assert not bad, bad


def test_numaforge_inventory_names_the_inventory_of_the_installed_tool(installed, fleet, project):
    flavours, inventory = fleet
    proj, _ = project
    r = installed.numaforge("inventory-check", "--syntax-only", cwd=proj, NUMAFORGE_INVENTORY=str(inventory))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "bmc01-" in r.stdout and "lab-vm" not in r.stdout
