"""The simulator's Base messages equal DMTF's Base.1.22.1 registry (vendored in numaforge/lab/bmc/dmtf)."""

import json

import pytest

from numaforge.lab.bmc.messages import BASE, BASE_PREFIX, error_body, message

from .conftest import DMTF

REGISTRY = DMTF / "registries" / "Base.1.22.1.json"


def test_templates_match_dmtf_base_registry():
    reg = json.loads(REGISTRY.read_text())
    assert BASE_PREFIX == "Base." + ".".join(reg["RegistryVersion"].split(".")[:2])
    for mid, (template, nargs, severity, resolution) in BASE.items():
        dmtf = reg["Messages"][mid]
        assert template == dmtf["Message"], mid
        assert nargs == dmtf["NumberOfArgs"], mid
        assert severity == dmtf["MessageSeverity"], mid
        assert resolution == dmtf["Resolution"], mid


def test_message_fills_args_and_related_properties():
    m = message("PropertyValueNotInList", "3", "NumaNodesPerSocket", related=["#/Attributes/NumaNodesPerSocket"])
    assert m["Message"] == "The value '3' for the property NumaNodesPerSocket is not in the list of acceptable values."
    assert m["MessageId"] == "Base.1.22.PropertyValueNotInList"
    assert m["RelatedProperties"] == ["#/Attributes/NumaNodesPerSocket"]


def test_wrong_arg_count_is_a_bug_not_a_message():
    with pytest.raises(ValueError):
        message("PropertyUnknown")


def test_error_body_shape():
    one = error_body([message("PreconditionFailed")])
    assert one["error"]["code"] == "Base.1.22.PreconditionFailed"
    two = error_body([message("PropertyUnknown", "A"), message("PropertyUnknown", "B")])
    assert two["error"]["code"] == "Base.1.22.GeneralError"
    assert len(two["error"]["@Message.ExtendedInfo"]) == 2
    reg = json.loads(REGISTRY.read_text())
    assert two["error"]["message"] == reg["Messages"]["GeneralError"]["Message"]
