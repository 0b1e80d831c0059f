"""Settings for every tier."""

import pytest


@pytest.fixture(autouse=True)
def _private_redfish_discovery_cache(tmp_path_factory, monkeypatch):
    """Each test starts with an empty on-disk Redfish discovery cache (numaforge.bios.discovery), so request
    counts never depend on what an earlier test (or a user run on this machine) learnt."""
    monkeypatch.setenv("NUMAFORGE_REDFISH_CACHE", str(tmp_path_factory.mktemp("redfish-cache")))
