"""Inventory YAML: numaforge.yamlsrc (the one YAML reader) with inventory wording and InventoryError."""

from __future__ import annotations

from pathlib import Path

from .. import yamlsrc
from ..errors import InventoryError
from ..yamlsrc import LMap, LSeq

__all__ = ["LMap", "LSeq", "load_yaml"]


def load_yaml(path: str | Path):
    """Parse one inventory YAML document with line information; every failure is an InventoryError."""
    doc = yamlsrc.load(path, error=InventoryError, what="inventory file",
                       fix_missing="pass an existing file with --inventory, or create inventory/lab.yaml")
    if doc is None:
        raise InventoryError("inventory file is empty", str(path), "add a `hosts:` mapping (see docs/inventory.md)")
    return doc
