"""The BIOS NPS the host OS plan checks devices against: a plain value is used; a preference list of several
values is unknown until the BMC's registry decides (None), a one-value list is that value."""

from __future__ import annotations

import dataclasses

import pytest

from numaforge.hostos.run import bios_nps

from .helpers import lab_like_host


@pytest.mark.parametrize("nps, want", [("4", 4), ("[4]", 4), ("[4, 2]", None)])
def test_bios_nps_of_a_value_and_of_preference_lists(tmp_path, nps, want):
    profile = tmp_path / "p.yaml.j2"
    profile.write_text(f"settings:\n  numa_nodes_per_socket: {nps}\n")
    host = dataclasses.replace(lab_like_host(), bios_profile=str(profile))
    assert bios_nps(host) == want
