"""Property tests of registry validation (pure, hypothesis): any JSON value for any attribute gives either no
message (and then the value is really acceptable) or messages that name that attribute; never an exception."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numaforge.lab.bmc import FLAVOURS, BMCSimulator, BMCSimulatorError, load_flavour
from numaforge.lab.bmc.validation import validate_settings_patch

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=5,
)


def acceptable(entry, value) -> bool:
    kind = entry["Type"]
    if entry["ReadOnly"]:
        return False
    if kind == "Enumeration":
        return isinstance(value, str) and value in [v["ValueName"] for v in entry["Value"]]
    if kind == "Integer":
        return (
            isinstance(value, int)
            and not isinstance(value, bool)
            and entry["LowerBound"] <= value <= entry["UpperBound"]
            and (value - entry["LowerBound"]) % max(entry.get("ScalarIncrement") or 1, 1) == 0
        )
    if kind == "String":
        return isinstance(value, str) and len(value) <= entry["MaxLength"]
    if kind == "Boolean":
        return isinstance(value, bool)
    return False


@settings(max_examples=300, deadline=None)
@given(flavour=st.sampled_from(FLAVOURS), index=st.integers(0, 100), value=json_values)
def test_one_attribute_any_value(flavour, index, value):
    f = load_flavour(flavour)
    entries = f.registry["RegistryEntries"]["Attributes"]
    entry = entries[index % len(entries)]
    name = entry["AttributeName"]
    msgs = validate_settings_patch(f.registry, dict(f.defaults), {"Attributes": {name: value}}, f.supported_apply_times)
    dependent = any(d["DependencyFor"] == name for d in f.registry["RegistryEntries"]["Dependencies"])
    if not msgs:
        assert acceptable(entry, value)
    else:
        assert all(f"#/Attributes/{name}" in m["RelatedProperties"] for m in msgs)
        if not dependent:
            assert not acceptable(entry, value)


@settings(max_examples=100, deadline=None)
@given(body=json_values)
def test_any_body_never_raises(body):
    f = load_flavour("generic")
    out = validate_settings_patch(f.registry, dict(f.defaults), body, f.supported_apply_times)
    assert isinstance(out, list)


@pytest.mark.parametrize("kw", [{"power_delay": -1}, {"port": 70000}, {"state_dir": "/proc/nope"}])
def test_bad_simulator_options_are_clear_errors(kw):
    with pytest.raises(BMCSimulatorError) as exc:
        BMCSimulator(password="x", **kw)
    assert exc.value.fix
