"""The fault campaign (docs/RELIABILITY.md): every case must fail cleanly -- right exit code, a message that
says what/where/how, no traceback, no write to a BMC, no secret in any output. `python tests/hostile/tally.py`
prints the tally by category."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.hostile  # its own tier in scripts/test.sh (-m hostile); no other tier's expression takes it

sys.path.insert(0, str(Path(__file__).parent))
import cases_bmc  # noqa: E402
import cases_cli  # noqa: E402
import cases_h25  # noqa: E402
import cases_input  # noqa: E402
from harness import Case  # noqa: E402

CASES: list[Case] = cases_input.cases() + cases_cli.cases() + cases_bmc.cases() + cases_h25.cases()


def test_the_campaign_is_large_enough():
    assert len(CASES) >= 300, len(CASES)
    assert len({c.id for c in CASES}) == len(CASES), "case ids must be unique"


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, id=c.id) for c in CASES],
)
def test_case(case: Case, tmp_path, monkeypatch, record_property):
    monkeypatch.setenv(cases_input.PW_VAR, cases_input.PASSWORD)
    out = case.run(tmp_path)
    bad = case.judge(out)
    record_property("campaign", {"id": case.id, "area": case.area, "bad": bad})  # conftest.py's tally
    assert bad == [], f"{case.id}: exit {out.code}\n{out.output[:1500]}"
