"""Typed errors shared by both pipelines.

Every error a user can cause carries three parts: *what* went wrong, *where* (file:line, host/attribute,
tree path...), and *how to fix* it. tasks.py turns any NumaforgeError into a message and a non-zero exit;
nothing else is allowed to reach the user as a traceback.
"""

from __future__ import annotations


class NumaforgeError(Exception):
    """Base of every user-facing error."""

    exit_code = 1
    # a usage error found before any host is touched (a bad option, environment, inventory, selection or gate
    # value): the run's report says "refused" when no host has a step yet (numaforge.cli.common)
    refusal = False

    def __init__(self, what: str, where: str | None = None, fix: str | None = None):
        self.what = what
        self.where = where
        self.fix = fix
        super().__init__(self.render())

    def render(self) -> str:
        head = f"{self.where}: {self.what}" if self.where else self.what
        return f"{head}\n  fix: {self.fix}" if self.fix else head


class InventoryError(NumaforgeError):
    """The inventory file is malformed or refers to something that does not exist."""

    exit_code = 2
    refusal = True


class SelectionError(NumaforgeError):
    """--host/--group/--limit matched nothing or named an unknown host or group."""

    exit_code = 2
    refusal = True


class SecretError(NumaforgeError):
    """A secret reference cannot be resolved (unset variable, unreadable file) or is a refused literal."""

    exit_code = 2
    refusal = True


class ToolMissingError(NumaforgeError):
    """A build-server tool is missing; `fix` says how to install it."""

    exit_code = 3


class ProfileError(NumaforgeError):
    """A profile (BIOS or host OS) cannot be found, rendered, parsed or fails its schema."""

    exit_code = 2
