"""Issue 40 item 3: a Bios or settings object whose Attributes is not an object (null, a list of pairs that
``dict()`` would turn into attributes) cannot tell what the BMC holds: the host fails naming it, before anything
is written. Real HTTPS simulators on 127.0.0.1 with the "answer" fault (the real document, Attributes replaced);
nothing mocked."""

from __future__ import annotations

import pytest

from numaforge.bios.apply import apply_host

from .test_bios_apply_bmc import _bmc_password, admin_session, host_for, run, sim_factory  # noqa: F401 (fixtures)


def _document(sim, path: str) -> dict:
    s = admin_session(sim)
    return s.get(sim.url + path, timeout=10).json()


@pytest.mark.bmc
@pytest.mark.parametrize("which", ["bios", "settings"])
@pytest.mark.parametrize("shape", ["null", "list"])
def test_attributes_that_are_not_an_object_are_refused_before_any_write(sim_factory, which, shape):
    sim = sim_factory("generic")
    path = sim.bios_path if which == "bios" else sim.flavour.settings_path
    doc = _document(sim, path)
    attrs = doc.get("Attributes") or {}
    doc["Attributes"] = None if shape == "null" else [[k, v] for k, v in attrs.items()] or [["ProcCStates", "x"]]
    sim.inject("answer", "(?i)" + path.rstrip("/") + "/?$", method="GET", count=100, body=doc)
    r = run(apply_host, host_for(sim))
    assert sim.count("PATCH") == 0, r.message
    assert r.status == "failed" and "answered Attributes as " in r.message, r.message
    assert ("null" if shape == "null" else "a JSON list") in r.message
