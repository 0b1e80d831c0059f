"""Encrypting as `ansible-vault encrypt_string` does, for tests when the ansible-vault CLI is not installed.

The format is checked against Ansible itself twice: test_vault.py decrypts ansible-core's own test vectors
(tests/data/inventory/vault/), and, where the CLI is installed, values the real `ansible-vault` encrypted.
"""

from __future__ import annotations

import binascii
import hmac
import os
import textwrap

from cryptography.hazmat.primitives import hashes, padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC


def encrypt(plaintext: str, password: str, label: str | None = None) -> str:
    salt = os.urandom(32)
    derived = PBKDF2HMAC(algorithm=hashes.SHA256(), length=80, salt=salt, iterations=10000).derive(password.encode())
    key, mac_key, iv = derived[:32], derived[32:64], derived[64:]
    padder = padding.PKCS7(128).padder()
    padded = padder.update(plaintext.encode()) + padder.finalize()
    enc = Cipher(algorithms.AES(key), modes.CTR(iv)).encryptor()
    ct = enc.update(padded) + enc.finalize()
    mac = hmac.new(mac_key, ct, "sha256").digest()
    inner = b"\n".join(binascii.hexlify(x) for x in (salt, mac, ct))
    header = f"$ANSIBLE_VAULT;1.2;AES256;{label}" if label else "$ANSIBLE_VAULT;1.1;AES256"
    return header + "\n" + "\n".join(textwrap.wrap(binascii.hexlify(inner).decode(), 80)) + "\n"


def yaml_value(ciphertext: str, indent: int) -> str:
    """`!vault |` and the block, indented for a YAML mapping value at `indent` spaces."""
    pad = " " * indent
    return "!vault |\n" + "".join(pad + line + "\n" for line in ciphertext.splitlines())
