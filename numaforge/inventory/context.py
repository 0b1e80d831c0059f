"""What both inventory readers share: the format's keys and patterns, the per-load context that turns a line
into file:line errors, and the wording of hints ("did you mean ...")."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import NoReturn

from ..errors import InventoryError
from .hostranges import too_long
from .vault import Vault, Vaulted
from .yamlsrc import LMap, LSeq

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
PROFILE_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
TARGET_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
PCI_RE = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
RELEASE_RE = re.compile(r"^\d+\.\d+(\.\d+)?([-+~][A-Za-z0-9_.+~-]+)?$")
VENDORS = ("auto", "dell", "hpe", "supermicro", "lenovo", "generic")
BMC_AUTH = ("auto", "session", "basic")  # bmc.auth (numaforge.bios.redfish: why Basic over verified TLS is safe)

TOP_KEYS = ("version", "vars", "defaults", "hosts", "groups")
SECTION_KEYS = ("ssh", "bmc", "kernel", "hardware", "bios_profile")
HOST_KEYS = (*SECTION_KEYS, "vars")
GROUP_KEYS = ("hosts", "children", "vars", *SECTION_KEYS)
SSH_KEYS = ("address", "port", "user", "key_file", "agent", "known_hosts", "sudo", "password", "config_file")
BMC_KEYS = ("url", "username", "password", "ca_bundle", "vendor", "system_id", "insecure", "auth")
KERNEL_KEYS = ("release", "target")
HARDWARE_KEYS = ("platform", "vendor", "sockets", "cpu_model", "gpus", "nics")
SECTION_FIELDS = {"ssh": SSH_KEYS, "bmc": BMC_KEYS, "kernel": KERNEL_KEYS, "hardware": HARDWARE_KEYS}

ANSIBLE_SSH_VARS = {
    "ansible_host": "address",
    "ansible_ssh_host": "address",
    "ansible_port": "port",
    "ansible_ssh_port": "port",
    "ansible_user": "user",
    "ansible_ssh_user": "user",
    "ansible_ssh_private_key_file": "key_file",
    "ansible_private_key_file": "key_file",
    "ansible_become": "sudo",
    "ansible_password": "password",
    "ansible_ssh_pass": "password",
}


# words people bring from other tools (ssh_config, Ansible, Redfish docs) -> our key
SYNONYMS = {
    "hostname": "address",
    "host": "address",
    "ip": "address",
    "addr": "address",
    "username": "user",
    "identity_file": "key_file",
    "identityfile": "key_file",
    "private_key": "key_file",
    "become": "sudo",
    "version": "release",
    "uname": "release",
    "kernel_release": "release",
    "members": "hosts",
    "subgroups": "children",
    "endpoint": "url",
    "address_url": "url",
    "cafile": "ca_bundle",
    "ca": "ca_bundle",
    "verify": "insecure",
    "profile": "bios_profile",
}


def hint(word: str, choices) -> str:
    choices = list(choices)
    syn = SYNONYMS.get(str(word).lower())
    close = [syn] if syn in choices else difflib.get_close_matches(str(word), choices, n=1, cutoff=0.6)
    allowed = ", ".join(choices)
    return f"did you mean '{close[0]}'? (allowed: {allowed})" if close else f"allowed keys: {allowed}"


class Ctx:
    """Per-load context: the file name (for errors) and options."""

    def __init__(self, path: str, allow_plaintext: bool, vault: Vault | None = None):
        self.vault = vault  # the run's Ansible Vault password (numaforge.inventory.vault), if one was given
        self.path = path
        self.base = Path(path).resolve().parent
        self.allow_plaintext = allow_plaintext

    def at(self, line: int | str | None) -> str:
        if isinstance(line, str):  # already file:line (Ansible inventories: group_vars/host_vars files)
            return line
        return f"{self.path}:{line}" if line else self.path

    def fail(self, line, what, fix=None) -> NoReturn:
        raise InventoryError(what, self.at(line), fix)

    def expect_map(self, value, line, what):
        if not isinstance(value, LMap):
            self.fail(
                line or getattr(value, "line", None),
                f"{what} must be a mapping (key: value), got {kind_of(value)}",
                f"write {what} as indented `key: value` lines",
            )
        return value

    def check_keys(self, m: LMap, allowed, what):
        for key in m:
            if not isinstance(key, str):
                self.fail(m.line_of(key), f"{what}: key {key!r} must be a string", "quote the key")
            if key not in allowed:
                self.fail(m.line_of(key), f"unknown key '{key}' in {what}", hint(key, allowed))


def kind_of(v) -> str:
    if v is None:
        return "nothing (empty value)"
    if isinstance(v, Vaulted):
        return "an Ansible Vault value"
    return {
        LMap: "a mapping",
        LSeq: "a list",
        dict: "a mapping",
        list: "a list",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
    }.get(type(v), type(v).__name__)


def check_name(ctx, name, line, kind):
    too_long(name, ctx.at(line), kind)
    if not isinstance(name, str) or not NAME_RE.match(name):
        ctx.fail(
            line,
            f"{kind} name {name!r} is not valid",
            "use letters, digits, '.', '_' and '-', starting with a letter or digit (quote numeric names)",
        )


def empty_map(line: int | None) -> LMap:
    """An empty LMap that stands for a key written without a value (``host:``) on ``line``."""
    m = LMap()
    m.line, m.key_lines = line or 0, {}
    return m
