"""Signing inputs are checked before any build (real openssl on real key/cert files made here)."""

import subprocess

import pytest

from numaforge.kernel import signing
from numaforge.kernel.kpatch_errors import PreflightError


def keypair(tmp_path, name="k", cn="numaforge test signer"):
    key, cert = tmp_path / f"{name}.pem", tmp_path / f"{name}.x509"
    subprocess.run(
        [
            "openssl",
            "req",
            "-new",
            "-nodes",
            "-utf8",
            "-sha256",
            "-days",
            "2",
            "-batch",
            "-x509",
            "-subj",
            f"/CN={cn}",
            "-newkey",
            "rsa:2048",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return key, cert


def test_no_signing_without_key_and_cert():
    assert signing.signing_inputs(None, None) is None


def test_a_matching_pair_gives_subject_and_cert_hash_but_never_the_key(tmp_path):
    key, cert = keypair(tmp_path)
    s = signing.signing_inputs(str(key), str(cert))
    assert s["subject"] == "CN=numaforge test signer" and len(s["cert_sha256"]) == 64
    assert key.read_text() not in repr(s)


@pytest.mark.parametrize(
    "case, needle",
    [
        ("key-only", "needs both"),
        ("missing-cert", "does not exist"),
        ("not-a-cert", "not an X.509"),
        ("other-key", "does not belong"),
    ],
)
def test_bad_signing_inputs_are_refused_with_a_fix(tmp_path, case, needle):
    key, cert = keypair(tmp_path)
    other_key, _ = keypair(tmp_path, "o")
    args = {
        "key-only": (str(key), None),
        "missing-cert": (str(key), str(tmp_path / "nope")),
        "not-a-cert": (str(key), str(key)),
        "other-key": (str(other_key), str(cert)),
    }[case]
    with pytest.raises(PreflightError) as ei:
        signing.signing_inputs(*args)
    assert needle in ei.value.what and ei.value.fix
