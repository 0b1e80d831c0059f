"""Issue 41 item 8, the write side: on the captured trees (tests/data/captures, served as captured by the
simulator's mockup mode) and on the simulator's Dell flavours; real HTTPS, DMTF's `redfish` library as the client,
nothing mocked."""

from __future__ import annotations

import json
import threading
import time

import pytest

from numaforge import budget
from numaforge.bios.apply import RegistryCache, apply_host, plan_host
from numaforge.bios.operations import OpOptions, operate_host
from numaforge.lab.bmc import ALL_FLAVOURS, load_flavour
from numaforge.report import HostResult

from .conftest import capture_dirs
from .test_bios_apply_bmc import PASSWORD, _bmc_password, admin_session, host_for, opts, run, sim_factory  # noqa: F401 (fixture)

pytestmark = pytest.mark.bmc


def _bios_docs(capture) -> list[dict]:
    docs = [json.loads(p.read_text()) for p in capture.rglob("index.json")]
    return [d for d in docs if str(d.get("@odata.type", "")).startswith("#Bios.")]


RESET_BIOS = [c for c in capture_dirs() if any("#Bios.ResetBios" in (d.get("Actions") or {}) for d in _bios_docs(c))]


def _host(sim):
    several = len(sim.tree["redfish/v1/systems"].get("Members") or []) > 1
    return host_for(sim, system_id=sim.system_path.rstrip("/").rsplit("/", 1)[-1] if several else None)


def test_the_corpus_has_reset_bios_with_and_without_an_action_info():
    """The space below covers both kinds of BMC (the list comes from the captures)."""
    infos = [
        any("@Redfish.ActionInfo" in (d.get("Actions") or {}).get("#Bios.ResetBios", {}) for d in _bios_docs(c))
        for c in RESET_BIOS
    ]
    assert any(infos) and not all(infos), [c.name for c in RESET_BIOS]


@pytest.mark.parametrize("capture", RESET_BIOS, ids=[c.name for c in RESET_BIOS])
def test_reset_bios_is_posted_with_the_body_its_action_info_asks_for(mockup_factory, capture):
    """bios-reset-defaults posted `{}` everywhere. DSP8010's Bios.ResetBios has no parameter, so `{}` is right where
    the BMC states none; the AMI MegaRAC of the DGX H100 capture (ResetBiosActionInfo) requires ResetType "Reset"
    and refuses `{}` with 400 ActionParameterMissing."""
    sim = mockup_factory(capture, password=PASSWORD)
    system = sim.first
    required = {n: allowed[0] for n, (req, allowed) in system.reset_bios_params.items() if req and allowed}
    r = HostResult("gpu-01")
    operate_host("reset-defaults", _host(sim), opts(), OpOptions(), RegistryCache(), r)
    assert r.status == "changed", r.message
    assert system.bios_resets == [required], system.bios_resets


DELL_FLAVOURS = [n for n in ALL_FLAVOURS if load_flavour(n).jobs == "dell"]


@pytest.mark.parametrize("flavour", DELL_FLAVOURS)
def test_dell_system_lockdown_is_named_as_the_cause(sim_factory, flavour):
    """Issue 41 item 8: an iDRAC in System Lockdown refuses the PATCH with a message that does not say why; main
    told the operator to "fix the attribute the BMC names". The host's error names the Lockdown attribute it
    read from the manager's DellAttributes, keeps the BMC's own message, and nothing is pending."""
    sim = sim_factory(flavour)
    sim.state.lockdown = True
    r = run(apply_host, host_for(sim))
    assert r.status == "failed"
    text = " ".join(r.message.split())
    assert "System Lockdown is enabled" in text and "Lockdown.1.SystemLockdown Enabled" in text, text
    assert "OperationNotAllowed" in text and "fix the attribute" not in text, text
    assert sim.bios_pending() == {} and sim.count("PATCH") == 1


@pytest.mark.parametrize("operation", ["clear-pending", "reset-defaults"])
@pytest.mark.parametrize("flavour", DELL_FLAVOURS)
def test_dell_system_lockdown_is_named_by_the_operations_too(sim_factory, flavour, operation):
    """The same for the operations that write: the iDRAC's refusal of ClearPending or ResetBios names the
    Lockdown attribute, not only the BMC's message; nothing changes."""
    sim = sim_factory(flavour)
    change = next(i for i in run(plan_host, host_for(sim)).data["plan"] if i["action"] == "change")
    staged = {change["attribute"]: change["desired"]}
    admin_session(sim).patch(sim.url + sim.settings_path, json={"Attributes": staged}, timeout=10).raise_for_status()
    sim.state.lockdown = True
    r = HostResult("gpu-01")
    operate_host(operation, host_for(sim), opts(), OpOptions(), RegistryCache(), r)
    assert r.status == "failed"
    text = " ".join(r.message.split())
    assert "System Lockdown is enabled" in text and "Lockdown.1.SystemLockdown Enabled" in text, text
    assert "OperationNotAllowed" in text, text
    assert sim.bios_pending() == staged


def test_a_stop_while_reading_reset_bios_action_info_is_not_an_unknown_write(mockup_factory):
    """Ctrl-C while the ActionInfo of ResetBios is read (the DGX capture), before the POST leaves: nothing was
    sent, so nothing is re-read or called "outcome unknown" -- the stop is said as a stop."""
    capture = next(c for c in RESET_BIOS if c.name == "libredfish-ami-dgx-viking")
    sim = mockup_factory(capture, password=PASSWORD)
    sim.inject("slow", "ResetBiosActionInfo", method="GET", seconds=5)

    def stop() -> None:
        t0 = time.monotonic()
        while sim.count("GET", "ResetBiosActionInfo") == 0 and time.monotonic() - t0 < 30:
            time.sleep(0.02)
        time.sleep(0.2)
        budget.request_stop("interrupted (SIGINT)")

    t = threading.Thread(target=stop, daemon=True)
    t.start()
    try:
        r = HostResult("gpu-01")
        operate_host("reset-defaults", _host(sim), opts(), OpOptions(), RegistryCache(), r)
    finally:
        t.join()
        budget.clear_stop()
    assert sim.count("POST", "ResetBios") == 0 and sim.first.bios_resets == []
    assert r.status in ("failed", "interrupted") and "interrupted (SIGINT)" in r.message, r.message
    assert "unsure" not in r.data and "outcome unknown" not in r.message, (r.data, r.message)
