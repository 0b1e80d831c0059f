"""Benchmark: loading a large Ansible INI inventory (one range line) and applying a --limit pattern.

Writes `[gpu] gpu[00001:N] ansible_user=ops` plus a parent group with vars to a temporary directory, then times
numaforge's load_inventory() and Inventory.select(limit=...) (best of --runs), and, with --ansible, the same
inventory through `ansible-inventory --list` for comparison. Prints one JSON line.

    .venv/bin/python bench/inventory_load.py [--hosts 10000] [--runs 3] [--ansible]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from numaforge.inventory.loader import load_inventory  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--ansible", action="store_true", help="also time ansible-inventory --list")
    args = ap.parse_args()
    width = len(str(args.hosts))
    with tempfile.TemporaryDirectory(prefix="nf-invbench-") as d:
        path = Path(d) / "hosts.ini"
        path.write_text(f"[gpu]\ngpu[{'1'.zfill(width)}:{args.hosts}] ansible_user=ops\n"
                        "[fra:children]\ngpu\n[fra:vars]\nnumaforge_bmc_password=env:P\n")
        loads, limits = [], []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            inv = load_inventory(path)
            loads.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            selected = inv.select(limit="fra:!gpu*1")
            limits.append(time.perf_counter() - t0)
        out = {"hosts": len(inv.hosts), "load_s": round(min(loads), 3), "limit_s": round(min(limits), 3),
               "limit_selected": len(selected)}
        if args.ansible:
            cmd = shutil.which("ansible-inventory", path=str(Path(sys.executable).parent))
            if cmd is None:
                raise SystemExit("ansible-inventory is not in the venv: run bash scripts/setup.sh")
            t0 = time.perf_counter()
            subprocess.run([cmd, "-i", str(path), "--list"], cwd=d, check=True, capture_output=True)
            out["ansible_inventory_list_s"] = round(time.perf_counter() - t0, 3)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
