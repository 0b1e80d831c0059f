"""A project profile extends a built-in one (issue 39 item 4): the project directory overrides the built-ins but
still sees them, also when its profile has the built-in's own name. Pure: files only."""

from __future__ import annotations

import pytest

from numaforge import paths
from numaforge.bios.errors import ProfileError
from numaforge.bios.profile import render_profile

from .helpers import facts


@pytest.fixture
def project(tmp_path):
    d = tmp_path / "proj" / "bios" / "profiles"
    d.mkdir(parents=True)
    paths.set_project_dir(tmp_path / "proj")
    try:
        yield d
    finally:
        paths.set_project_dir(None)


def test_a_project_profile_extends_a_builtin_one(project):
    (project / "mine.yaml.j2").write_text("extends: epyc-gpudirect\nsettings:\n  numa_nodes_per_socket: 1\n")
    p = render_profile("mine", facts())
    assert [c.rsplit("/", 1)[1] for c in p.chain] == [
        "mine.yaml.j2",
        "epyc-gpudirect.yaml.j2",
        "epyc-baseline.yaml.j2",
    ]
    assert p.settings["numa_nodes_per_socket"] == 1 and p.origin["numa_nodes_per_socket"] == "mine"
    assert p.settings["pcie_acs"] is False and p.origin["pcie_acs"] == "epyc-gpudirect"
    assert str(paths.BUILTIN) in p.chain[1]


def test_a_project_profile_overrides_a_builtin_of_its_name_and_extends_it(project):
    (project / "epyc-gpudirect.yaml.j2").write_text("extends: epyc-gpudirect\nsettings:\n  sriov: false\n")
    p = render_profile("epyc-gpudirect", facts())
    assert p.chain[0].startswith(str(project)) and str(paths.BUILTIN) in p.chain[1] and len(p.chain) == 3
    assert p.settings["sriov"] is False and p.settings["pcie_acs"] is False


def test_a_project_parent_still_wins_over_a_builtin_of_its_name(project):
    (project / "epyc-baseline.yaml.j2").write_text("settings:\n  numa_nodes_per_socket: 2\n  determinism: power\n")
    (project / "mine.yaml.j2").write_text("extends: epyc-baseline\nsettings:\n  sriov: true\n")
    p = render_profile("mine", facts())
    assert p.chain[1].startswith(str(project)) and len(p.chain) == 2
    assert p.settings == {"numa_nodes_per_socket": 2, "determinism": "power", "sriov": True}


def test_a_cycle_across_the_project_is_still_a_cycle(project):
    (project / "a.yaml.j2").write_text("extends: b\n")
    (project / "b.yaml.j2").write_text("extends: a\n")
    with pytest.raises(ProfileError) as e:
        render_profile("a", facts())
    assert "cycle" in str(e.value)
