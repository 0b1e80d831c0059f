"""The capture corpus (tests/data/captures, issue 41): every whole captured BMC tree, served as captured by the
simulator's mockup mode, x both shipped BIOS profiles: plan, apply --reboot, verify, re-plan. Real HTTPS on
127.0.0.1, DMTF's `redfish` library as the client; nothing is mocked.

Done when (issue 41): the plan is ok; a setting the capture cannot hold is shown as a gap/skip, never written;
apply --reboot converges with exactly one reset where something changed and none where nothing did; verify is
ok; a re-plan shows 0 changes. Today's failures are strict xfails naming the issue-41 item and the step, so a fix
flips them to failures that must be unmarked (EXPECTED below)."""

from __future__ import annotations

from pathlib import Path

import pytest

from numaforge.bios.apply import Timeouts, apply_host, plan_host, verify_host

from .conftest import capture_dirs
from .test_bios_apply_bmc import PASSWORD, _bmc_password, host_for, opts, run  # noqa: F401 (fixture)

pytestmark = pytest.mark.bmc

SHIPPED = Path(__file__).resolve().parents[2] / "bios" / "profiles"
PROFILES = sorted(p.name.removesuffix(".yaml.j2") for p in SHIPPED.glob("*.yaml.j2"))
CAPTURES = capture_dirs()
STEPS = ("plan", "apply", "verify", "replan")
TIMEOUTS = Timeouts(graceful=3.0, power_on=15.0, job=5.0, poll=0.1, settle=3.0)

_GENERIC = (
    "issue 41 (outside items 1-9): {model} names no processor model and no vendor map names its BMC; the generic "
    "map cannot map the profile (the plan fails listing every setting it could not find)"
)


def _expected() -> dict[tuple[str, str, str], str]:
    out: dict[tuple[str, str, str], str] = {}

    def every_step(capture: str, reason: str, profiles=PROFILES, steps=STEPS) -> None:
        for profile in profiles:
            for step in steps:
                out[(capture, profile, step)] = reason

    every_step("libredfish-ami-dgx-viking", _GENERIC.format(model="DGX H100 (AMI MegaRAC, Intel)"))
    every_step("libredfish-nvidia-bluefield3", _GENERIC.format(model="BlueField-3 (ARM)"))
    return out


# Boards that are no AMD EPYC host, whose System says so (ProcessorSummary.Model): the plan refuses each, clearly,
# and nothing is written (issue 41, the Intel and ARM captures): the message's first words per capture
REFUSED = {
    "libredfish-dell-r750": "no vendor map for this model: PowerEdge R750 has Intel(R) Xeon(R) Gold 6354",
    "libredfish-dell-r750-multi-dpu": "no vendor map for this model: PowerEdge R750 has Intel(R) Xeon(R) Gold 6354",
    "libredfish-lenovo-sr670v2": "no vendor map for this model: ThinkSystem SR670 V2 has Intel(R) Xeon(R) Platinum",
    "libredfish-supermicro-x13": "no vendor map for this model: SYS-821GE-TNHR has Intel(R) Xeon(R) processor",
    "libredfish-nvidia-gh200": "no vendor map for this model: this system has ARMv9 processors",
    "libredfish-nvidia-gb200": "no vendor map for this model: this system has ARMv9 processors",
}


EXPECTED = _expected()


def _cases():
    for capture in CAPTURES:
        if capture.name in REFUSED:
            continue
        for profile in PROFILES:
            for step in STEPS:
                reason = EXPECTED.get((capture.name, profile, step))
                marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
                yield pytest.param(capture, profile, step, id=f"{capture.name}-{profile}-{step}", marks=marks)


def test_expected_failures_name_real_cases_and_an_issue_item():
    """Every expected failure names a capture, a shipped profile and a step that exist, and its cause."""
    names = {c.name for c in CAPTURES}
    assert set(REFUSED) <= names and not {c for c, _, _ in EXPECTED} & set(REFUSED)
    for (capture, profile, step), reason in EXPECTED.items():
        assert capture in names and profile in PROFILES and step in STEPS, (capture, profile, step)
        assert reason.startswith("issue 41 "), reason


@pytest.mark.parametrize("capture,profile,step", list(_cases()))
def test_capture_converges_in_one_apply(mockup_factory, capture, profile, step):
    sim = mockup_factory(capture, password=PASSWORD)
    # a BMC that manages more than one system: the operator names the one with a Bios (bmc.system_id)
    several = len([m for m in sim.tree["redfish/v1/systems"].get("Members") or []]) > 1
    h = host_for(sim, profile=profile, system_id=sim.system_path.rstrip("/").rsplit("/", 1)[-1] if several else None)
    before = sim.bios_current()

    plan = run(plan_host, h)
    assert plan.status in ("ok", "unchanged"), plan.message
    items = plan.data["plan"]
    changes = {i["attribute"]: i["desired"] for i in items if i["action"] == "change"}
    not_here = {i["attribute"] for i in items if i["action"] in ("gap", "skipped") and i.get("attribute")}
    # what the plan writes is on this host; what the host cannot hold is shown, not written
    assert all(a in before for a in changes), sorted(set(changes) - set(before))
    assert not (set(changes) & not_here)
    if step == "plan":
        return

    applied = run(apply_host, h, opts(reboot=True, timeouts=TIMEOUTS))
    assert applied.status == ("changed" if changes else "unchanged"), applied.message
    assert sum(sim.resets.values()) == (1 if changes else 0), sim.resets
    assert sim.bios_pending() == {}
    now = sim.bios_current()
    assert {k: now[k] for k in changes} == changes
    assert {k: v for k, v in now.items() if k not in changes} == {k: v for k, v in before.items() if k not in changes}
    if step == "apply":
        return

    verified = run(verify_host, h)
    assert verified.status == "ok", verified.message
    if step == "verify":
        return

    sim.reset_counts()
    again = run(plan_host, h)
    assert again.data["would_change"] == [], again.data["would_change"]
    assert sim.count("PATCH") == 0 and sim.count("POST", "Reset") == 0


@pytest.mark.parametrize("capture", [c for c in CAPTURES if c.name in REFUSED], ids=lambda c: c.name)
@pytest.mark.parametrize("profile", PROFILES)
def test_a_board_that_is_no_epyc_host_is_refused_clearly_and_nothing_written(mockup_factory, capture, profile):
    """Plan and apply --reboot both fail for the host, saying it has no vendor map and why; no PATCH, no reset."""
    sim = mockup_factory(capture, password=PASSWORD)
    several = len([m for m in sim.tree["redfish/v1/systems"].get("Members") or []]) > 1
    h = host_for(sim, profile=profile, system_id=sim.system_path.rstrip("/").rsplit("/", 1)[-1] if several else None)
    before = sim.bios_current()
    for r in (run(plan_host, h), run(apply_host, h, opts(reboot=True, timeouts=TIMEOUTS))):
        assert r.status == "failed", r.message
        assert REFUSED[capture.name] in r.message and "nothing is written" in r.message, r.message
    assert sim.count("PATCH") == 0 and sum(sim.resets.values()) == 0
    assert sim.bios_current() == before and sim.bios_pending() == {}
