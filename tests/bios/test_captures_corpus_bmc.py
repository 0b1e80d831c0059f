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

_NO_GENERATION = (
    "issue 41 (outside items 1-9): no generation of the {vendor} vendor map fits {model} (registry {registry}); "
    "the plan fails instead of showing the settings this host cannot take as gaps"
)
_GENERIC = (
    "issue 41 (outside items 1-9): {model} is no EPYC host and no vendor map names its BMC; the generic map "
    "cannot map the profile, so the plan fails instead of saying the host has no map"
)


def _expected() -> dict[tuple[str, str, str], str]:
    out: dict[tuple[str, str, str], str] = {}

    def every_step(capture: str, reason: str, profiles=PROFILES, steps=STEPS) -> None:
        for profile in profiles:
            for step in steps:
                out[(capture, profile, step)] = reason

    every_step("libredfish-ami-dgx-viking", _GENERIC.format(model="DGX H100 (AMI MegaRAC, Intel)"))
    for dell in ("libredfish-dell-r750", "libredfish-dell-r750-multi-dpu"):
        every_step(
            dell,
            _NO_GENERATION.format(vendor="dell", model="PowerEdge R750", registry="BiosAttributeRegistry.v1_0_3"),
        )
    every_step(
        "libredfish-lenovo-sr670v2",
        _NO_GENERATION.format(vendor="lenovo", model="ThinkSystem SR670 V2", registry="BiosAttributeRegistry.1.0.0"),
    )
    every_step(
        "libredfish-supermicro-x13",
        _NO_GENERATION.format(vendor="supermicro", model="SYS-821GE-TNHR", registry="BiosAttributeRegistry.1_0_0"),
    )
    for nvidia in ("libredfish-nvidia-bluefield3", "libredfish-nvidia-gb200", "libredfish-nvidia-gh200"):
        every_step(nvidia, _GENERIC.format(model=nvidia.rsplit("-", 1)[-1] + " (ARM)"))
    return out


EXPECTED = _expected()


def _cases():
    for capture in CAPTURES:
        for profile in PROFILES:
            for step in STEPS:
                reason = EXPECTED.get((capture.name, profile, step))
                marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
                yield pytest.param(capture, profile, step, id=f"{capture.name}-{profile}-{step}", marks=marks)


def test_expected_failures_name_real_cases_and_an_issue_item():
    """Every expected failure names a capture, a shipped profile and a step that exist, and its cause."""
    names = {c.name for c in CAPTURES}
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
