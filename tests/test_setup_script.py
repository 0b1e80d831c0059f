"""scripts/setup.sh's arguments: none (what the tasks need: the README's first command) or --tests (the test
suite's part too: scripts/test.sh); anything else stops it before it changes anything. Which steps are the test
suite's only is read from each step's header (issue 43); the fresh root (scripts/fresh-root.sh) runs both."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARK = "# setup: the test suite's only"


def test_an_unknown_argument_is_refused_with_the_usage_before_anything_runs():
    r = subprocess.run(["bash", str(ROOT / "scripts/setup.sh"), "--test"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "unknown argument '--test'" in r.stderr and "[--tests]" in r.stderr
    assert r.stdout == ""  # no step started, no apt, no venv


def test_the_test_suite_runs_setup_with_its_part_and_the_readme_without():
    test_sh = (ROOT / "scripts/test.sh").read_text()
    assert "bash scripts/setup.sh --tests || exit 1" in test_sh
    readme = (ROOT / "README.md").read_text()
    first = readme[readme.index("```sh") :].splitlines()[1]
    assert first.startswith("bash scripts/setup.sh && "), first


def test_a_step_marked_as_the_test_suites_is_one_setup_skips_by_that_exact_line():
    """The marker setup.sh greps for (grep -qx) is a whole line in each marked step, so a reworded comment
    cannot silently make a test-only step run for the main job or the other way round."""
    setup = (ROOT / "scripts/setup.sh").read_text()
    assert f'grep -qx "{MARK}"' in setup
    marked = [p.name for p in sorted((ROOT / "scripts/setup.d").glob("*.sh")) if MARK in p.read_text().splitlines()]
    assert marked == ["60-bench.sh"], marked
