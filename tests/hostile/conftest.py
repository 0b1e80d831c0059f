"""The hostile tier prints the campaign's tally (harness.Tally) at the end of its pytest output, from each
case's recorded judgement (test_campaign.test_case's ``campaign`` property; xdist carries it to the controller),
and the generated option campaign's counts (test_generated_options.py's ``generated_options`` property).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from harness import Case, Tally


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    tally = Tally()
    counts = []  # test_generated_options.py's "tasks x options x values" line
    for reports in terminalreporter.stats.values():
        for rep in reports:
            if getattr(rep, "when", None) != "call":
                continue
            for name, value in getattr(rep, "user_properties", ()):
                if name == "generated_options":
                    counts.append(value)
                if name != "campaign":
                    continue
                tally.add(Case(value["id"], value["area"], run=None, message=""), list(value["bad"]))
    if tally.total:
        terminalreporter.write_sep("=", "hostile campaign tally (docs/RELIABILITY.md)")
        terminalreporter.write_line(tally.render())
    for line in counts:
        terminalreporter.write_line(line)
