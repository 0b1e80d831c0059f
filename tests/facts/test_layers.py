"""Layers one-way: the facts pipeline knows nothing of BIOS profiles (bios/verify builds on facts, never the
reverse). Checked on the source: any import of numaforge.bios from numaforge/facts fails this test."""

import ast
from pathlib import Path

FACTS = Path(__file__).resolve().parents[2] / "numaforge" / "facts"


def imported_modules(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            out |= {base} | {f"{base}.{a.name}" for a in node.names}
    return out


def test_facts_never_imports_bios():
    offenders = {}
    for path in sorted(FACTS.glob("*.py")):
        bad = sorted(m for m in imported_modules(path) if m.startswith(("numaforge.bios", "..bios")) or m == "..bios")
        if bad:
            offenders[path.name] = bad
    assert offenders == {}
    assert len(list(FACTS.glob("*.py"))) >= 5  # the glob found the package
