"""Inventory YAML: numaforge.yamlsrc (the one YAML reader) with inventory wording and InventoryError."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from .. import yamlsrc
from ..errors import InventoryError
from ..yamlsrc import LMap, LSeq
from .hostranges import too_long
from .vault import Vaulted

TAGS: dict[str, Callable[[str, str], Any]] = {
    "!vault": Vaulted
}  # an inventory's `!vault |` value stays encrypted until a host's value needs it

YAML_MAX_KEY = 1024  # PyYAML refuses a plain key longer than this as a syntax error ("could not find ':'")

__all__ = ["LMap", "LSeq", "load_yaml", "parse_yaml"]


def load_yaml(path: str | Path):
    """Parse one inventory YAML document with line information; every failure is an InventoryError."""
    text = yamlsrc.read_limited(
        path,
        error=InventoryError,
        what="inventory file",
        fix_missing="pass an existing file with --inventory, or create inventory/lab.yaml",
    )
    return parse_yaml(text, str(path))


def long_key(text: str, where: str) -> None:
    """After a YAML syntax error: a key past PyYAML's own key limit is a name too long, said with the limit
    (a 5000-character host name was "could not find expected ':'")."""
    for number, line in enumerate(text.splitlines(), 1):
        if len(line) <= YAML_MAX_KEY:
            continue
        stripped = line.strip()
        key = stripped[:-1] if stripped.endswith(":") else stripped.partition(": ")[0]
        key = key.strip().strip("\"'")
        if len(key) > YAML_MAX_KEY:
            too_long(key, f"{where}:{number}", "host")


def parse_yaml(text: str, where: str, **kw):
    """Parse YAML text already read from `where` (a file name, for messages)."""
    try:
        doc = yamlsrc.parse(text, where, error=InventoryError, tags=TAGS, **kw)
    except InventoryError as exc:
        if exc.what.startswith("YAML syntax error"):
            long_key(text, where)
        raise
    if doc is None:
        raise InventoryError("inventory file is empty", where, "add a `hosts:` mapping (see docs/inventory.md)")
    return doc
