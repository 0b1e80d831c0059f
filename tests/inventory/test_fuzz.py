"""Fuzz the loader: arbitrary text and arbitrary YAML-shaped structures never produce anything but an
InventoryError (or a valid inventory) — no traceback ever reaches the user for bad input."""

from __future__ import annotations

import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numaforge.errors import InventoryError
from numaforge.inventory.loader import load_inventory
from numaforge.inventory.model import Inventory

KEYS = [
    "hosts",
    "groups",
    "vars",
    "defaults",
    "version",
    "all",
    "children",
    "ssh",
    "bmc",
    "kernel",
    "hardware",
    "bios_profile",
    "address",
    "port",
    "user",
    "url",
    "password",
    "vendor",
    "gpus",
    "sockets",
    "release",
    "target",
    "ansible_host",
    "ansible_port",
    "numaforge_bmc",
    "sudo",
    "insecure",
    "ca_bundle",
    "h1",
    "g1",
]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 70000),
    st.sampled_from(
        [
            "10.0.0.1",
            "https://b",
            "http://b",
            "env:X",
            "file:/x",
            "calvin",
            "dell",
            "0000:41:00.0",
            "5.10.0-1-amd64",
            "h1",
            "g1",
            "",
            "NPS4",
        ]
    ),
    st.text(max_size=8),
)
trees = st.recursive(
    scalars,
    lambda kids: st.one_of(st.lists(kids, max_size=4), st.dictionaries(st.sampled_from(KEYS), kids, max_size=5)),
    max_leaves=25,
)


def _load(text: str):
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "inv.yaml"
        p.write_text(text)
        try:
            return load_inventory(p)
        except InventoryError as exc:
            assert exc.where and exc.where.startswith(str(p))
            assert exc.fix
            return exc


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees)
def test_structures_never_crash(tree):
    result = _load(yaml.safe_dump(tree))
    assert isinstance(result, (Inventory, InventoryError))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("hosts:{}[]-,'\"!&*#|>\n\t 0123456789abc")), max_size=120))
def test_text_never_crashes(text):
    assert isinstance(_load(text), (Inventory, InventoryError))
