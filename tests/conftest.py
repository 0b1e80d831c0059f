"""Settings for every tier."""

import signal

import pytest

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
