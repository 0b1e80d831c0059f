"""bench/numa_effect_power.py (issue 42 item 6): the exact p-values and power the docs quote, from the stored
study files. Pure: reads docs/numa-effect/study/*.json, writes nothing there."""

from __future__ import annotations

import math
import random
import signal
import subprocess
import sys
from pathlib import Path

import benchscripts
import pytest

from numaforge.measure import decision, paired, study

ROOT = Path(__file__).resolve().parents[1]
EVERY_STUDY = sorted((ROOT / "docs" / "numa-effect" / "study").glob("*.json"))


def _load():
    return benchscripts.load("numa_effect_power")


power = _load()
STUDIES = power.finished_studies()  # the studies the table covers (not amendment 8's matrix)


def test_the_table_covers_every_study_but_amendment_8s_matrix():
    """A study of amendment 8's cases (the configuration matrix, run in chunks) is judged by its own report at
    each case's registered n, its block counts and power are the amendment's: the table neither reads it nor
    quotes an interim pool of it. Every other study file is in the table."""
    matrix = [p for p in EVERY_STUDY if p not in STUDIES]
    assert sorted(STUDIES + matrix) == EVERY_STUDY
    for p in matrix:
        settings, _chunks, blocks = study.read(p)
        assert any(decision.registered_case(settings, case) for case in blocks), p.name
    for p in STUDIES:
        settings, _chunks, blocks = study.read(p)
        assert not any(decision.registered_case(settings, case) for case in blocks), p.name


def test_a_study_of_amendment_8s_cases_is_left_out_and_every_other_study_is_read(tmp_path):
    """The real class pilot (backplane4, --pairs classes: amendment 8's registered cases) beside copies of the
    stored studies: the table's set is the stored studies alone."""
    for p in EVERY_STUDY:
        (tmp_path / p.name).write_bytes(p.read_bytes())
    pilot = ROOT / "docs" / "numa-effect" / "pilot" / "probe-backplane4-classes-pilot.json"
    (tmp_path / "matrix.json").write_bytes(pilot.read_bytes())
    assert [p.name for p in power.finished_studies(tmp_path)] == [p.name for p in STUDIES]


@pytest.mark.parametrize("n", range(paired.MIN_BLOCKS, 21))
def test_exact_p_is_the_reports_p_where_the_report_enumerates(n):
    rng = random.Random(n)
    for _ in range(5):
        d = [rng.choice([-3, -1, 0, 0.5, 2, 4]) for _ in range(n)]
        if any(d):
            assert power.exact_sign_flip_p(d) == pytest.approx(paired.sign_flip_p(d))


def test_exact_p_of_twenty_blocks_all_one_way_is_two_in_two_to_the_twenty_not_the_monte_carlo_floor():
    d = [1.0 + k / 10 for k in range(20)]
    assert power.exact_sign_flip_p(d) == 2 / 2**20
    assert paired.sign_flip_p(d) == 2 / 2**20  # what the reports print (issue 42: no longer the floor, 5e-05)


def test_power_and_blocks_needed_move_the_right_way():
    assert power.power_at(20, 1.0, 1.0) > power.power_at(20, 2.0, 1.0) > power.power_at(5, 2.0, 1.0)
    n80 = power.blocks_needed(2.0, 1.0)
    assert power.power_at(round(n80), 2.0, 1.0) == pytest.approx(0.80, abs=0.02)
    assert power.blocks_needed(2.0, 1.0, mean=1.5) == float("inf")


@pytest.fixture(scope="module")
def study_rows():
    before = {p: p.read_bytes() for p in STUDIES}
    rows = [r for p in STUDIES for r in power.rows(p)]
    return before, rows


def test_every_study_is_read_and_every_study_file_is_left_unchanged(study_rows):
    before, rows = study_rows
    assert {r["study"] for r in rows} == {p.name for p in STUDIES}
    assert all(0 < r["p_exact"] <= 1 for r in rows)
    assert {p: p.read_bytes() for p in STUDIES} == before


def test_the_committed_table_is_what_the_script_prints(study_rows):
    """docs/numa-effect/power.md is regenerated, not edited: the numbers the docs quote come from here."""
    _before, rows = study_rows
    assert (ROOT / "docs" / "numa-effect" / "power.md").read_text() == power.markdown(rows)


PILOT = ROOT / "docs" / "numa-effect" / "pilot" / "probe-backplane4-p3-s0-pilot.json"


def test_pilot_block_counts_follow_amendment_8s_formula_for_every_arm_and_endpoint():
    """--pilot: per arm and non-inferiority endpoint ((z.95 + z.80) * sd / margin)**2 from the paired SDs, and per
    case max(20, the largest), at most 100; the stored P = 3, S = 0 pilot file is read, not written."""
    before = PILOT.read_bytes()
    prows = power.pilot_rows(PILOT)
    assert PILOT.read_bytes() == before
    assert {(r["arm"], r["key"]) for r in prows} == {
        (a, k) for a in ("winner", "alt-closer-or-gain") for k in power.NI_MARGINS
    }
    for r in prows:
        assert r["n"] == 5 and r["blocks"] == math.ceil(((power.Z95 + power.Z80) * r["sd"] / r["margin"]) ** 2)
    returns = next(r for r in prows if r["arm"] == "alt-closer-or-gain" and r["key"] == "lb_returns_per_min")
    assert returns["margin"] == 0.25 and returns["sd"] == pytest.approx(0.446, abs=0.001) and returns["blocks"] == 20
    assert power.case_blocks(prows) == {(PILOT.name, "source spare"): power.MAX_CASE_BLOCKS}  # 641 for 0001's locality
    assert power.case_blocks([{**returns, "blocks": 3}]) == {(PILOT.name, "source spare"): power.MIN_CASE_BLOCKS}


def test_numa_effect_stops_its_vm_on_sigterm_and_sighup(tmp_path):
    """bench/numa_effect.py under `timeout` (SIGTERM) left qemu running: the signal killed Python before its
    `finally: vm.down(...)`. With stop_on_signals the signal is an exception, so the finally runs and the exit
    code is the signal's."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        marker = tmp_path / f"down-{sig.name}"
        code = (
            "import os, signal, sys; sys.path.insert(0, 'tests'); import benchscripts\n"
            "benchscripts.load('numa_effect').stop_on_signals()\n"
            f"try:\n    os.kill(os.getpid(), {int(sig)}); signal.pause()\n"
            f"finally:\n    open({str(marker)!r}, 'w').write('vm.down ran')\n"
        )
        r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert r.returncode == 128 + sig, r.stderr
        assert marker.read_text() == "vm.down ran"
