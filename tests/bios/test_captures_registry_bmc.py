"""Issue 41 item 4 and its neighbour, on the captured trees that show them (tests/data/captures, served as captured
by the simulator's mockup mode; real HTTPS, DMTF's `redfish` library as the client; nothing mocked):

- the AMI MegaRAC of an NVIDIA DGX H100 (libredfish-ami-dgx-viking) lists its BIOS registry as the member
  BiosAttributeRegistry113.1.1.3, whose file's document Id is BiosAttributeRegistry113.en-US.1.1.3 (a language
  tag inside the id): it is found by the member's key, as sushy finds it;
- NVIDIA's Grace and BlueField BMCs (gh200, gb200, bluefield3) name no AttributeRegistry in the Bios, yet list
  exactly one BIOS attribute registry (Registries/BiosAttributeRegistry): it is used, and said."""

from __future__ import annotations

import json

import pytest

from numaforge.bios.apply import plan_host
from numaforge.bios.discovery import registry_fit, registry_identity

from .conftest import capture_dirs
from .test_bios_apply_bmc import PASSWORD, _bmc_password, host_for, run  # noqa: F401 (fixture)

pytestmark = pytest.mark.bmc


def _bios(capture) -> dict:
    (path,) = [p for p in capture.glob("redfish/v1/*/*/*/index.json") if p.parent.name.lower() == "bios"]
    return json.loads(path.read_text())


def _host(sim):
    """The host of a capture; where the BMC manages several systems, the one with a Bios (as an operator would)."""
    several = len(sim.tree["redfish/v1/systems"].get("Members") or []) > 1
    return host_for(sim, system_id=sim.system_path.rstrip("/").rsplit("/", 1)[-1] if several else None)


NO_REGISTRY_NAMED = [c for c in capture_dirs() if not _bios(c).get("AttributeRegistry")]


def test_a_language_tag_inside_a_registry_id_is_no_part_of_its_name():
    assert registry_identity("BiosAttributeRegistry113.en-US.1.1.3") == ("biosattributeregistry113", (1, 1, 3))
    assert registry_identity("BiosAttributeRegistry.en.1.0.0") == ("biosattributeregistry", (1, 0, 0))
    assert registry_fit("BiosAttributeRegistry113.1.1.3", registry_identity("BiosAttributeRegistry113.en-US.1.1.3"))
    assert registry_identity("BiosAttributeRegistry.v1_0_3") == ("biosattributeregistry", (1, 0, 3))


def test_ami_registry_with_a_language_tag_in_its_document_id_is_found(mockup_factory):
    sim = mockup_factory(next(c for c in capture_dirs() if c.name == "libredfish-ami-dgx-viking"), password=PASSWORD)
    r = run(plan_host, _host(sim))
    # the registry is found (what the plan says of this Intel board's settings is another matter: item 6 of the
    # fixes, tests/bios/test_captures_corpus_bmc.py)
    assert "serves registry" not in r.message and "no registry file" not in r.message, r.message
    assert ("GET", "/redfish/v1/Registries/BiosAttributeRegistry113.en-US.1.1.3.json") in sim.requests


def test_the_corpus_has_captures_whose_bios_names_no_registry():
    assert {c.name for c in NO_REGISTRY_NAMED} >= {"libredfish-nvidia-gh200"}


@pytest.mark.parametrize("capture", NO_REGISTRY_NAMED, ids=lambda c: c.name)
def test_a_bios_naming_no_registry_uses_the_only_bios_registry_listed(mockup_factory, capture):
    sim = mockup_factory(capture, password=PASSWORD)
    r = run(plan_host, _host(sim))
    # found and said (what the plan then says of this ARM board is item 6's: tests/bios/test_captures_corpus_bmc.py)
    assert "Bios names no AttributeRegistry\n" not in r.message + "\n", r.message
    said = [w for w in r.data.get("warnings", []) if "the Bios names no AttributeRegistry" in w]
    assert said and "BiosAttributeRegistry.1.0.0 (/redfish/v1/Registries/BiosAttributeRegistry)" in said[0], said
    assert ("GET", "/redfish/v1/Registries/BiosAttributeRegistry/BiosAttributeRegistry") in sim.requests
