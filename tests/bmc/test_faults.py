"""Fault plan semantics (pure): matching, counting, before/after stage, bad options."""

import pytest

from numaforge.lab.bmc.faults import FaultPlan


def test_fault_matches_path_and_is_used_up():
    plan = FaultPlan()
    plan.add("503", r"/Bios$", count=2, retry_after=3)
    assert plan.take("GET", "/redfish/v1/Systems/1", after=False) is None
    f1 = plan.take("GET", "/redfish/v1/Systems/1/Bios", after=False)
    f2 = plan.take("GET", "/redfish/v1/Systems/1/Bios", after=False)
    assert f1.options == {"retry_after": 3} and f2 is f1
    assert plan.take("GET", "/redfish/v1/Systems/1/Bios", after=False) is None
    assert plan.fired == [("503", "GET", "/redfish/v1/Systems/1/Bios")] * 2


def test_method_filter_and_after_stage():
    plan = FaultPlan()
    plan.add("reset", "Settings", method="patch", after=True)
    assert plan.take("GET", "/x/Settings", after=True) is None
    assert plan.take("PATCH", "/x/Settings", after=False) is None
    assert plan.take("PATCH", "/x/Settings", after=True).kind == "reset"
    assert plan.pending() == 0


def test_slow_after_processing_is_a_late_answer():
    """slow + after=True: the request is processed, then answered ``seconds`` late (past a client's timeout)."""
    plan = FaultPlan()
    plan.add("slow", "Settings", method="PATCH", after=True, seconds=3)
    assert plan.take("PATCH", "/x/Settings", after=False) is None
    fault = plan.take("PATCH", "/x/Settings", after=True)
    assert (fault.kind, fault.options) == ("slow", {"seconds": 3})


@pytest.mark.parametrize(
    "kind,kw", [("teapot", {}), ("503", {"after": True}), ("503", {"seconds": 1}), ("5xx", {"count": 0})]
)
def test_bad_fault_requests_are_refused(kind, kw):
    with pytest.raises(ValueError):
        FaultPlan().add(kind, **kw)
