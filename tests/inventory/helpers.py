"""Shared by the inventory tests."""

from __future__ import annotations


def write(tmp_path, text, name="inv.yaml"):
    """Write an inventory file under tmp_path and return its path."""
    p = tmp_path / name
    p.write_text(text)
    return p
