"""Registry validation of settings PATCHes (pure). Each tests/data/bmc/patch_cases/<flavour>__<what>.json holds a
PATCH body and the exact Base messages (id, args, related property) the simulator must answer with."""

import json
from pathlib import Path

import pytest

from numaforge.lab.bmc.flavours import load_flavour
from numaforge.lab.bmc.validation import validate_settings_patch

CASES = sorted((Path(__file__).parents[1] / "data" / "bmc" / "patch_cases").glob("*.json"))


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_patch_case(case):
    spec = json.loads(case.read_text())
    flavour = load_flavour(spec["flavour"])
    got = validate_settings_patch(flavour.registry, dict(flavour.defaults), spec["body"], flavour.supported_apply_times)
    assert [(m["MessageId"], m["MessageArgs"], m.get("RelatedProperties", [None])[0]) for m in got] == [
        (f"Base.1.22.{mid}", args, rel) for mid, args, rel in spec["expect"]
    ]
    for m in got:
        assert "%" not in m["Message"] and m["Resolution"] and m["MessageSeverity"] in ("OK", "Warning", "Critical")


def test_cases_cover_every_message_kind_the_brief_names():
    kinds = {e[0] for c in CASES for e in json.loads(c.read_text())["expect"]}
    assert {
        "PropertyValueNotInList",
        "PropertyValueTypeError",
        "PropertyNotWritable",
        "PropertyUnknown",
        "PropertyValueOutOfRange",
        "StringValueTooLong",
        "PropertyValueConflict",
    } <= kinds


def test_dependency_is_evaluated_over_pending_values_too():
    dell = load_flavour("dell")
    effective = {**dell.defaults, "AcPwrRcvryDelay": "User"}  # staged earlier, not yet applied
    assert (
        validate_settings_patch(
            dell.registry, effective, {"Attributes": {"AcPwrRcvryUserDelay": 300}}, dell.supported_apply_times
        )
        == []
    )


def test_body_that_is_not_an_object_is_a_type_error():
    g = load_flavour("generic")
    (m,) = validate_settings_patch(g.registry, dict(g.defaults), ["x"], g.supported_apply_times)
    assert m["MessageId"].endswith("PropertyValueTypeError")
