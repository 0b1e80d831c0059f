"""Secrets by reference only: ``env:VAR`` or ``file:PATH``.

A resolved value is remembered in a process-wide redaction set so that reports and error messages can
scrub it (``redact``); the reference itself (``env:BMC_PASS``) is what gets printed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from . import safeio
from .errors import SecretError

_RESOLVED: set[str] = set()
MASK = "********"
MAX_SECRET_FILE_BYTES = 16 * 1024
ALLOW_READABLE_ENV = safeio.ALLOW_READABLE_ENV


def register(value: str | None) -> None:
    """Scrub ``value`` (e.g. a Redfish session token) from every later message and report, like a resolved
    secret. Values shorter than 4 characters are not registered (they would mask ordinary text)."""
    if value and len(value) >= 4:
        _RESOLVED.add(value)


def _read_secret_file(path: Path, where: str) -> str:
    """A ``file:`` secret: a regular file, at most MAX_SECRET_FILE_BYTES, readable only by its owner (unless
    NUMAFORGE_ALLOW_READABLE_SECRET_FILES=1) -- numaforge.safeio.read_input, the one checked reader."""
    data = safeio.read_input(
        path,
        what="secret file",
        where=where,
        error=SecretError,
        max_bytes=MAX_SECRET_FILE_BYTES,
        private=True,
        fix_missing="check the path and its permissions",
        fix_kind="point file: at a regular file holding only the secret",
        fix_size="point file: at a file holding only the secret",
    )
    try:
        return data.decode("utf-8").rstrip("\n")
    except UnicodeDecodeError:
        raise SecretError(f"secret file {path} is not UTF-8 text", where, "store the secret as text") from None


class SecretText(str):
    """A secret value in hand (an Ansible Vault value, decrypted): a str that joins the redaction set when made,
    shows only the mask as its repr, and is masked by redact() whatever its length; ``where`` is its file:line."""

    where: str

    def __new__(cls, value: str, where: str = "") -> "SecretText":
        obj = super().__new__(cls, value)
        obj.where = where
        register(value)
        return obj

    def __repr__(self) -> str:
        return MASK


@dataclass(frozen=True)
class SecretRef:
    """A reference to a secret. ``kind`` is ``env``, ``file``, ``plain`` (a literal, only if allowed) or ``vault``
    (a decrypted Ansible Vault value: ``value`` holds it, ``where`` the file:line it was written on)."""

    kind: str
    value: str
    where: str = ""

    @classmethod
    def parse(cls, text: str, where: str = "", allow_plaintext: bool = False) -> "SecretRef":
        if not isinstance(text, str) or not text:
            raise SecretError(
                "a secret must be a non-empty string reference", where, "write env:VARIABLE or file:/path/to/secret"
            )
        if text.startswith("env:"):
            name = text[4:]
            if not name or not name.replace("_", "").isalnum():
                raise SecretError(
                    f"'{text}' is not a valid environment variable reference",
                    where,
                    "write env:NAME with letters, digits and underscores",
                )
            return cls("env", name, where)
        if text.startswith("file:"):
            if not text[5:]:
                raise SecretError("'file:' needs a path", where, "write file:/path/to/secret")
            return cls("file", text[5:], where)
        if allow_plaintext:
            return cls("plain", text, where)
        raise SecretError(
            "literal secret refused",
            where,
            "store it in an environment variable (env:NAME) or a file readable only by you "
            "(file:PATH), or pass --allow-plaintext-secrets",
        )

    def resolve(self) -> str:
        if self.kind == "env":
            if self.value not in os.environ:
                raise SecretError(
                    f"environment variable {self.value} is not set",
                    self.where,
                    f"export {self.value}=... before running",
                )
            secret = os.environ[self.value]
        elif self.kind == "file":
            secret = _read_secret_file(Path(self.value).expanduser(), self.where)
        else:
            secret = self.value
        if not secret:  # sent, an empty password came back as "the BMC refused the credentials" (issue 40)
            raise SecretError(
                f"environment variable {self.value} is empty"
                if self.kind == "env"
                else (
                    f"secret file {Path(self.value).expanduser()} is empty" if self.kind == "file" else "empty secret"
                ),
                self.where,
                (f"export {self.value}=... with the password" if self.kind == "env" else "put the secret there")
                + " (an empty password is never sent; its value is never printed)",
            )
        _RESOLVED.add(secret)
        return secret

    def __str__(self) -> str:  # what gets printed: the reference, never the value
        if self.kind == "vault":
            return f"!vault ({self.where})" if self.where else "!vault"
        return MASK if self.kind == "plain" else f"{self.kind}:{self.value}"

    def __repr__(self) -> str:
        return f"SecretRef({self})"


# scheme://user:password@ -- the userinfo of a URL with a password (RFC 3986 3.2.1; '/', '?', '#' end the authority)
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#@\s]*:[^/?#@\s]*@")


def url_has_credentials(url: str) -> bool:
    """True when ``url``'s authority carries userinfo (``user@`` or ``user:password@``): the one check for every
    URL numaforge is given (bmc.url, --prometheus). Never print such a URL."""
    authority = url.split("://", 1)[1] if "://" in url else url
    return "@" in re.split(r"[/?#]", authority, maxsplit=1)[0]


def redact(obj):
    """Return a copy of obj (str/list/dict tree) with every resolved secret and SecretRef masked, and the
    password of any ``scheme://user:password@`` URL in a string."""
    if isinstance(obj, SecretRef):
        return str(obj)
    if isinstance(obj, SecretText):
        return MASK
    if isinstance(obj, str):
        for secret in sorted(_RESOLVED, key=len, reverse=True):
            if secret and secret in obj:
                obj = obj.replace(secret, MASK)
        if "@" in obj:
            obj = _URL_USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", obj)
        return obj
    if isinstance(obj, dict):
        # belt and braces: a credential-named key only ever shows a reference
        return {
            k: (MASK if _credential_key(k) and isinstance(v, str) and not _is_reference(v) else redact(v))
            for k, v in obj.items()
        }
    if isinstance(obj, (list, tuple)):
        return [redact(v) for v in obj]
    return obj


_CREDENTIAL_KEYS = ("password", "passwd", "secret", "token", "x-auth-token", "authorization")


def _credential_key(key) -> bool:
    return isinstance(key, str) and key.lower() in _CREDENTIAL_KEYS


def _is_reference(value: str) -> bool:
    return value.startswith(("env:", "file:", "!vault")) or value == MASK
