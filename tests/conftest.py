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
# The same for SIGHUP under nohup (a fresh root started with `nohup ... &` failed every SIGHUP test: the tasks
# keep an inherited SIG_IGN for SIGHUP on purpose, as a run under nohup must). The SIGHUP tests stand for a run
# whose terminal goes away, so the suite's children start with the default action, as on a terminal, while
# the suite itself still survives a hangup: a handler that does nothing, which exec resets to the default.
if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
    signal.signal(signal.SIGHUP, lambda signum, frame: None)


@pytest.fixture(autouse=True)
def _private_redfish_discovery_cache(tmp_path_factory, monkeypatch):
    """Each test starts with an empty on-disk Redfish discovery cache (numaforge.bios.discovery), so request
    counts never depend on what an earlier test (or a user run on this machine) learnt."""
    monkeypatch.setenv("NUMAFORGE_REDFISH_CACHE", str(tmp_path_factory.mktemp("redfish-cache")))


# the shared VMs booted so far on this worker, by their xdist group (pytest_runtest_setup/teardown below)
SHARED_VMS: dict[str, Lab | NicLab] = {}


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    """One lab VM per test session (boots are slow under TCG), for every test that only needs a 4-node VM: a
    private state dir, a free loopback port, the persistent disk (livepatch-install survives reboot()). The test
    live patches are compiled first (cached by content), so no test waits on a compile with the VM up."""
    kernel = vm.resolve_kernel(lab_kernel_name())
    for name in test_modules():
        Lab.build(name, kernel)
    state, port = tmp_path_factory.mktemp("labvm"), free_port()
    lab = Lab(kernel, Host("lab-vm", Location("tests/conftest.py"), groups=["lab"], ssh=vm.lab_ssh(state, port)), state)
    lab.boot()
    SHARED_VMS[SESSION_GROUP] = lab
    try:
        yield lab
    finally:
        lab.stop()


@pytest.fixture(scope="session")
def nic_lab(tmp_path_factory):
    """One lab VM with the persistent disk and the NUMA-local virtio NIC for the tests that need that NIC (the
    host OS pipeline across a reboot, numa-audit's IRQ fault): one boot for both, in the xdist group NIC_GROUP."""
    lab = NicLab(tmp_path_factory.mktemp("nic-labvm"), free_port(), own_kernel())
    lab.boot()
    SHARED_VMS[NIC_GROUP] = lab
    try:
        yield lab
    finally:
        lab.stop()


def _loadgroup_suffix(item) -> None:
    """Boundary workaround for pytest-xdist#1386 (open; fix proposed in pytest-xdist#1388): xdist 3.8 writes the
    "@group" suffix into ``item._nodeid``, which pytest 9.2's structured node ids (``item._id``) no longer read,
    so --dist loadgroup silently scheduled every test on its own (seen: the session VM and the probe-direction VM
    each booted on both workers). Here the suffix goes into the structured id, as the proposed fix does. With a
    pytest whose ``_nodeid`` still takes, xdist's hook adds a second suffix; the scheduler reads the last one."""
    group = _group(item)
    node_id = getattr(item, "_id", None)
    if group and node_id is not None and hasattr(type(node_id), "parse") and not item.nodeid.endswith("@" + group):
        item._id = type(node_id).parse(f"{item.nodeid}@{group}")


def _group(item) -> str | None:
    mark = item.get_closest_marker("xdist_group")
    return mark.args[0] if mark else None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """A shared VM stopped after its group (below) boots again for a test of its group that comes later: never
    under scripts/test.sh (a group's tests run one after the other on one worker), a safety net otherwise."""
    shared = SHARED_VMS.get(_group(item) or "")
    if shared is not None and shared.stopped:
        shared.boot()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """After the last test of a shared VM's group, stop that VM then rather than at the session's end: it would
    idle meanwhile while the worker runs other groups (an idle TCG guest took ~10 % of a core in the lab_vm tier)."""
    group = _group(item)
    shared = SHARED_VMS.get(group or "")
    if shared is not None and not shared.stopped and (nextitem is None or _group(nextitem) != group):
        shared.stop()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """scripts/test.sh runs the lab_vm tier on two xdist workers with --dist loadgroup: every test on the session
    lab VM (`lab`) stays on one worker, so the session boots one VM, and likewise every test on the NIC VM
    (`nic_lab`); a test module that boots a VM of its own is a group of its own and runs on the other worker
    meanwhile. A module with SESSION_FIRST runs first of the session VM's tests (its test builds the lab kernel's
    module, which decides the session VM's kernel: tests/labvm.py's lab_kernel_name); the tests that change the
    session VM for good (module.sig_enforce can only be switched on) run last of them. Every group's tests are
    made adjacent (at the place of its first test), so a run without xdist boots each shared VM once too.

    The xdist_group marks reach --dist loadgroup only as an "@group" suffix of the node ids (xdist writes it in a
    worker's own hook). tryfirst: otherwise that hook ran before this one and never saw the marks added here.
    _loadgroup_suffix: on pytest 9.2 xdist's suffix does not take (below), so every test was a group of its own."""
    for item in items:
        if item.get_closest_marker("lab_vm") and not item.get_closest_marker("xdist_group"):
            if "lab" in item.fixturenames:
                group = SESSION_GROUP
            elif "nic_lab" in item.fixturenames:
                group = NIC_GROUP
            else:
                group = f"own-vm:{item.module.__name__}"
            item.add_marker(pytest.mark.xdist_group(group))
    if config.getoption("loadgroup", default=False):  # an xdist worker of --dist loadgroup (no xdist: no option)
        for item in items:
            _loadgroup_suffix(item)
    items.sort(
        key=lambda it: (not getattr(getattr(it, "module", None), "SESSION_FIRST", False), "sig_enforce" in it.nodeid)
    )
    place: dict[str, int] = {}  # a group's place: its first test's
    order = {id(item): place.setdefault(_group(item) or f"item:{i}", i) for i, item in enumerate(items)}
    items.sort(key=lambda item: order[id(item)])


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The hostile tier's counts (reader fault matrix, campaign tally, generated options): here, because the xdist
    controller that prints the summary loads this conftest only."""
    print_summary(terminalreporter)
