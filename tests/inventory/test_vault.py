"""Ansible Vault in inventories (issue 39 item 10): `!vault` values and vault-encrypted vars and inventory files,
decrypted with --vault-password-file / ANSIBLE_VAULT_PASSWORD_FILE; the values are secrets, never printed.

Ciphertexts come from Ansible where it runs: ansible-core's own test vectors always, and the real `ansible-vault`
CLI when it is installed in the venv (scripts/setup.d/60-bench.sh); otherwise the test encryptor (vaultenc.py)
stands in for it, checked by the same vectors.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from numaforge.errors import InventoryError
from numaforge.inventory.loader import load_inventory
from numaforge.secrets import MASK, SecretText, redact

from . import vaultenc
from .helpers import write

ROOT = Path(__file__).parents[2]
VECTORS = sorted((ROOT / "tests" / "data" / "inventory" / "vault").glob("format_*"))
ANSIBLE_VAULT = Path(sys.executable).with_name("ansible-vault")
PASSWORD = "correct horse battery staple"


@pytest.fixture(autouse=True)
def _no_env_password(monkeypatch):
    monkeypatch.delenv("ANSIBLE_VAULT_PASSWORD_FILE", raising=False)


def password_file(tmp_path: Path, text: str = PASSWORD + "\n", mode: int = 0o600, name: str = "vault.pass") -> Path:
    p = tmp_path / name
    p.write_text(text)
    p.chmod(mode)
    return p


def _ansible_vault(tmp_path: Path, plaintext: str, pw: Path) -> str:
    tmp_path.mkdir(parents=True)
    src = tmp_path / "plain.txt"
    src.write_text(plaintext)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(HOME=str(tmp_path), ANSIBLE_CONFIG=str(tmp_path / "none.cfg"), ANSIBLE_LOCAL_TEMP=str(tmp_path / "t"))
    out = tmp_path / "enc.txt"
    subprocess.run(
        [str(ANSIBLE_VAULT), "encrypt", "--vault-password-file", str(pw), "--output", str(out), str(src)],
        check=True,
        capture_output=True,
        env=env,
        timeout=120,
    )
    return out.read_text()


@pytest.fixture(params=["ansible-vault", "test-encryptor"])
def encrypt(request, tmp_path):
    """encrypt(plaintext) -> a vault envelope under PASSWORD, by the real CLI or by vaultenc.py."""
    if request.param == "ansible-vault":
        if not ANSIBLE_VAULT.exists():
            pytest.skip(f"{ANSIBLE_VAULT} is not installed (scripts/setup.d/60-bench.sh installs Ansible)")
        pw = password_file(tmp_path, name="cli.pass")
        counter = iter(range(10**6))
        return lambda plaintext: _ansible_vault(tmp_path / f"v{next(counter)}", plaintext, pw)
    return lambda plaintext: vaultenc.encrypt(plaintext, PASSWORD)


@pytest.mark.parametrize("vector", VECTORS, ids=[v.name for v in VECTORS])
def test_ansible_cores_own_vectors_decrypt(tmp_path, vector):
    """The format as ansible-vault wrote it (1.1 and 1.2 with a vault id), as a `!vault` value."""
    assert len(VECTORS) == 2
    inv = write(
        tmp_path,
        "all:\n  hosts:\n    g1:\n      ansible_host: 10.0.0.1\n      token: "
        + vaultenc.yaml_value(vector.read_text(), 8),
    )
    pw = password_file(tmp_path, "test-vault-password\n")
    value = load_inventory(inv, vault_password_file=str(pw)).hosts["g1"].vars["token"]
    assert isinstance(value, SecretText) and value == "foobar\n" and repr(value) == MASK


def test_vault_values_and_files_as_ansible_writes_them(tmp_path, encrypt):
    tmp = tmp_path
    (tmp / "group_vars").mkdir()
    (tmp / "group_vars" / "gpu.yml").write_text(encrypt("ansible_user: deploy\nsite_token: T0kenFromFile\n"))
    inv = write(
        tmp,
        "all:\n"
        "  children:\n"
        "    gpu:\n"
        "      hosts:\n"
        "        g1:\n"
        "          ansible_host: 10.0.0.1\n"
        "          numaforge_bmc_url: https://10.0.0.2\n"
        "          numaforge_bmc_username: " + vaultenc.yaml_value(encrypt("bmcadmin"), 12) + ""
        "          numaforge_bmc_password: " + vaultenc.yaml_value(encrypt("BmcPa55word"), 12) + ""
        "          db_pass: " + vaultenc.yaml_value(encrypt("DbPa55word"), 12),
    )
    h = load_inventory(inv, vault_password_file=str(password_file(tmp))).hosts["g1"]
    assert h.bmc.password.kind == "vault" and h.bmc.password.resolve() == "BmcPa55word"
    line = next(i for i, t in enumerate(inv.read_text().splitlines(), 1) if "numaforge_bmc_password" in t)
    assert str(h.bmc.password) == f"!vault ({inv}:{line})"
    assert h.bmc.username == "bmcadmin" and isinstance(h.bmc.username, SecretText)
    assert h.ssh.user == "deploy"
    assert h.vars["db_pass"] == "DbPa55word" and h.vars["site_token"] == "T0kenFromFile"
    shown = redact({"vars": h.vars, "note": f"user {h.bmc.username} token {h.vars['site_token']}"})
    assert "DbPa55word" not in str(shown) and "T0kenFromFile" not in str(shown) and "bmcadmin" not in str(shown)


def test_a_vault_encrypted_inventory_file(tmp_path):
    inv = tmp_path / "hosts.yml"
    inv.write_text(vaultenc.encrypt("all:\n  hosts:\n    g1:\n      ansible_host: 10.0.0.7\n", PASSWORD))
    with pytest.raises(InventoryError, match="this inventory file is encrypted with Ansible Vault"):
        load_inventory(inv)
    assert load_inventory(inv, vault_password_file=str(password_file(tmp_path))).hosts["g1"].ssh.address == "10.0.0.7"


def _one_secret_inventory(tmp_path, ciphertext: str) -> Path:
    return write(
        tmp_path,
        "all:\n  hosts:\n    g1:\n      ansible_host: 10.0.0.1\n      numaforge_bmc_url: https://10.0.0.2\n"
        "      numaforge_bmc_password: " + vaultenc.yaml_value(ciphertext, 8),
    )


def test_wrong_password_names_the_value_and_the_fix(tmp_path):
    inv = _one_secret_inventory(tmp_path, vaultenc.encrypt("BmcPa55word", PASSWORD))
    wrong = password_file(tmp_path, "hunter42\n")
    with pytest.raises(InventoryError) as info:
        load_inventory(inv, vault_password_file=str(wrong))
    err = info.value
    assert err.where == f"{inv}:6" and "wrong password" in err.what and str(wrong) in err.what
    assert "--vault-password-file" in err.fix and "BmcPa55word" not in err.render()


def test_no_password_given_names_the_value(tmp_path):
    inv = _one_secret_inventory(tmp_path, vaultenc.encrypt("BmcPa55word", PASSWORD))
    with pytest.raises(InventoryError) as info:
        load_inventory(inv)
    assert info.value.where == f"{inv}:6" and "no vault password was given" in info.value.what
    assert "ANSIBLE_VAULT_PASSWORD_FILE" in info.value.fix


def test_the_environment_variable_names_the_password_file(tmp_path, monkeypatch):
    inv = _one_secret_inventory(tmp_path, vaultenc.encrypt("BmcPa55word", PASSWORD))
    monkeypatch.setenv("ANSIBLE_VAULT_PASSWORD_FILE", str(password_file(tmp_path)))
    assert load_inventory(inv).hosts["g1"].bmc.password.resolve() == "BmcPa55word"


BAD_PASSWORD_FILES = {
    "readable by others": (PASSWORD, 0o644, "readable by"),
    "executable script": ("#!/bin/sh\necho pw\n", 0o700, "is executable"),
    "empty": ("\n  \n", 0o600, "is empty"),
    "missing": (None, 0o600, "No such file"),
}


@pytest.mark.parametrize("case", list(BAD_PASSWORD_FILES))
def test_password_file_is_checked_before_use(tmp_path, case, monkeypatch):
    monkeypatch.delenv("NUMAFORGE_ALLOW_READABLE_SECRET_FILES", raising=False)
    text, mode, says = BAD_PASSWORD_FILES[case]
    pw = tmp_path / "missing.pass" if text is None else password_file(tmp_path, text, mode)
    inv = write(tmp_path, "all:\n  hosts:\n    g1:\n      ansible_host: 10.0.0.1\n")
    with pytest.raises(InventoryError) as info:  # checked even though this inventory needs no vault
        load_inventory(inv, vault_password_file=str(pw))
    assert says in info.value.what or says in info.value.render(), info.value.render()
    assert "--vault-password-file" in info.value.where and info.value.fix


@pytest.mark.parametrize(
    "mangle,says",
    [
        (lambda t: t.replace("AES256", "AES"), "cipher 'AES'"),
        (lambda t: t.replace(";1.1;", ";9.9;"), "format version '9.9'"),
        (lambda t: t[:60] + "zz" + t[62:], "payload"),
        (lambda t: t.splitlines()[0], "payload"),
    ],
)
def test_a_damaged_vault_value_is_named(tmp_path, mangle, says):
    inv = _one_secret_inventory(tmp_path, mangle(vaultenc.encrypt("BmcPa55word", PASSWORD)))
    with pytest.raises(InventoryError) as info:
        load_inventory(inv, vault_password_file=str(password_file(tmp_path)))
    assert info.value.where == f"{inv}:6" and says in info.value.what and "ansible-vault" in info.value.fix


def test_inventory_check_never_prints_a_vault_value(tmp_path):
    """Through the task: the option, the table and the --json report show the reference, never a value."""
    secrets = {"bmc": "BmcPa55word", "user": "bmcadmin", "note": "N0teSecret"}
    inv = write(
        tmp_path,
        "all:\n  hosts:\n    g1:\n      ansible_host: 10.0.0.1\n      numaforge_bmc_url: https://10.0.0.2\n"
        "      numaforge_bmc_password: "
        + vaultenc.yaml_value(vaultenc.encrypt(secrets["bmc"], PASSWORD), 8)
        + "      numaforge_bmc_username: "
        + vaultenc.yaml_value(vaultenc.encrypt(secrets["user"], PASSWORD), 8)
        + "      note: "
        + vaultenc.yaml_value(vaultenc.encrypt(secrets["note"], PASSWORD), 8)
        + '      greeting: "hello {{ note }}"\n',
    )
    report = tmp_path / "r.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    r = subprocess.run(
        [sys.executable, "-m", "invoke", "inventory-check", "--inventory", str(inv), "--json", str(report)]
        + ["--vault-password-file", str(password_file(tmp_path))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**env, "COLUMNS": "200"},
        timeout=120,
    )
    out = r.stdout + r.stderr + report.read_text()
    assert r.returncode == 0, out
    assert "!vault (" in r.stdout and json.loads(report.read_text())["ok"] is True
    for value in secrets.values():
        assert value not in out, value
    assert "hello" not in out, "a value rendered from a vault value is a secret too"
