"""The registry corpus (numaforge/lab/bmc/registries): built from the public facts in corpus.yaml, every attribute citing
a source its vendor map defines, one generation of each vendor map per corpus flavour, and both shipped profiles
planning on every flavour without raw overrides (platform gaps shown as gaps). Pure: no BMC."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from numaforge.bios.plan import make_plan
from numaforge.bios.profile import render_profile
from numaforge.bios.registry import Registry
from numaforge.bios.vendors import load_vendor_map, translate
from numaforge.lab.bmc import CORPUS, FLAVOURS, flavours, load_flavour

from .helpers import facts

CORPUS_DIR = flavours.CORPUS_DIR
FACTS = yaml.safe_load((CORPUS_DIR / "corpus.yaml").read_text())
VENDOR = {
    "HPE": "hpe",
    "Dell": "dell",
    "Dell Inc.": "dell",
    "Supermicro": "supermicro",
    "Lenovo": "lenovo",
    "Contoso": "generic",
}
GENERATION = {
    "hpe-gen10p": "gen10p",
    "hpe-gen11": "gen11",
    "dell-15g": "15g",
    "dell-16g": "16g",
    "smc-h12": "h12",
    "smc-h13": "h13",
    "lenovo-sr665": "sr665",
    "lenovo-sr665v3": "sr665v3",
}


def test_corpus_json_is_built_from_the_facts():
    proc = subprocess.run(
        [sys.executable, "-m", "numaforge.lab.bmc.corpus", "--check"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert set(FACTS) == set(CORPUS) and len(CORPUS) >= 8


@pytest.mark.parametrize("name", CORPUS)
def test_every_corpus_attribute_cites_a_source_of_its_vendor_map(name):
    vm = load_vendor_map(VENDOR[FACTS[name]["owner"]])
    for a in FACTS[name]["attributes"]:
        assert a.get("src") in vm.sources, f"{name}/{a['name']}: src {a.get('src')!r}"
    assert (CORPUS_DIR / "SOURCES.md").read_text().count(f"`{name}`") >= 1


@pytest.mark.parametrize("name", CORPUS)
def test_each_generation_of_the_vendor_maps_is_chosen_for_its_corpus_flavour(name):
    f = load_flavour(name)
    assert load_vendor_map(VENDOR[f.vendor]).generation(Registry.from_json(f.registry)).id == GENERATION[name]


@pytest.mark.parametrize("flavour", FLAVOURS + CORPUS)
@pytest.mark.parametrize("profile", ["epyc-gpudirect", "epyc-baseline"])
def test_shipped_profiles_plan_on_every_flavour_without_raw(flavour, profile):
    f = load_flavour(flavour)
    vendor = VENDOR[f.vendor]
    p = render_profile(profile, facts(vendor=vendor, model=f.model))
    assert not p.raw
    reg = Registry.from_json(f.registry)
    plan = make_plan(
        translate(p.settings, {}, load_vendor_map(vendor), reg, "h", optional=p.optional),
        reg,
        dict(f.defaults),
        {},
        "h",
    )
    assert {i.action for i in plan.items} <= {"ok", "change", "gap"} and plan.changes
    for i in plan.items:
        assert (i.action == "gap") == (i.attribute == "-")
