"""Profiles: Jinja2 over inventory facts -> abstract settings; extends; errors name file:line and the fix."""

from __future__ import annotations

import pytest

from numaforge.bios.errors import ProfileError
from numaforge.bios.profile import host_facts, render_profile

from .helpers import PROFILES, facts, host


def test_shipped_gpudirect_profile_extends_baseline_and_turns_acs_off_with_gpus():
    p = render_profile("epyc-gpudirect", facts())
    assert p.settings == {
        "numa_nodes_per_socket": 4,
        "llc_as_numa": False,
        "memory_interleaving": False,
        "pcie_acs": False,
        "pcie_aspm": ["l0s", "disabled"],
        "iommu": True,
        "sriov": True,
        "determinism": "performance",
    }
    assert [c.rsplit("/", 1)[1] for c in p.chain] == ["epyc-gpudirect.yaml.j2", "epyc-baseline.yaml.j2"]
    assert p.origin["llc_as_numa"] == "epyc-baseline" and p.origin["pcie_acs"] == "epyc-gpudirect"


def test_gpudirect_keeps_acs_without_gpus_or_nics_and_uses_nps2_beyond_two_sockets():
    p = render_profile("epyc-gpudirect", facts(gpus=[], gpu_count=0, nics=[], nic_count=0, sockets=4))
    assert p.settings["pcie_acs"] is True  # inherited from the baseline
    assert p.settings["numa_nodes_per_socket"] == 2


def test_gpudirect_raw_from_host_vars_only_for_this_vendor():
    p = render_profile("epyc-gpudirect", facts(vendor="hpe", vars={"bios_raw": {"hpe": {"WorkloadProfile": "Custom"}}}))
    assert p.raw == {"hpe": {"WorkloadProfile": "Custom"}}
    assert p.raw_for("dell") == {}


def test_baseline_renders():
    p = render_profile("epyc-baseline", facts())
    assert p.settings["numa_nodes_per_socket"] == 1 and p.settings["memory_interleaving"] is True


def test_child_overrides_parent_and_raw_merges():
    p = render_profile("child-overrides-parent", facts(host="gpu-r7525-0042"), PROFILES)
    assert p.settings["numa_nodes_per_socket"] == 2  # child
    assert p.settings["sriov"] is True  # child, from a fact
    assert p.settings["determinism"] == "power"  # parent
    assert p.raw["dell"] == {"AcPwrRcvryDelay": "Immediate", "AssetTag": "gpu-r7525-"}


def test_host_facts_from_inventory_host():
    f = host_facts(host(hw_vendor="lenovo"))
    assert f["vendor"] == "lenovo" and f["gpu_count"] == 1 and f["sockets"] == 2 and f["host"] == "gpu-01"


@pytest.mark.parametrize(
    "name, what, where, fix",
    [
        ("cycle-a", "cycle", "cycle-", "remove one of the `extends:` lines"),
        (
            "typo-in-setting-name",
            "unknown key 'settings.memory_interleave'",
            "typo-in-setting-name.yaml.j2:3",
            "did you mean 'memory_interleaving'?",
        ),
        (
            "nps-3-not-allowed",
            "settings.numa_nodes_per_socket",
            "nps-3-not-allowed.yaml.j2",
            "allowed values: 0, 1, 2, 4",
        ),
        ("undefined-fact-on-line-3", "undefined", "undefined-fact-on-line-3.yaml.j2:3", "nic_count"),
        ("jinja-syntax-error-on-line-2", "syntax", "jinja-syntax-error-on-line-2.yaml.j2:2", "Jinja2"),
        ("no-such-profile", "unknown BIOS profile", "profiles", "known profiles:"),
        ("cycle-aa", "unknown BIOS profile", "profiles", "did you mean 'cycle-a'?"),
    ],
)
def test_profile_errors_name_file_line_and_fix(name, what, where, fix):
    with pytest.raises(ProfileError) as ei:
        render_profile(name, facts(), PROFILES)
    err = ei.value
    assert what in err.what
    assert where in err.where
    assert fix in err.fix


def test_bool_is_not_accepted_as_nps():
    """YAML true must not sneak through as NPS1 (True == 1 in Python)."""
    from pathlib import Path

    from numaforge.bios.profile import parse_rendered

    with pytest.raises(ProfileError):
        parse_rendered("settings:\n  numa_nodes_per_socket: true\n", Path("x.yaml.j2"))


def test_template_that_renders_invalid_yaml_quotes_the_rendered_line():
    with pytest.raises(ProfileError) as ei:
        render_profile("renders-invalid-yaml", facts(), PROFILES)
    assert "not valid YAML" in ei.value.what
    assert "renders-invalid-yaml.yaml.j2 (rendered line" in ei.value.where and "[unclosed" in ei.value.where
