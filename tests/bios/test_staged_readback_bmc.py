"""Issue 25 item 5 (BIOS apply): after a PATCH the BMC accepted, the settings object is read back and compared
with what was sent. A BMC that answers "accepted" but stages nothing, or stages another value, makes the host
"failed" with the attribute names and values -- never "7 written, 7 pending" and exit 0. The simulator's
"stage_nothing" / "stage_other" faults are such BMCs. Real HTTPS simulators on 127.0.0.1; nothing mocked."""

from __future__ import annotations

import pytest

from numaforge.bios.apply import apply_host
from numaforge.bios.plan import staged_mismatches

from .test_bios_apply_bmc import _bmc_password, host_for, run, sim_factory  # noqa: F401 (fixtures)


def test_staged_mismatches_names_each_attribute_and_value():
    cur = {"A": "x", "B": "x", "C": "x"}
    assert staged_mismatches({"A": "y"}, cur, {"A": "y"}) == []
    assert staged_mismatches({"A": "y"}, cur, {}) == ["A: sent 'y', staged nothing"]
    assert staged_mismatches({"A": "y"}, cur, {"A": "x"}) == ["A: sent 'y', staged nothing"]   # echoes current
    assert staged_mismatches({"A": "y"}, cur, {"A": "z"}) == ["A: sent 'y', staged 'z'"]
    assert staged_mismatches({"B": "x"}, cur, {}) == []             # same as current: nothing to stage


@pytest.mark.bmc
@pytest.mark.parametrize("flavour", ["generic", "dell", "smc-h13", "hpe-gen11"])
@pytest.mark.parametrize("kind, shows", [("stage_nothing", "staged nothing"), ("stage_other", "staged '")])
def test_a_bmc_that_accepts_and_stages_something_else_fails_the_host(sim_factory, flavour, kind, shows):
    sim = sim_factory(flavour)
    sim.inject(kind, "(?i)" + sim.flavour.settings_path.rstrip("/") + "/?$", method="PATCH")   # iLO: any case
    r = run(apply_host, host_for(sim))
    assert r.status == "failed", r.message
    assert "the BMC accepted the PATCH but its settings object" in r.message and shows in r.message, r.message
    assert "written before it stopped" not in r.message
    assert [(k, m) for k, m, _ in sim.faults.fired] == [(kind, "PATCH")]
