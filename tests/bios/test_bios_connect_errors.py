"""Bad inventory input for the BMC side fails before any connection, naming the host and the fix."""

from __future__ import annotations

import threading

import pytest

from numaforge.bios.apply import HostOptions, RegistryCache
from numaforge.bios.hostsession import connect
from numaforge.errors import NumaforgeError
from numaforge.secrets import SecretRef

from .helpers import host


@pytest.mark.parametrize(
    "kw, what, fix",
    [
        ({"password": None}, "bmc.password is not set", "env:VARIABLE"),
        ({"password": SecretRef("env", "NF_SURELY_UNSET_VAR")}, "NF_SURELY_UNSET_VAR is not set", "export"),
        ({"password": SecretRef("env", "HOME"), "ca_bundle": "/nonexistent/ca.pem"}, "does not exist", "PEM"),
        ({"password": SecretRef("env", "HOME"), "url": "http://10.0.0.1"}, "is not https", "https://"),
    ],
)
def test_connect_refuses_bad_bmc_settings(kw, what, fix, monkeypatch):
    monkeypatch.delenv("NF_SURELY_UNSET_VAR", raising=False)
    with pytest.raises(NumaforgeError) as ei:
        connect(host(**kw), HostOptions())
    assert what in ei.value.what and fix in ei.value.fix


def test_host_without_bmc_section():
    h = host()
    h.bmc = None
    with pytest.raises(NumaforgeError) as ei:
        connect(h, HostOptions())
    assert ei.value.where.startswith("gpu-01") and "bmc" in ei.value.fix


def test_registry_cache_fetches_each_id_once_under_concurrency():
    cache = RegistryCache()
    calls = []
    gate = threading.Event()

    def fetch():
        calls.append(1)
        gate.wait(1)
        return object()

    got = []
    threads = [threading.Thread(target=lambda: got.append(cache.get("Reg.v1", fetch))) for _ in range(8)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join()
    assert len(calls) == 1 and cache.fetches == 1 and len({id(g) for g in got}) == 1
