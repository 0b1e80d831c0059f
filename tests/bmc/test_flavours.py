"""Flavour data (pure): the shared attribute table is honoured exactly, display-name settings resolve to one
attribute, and every registry has something for client-side validation to bite on."""

import re
from pathlib import Path

import pytest
import yaml

from numaforge.lab.bmc import FLAVOURS, BMCSimulatorError, load_flavour
from numaforge.lab.bmc.flavours import HERE, build_flavour

TABLE = yaml.safe_load((Path(__file__).parents[1] / "data" / "bmc" / "shared_attribute_table.yaml").read_text())


def _values(entry):
    return [v["ValueName"] for v in entry.get("Value", [])]


@pytest.mark.parametrize("flavour", sorted(TABLE["names"]))
def test_shared_table_names_and_values(flavour):
    f = load_flavour(flavour)
    for name, values in TABLE["names"][flavour].items():
        entry = f.attribute(name)
        assert entry is not None, f"{flavour}: {name} missing"
        assert _values(entry) == values
        assert entry["ReadOnly"] is False


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_display_name_patterns_resolve_to_exactly_one_attribute(flavour):
    f = load_flavour(flavour)
    for pattern in TABLE["by_display_name"][flavour]:
        hits = [
            e["AttributeName"]
            for e in f.registry["RegistryEntries"]["Attributes"]
            if re.search(pattern, e["DisplayName"], re.IGNORECASE)
        ]
        assert len(hits) == 1, f"{flavour}: /{pattern}/ matched {hits}"


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_registry_has_read_only_bounded_integer_bounded_string_and_dependency(flavour):
    f = load_flavour(flavour)
    attrs = f.registry["RegistryEntries"]["Attributes"]
    assert any(a["ReadOnly"] for a in attrs)
    assert any(a["Type"] == "Integer" and a["LowerBound"] < a["UpperBound"] for a in attrs)
    assert any(a["Type"] == "String" and a.get("MaxLength") for a in attrs if not a["ReadOnly"])
    deps = f.registry["RegistryEntries"]["Dependencies"]
    assert deps and all(f.attribute(d["DependencyFor"]) for d in deps)
    assert f.registry["Id"] == f.registry_id


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_defaults_are_valid_values(flavour):
    f = load_flavour(flavour)
    for name, value in f.defaults.items():
        entry = f.attribute(name)
        if entry["Type"] == "Enumeration":
            assert value in _values(entry)


def test_vendor_paths():
    assert load_flavour("dell").system_path == "/redfish/v1/Systems/System.Embedded.1"
    assert load_flavour("dell").settings_link == "/redfish/v1/Systems/System.Embedded.1/Bios/Settings"
    assert load_flavour("hpe").settings_link == "/redfish/v1/systems/1/bios/settings/"
    assert load_flavour("supermicro").settings_link == "/redfish/v1/Systems/1/Bios/SD"
    assert load_flavour("lenovo").settings_link == "/redfish/v1/Systems/1/Bios/Pending"
    assert load_flavour("generic").settings_link == "/redfish/v1/Systems/1/Bios/Settings"


def test_unknown_flavour_is_a_clear_error():
    with pytest.raises(BMCSimulatorError) as exc:
        load_flavour("ibm")
    assert "dell" in exc.value.fix and exc.value.where == "--flavour"


def test_malformed_flavour_data_names_the_attribute():
    data = yaml.safe_load((HERE / "generic.yaml").read_text())
    data["attributes"][1]["default"] = "NPS3"
    with pytest.raises(BMCSimulatorError, match="default of Q0100"):
        build_flavour(data, "generic.yaml")
    data = yaml.safe_load((HERE / "generic.yaml").read_text())
    data["dependencies"][0]["from"] = "Q9999"
    with pytest.raises(BMCSimulatorError, match="Q9999"):
        build_flavour(data, "generic.yaml")
