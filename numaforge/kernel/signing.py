"""Module signing with a user-provided key and certificate, through the kernel tree's own scripts/sign-file
(the tool `make modules_install` uses; built by the tree's `make scripts`, or compiled here from the tree's
scripts/sign-file.c against libcrypto when the tree has none).

The private key is a secret given by reference (a path): only sign-file reads it; numaforge never copies,
prints or records it. The manifest records the certificate's subject and sha256 and the signer modinfo shows.

A host that enforces signatures (module.sig_enforce=1, or lockdown under Secure Boot) only loads the module when
it trusts the certificate: built into the kernel's keyring, or enrolled as a Machine Owner Key with
`mokutil --import CERT.der` and confirmed in MokManager at the next boot (docs/kpatch.md, 'Signing').
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from ..digest import sha256_bytes, sha256_file
from ..paths import cache_dir
from .kpatch_errors import KpatchError, PreflightError

SIG_MARK = b"~Module signature appended~\n"
HASH = "sha512"


class SigningError(KpatchError):
    """The module could not be signed (bad key/certificate, sign-file failed)."""

    exit_code = 2


def signing_inputs(key: str | None, cert: str | None) -> dict | None:
    """Check the key/cert pair before any build; None when not signing."""
    if not key and not cert:
        return None
    if not key or not cert:
        raise PreflightError(
            "signing needs both --sign-key and --sign-cert",
            "--sign-key/--sign-cert",
            "pass the PEM private key and its X.509 certificate (e.g. your MOK pair)",
        )
    k, c = Path(key), Path(cert)
    for p, what in ((k, "--sign-key"), (c, "--sign-cert")):
        if not p.is_file():
            raise PreflightError(f"{p} does not exist", what, "give the path of the PEM file")
    proc = subprocess.run(
        ["openssl", "x509", "-in", str(c), "-noout", "-subject", "-nameopt", "RFC2253"], capture_output=True, text=True
    )
    if proc.returncode != 0:
        proc = subprocess.run(
            ["openssl", "x509", "-in", str(c), "-inform", "DER", "-noout", "-subject", "-nameopt", "RFC2253"],
            capture_output=True,
            text=True,
        )
    if proc.returncode != 0:
        raise PreflightError(
            f"{c} is not an X.509 certificate (PEM or DER): {proc.stderr.strip()[-200:]}",
            "--sign-cert",
            "give the certificate that goes with the key",
        )
    subject = proc.stdout.strip().removeprefix("subject=").strip()
    # the key must belong to the certificate (compare public keys; the key text itself is never kept)
    pub_c = subprocess.run(["openssl", "x509", "-in", str(c), "-noout", "-pubkey"], capture_output=True)
    pub_k = subprocess.run(["openssl", "pkey", "-in", str(k), "-pubout"], capture_output=True)
    if pub_k.returncode != 0:
        raise PreflightError(
            "the signing key cannot be read as a PEM private key",
            "--sign-key",
            "give an unencrypted PEM private key (sign-file cannot ask for a passphrase here)",
        )
    if pub_c.returncode == 0 and pub_c.stdout.strip() != pub_k.stdout.strip():
        raise PreflightError(
            "the signing key does not belong to the certificate",
            "--sign-key/--sign-cert",
            "pass the private key of that certificate",
        )
    return {"key": k, "cert": c, "cert_sha256": sha256_file(c), "subject": subject}


def sign_file_tool(tree: Path) -> Path:
    """The tree's scripts/sign-file, else one compiled from its scripts/sign-file.c (cached by content)."""
    built = tree / "scripts" / "sign-file"
    if built.is_file() and os.access(built, os.X_OK):
        return built
    src = tree / "scripts" / "sign-file.c"
    if not src.is_file():
        raise SigningError("the kernel tree has no scripts/sign-file.c", str(tree), "use a 4.x/5.x kernel tree")
    out = cache_dir() / "kpatch" / "sign-file" / sha256_bytes(src.read_bytes())[:16] / "sign-file"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(".sign-file.tmp")
    proc = subprocess.run(["gcc", "-O2", "-o", str(tmp), str(src), "-lcrypto"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SigningError(
            f"compiling sign-file failed: {proc.stderr.strip()[-300:]}",
            str(src),
            "install libssl-dev (scripts/setup.sh does)",
        )
    os.replace(tmp, out)
    return out


def module_signer(ko: Path) -> dict:
    exe = shutil.which("modinfo") or "/usr/sbin/modinfo"
    out = {}
    for field in ("signer", "sig_key", "sig_hashalgo"):
        proc = subprocess.run([exe, "-F", field, str(ko)], capture_output=True, text=True)
        out[field] = proc.stdout.strip() or None
    return out


def sign_module(ko: Path, tree: Path, signing: dict, log=print) -> dict:
    """Sign ko in place with sign-file; returns what the manifest records."""
    if ko.read_bytes().endswith(SIG_MARK):
        raise SigningError(f"{ko.name} is already signed", str(ko), "sign an unsigned module")
    tool = sign_file_tool(tree)
    proc = subprocess.run(
        [str(tool), HASH, str(signing["key"]), str(signing["cert"]), str(ko)], capture_output=True, text=True
    )
    if proc.returncode != 0 or not ko.read_bytes().endswith(SIG_MARK):
        raise SigningError(
            f"sign-file failed (rc={proc.returncode}): {proc.stderr.strip()[-300:]}",
            str(ko),
            "check the key and certificate (PEM key, PEM or DER certificate)",
        )
    info = module_signer(ko)
    log(f"signed {ko.name}: signer {info.get('signer') or signing['subject']}")
    return {
        "signer": info.get("signer") or signing["subject"],
        "subject": signing["subject"],
        "sig_key": info.get("sig_key"),
        "hash": HASH,
        "cert_sha256": signing["cert_sha256"],
        "sign_file": str(tool),
    }
