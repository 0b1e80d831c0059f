"""Unverified values are not written by default (issue 39 item 5): the plans showed long "UNVERIFIED" notes and
bios-apply then wrote them (Dell 15G SysProfile=Custom). `--unverified refuse|warn|allow` (also the inventory var
bios_unverified and the profile key `unverified:`; option > inventory > profile), default refuse on apply (the host
fails before any write, naming the attributes and the option), warn on plan; plan values show the registry's display
name beside a code (Supermicro H13 NUMANodesPerSocket_703E "3" is NPS4).

The policy decision is pure (numaforge.bios.plan.unverified_policy / check_unverified) and walked over every
combination; the enforcement runs against the BMC simulator in every flavour (its flavour list). Real HTTPS
simulators on 127.0.0.1; nothing mocked."""

from __future__ import annotations

import itertools
import json

import pytest
from rich.console import Console

from numaforge.bios.apply import HostOptions, RegistryCache, apply_host, plan_host
from numaforge.bios.plan import DEFAULT_UNVERIFIED, Plan, PlanItem, check_unverified, unverified_policy
from numaforge.bios.presets import UNVERIFIED_POLICIES, UNVERIFIED_VAR
from numaforge.cli import bios, common
from numaforge.lab.bmc.flavours import ALL_FLAVOURS
from numaforge.report import HostResult, Report

from .test_bios_apply_bmc import FAST, POLICY, _bmc_password, host_for, sim_factory  # noqa: F401 (fixtures)
from .test_bios_cli_bmc import PASSWORD as CLI_PASSWORD
from .test_bios_cli_bmc import invoke

pytestmark = pytest.mark.bmc


def opts(**kw) -> HostOptions:  # this file's own: no unverified default of the shared helper
    return HostOptions(timeouts=FAST, policy=POLICY, **kw)


def run(fn, h, o) -> HostResult:
    r = HostResult(h.name)
    fn(h, o, RegistryCache(), r)
    return r


# -- pure -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("action", sorted(DEFAULT_UNVERIFIED))
def test_policy_precedence_option_then_inventory_then_profile_then_default(action):
    choices = (None, *UNVERIFIED_POLICIES)
    for option, inventory, profile in itertools.product(choices, repeat=3):
        policy, source = unverified_policy(action, option, inventory, profile)
        first = next((v for v in (option, inventory, profile) if v is not None), None)
        assert policy == (first if first is not None else DEFAULT_UNVERIFIED[action])
        if option is not None:
            assert source == "--unverified"
        elif inventory is not None:
            assert UNVERIFIED_VAR in source
    assert DEFAULT_UNVERIFIED == {"plan": "warn", "apply": "refuse"}


def test_only_unverified_values_to_write_count():
    items = [
        PlanItem("A", "s", "x", "y", None, "change", unverified="not seen"),
        PlanItem("B", "s", "x", "x", None, "ok", unverified="not seen"),
        PlanItem("C", "s", "x", "y", "x", "pending", unverified="not seen"),
        PlanItem("D", "s", "x", "y", None, "change"),
    ]
    plan = Plan("R", items)
    for policy in UNVERIFIED_POLICIES:
        c = check_unverified(plan, policy, "--unverified")
        assert [i.attribute for i in c.items] == ["A"]
        assert c.refused == (policy == "refuse") and c.warned == (policy == "warn")
    assert not check_unverified(Plan("R", items[1:]), "refuse", "x").refused


# -- against the simulator ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("flavour", ALL_FLAVOURS)
def test_apply_refuses_unverified_values_before_any_write_in_every_flavour(sim_factory, flavour):
    sim = sim_factory(flavour)
    h = host_for(sim)
    plan = run(plan_host, h, opts())
    assert plan.status in ("ok", "unchanged"), plan.message
    would = plan.data["unverified_policy"]["values"]
    assert plan.data["unverified_policy"]["policy"] == "warn"

    applied = run(apply_host, h, opts())
    if would:
        assert applied.status == "failed", applied.message
        assert "refused before any write" in applied.message and "--unverified" in applied.message
        assert all(a in applied.message for a in would), applied.message
        assert sim.count("PATCH") == 0 and sim.bios_pending() == {}
        allowed = run(apply_host, h, opts(unverified="allow"))
        assert allowed.status == "changed", allowed.message
        assert set(would) <= set(allowed.data["changed"])
    else:
        assert applied.status in ("changed", "unchanged"), applied.message


def test_dell_15g_unverified_values_are_refused_unless_allowed_and_the_sources_rank(sim_factory, tmp_path):
    """The policy applies per value (issue 41 item 9): on the Dell 15G the gpudirect plan's MemoryInterleaving
    Disabled and PerfDeterminism are marked, while NPS "4" (cybozu-go/setup-hw) and SysProfile=Custom (the R750's
    iDRAC9 15G registry), values of marked entries before, are shown and not refused."""
    sim = sim_factory("dell-15g")
    h = host_for(sim)
    refused = run(apply_host, h, opts())
    assert refused.status == "failed", refused.message
    assert (
        "MemoryInterleaving='Disabled'" in refused.message and "DeterminismSlider='PerfDeterminism'" in refused.message
    )
    assert "SysProfile" not in refused.message and "NumaNodesPerSocket" not in refused.message, refused.message
    assert sim.count("PATCH") == 0
    assert refused.data["unverified_policy"]["from"] == "the bios-apply default"

    # the profile's key allows; the inventory var refuses: the inventory wins
    profile = tmp_path / "allowing.yaml.j2"
    profile.write_text("unverified: allow\nsettings:\n  numa_nodes_per_socket: 4\n  memory_interleaving: false\n")
    h.bios_profile = str(profile)
    h.vars[UNVERIFIED_VAR] = "refuse"
    by_inventory = run(apply_host, h, opts())
    assert by_inventory.status == "failed" and UNVERIFIED_VAR in by_inventory.data["unverified_policy"]["from"]
    # the option wins over both
    warned = run(plan_host, h, opts(unverified="warn"))
    assert warned.data["unverified_policy"]["from"] == "--unverified"
    del h.vars[UNVERIFIED_VAR]
    by_profile = run(apply_host, h, opts())
    assert by_profile.status == "changed", by_profile.message
    assert by_profile.data["unverified_policy"]["from"] == "the profile's unverified: key"
    assert sim.bios_pending().get("SysProfile") == "Custom"


def test_a_bad_inventory_value_names_the_var_and_host(sim_factory):
    sim = sim_factory("dell-15g")
    h = host_for(sim)
    h.vars[UNVERIFIED_VAR] = "maybe"
    r = run(apply_host, h, opts())
    assert r.status == "failed" and f"{UNVERIFIED_VAR}: 'maybe' is not a policy" in r.message
    assert "inventory/test.yaml" in r.message and sim.count("PATCH") == 0


def test_plan_prints_display_names_beside_codes_and_warns(sim_factory, monkeypatch):
    sim = sim_factory("smc-h13")
    r = run(plan_host, host_for(sim), opts())
    item = next(i for i in r.data["plan"] if i["attribute"] == "NUMANodesPerSocket_703E")
    assert item["desired"] == "3" and item["display"]["desired"] == "NPS4"
    out = Console(record=True, width=250, color_system=None)
    err = Console(record=True, width=250, color_system=None)
    monkeypatch.setattr(common, "console", out)
    monkeypatch.setattr(common, "err_console", err)
    bios._print_plans(Report("bios-plan", hosts=[r]))
    assert "3 (NPS4)" in out.export_text()
    assert "UNVERIFIED values to write" in err.export_text()


def test_cli_option_is_checked_and_the_report_says_what_was_refused(tmp_path):
    from numaforge.lab.bmc import BMCSimulator

    sim = BMCSimulator(flavour="dell-15g", tls=True, username="admin", password=CLI_PASSWORD, power_delay=0.3).start()
    try:
        inv = tmp_path / "inv.yaml"
        inv.write_text(
            "version: 1\nhosts:\n  gpu-01:\n"
            f"    bmc: {{url: '{sim.url}', username: admin, password: 'env:NF_CLI_BMC_PW', ca_bundle: '{sim.ca_file}'}}\n"
            "    hardware: {sockets: 2, gpus: ['0000:41:00.0']}\n    bios_profile: epyc-gpudirect\n"
        )
        bad = invoke("bios-apply", "-i", str(inv), "--unverified", "sometimes")
        assert bad.returncode == 2 and "--unverified must be one of refuse, warn, allow" in bad.stderr
        r = invoke("bios-apply", "-i", str(inv), "--json", str(tmp_path / "r.json"))
        assert r.returncode == 1, r.stdout + r.stderr
        doc = json.loads((tmp_path / "r.json").read_text())
        assert doc["hosts"][0]["data"]["unverified_policy"]["refused"] is True
        assert sim.count("PATCH") == 0
        bad_var = tmp_path / "bad.yaml"
        bad_var.write_text(inv.read_text() + f"    vars: {{{UNVERIFIED_VAR}: sometimes}}\n")
        sim.reset_counts()
        refused = invoke("bios-plan", "-i", str(bad_var))
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert f"{UNVERIFIED_VAR}: 'sometimes' is not a policy" in refused.stdout + refused.stderr
        assert sim.count() == 0, "checked before the first host is touched"
        ok = invoke("bios-apply", "-i", str(inv), "--unverified", "allow")
        assert ok.returncode == 0, ok.stdout + ok.stderr
        assert sim.count("PATCH") == 1
    finally:
        sim.stop()


def test_the_profile_key_is_checked_and_a_child_overrides_its_parent(tmp_path):
    from numaforge.bios.errors import ProfileError
    from numaforge.bios.profile import render_profile

    from .helpers import facts

    (tmp_path / "parent.yaml.j2").write_text("unverified: allow\nsettings:\n  iommu: true\n")
    (tmp_path / "child.yaml.j2").write_text("extends: parent\nunverified: warn\n")
    (tmp_path / "plain.yaml.j2").write_text("extends: parent\n")
    (tmp_path / "bad.yaml.j2").write_text("unverified: sometimes\n")
    assert render_profile("child", facts(), tmp_path).unverified == "warn"
    assert render_profile("plain", facts(), tmp_path).unverified == "allow"
    with pytest.raises(ProfileError) as exc:
        render_profile("bad", facts(), tmp_path)
    assert "unverified" in exc.value.render() and "bad.yaml.j2" in exc.value.render()
