"""Hints name the program the operator runs (issue 39 item 4): installed, the command is `numaforge TASK`, and a
fix saying `invoke TASK` named a command the user does not have. Every string in numaforge/ that names a task
(derived from the task surface) goes through numaforge.program.prog(); at run time the hint says `invoke` under
invoke and `numaforge` under the numaforge command. Real subprocesses for both entry points."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from numaforge.cli.main import namespace

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "numaforge"
TASKS = sorted(namespace().task_names)


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def test_the_task_surface_is_walked():
    assert {"bios-plan", "bios-apply", "inventory-check", "lab-up", "build-kpatch", "facts"} <= set(TASKS)


def test_no_string_in_the_package_names_a_task_as_invoke_task():
    """Docstrings of modules and library functions are for developers; task docstrings are checked below."""
    pattern = re.compile(r"\binvoke\s+(" + "|".join(re.escape(t) for t in TASKS) + r")\b")
    bad = []
    for f in sorted(PKG.rglob("*.py")):
        if "dmtf" in f.parts:
            continue
        tree = ast.parse(f.read_text(), str(f))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                if pattern.search(node.value):
                    bad.append(f"{f.relative_to(ROOT)}:{node.lineno}: {node.value.strip()[:90]}")
    assert not bad, 'say f"`{prog()} TASK`" (numaforge.program):\n' + "\n".join(bad)


@pytest.mark.parametrize("name", TASKS)
def test_no_task_help_names_invoke(name):
    t = namespace()[name]
    # the help dict itself: Task.get_arguments() pops its entries (invoke), which would strip later callers' help
    texts = [t.__doc__ or ""] + [str(h) for h in (t.help or {}).values()]
    assert not [x for x in texts if re.search(r"\binvoke\s+[a-z]", x)], texts


ENTRY = {
    "invoke": [sys.executable, "-m", "invoke"],
    "numaforge": [sys.executable, "-c", "from numaforge.cli.main import main; main()"],
}


@pytest.mark.parametrize("entry", sorted(ENTRY))
def test_a_hint_names_the_running_program(entry, tmp_path):
    inv = tmp_path / "fleet.yaml"
    inv.write_text("version: 1\nhosts:\n  gpu-01:\n    ssh: {address: 192.0.2.1}\n")
    r = subprocess.run(
        [*ENTRY[entry], "inventory-check", "--syntax-only", "-i", str(inv), "--host", "zzz"],
        cwd=ROOT if entry == "invoke" else tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200", "NUMAFORGE_STATE": str(tmp_path / "state")},
    )
    out = r.stdout + r.stderr
    assert r.returncode == 2, out
    assert f"`{entry} inventory-check`" in out
    other = "invoke" if entry == "numaforge" else "numaforge"
    assert f"{other} inventory-check" not in out
