"""The install tests build a wheel and a venv in a module- or session-scoped fixture (tens of seconds of pip each).
Under xdist such a fixture is made once per worker that runs one of the module's tests: with the bmc tier on four
workers, test_installed's three tests built three venvs (issue 43). Each such module is one xdist group of its own,
and scripts/test.sh runs the bmc tier with --dist loadgroup, so each is built once. Pure: the modules' source and
scripts/test.sh are read, nothing is built."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from numaforge.paths import ROOT

HERE = Path(__file__).parent


def _fixture_scope(node: ast.expr) -> str | None:
    """The scope of a ``@pytest.fixture(scope=...)`` decorator (None: not a fixture with a scope)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "fixture":
        for kw in node.keywords:
            if kw.arg == "scope" and isinstance(kw.value, ast.Constant):
                return str(kw.value.value)
    return None


def _shared_fixture_modules() -> dict[Path, ast.Module]:
    """Every module of tests/install with a fixture of module or session scope."""
    out = {}
    for path in sorted(HERE.glob("test_*.py")):
        tree = ast.parse(path.read_text())
        scopes = {_fixture_scope(d) for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) for d in n.decorator_list}
        if scopes & {"module", "session"}:
            out[path] = tree
    return out


def _xdist_groups(tree: ast.Module) -> list[str]:
    """The xdist_group names the module's ``pytestmark`` gives."""
    groups = []
    for n in tree.body:
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in n.targets):
            for c in ast.walk(n.value):
                if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr == "xdist_group":
                    groups += [str(a.value) for a in c.args if isinstance(a, ast.Constant)]
    return groups


def test_every_install_module_with_a_shared_build_is_one_xdist_group_of_its_own():
    modules = _shared_fixture_modules()
    assert {p.name for p in modules} >= {"test_installed.py", "test_wheel.py"}, sorted(p.name for p in modules)
    groups = {path.name: _xdist_groups(tree) for path, tree in modules.items()}
    for name, names in groups.items():
        assert len(names) == 1, f"{name}: its shared fixture is built on every worker without one xdist_group"
    every = [g for names in groups.values() for g in names]
    assert len(set(every)) == len(every), f"two modules share a group (one worker for both builds): {groups}"


def test_the_bmc_tier_runs_with_loadgroup():
    """xdist honours the groups only with --dist loadgroup: the bmc tier's line in scripts/test.sh passes it."""
    script = (ROOT / "scripts" / "test.sh").read_text()
    (line,) = [ln for ln in script.splitlines() if re.search(r"tier bmc ", ln)]
    assert re.search(r"tier bmc .*--dist loadgroup", line), line
