"""The capture corpus (tests/data/captures, issue 41): every whole captured BMC tree, served as captured by the
simulator's mockup mode, x both shipped BIOS profiles: plan, apply --reboot, verify, re-plan. Real HTTPS on
127.0.0.1, DMTF's `redfish` library as the client; nothing is mocked.

Done when (issue 41): the plan is ok; a setting the capture cannot hold is shown as a gap ("not on this host" for
a setting the vendor map has for another processor family), never written; apply --reboot converges with exactly
one reset where something changed and none where nothing did; verify is ok and names the gaps; a re-plan shows 0
changes. A host where nothing can be applied says so at every step. The cases come from the corpus directory,
the shipped profiles and the vendor maps' own `processor:` marks, never from a list kept here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from numaforge.bios.apply import RegistryCache, Timeouts, apply_host, plan_host, verify_host
from numaforge.bios.hoststate import processor_model
from numaforge.bios.vendormap import PROCESSORS

from .conftest import capture_dirs
from .test_bios_apply_bmc import PASSWORD, _bmc_password, host_for, opts, run  # noqa: F401 (fixture)
from .test_bios_cli_bmc import PASSWORD as CLI_PASSWORD
from .test_bios_cli_bmc import invoke, report

pytestmark = pytest.mark.bmc

SHIPPED = Path(__file__).resolve().parents[2] / "bios" / "profiles"
PROFILES = sorted(p.name.removesuffix(".yaml.j2") for p in SHIPPED.glob("*.yaml.j2"))
CAPTURES = capture_dirs()
STEPS = ("plan", "apply", "verify", "replan")
TIMEOUTS = Timeouts(graceful=3.0, power_on=15.0, job=5.0, poll=0.1, settle=3.0)
NOTHING = "nothing can be applied on this host"


def _host(mockup_factory, capture, profile):
    sim = mockup_factory(capture, password=PASSWORD)
    # a BMC that manages more than one system: the operator names the one with a Bios (bmc.system_id)
    several = len([m for m in sim.tree["redfish/v1/systems"].get("Members") or []]) > 1
    h = host_for(sim, profile=profile, system_id=sim.system_path.rstrip("/").rsplit("/", 1)[-1] if several else None)
    return sim, h


def _other_processor(sim) -> tuple[str, list[str]]:
    """(the System's processor model, the families it is not) -- ("", []) when the BMC names no processor."""
    model = processor_model(sim.tree.get(sim.system_path.strip("/").lower()) or {})
    return model, [f for f, rx in PROCESSORS.items() if model and not re.search(rx, model)]


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("capture", CAPTURES, ids=lambda c: c.name)
def test_capture_converges_in_one_apply(mockup_factory, capture, profile, step):
    sim, h = _host(mockup_factory, capture, profile)
    before = sim.bios_current()

    plan = run(plan_host, h)
    assert plan.status in ("ok", "unchanged"), plan.message
    items = plan.data["plan"]
    changes = {i["attribute"]: i["desired"] for i in items if i["action"] == "change"}
    gaps = {i["setting"]: i["resolved"] for i in items if i["action"] in ("gap", "skipped")}  # setting -> why
    settable = [i for i in items if i["action"] not in ("gap", "skipped")]
    # what the plan writes is on this host; what the host cannot hold is shown, with why, not written
    assert all(a in before for a in changes), sorted(set(changes) - set(before))
    gap_items = [i for i in items if i["action"] in ("gap", "skipped")]
    assert all(i["resolved"] and i["desired"] is None for i in gap_items)
    assert not {i["attribute"] for i in gap_items} & set(changes)
    assert plan.data["gaps"] == [{"setting": i["setting"], "why": i["resolved"]} for i in gap_items]
    model, not_families = _other_processor(sim)
    if not_families:  # an Intel or ARM board: the settings its map has for AMD EPYC only are gaps, never planned
        epyc_only = [s for s, why in gaps.items() if why.startswith(f"not on this host ({model})")]
        assert epyc_only, gaps
        assert not {i["setting"] for i in settable} & set(epyc_only)
    if not settable:
        assert plan.status == "unchanged" and NOTHING in plan.message, plan.message
    elif gaps:
        assert f"{len(plan.data['gaps'])} gap" in plan.message, plan.message
    if step == "plan":
        return

    applied = run(apply_host, h, opts(reboot=True, timeouts=TIMEOUTS))
    assert applied.status == ("changed" if changes else "unchanged"), applied.message
    assert sum(sim.resets.values()) == (1 if changes else 0), sim.resets
    # nothing unsafe is written: every attribute any PATCH carried is one the plan changes
    assert {a for _, attrs in sim.patches for a in attrs} <= set(changes), sim.patches
    assert sim.bios_pending() == {}
    now = sim.bios_current()
    # each value written is current, in the form this Bios shows (a Supermicro shows the display string)
    forms = {i["attribute"]: {i["desired"], (i.get("display") or {}).get("desired")} for i in items}
    assert all(now[k] in forms[k] for k in changes), {k: (now[k], forms[k]) for k in changes}
    assert {k: v for k, v in now.items() if k not in changes} == {k: v for k, v in before.items() if k not in changes}
    if not settable:
        assert NOTHING in applied.message and not sim.patches, applied.message
    if step == "apply":
        return

    verified = run(verify_host, h)
    assert verified.status == "ok", verified.message
    settable_now = [i for i in verified.data["plan"] if i["action"] not in ("gap", "skipped")]
    assert sorted(verified.data["verified"]) == sorted(i["attribute"] for i in settable_now)
    assert verified.data["gaps"] == plan.data["gaps"]
    if gaps:  # the gaps are named, never counted as verified
        assert f"{len(plan.data['gaps'])} gap" in verified.message or NOTHING in verified.message, verified.message
    if step == "verify":
        return

    sim.reset_counts()
    again = run(plan_host, h)
    assert again.data["would_change"] == [], again.data["would_change"]
    assert sim.count("PATCH") == 0 and sim.count("POST", "Reset") == 0


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda c: c.name)
def test_bios_plan_shows_each_gap_in_the_table_and_the_json_and_exits_0_for_gaps_alone(
    mockup_factory, tmp_path, capture
):
    """`invoke bios-plan --detailed-exitcode --json` as an operator runs it: every gap is a `gap` row of the table
    with why (on an Intel/ARM board "not on this host (<model>)"), and a `gaps` entry of the host's JSON data;
    a plan of gaps only is no drift (exit 0), one with changes exits 2; a host with nothing to apply says so."""
    sim = mockup_factory(capture, password=CLI_PASSWORD)
    several = len([m for m in sim.tree["redfish/v1/systems"].get("Members") or []]) > 1
    system = f", system_id: '{sim.system_path.rstrip('/').rsplit('/', 1)[-1]}'" if several else ""
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "version: 1\nhosts:\n  gpu-01:\n"
        f"    bmc: {{url: '{sim.url}', username: admin, password: 'env:NF_CLI_BMC_PW', ca_bundle: '{sim.ca_file}'"
        f"{system}}}\n"
        "    hardware: {sockets: 2, gpus: ['0000:41:00.0']}\n    bios_profile: epyc-baseline\n"
    )
    r = invoke("bios-plan", "-i", str(inv), "--detailed-exitcode", "--json", str(tmp_path / "plan.json"))
    [host] = report(tmp_path / "plan.json")["hosts"]
    data = host["data"]
    changes = [i for i in data["plan"] if i["action"] == "change"]
    assert r.returncode == (2 if changes else 0), (r.returncode, r.stdout, r.stderr)
    assert host["status"] == "unchanged" and sim.count("PATCH") == 0
    gaps = [i for i in data["plan"] if i["action"] == "gap"]
    assert data["gaps"] == [{"setting": i["setting"], "why": i["resolved"]} for i in gaps]
    table = " ".join(r.stdout.split())  # the table folds long cells; compare the words
    for i in gaps:
        assert f"{i['setting']} " in table and " ".join(i["resolved"].split()[:6]) in table, i
    model, not_families = _other_processor(sim)
    if not_families:
        assert f"not on this host ({model.split()[0]}" in table
    if not [i for i in data["plan"] if i["action"] not in ("gap", "skipped")]:
        assert NOTHING in host["message"]


def test_a_second_host_of_a_known_model_keeps_its_processor(mockup_factory):
    """Hosts of one model (inventory vendor stated) share the first one's discovered shape and skip the System
    read; the processor the generation and the gaps depend on travels in that shape, so the second R750 plans
    the same as the first -- not "no generation fits (processor: not read)"."""
    r750 = next(c for c in CAPTURES if c.name == "libredfish-dell-r750")
    sims = [mockup_factory(r750, password=PASSWORD) for _ in range(2)]
    cache = RegistryCache()
    results = [
        run(plan_host, host_for(s, name=f"gpu-{n}", vendor="dell", profile="epyc-baseline"), cache=cache)
        for n, s in enumerate(sims)
    ]
    assert [r.status for r in results] == ["ok", "ok"], [r.message for r in results]
    assert results[0].data["plan"] == results[1].data["plan"]
    assert any(g["why"].startswith("not on this host (Intel(R) Xeon(R) Gold 6354") for g in results[1].data["gaps"])
    assert sims[1].count("GET", r"/Systems/System\.Embedded\.1$") == 0  # the second host did read no System


def test_the_docs_say_what_every_capture_gives():
    """docs/bios-profiles.md's "Real captures each map was run against" table has a row naming every capture of
    the corpus (a capture added without its result there fails here)."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "bios-profiles.md").read_text()
    section = doc[doc.index("**Real captures each map was run against**") :]
    section = section[: section.index("\n\n", section.index("| vendor map"))]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "tests/data/captures" not in line]
    for capture in CAPTURES:
        short = capture.name.removeprefix("libredfish-nvidia-")
        assert any(capture.name in r or f"-{short}" in r for r in rows), capture.name
