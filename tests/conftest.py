"""Settings for every tier."""

import signal
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "hostile"))
from hostile_summary import print_summary  # tests/hostile is no package: its modules import by name
from labvm import NIC_GROUP, SESSION_GROUP, Lab, NicLab, lab_kernel_name, own_kernel, test_modules
from sshd_fixture import free_port

from numaforge.inventory.model import Host, Location
from numaforge.lab import vm

# A suite started in the background (`cmd &` in a script, nohup, some CI runners) inherits SIGINT as ignored, and
# an ignored signal stays ignored across exec: `_thread.interrupt_main()` then does nothing and the Ctrl-C tests of
# the fleet runner and of the tasks (SIGINT to an `invoke` child) would test nothing. Python's own handler here is
# reset to the default by exec, so every child Python turns SIGINT into KeyboardInterrupt as on a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _private_redfish_discovery_cache(tmp_path_factory, monkeypatch):
    """Each test starts with an empty on-disk Redfish discovery cache (numaforge.bios.discovery), so request
    counts never depend on what an earlier test (or a user run on this machine) learnt."""
    monkeypatch.setenv("NUMAFORGE_REDFISH_CACHE", str(tmp_path_factory.mktemp("redfish-cache")))


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    """One lab VM per test session (boots are slow under TCG), for every test that only needs a 4-node VM: a
    private state dir, a free loopback port, the persistent disk (livepatch-install survives reboot()). The test
    live patches are compiled first (cached by content), so no test waits on a compile with the VM up."""
    kernel = vm.resolve_kernel(lab_kernel_name())
    for name in test_modules():
        Lab.build(name, kernel)
    state = tmp_path_factory.mktemp("labvm")
    port = free_port()
    info = vm.up(kernel=kernel, state_dir=state, ssh_port=port, persist=True)
    host = Host("lab-vm", Location("tests/conftest.py"), groups=["lab"], ssh=vm.lab_ssh(state, port))
    try:
        yield Lab(info, kernel, host, state)
    finally:
        vm.down(state)


@pytest.fixture(scope="session")
def nic_lab(tmp_path_factory):
    """One lab VM with the persistent disk and the NUMA-local virtio NIC for the tests that need that NIC (the
    host OS pipeline across a reboot, numa-audit's IRQ fault): one boot for both, in the xdist group NIC_GROUP."""
    lab = NicLab(tmp_path_factory.mktemp("nic-labvm"), free_port(), own_kernel())
    lab.boot()
    try:
        yield lab
    finally:
        vm.down(lab.state_dir)


def pytest_collection_modifyitems(config, items):
    """scripts/test.sh runs the lab_vm tier on two xdist workers with --dist loadgroup: every test on the session
    lab VM (`lab`) stays on one worker, so the session boots one VM, and likewise every test on the NIC VM
    (`nic_lab`); a test module that boots a VM of its own is a group of its own and runs on the other worker
    meanwhile. A module with SESSION_FIRST runs first of the session VM's tests (its test builds the lab kernel's
    module, which decides the session VM's kernel: tests/labvm.py's lab_kernel_name)."""
    items.sort(key=lambda item: not getattr(item.module, "SESSION_FIRST", False))
    for item in items:
        if item.get_closest_marker("lab_vm") and not item.get_closest_marker("xdist_group"):
            if "lab" in item.fixturenames:
                group = SESSION_GROUP
            elif "nic_lab" in item.fixturenames:
                group = NIC_GROUP
            else:
                group = f"own-vm:{item.module.__name__}"
            item.add_marker(pytest.mark.xdist_group(group))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The hostile tier's counts (reader fault matrix, campaign tally, generated options): here, because the xdist
    controller that prints the summary loads this conftest only."""
    print_summary(terminalreporter)
