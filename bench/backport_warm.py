"""Benchmark: `backport` warm run vs cold run on a real linux-source-5.10 tarball (ratio, not a test).

Cold = fresh cache and build dirs: import the tarball into git, git am, compile check (make defconfig +
prepare + touched objects) per compiler. Warm = the same call again: no import, no git am, no make.
The tarball comes from the Debian package already cached by scripts/setup.d/20-kernel-toolchain.sh.

    .venv/bin/python bench/backport_warm.py [--version 5.10.262-1] [--warm-runs 3] [--no-compile-check]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", default="5.10.262-1")
    ap.add_argument("--warm-runs", type=int, default=3)
    ap.add_argument("--no-compile-check", action="store_true")
    args = ap.parse_args()

    from numaforge.kernel import source

    tarball, _ = source.debian_tarball("linux-source-5.10", args.version)  # shared cache: download once

    scratch = Path(tempfile.mkdtemp(prefix="numaforge-bench-"))
    os.environ["NUMAFORGE_CACHE"] = str(scratch / "cache")
    os.environ["NUMAFORGE_BUILD"] = str(scratch / "build")
    from numaforge.kernel.backport import backport

    try:
        t0 = time.monotonic()
        cold = backport(str(tarball), compile_check=not args.no_compile_check)
        cold_s = time.monotonic() - t0
        warm = []
        for _ in range(args.warm_runs):
            t0 = time.monotonic()
            res = backport(str(tarball), compile_check=not args.no_compile_check)
            warm.append(time.monotonic() - t0)
            assert res.status == "unchanged" and res.result_commit == cold.result_commit
            assert not res.manifest["source_imported"]
        warm_s = statistics.median(warm)
        print(
            json.dumps(
                {
                    "bench": "backport_warm",
                    "base": cold.base_version,
                    "compile_check": not args.no_compile_check,
                    "cold_s": round(cold_s, 1),
                    "warm_median_s": round(warm_s, 2),
                    "warm_runs": [round(w, 2) for w in warm],
                    "warm_over_cold": round(warm_s / cold_s, 4),
                },
                indent=1,
            )
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
