"""Inventory YAML: numaforge.yamlsrc (the one YAML reader) with inventory wording and InventoryError."""

from __future__ import annotations

from pathlib import Path

from .. import yamlsrc
from ..errors import InventoryError
from ..yamlsrc import LMap, LSeq

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


def parse_yaml(text: str, where: str):
    """Parse YAML text already read from `where` (a file name, for messages)."""
    doc = yamlsrc.parse(text, where, error=InventoryError)
    if doc is None:
        raise InventoryError("inventory file is empty", where, "add a `hosts:` mapping (see docs/inventory.md)")
    return doc
