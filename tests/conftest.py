"""Settings for every tier."""

import signal
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "hostile"))
from hostile_summary import print_summary  # tests/hostile is no package: its modules import by name

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


def pytest_collection_modifyitems(config, items):
    """scripts/test.sh runs the lab_vm tier on two xdist workers with --dist loadgroup: every test on the session
    lab VM (tests/lab/conftest.py's `lab` fixture) stays on one worker, so the session boots one VM; a test that
    boots its own VM is a group of its own and runs on the other worker meanwhile."""
    for item in items:
        if item.get_closest_marker("lab_vm") and not item.get_closest_marker("xdist_group"):
            group = "lab-session-vm" if "lab" in item.fixturenames else f"own-vm:{item.module.__name__}"
            item.add_marker(pytest.mark.xdist_group(group))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The hostile tier's counts (reader fault matrix, campaign tally, generated options): here, because the xdist
    controller that prints the summary loads this conftest only."""
    print_summary(terminalreporter)
