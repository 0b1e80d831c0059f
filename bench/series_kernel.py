"""Benchmark the series kernel build: from scratch (how setup built it before issue 43) vs incremental from the
cached lab kernel (how it builds it now), one after the other, same machine, same inputs.

    flock /tmp/numaforge-kbuild.lock .venv/bin/python bench/series_kernel.py [--work DIR] [--only incremental]

Both builds go into DIR (default: a new directory under /tmp), never into the cache: the cached lab kernel is
only read (the incremental build copies its tree) and the cached series kernel is not touched. Needs the latest
backport of the series (`invoke backport`) and the cached lab kernel (setup). Prints one JSON document with each
build's seconds (the incremental one split into copy and make), the units compiled and the load average before
and after each; docs/BENCHMARKS.md ("The series kernel") records the numbers and this command. DIR is removed
at the end unless --keep.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from numaforge.kernel import backport, labkernel


def compiled(log: Path, since: int) -> int:
    """C/assembler units compiled after byte offset `since` of a build log."""
    text = log.read_bytes()[since:].decode(errors="replace")
    return len(re.findall(r"^\s+(?:CC|AS)\s+(?!/)\S+\.o$", text, re.M))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, help="directory for the two builds (default: new under /tmp)")
    ap.add_argument("--only", choices=["scratch", "incremental"], help="run one of the two")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args(argv)
    bp = backport.latest(backport.DEFAULT_SERIES, base_version="5.10.262")
    if bp is None:
        print("run `invoke backport` first", file=sys.stderr)
        return 2
    work = args.work or Path(tempfile.mkdtemp(prefix="numaforge-series-bench-"))
    quiet = lambda m: print(f"{time.strftime('%H:%M:%S')} {m}", file=sys.stderr, flush=True)
    lab_ref = labkernel.SourceRef(bp.tree, bp.base_commit, bp.source_hash)
    lab = labkernel.lab_kernel(log=quiet, source=lab_ref)
    tree_id = subprocess.run(
        ["git", "-C", str(bp.tree), "rev-parse", f"{bp.result_commit}^{{tree}}"], capture_output=True, text=True
    ).stdout.strip()
    series_ref = labkernel.SourceRef(bp.tree, bp.result_commit, f"{bp.source_hash}+series-tree:{tree_id}")
    out: dict = {"lab_key": lab.key, "work": str(work), "cpus": os.cpu_count(), "builds": {}}
    for name in ("incremental", "scratch"):
        if args.only and name != args.only:
            continue
        root = work / name
        root.mkdir(parents=True, exist_ok=True)
        load0 = os.getloadavg()
        t = time.monotonic()
        if name == "scratch":
            inputs = labkernel._inputs(None, quiet, None, series_ref)
            inputs.update(key="bench-scratch", root=root)
            lk = labkernel._build(**inputs, log=quiet)
        else:
            inputs = labkernel._inputs(None, quiet, None, lab_ref)
            lk = labkernel._build_incremental("bench-incremental", root, lab, lab_ref, series_ref, inputs, quiet)
        secs = round(time.monotonic() - t, 1)
        st = json.loads((root / labkernel.STATE).read_text())
        out["builds"][name] = {
            "seconds": secs,
            "copy_seconds": st.get("copy_seconds"),
            "make_seconds": st.get("make_seconds"),
            "units_compiled": compiled(root / "build.log", 0),
            "load_before": [round(x, 2) for x in load0],
            "load_after": [round(x, 2) for x in os.getloadavg()],
            "feature_in_vmlinux": b"NUMA_PREFER_LOCAL" in lk.vmlinux.read_bytes(),
        }
    b = out["builds"]
    if "scratch" in b and "incremental" in b:
        out["ratio"] = round(b["scratch"]["seconds"] / b["incremental"]["seconds"], 1)
    print(json.dumps(out, indent=1))
    if not args.keep and not args.work:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
