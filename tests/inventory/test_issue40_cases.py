"""Issue 40's inventory cases that are not a malformed file (those are in tests/data/inventory/bad/): a CA bundle
that holds no certificate, an empty password in the environment. Each must be said plainly, with where the value
was set, before any request reaches a BMC."""

from __future__ import annotations

import os

import pytest

from numaforge.bios.hostsession import HostOptions, connect
from numaforge.errors import NumaforgeError, SecretError
from numaforge.inventory.loader import load_inventory
from numaforge.inventory.preflight import ca_bundle_problem, check_hosts
from numaforge.lab.bmc.tls import ensure_certificates
from numaforge.secrets import SecretRef

from .helpers import write

NOT_A_CERTIFICATE = {
    "empty": "",
    "text": "not a certificate\n",
    "key only": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    "broken block": "-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n",
}


def _inventory(tmp_path, ca_name: str):
    return write(
        tmp_path,
        "hosts:\n"
        "  g1:\n"
        "    bmc:\n"
        "      url: https://127.0.0.1:9\n"  # nothing is ever sent: the checks come first
        f"      ca_bundle: {ca_name}\n"
        "      password: env:NF_I40_BMC_PASS\n",
    )


@pytest.mark.parametrize("content", list(NOT_A_CERTIFICATE.values()), ids=list(NOT_A_CERTIFICATE))
def test_ca_bundle_without_a_certificate_is_named_with_its_line(tmp_path, monkeypatch, content):
    monkeypatch.setenv("NF_I40_BMC_PASS", "Pa55word")
    (tmp_path / "ca.pem").write_text(content)
    inv = load_inventory(_inventory(tmp_path, "ca.pem"))
    problems = check_hosts(list(inv.hosts.values()))
    assert [(p.host, p.attribute) for p in problems] == [("g1", "bmc.ca_bundle")]
    assert "holds no PEM certificate" in problems[0].what
    assert problems[0].where == f"{tmp_path / 'inv.yaml'}:5"
    assert "set bmc.ca_bundle" not in problems[0].fix
    # the run itself says the same before any request (was: a TLS failure whose fix was "set bmc.ca_bundle")
    with pytest.raises(NumaforgeError) as info:
        connect(inv.hosts["g1"], HostOptions())
    assert "holds no PEM certificate" in info.value.what and info.value.where.endswith("inv.yaml:5")
    assert "set bmc.ca_bundle" not in info.value.fix


def test_ca_bundle_with_a_certificate_passes(tmp_path, monkeypatch):
    monkeypatch.setenv("NF_I40_BMC_PASS", "Pa55word")
    ca, _cert, _key = ensure_certificates(tmp_path / "tls", "127.0.0.1")
    (tmp_path / "ca.pem").write_bytes(ca.read_bytes())
    inv = load_inventory(_inventory(tmp_path, "ca.pem"))
    assert check_hosts(list(inv.hosts.values())) == []


def test_empty_env_password_is_said_before_any_contact(tmp_path, monkeypatch):
    """Was: sent empty, then "the BMC refused the credentials". Now the reference refuses to resolve to nothing,
    for inventory-check and for the run, and no client is even built."""
    monkeypatch.setenv("NF_I40_BMC_PASS", "")
    ca, _cert, _key = ensure_certificates(tmp_path / "tls", "127.0.0.1")
    (tmp_path / "ca.pem").write_bytes(ca.read_bytes())
    inv = load_inventory(_inventory(tmp_path, "ca.pem"))
    problems = check_hosts(list(inv.hosts.values()))
    assert [(p.attribute, p.what) for p in problems] == [
        ("bmc.password", "environment variable NF_I40_BMC_PASS is empty")
    ]
    assert problems[0].where.endswith("inv.yaml:6")
    with pytest.raises(SecretError) as info:
        connect(inv.hosts["g1"], HostOptions())
    assert "environment variable NF_I40_BMC_PASS is empty" in info.value.what
    assert "refused" not in info.value.render()


@pytest.mark.parametrize("kind", ["env", "file"])
def test_no_reference_resolves_to_an_empty_secret(tmp_path, monkeypatch, kind):
    monkeypatch.setenv("NF_I40_EMPTY", "")
    secret = tmp_path / "empty.pass"
    secret.write_text("\n")
    secret.chmod(0o600)
    ref = SecretRef.parse("env:NF_I40_EMPTY" if kind == "env" else f"file:{secret}", where="inv.yaml:3")
    with pytest.raises(SecretError, match="is empty") as info:
        ref.resolve()
    assert info.value.where == "inv.yaml:3" and "never sent" in info.value.fix


def test_the_ca_bundle_check_never_blocks_on_a_fifo_or_reads_a_device(tmp_path, monkeypatch):
    """connect() checks the bundle's content before the client's own file checks (which report a FIFO or a
    device with their own fix): the content check must use the checked reader and leave those to them."""
    os.mkfifo(tmp_path / "fifo.pem")
    assert ca_bundle_problem(tmp_path / "fifo.pem") is None
    assert ca_bundle_problem("/dev/zero") is None
