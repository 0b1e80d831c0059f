"""Every test of the suite runs in exactly one tier of scripts/test.sh (issue 43): the tiers' marker expressions,
read from the script, are evaluated by pytest's own -m evaluator on a real collection of the suite (a child
pytest --collect-only; nothing runs). A test in two tiers ran twice per suite (the os-apply signal tests, marked
ssh and bmc, cost ~80 s of the ssh tier's wall time on top of their run in the bmc tier); a test in none never ran.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from numaforge.paths import ROOT

# Loaded into the child pytest: for every collected test, the tiers whose -m expression selects it (the evaluation
# -m itself does: MarkMatcher over the item's markers), then every test is deselected, so nothing runs.
PLUGIN = """
import json, os
import pytest
from _pytest.mark import MarkMatcher
from _pytest.mark.expression import Expression

@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    tiers = {name: Expression.compile(expr) for name, expr in json.loads(os.environ["TIERS"]).items()}
    rows = {}
    for it in items:
        matcher = MarkMatcher.from_markers(it.iter_markers())
        rows[it.nodeid] = [name for name, expr in tiers.items() if expr.evaluate(matcher)]
    with open(os.environ["TIERS_OUT"], "w") as fh:
        json.dump(rows, fh)
    config.hook.pytest_deselected(items=list(items))
    items[:] = []
"""


def script_tiers() -> dict[str, str]:
    """Each ``tier NAME EXPR`` call of scripts/test.sh: NAME -> its -m expression ($heavy expanded)."""
    lines = [ln for ln in (ROOT / "scripts" / "test.sh").read_text().splitlines() if not ln.lstrip().startswith("#")]
    script = "\n".join(lines)
    (heavy,) = re.findall(r'^heavy="([^"]*)"', script, re.M)
    return {
        m.group(1): m.group(2).strip('"').replace("$heavy", heavy)
        for m in re.finditer(r'\btier (\w+) ("[^"]*"|\w+)', script)
    }


def test_every_test_runs_in_exactly_one_tier(tmp_path):
    tiers = script_tiers()
    assert {"core", "ssh", "bmc", "hostile", "kernel_source", "kpatch", "lab_vm"} <= set(tiers), tiers
    (tmp_path / "tiers_plugin.py").write_text(PLUGIN)
    out = tmp_path / "tiers.json"
    env = {
        **os.environ,
        "TIERS": json.dumps(tiers),
        "TIERS_OUT": str(out),
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "tiers_plugin", "-q", "--collect-only"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.exists(), r.stdout[-2000:] + r.stderr[-2000:]
    rows = json.loads(out.read_text())
    assert len(rows) > 1000, f"the collection found {len(rows)} tests: {r.stdout[-2000:]}"
    twice = {t: names for t, names in rows.items() if len(names) > 1}
    never = sorted(t for t, names in rows.items() if not names)
    assert not twice, f"{len(twice)} tests run in more than one tier: {dict(list(twice.items())[:20])}"
    assert not never, f"{len(never)} tests run in no tier: {never[:20]}"
