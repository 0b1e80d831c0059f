"""Malformed inventories: each file in tests/data/inventory/bad/ states its expected error in its first line
(`# expect: :LINE: message fragment`); the loader must raise InventoryError naming that file and line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from numaforge.errors import InventoryError
from numaforge.inventory.loader import load_inventory

BAD = Path(__file__).parents[1] / "data" / "inventory" / "bad"
CASES = sorted(BAD.glob("*.yaml"))


def expectation(path: Path) -> tuple[int | None, str]:
    first = path.read_text().splitlines()[0] if path.read_text() else ""
    m = re.match(r"# expect: (?::(\d+): )?(.*)$", first)
    assert m, f"{path.name} must start with '# expect: [:LINE: ]message'"
    return (int(m.group(1)) if m.group(1) else None), m.group(2)


def test_corpus_is_large_and_distinct():
    assert len(CASES) >= 30
    messages = {expectation(p) for p in CASES}
    assert len(messages) == len(CASES), "every malformed inventory must exercise a different error"


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_bad_inventory_reports_file_line_and_fix(path):
    line, fragment = expectation(path)
    with pytest.raises(InventoryError) as info:
        load_inventory(path)
    err = info.value
    text = err.render()
    # 'did you mean' hints live in the fix line; compare against the whole rendering with the fix folded in
    flat = f"{err.where}: {err.what}; {err.fix}"
    assert err.where is not None and err.where.startswith(str(path)), text
    if line is not None:
        assert err.where == f"{path}:{line}", text
    assert fragment.split("; did you mean")[0] in flat, text
    if "did you mean" in fragment:
        suggestion = fragment.split("did you mean")[1].strip().rstrip("?")
        assert f"did you mean {suggestion}" in err.fix, text
    assert err.fix, f"{path.name}: every error must say how to fix it"
    assert "Traceback" not in text


def test_missing_file():
    with pytest.raises(InventoryError) as info:
        load_inventory("/nonexistent/inv.yaml")
    assert info.value.where == "/nonexistent/inv.yaml"
    assert "not found" in info.value.what


def test_directory_instead_of_file(tmp_path):
    with pytest.raises(InventoryError, match="is a directory"):
        load_inventory(tmp_path)


def test_binary_file(tmp_path):
    p = tmp_path / "inv.yaml"
    p.write_bytes(b"\xff\xfe\x00hosts")
    with pytest.raises(InventoryError, match="not UTF-8"):
        load_inventory(p)
