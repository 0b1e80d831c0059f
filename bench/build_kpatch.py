"""Benchmark build-kpatch for the lab target: cold, warm edit-rebuild and no-op, as ratios.

    .venv/bin/python bench/build_kpatch.py [--cold]

- cold: the lab kernel prebuild (read from the cache's state.json: build_seconds of the run that built it,
  or measured now with --cold, which deletes nothing but builds a missing key) plus one kpatch-build;
- edit-rebuild: kpatch-build on the prebuilt tree for a changed series (forced rebuild of the same series:
  the same work as after editing the patch: original build is a no-op, fair.o + vmlinux relinked, diff,
  module, restore);
- no-op: build-kpatch with unchanged inputs (artifact cache hit).
Prints one JSON document; docs/BENCHMARKS.md ("build-kpatch") records the numbers and this command.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from numaforge.kernel import backport, labkernel
from numaforge.kernel import kpatch as kp


def main(argv: list[str]) -> int:
    bp = backport.latest(backport.DEFAULT_SERIES, base_version="5.10.262")
    if bp is None:
        print("run `invoke backport` first", file=sys.stderr)
        return 2
    quiet = lambda m: None
    t = time.monotonic()
    lk = kp.lab_kernel(log=quiet)
    lab_lookup = time.monotonic() - t
    state = json.loads((lk.root / labkernel.STATE).read_text())
    cold_kernel = lk.build_seconds if lk.built_now else state.get("build_seconds")

    t = time.monotonic()
    res = kp.build_kpatch("lab", bp=bp, log=quiet, options=kp.BuildOptions(force=True))
    edit = time.monotonic() - t
    stages = {s["stage"]: s.get("seconds") for s in res.manifest["stages"]}

    t = time.monotonic()
    again = kp.build_kpatch("lab", bp=bp, log=quiet)
    noop = time.monotonic() - t
    assert again.status == "unchanged"

    cold = (cold_kernel or 0) + edit
    out = {
        "lab_kernel_prebuild_s": cold_kernel,
        "lab_kernel_cached_lookup_s": round(lab_lookup, 2),
        "cold_s": round(cold, 1),
        "edit_rebuild_s": round(edit, 1),
        "edit_rebuild_stages_s": stages,
        "noop_s": round(noop, 2),
        "ratio_cold_over_edit": round(cold / edit, 1) if edit else None,
        "ratio_edit_over_noop": round(edit / noop, 1) if noop else None,
        "patched_functions": [f["function"] for f in res.manifest["patched_functions"]],
    }
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
