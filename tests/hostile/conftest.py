"""The hostile tier prints the campaign's tally (harness.Tally) at the end of its pytest output, from each
case's recorded judgement (test_campaign.test_case's ``campaign`` property; xdist carries it to the controller).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from harness import Case, Tally  # noqa: E402


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    tally, expected = Tally(), []
    for reports in terminalreporter.stats.values():
        for rep in reports:
            if getattr(rep, "when", None) != "call":
                continue
            for name, value in getattr(rep, "user_properties", ()):
                if name != "campaign":
                    continue
                if getattr(rep, "wasxfail", None) is not None:  # waits for another branch's fix: said, not hidden
                    expected.append(f"  XFAIL {value['id']}: {', '.join(value['bad'])} ({rep.wasxfail})")
                    continue
                tally.add(Case(value["id"], value["area"], run=None, message=""), list(value["bad"]))
    if tally.total or expected:
        terminalreporter.write_sep("=", "hostile campaign tally (docs/RELIABILITY.md)")
        terminalreporter.write_line(tally.render())
        for line in expected:
            terminalreporter.write_line(line)
