"""Ansible Vault, read: `!vault` values and whole vault-encrypted files, decrypted with the password of
``--vault-password-file`` / ``ANSIBLE_VAULT_PASSWORD_FILE``. No Ansible code: the format as Ansible documents it
(docs.ansible.com, "Vault" -> "Format of files encrypted with Ansible Vault"), with the ``cryptography`` package:

- a header line ``$ANSIBLE_VAULT;1.1;AES256`` (or ``1.2;AES256;<vault id label>``), then the payload in hex,
  wrapped at 80 characters;
- the payload, hex-decoded, is three lines: hex(salt), hex(HMAC), hex(ciphertext);
- PBKDF2-HMAC-SHA256 over the password and the salt, 10000 iterations, gives 80 bytes: the AES-256 key (32),
  the HMAC-SHA256 key (32) and the counter-mode IV (16);
- the HMAC-SHA256 of the ciphertext must match (a mismatch is a wrong password); AES-256-CTR decrypts it, and
  PKCS#7 padding (128-bit blocks) is removed;
- a password file holds the password, surrounding white space stripped. Ansible runs an executable password
  file as a script; numaforge runs no program to get a secret and refuses it.

A decrypted value is a :class:`numaforge.secrets.SecretText`: registered for redaction, masked in every report.
"""

from __future__ import annotations

import binascii
import hmac
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.hazmat.primitives import hashes, padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

from .. import safeio
from ..errors import InventoryError
from ..secrets import SecretText

HEADER = "$ANSIBLE_VAULT"
VERSIONS = ("1.1", "1.2")
ITERATIONS = 10000
MAX_PASSWORD_FILE_BYTES = 16 * 1024
ENV_PASSWORD_FILE = "ANSIBLE_VAULT_PASSWORD_FILE"
PASSWORD_FIX = "pass --vault-password-file FILE (or set ANSIBLE_VAULT_PASSWORD_FILE) naming a file, readable only by you, that holds the vault password"


@dataclass(frozen=True)
class Vaulted:
    """An encrypted value as written (a `!vault |` scalar) and the file:line it was written on."""

    ciphertext: str
    where: str

    def __str__(self) -> str:
        return "!vault (encrypted)"

    __repr__ = __str__


def is_vault_text(text: str) -> bool:
    return text.lstrip().startswith(HEADER + ";")


@dataclass
class Vault:
    """The vault password(s) of a run and the values decrypted with them (each ciphertext decrypted once)."""

    password: bytes
    source: str  # where the password came from (the file and the option or variable that named it)
    _plain: dict[str, SecretText] = field(default_factory=dict, repr=False)

    @classmethod
    def from_option(cls, option: str | None) -> Vault | None:
        """--vault-password-file's value, else ANSIBLE_VAULT_PASSWORD_FILE, else None (no vault password)."""
        if option is not None:
            return cls.from_file(option, "--vault-password-file")
        env = os.environ.get(ENV_PASSWORD_FILE)
        if env is None:
            return None
        if not env.strip():
            raise InventoryError(
                f"{ENV_PASSWORD_FILE} is set but empty", ENV_PASSWORD_FILE, f"unset it or {PASSWORD_FIX[5:]}"
            )
        return cls.from_file(env, ENV_PASSWORD_FILE)

    @classmethod
    def from_file(cls, path: str, named_by: str) -> Vault:
        p = Path(path).expanduser()
        where = f"{named_by} {path}"
        try:
            mode = os.stat(p).st_mode
        except OSError:
            mode = 0
        if stat.S_ISREG(mode) and mode & 0o111:
            raise InventoryError(
                f"vault password file {p} is executable: Ansible runs such a file as a script to get the password; "
                "numaforge runs no program to get a secret",
                where,
                f"write the password itself into a file (chmod 600, not executable) and pass that; {PASSWORD_FIX}",
            )
        data = safeio.read_input(
            p,
            what="vault password file",
            where=where,
            error=InventoryError,
            max_bytes=MAX_PASSWORD_FILE_BYTES,
            private=True,
            fix_missing=PASSWORD_FIX,
            fix_kind=PASSWORD_FIX,
            fix_size="a vault password file holds only the password",
        )
        password = data.strip()
        if not password:
            raise InventoryError(f"vault password file {p} is empty", where, PASSWORD_FIX)
        SecretText(password.decode("utf-8", "replace"), where)  # registered: never printed from here on
        return cls(password, where)

    def decrypt(self, text: str, where: str) -> SecretText:
        """The plaintext of one vault envelope (a `!vault` value or a whole file) as a SecretText."""
        done = self._plain.get(text)
        if done is not None:
            return done
        plain = _decrypt(text, self.password, where, self.source)
        try:
            value = SecretText(plain.decode("utf-8"), where)
        except UnicodeDecodeError:
            raise InventoryError(
                "the vault value decrypted to bytes that are not UTF-8 text",
                where,
                "vault-encrypt the text of the value (ansible-vault encrypt_string)",
            ) from None
        self._plain[text] = value
        return value


def require(vault: Vault | None, where: str, what: str) -> Vault:
    """The run's vault, or an error saying that `what` (at `where`) is encrypted and no password was given."""
    if vault is None:
        raise InventoryError(
            f"{what} is encrypted with Ansible Vault and no vault password was given", where, PASSWORD_FIX
        )
    return vault


def _bad(where: str, why: str) -> InventoryError:
    return InventoryError(
        f"not a valid Ansible Vault value ({why})",
        where,
        "re-encrypt it with `ansible-vault encrypt_string` (paste the whole block, header line included, under "
        "`!vault |`)",
    )


def _decrypt(text: str, password: bytes, where: str, source: str) -> bytes:
    lines = [line.strip() for line in text.strip().splitlines()]
    if not lines or not lines[0].startswith(HEADER + ";"):
        raise _bad(where, f"it does not start with {HEADER};")
    header = lines[0].split(";")
    if len(header) < 3 or header[1] not in VERSIONS:
        raise _bad(where, f"format version {header[1] if len(header) > 1 else '?'!r}; numaforge reads 1.1 and 1.2")
    if header[2] != "AES256":
        raise _bad(
            where, f"cipher {header[2]!r}; Ansible writes AES256 (re-encrypt older vaults with ansible-vault rekey)"
        )
    try:
        inner = binascii.unhexlify("".join(lines[1:]))
        parts = inner.split(b"\n")
        if len(parts) != 3:
            raise ValueError("three hex lines expected inside")
        salt, mac, ciphertext = (binascii.unhexlify(p) for p in parts)
    except (binascii.Error, ValueError) as exc:
        raise _bad(where, f"payload: {exc}") from None
    derived = PBKDF2HMAC(algorithm=hashes.SHA256(), length=80, salt=salt, iterations=ITERATIONS).derive(password)
    key, mac_key, iv = derived[:32], derived[32:64], derived[64:]
    expected = hmac.new(mac_key, ciphertext, "sha256").digest()
    if not hmac.compare_digest(expected, mac):
        label = f" (vault id '{header[3]}')" if len(header) > 3 and header[3] else ""
        raise InventoryError(
            f"cannot decrypt this vault value{label} with the password from {source}: wrong password",
            where,
            "pass the password it was encrypted with (--vault-password-file FILE or ANSIBLE_VAULT_PASSWORD_FILE); "
            "`ansible-vault view` with the same file tells whether it is the right one",
        )
    decryptor = Cipher(algorithms.AES(key), modes.CTR(iv)).decryptor()
    padded = decryptor.update(ciphertext) + decryptor.finalize()
    unpadder = padding.PKCS7(128).unpadder()
    try:
        return unpadder.update(padded) + unpadder.finalize()
    except ValueError:
        raise _bad(where, "bad padding after decryption") from None
