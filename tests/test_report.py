"""Run reports: schema-valid, atomic, and never carrying a resolved secret."""

from __future__ import annotations

import json

import jsonschema
import pytest

from numaforge.errors import SelectionError
from numaforge.report import Report, load_schema
from numaforge.secrets import SecretRef


def test_report_steps_and_schema(tmp_path):
    rep = Report("validate", inventory="inventory/lab.yaml")
    h = rep.host("lab-vm")
    with h.step("preflight") as s:
        s.detail = {"uname": "5.10.262"}
    with pytest.raises(RuntimeError):
        with h.step("load"):
            raise RuntimeError("insmod: Invalid module format")
    h.status = "failed"
    (tmp_path / "sub").mkdir()  # a missing parent is an error (numaforge.safeio), never created
    path = rep.write(tmp_path / "sub" / "report.json")
    doc = json.loads(path.read_text())
    jsonschema.validate(doc, load_schema())
    assert doc["ok"] is False
    steps = doc["hosts"][0]["steps"]
    assert [s["name"] for s in steps] == ["preflight", "load"]
    assert steps[1]["status"] == "failed" and "Invalid module format" in steps[1]["detail"]
    assert not list(path.parent.glob(".report.json.*")), "temp file left behind"


def test_resolved_secrets_are_scrubbed(tmp_path, monkeypatch):
    monkeypatch.setenv("NF_TEST_BMC_PW", "pa55-w0rd-xyz")
    ref = SecretRef.parse("env:NF_TEST_BMC_PW")
    value = ref.resolve()
    rep = Report("bios-apply")
    rep.host("h").message = f"login with {value} failed"
    rep.data = {"echo": [value, {"ref": ref}]}
    rep.error = SelectionError(f"boom {value}")
    text = rep.write(tmp_path / "r.json").read_text()
    assert "pa55-w0rd-xyz" not in text
    assert "env:NF_TEST_BMC_PW" in text


def test_invalid_report_is_not_written(tmp_path):
    rep = Report("Bad Task Name")
    with pytest.raises(jsonschema.ValidationError):
        rep.write(tmp_path / "r.json")
    assert not (tmp_path / "r.json").exists()


def test_secret_reference_errors(tmp_path, monkeypatch):
    monkeypatch.delenv("NF_UNSET_VAR", raising=False)
    with pytest.raises(Exception, match="NF_UNSET_VAR is not set"):
        SecretRef.parse("env:NF_UNSET_VAR").resolve()
    with pytest.raises(Exception, match="cannot read secret file"):
        SecretRef.parse(f"file:{tmp_path}/missing").resolve()
    (tmp_path / "s").write_text("from-file\n")
    (tmp_path / "s").chmod(0o644)
    with pytest.raises(Exception, match=r"(?s)readable by others \(mode 0644\).*chmod 600"):
        SecretRef.parse(f"file:{tmp_path}/s").resolve()
    monkeypatch.setenv("NUMAFORGE_ALLOW_READABLE_SECRET_FILES", "1")
    assert SecretRef.parse(f"file:{tmp_path}/s").resolve() == "from-file"
    monkeypatch.delenv("NUMAFORGE_ALLOW_READABLE_SECRET_FILES")
    (tmp_path / "s").chmod(0o600)
    assert SecretRef.parse(f"file:{tmp_path}/s").resolve() == "from-file"
    with pytest.raises(Exception, match="not a regular file"):
        SecretRef.parse("file:/dev/zero").resolve()
