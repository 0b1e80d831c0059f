"""One lab VM per test session (boots are slow under TCG): a private state dir and a free loopback port.

Kernel: the kpatch helper's lab kernel when its live patch is built (<build>/kpatch/lab/manifest.json), else
Debian bullseye's 5.10.0-46-amd64; NUMAFORGE_TEST_LAB_KERNEL=lab|debian overrides. The test live patches in
tests/data/livepatch/ are compiled against whichever kernel boots.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from sshd_fixture import free_port

from numaforge.inventory.model import Host, Location
from numaforge.lab import vm
from numaforge.paths import ROOT, kpatch_build_dir

LP_DATA = ROOT / "tests" / "data" / "livepatch"


def lab_kernel_name() -> str:
    env = os.environ.get("NUMAFORGE_TEST_LAB_KERNEL")
    if env:
        return env
    return "lab" if (kpatch_build_dir() / "lab" / "manifest.json").is_file() else "debian"


@dataclass
class Lab:
    info: vm.VMInfo
    kernel: vm.BootKernel
    host: Host
    state_dir: Path

    def module(self, name: str) -> Path:
        return vm.build_module(LP_DATA / name, self.kernel)

    def check_script(self, name: str) -> Path:
        return LP_DATA / name / f"{name}-LOADED.test"

    def remote(self):
        from numaforge.remote.ssh import connect

        return connect(self.host.ssh, self.host.name)


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    kernel = vm.resolve_kernel(lab_kernel_name())
    state = tmp_path_factory.mktemp("labvm")
    port = free_port()
    info = vm.up(kernel=kernel, state_dir=state, ssh_port=port, persist=True)  # livepatch-install survives reboot()
    host = Host(
        "lab-vm",
        Location("tests/lab/conftest.py"),
        groups=["lab"],
        ssh=vm.lab_ssh(state, port),
    )
    try:
        yield Lab(info, kernel, host, state)
    finally:
        vm.down(state)


def pytest_collection_modifyitems(config, items):
    """Tests that change the session VM for good (module.sig_enforce can only be switched on) run last."""
    items.sort(key=lambda item: "sig_enforce" in item.nodeid)


def manifest_for(ko: Path, dest_dir: Path, **fields) -> Path:
    """Copy a test module next to a manifest.json declaring its mode (what build-kpatch writes for its modules)."""
    import hashlib
    import json
    import shutil

    dest_dir.mkdir(parents=True, exist_ok=True)
    out = dest_dir / ko.name
    shutil.copy2(ko, out)
    (dest_dir / "manifest.json").write_text(
        json.dumps({"sha256": hashlib.sha256(out.read_bytes()).hexdigest(), "module_file": out.name, **fields})
    )
    return out
