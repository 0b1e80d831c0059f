"""The session lab VM's pieces shared by every lab_vm test directory (tests/conftest.py's `lab` fixture).

Kernel: the kpatch helper's lab kernel when its live patch is built (<build>/kpatch/lab/manifest.json), else
Debian bullseye's 5.10.0-46-amd64; NUMAFORGE_TEST_LAB_KERNEL=lab|debian overrides. The test live patches in
tests/data/livepatch/ are compiled against whichever kernel boots.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from numaforge.errors import NumaforgeError
from numaforge.inventory.model import Host
from numaforge.lab import vm
from numaforge.paths import ROOT, kpatch_build_dir
from numaforge.remote.ssh import connect

LP_DATA = ROOT / "tests" / "data" / "livepatch"
SESSION_GROUP = "lab-session-vm"  # the xdist group of every test on the session VM (tests/conftest.py)
NIC_GROUP = "lab-nic-vm"  # the xdist group of every test on the NUMA-local NIC VM (tests/conftest.py's nic_lab)
# The tier's longest group, the probe-direction VM (about half the tier), must start first on the second worker and
# keep it to itself: --dist loadgroup hands groups out largest first and gives a worker its next group as soon as
# no more than 2 of its tests are pending, so a 2-test group took a second group at once, queued behind it while
# the first worker went idle. test_vm_errors.py's 3 tests (no boot: a refused port, a kernel qemu cannot load)
# ride after it in the same group: 5 tests, the largest but the session's, and the next group is taken only when
# the probe-direction tests are done.
LONG_GROUP = "own-vm:probe-direction+vm-errors"


def lab_kernel_name() -> str:
    env = os.environ.get("NUMAFORGE_TEST_LAB_KERNEL")
    if env:
        return env
    return "lab" if (kpatch_build_dir() / "lab" / "manifest.json").is_file() else "debian"


def test_modules() -> list[str]:
    """Every test live patch (a directory of tests/data/livepatch/)."""
    return sorted(p.name for p in LP_DATA.iterdir() if p.is_dir())


@dataclass
class Lab:
    """The session lab VM (4 nodes, the persistent disk): booted by tests/conftest.py's `lab`."""

    kernel: vm.BootKernel
    host: Host
    state_dir: Path
    info: vm.VMInfo = field(init=False)  # set by boot()
    stopped: bool = True

    @staticmethod
    def build(name: str, kernel: vm.BootKernel) -> Path:
        return vm.build_module(LP_DATA / name, kernel)

    def module(self, name: str) -> Path:
        return self.build(name, self.kernel)

    def check_script(self, name: str) -> Path:
        return LP_DATA / name / f"{name}-LOADED.test"

    def remote(self):
        return connect(self.host.ssh, self.host.name)

    def boot(self) -> vm.VMInfo:
        assert self.host.ssh is not None
        self.info = vm.up(kernel=self.kernel, state_dir=self.state_dir, ssh_port=self.host.ssh.port, persist=True)
        self.stopped = False
        return self.info

    def stop(self) -> None:
        vm.down(self.state_dir)
        self.stopped = True


def own_kernel() -> vm.BootKernel:
    """The kernel of a test's own VM: the lab kernel, else Debian's (the lab kernel is not built yet)."""
    try:
        return vm.resolve_kernel("lab")
    except NumaforgeError:
        return vm.resolve_kernel("debian")


NIC_PCI = "0000:21:04.0"  # the NUMA-local virtio NIC in the guest (behind qemu's expander bridge on node 1)


@dataclass
class NicLab:
    """The lab VM with its persistent disk and the NUMA-local virtio NIC (vm.up persist, numa_nic)."""

    state_dir: Path
    port: int
    kernel: vm.BootKernel
    stopped: bool = True

    def boot(self) -> vm.VMInfo:
        """Boot it (again, after a guest reboot: the same kernel, port, keys and persistent disk)."""
        info = vm.up(kernel=self.kernel, state_dir=self.state_dir, ssh_port=self.port, persist=True, numa_nic=True)
        self.stopped = False
        return info

    def stop(self) -> None:
        vm.down(self.state_dir)
        self.stopped = True

    @property
    def ssh(self):
        return vm.lab_ssh(self.state_dir, self.port)
