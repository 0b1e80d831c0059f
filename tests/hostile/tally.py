"""Print the fault campaign's tally by category (docs/RELIABILITY.md).

    .venv/bin/python tests/hostile/tally.py          # every case (BMC cases start simulators: ~1-2 min)
    .venv/bin/python tests/hostile/tally.py --core   # only the cases that need no peer

Exit status 0 only when every category is 0. The same cases run under pytest: tests/hostile/test_campaign.py.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import cases_bmc
import cases_cli
import cases_h25
import cases_input
from harness import Tally


def main(argv: list[str]) -> int:
    core_only = "--core" in argv
    os.environ[cases_input.PW_VAR] = cases_input.PASSWORD
    os.environ.setdefault("NUMAFORGE_REDFISH_CACHE", tempfile.mkdtemp(prefix="faults-redfish-cache-"))
    cases = cases_input.cases() + cases_cli.cases() + cases_bmc.cases() + cases_h25.cases()
    if core_only:
        cases = [c for c in cases if c.tier == "core"]
    tally = Tally()
    t0 = time.monotonic()
    for case in cases:
        with tempfile.TemporaryDirectory(prefix="fault-") as tmp:
            out = case.run(Path(tmp))
            bad = case.judge(out)
            tally.add(case, bad)
    print(tally.render())
    print(f"({time.monotonic() - t0:.0f} s)")
    return 0 if not tally.failures else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
