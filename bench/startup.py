"""Benchmark: process start of the task surface (issue 18), this revision beside another one.

    .venv/bin/python bench/startup.py [--baseline REV] [--rounds 10] [--json out.json] [--workdir DIR]

Each revision (HEAD, and --baseline REV if given) is exported with `git archive` twice into a scratch
directory: once as git leaves it (no bytecode: every start compiles numaforge from source, which is what a
checkout does with PYTHONDONTWRITEBYTECODE=1 set) and once with its bytecode written (compileall, what
scripts/setup.d/70-bytecode.sh does). Every child runs with PYTHONDONTWRITEBYTECODE=1, so nothing is written
while measuring, and with the checkout first on sys.path (the venv's editable install points at this
checkout). The venv's own packages are the same for every variant.

Per variant and round, measured as a user runs it (`python -m invoke ...` from the checkout):
  invoke --list, invoke bios-plan --help and `python -c "import tasks"`: wall time and peak RSS of the
  process (ru_maxrss from wait4, like `/usr/bin/time -f %M`); the number of modules `import tasks` leaves
  in sys.modules; the total of `python -X importtime -c "import tasks"` (its top-level entries). The floor
  (`python -c "import invoke, rich..."`, the same in every variant) is what no change to numaforge removes.
Rounds are interleaved (every variant once per round, the order rotating), so a change of machine load hits
all of them alike; medians are printed with min-max, and the load average before and after.
HEAD means committed work: the script says so when numaforge/ or tasks.py have uncommitted changes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bios_scaling import run_measured  # noqa: E402
from bmc_farm import ROOT  # noqa: E402

COMMANDS = {
    "invoke --list": ["-m", "invoke", "--list"],
    "invoke bios-plan --help": ["-m", "invoke", "bios-plan", "--help"],
    "import tasks": ["-c", "import tasks"],
    # the floor under every task: the interpreter, invoke and the rich parts every task prints with
    "floor: import invoke, rich": ["-c", "import invoke, rich.console, rich.table, rich.progress"],
}
COUNT = "import sys, tasks; print(len(sys.modules))"


def export(rev: str, dest: Path, compiled: bool) -> Path:
    """`git archive REV` unpacked into DEST; with compiled, its bytecode written as setup does."""
    shutil.rmtree(dest, ignore_errors=True)  # a --workdir is scratch: start clean
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    if compiled:
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", "-j", "0", "numaforge", "bench", "tasks.py"],
            cwd=dest,
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return dest


def child_env(checkout: Path) -> dict:
    return {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(checkout), "COLUMNS": "120"}


def python_in(checkout: Path, *argv: str) -> subprocess.CompletedProcess:
    """`python ARGV...` run from CHECKOUT (its numaforge first on sys.path); must exit 0."""
    return subprocess.run(
        [sys.executable, *argv], cwd=checkout, env=child_env(checkout), capture_output=True, text=True, check=True
    )


def check_import_source(checkout: Path) -> None:
    out = python_in(checkout, "-c", "import numaforge; print(numaforge.__file__)").stdout.strip()
    if not Path(out).resolve().is_relative_to(checkout.resolve()):
        sys.exit(f"startup: {checkout} imports numaforge from {out}, not from itself")


def importtime_total(checkout: Path) -> float:
    """Seconds `python -X importtime -c "import tasks"` reports for its top-level imports."""
    err = python_in(checkout, "-X", "importtime", "-c", "import tasks").stderr
    total = 0
    for line in err.splitlines():
        if not line.startswith("import time:"):
            continue
        _, cumulative, name = line.split("|")
        if cumulative.strip().isdigit() and not name.startswith("   "):  # top level: one leading space only
            total += int(cumulative)
    return total / 1e6


def module_count(checkout: Path) -> int:
    return int(python_in(checkout, "-c", COUNT).stdout)


def med(xs: list[float]) -> str:
    return f"{statistics.median(xs):.3f} ({min(xs):.3f}-{max(xs):.3f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", help="git revision to measure beside HEAD (e.g. main, a commit)")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--workdir", help="scratch directory (default: a new temporary one, removed at the end)")
    ap.add_argument("--json")
    args = ap.parse_args()

    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", "numaforge", "tasks.py"], cwd=ROOT, capture_output=True, text=True
    ).stdout
    if dirty:
        print("startup: numaforge/ or tasks.py have uncommitted changes; HEAD is measured without them")
    revs = {"HEAD": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                   check=True).stdout.strip()}
    if args.baseline:
        revs[args.baseline] = subprocess.run(["git", "rev-parse", "--short", args.baseline], cwd=ROOT,
                                             capture_output=True, text=True, check=True).stdout.strip()
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="numaforge-startup-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        variants: dict[str, Path] = {}
        for label, sha in revs.items():
            for compiled in (False, True):
                name = f"{label} ({sha}), {'bytecode' if compiled else 'source'}"
                variants[name] = export(sha, work / f"{sha}-{'pyc' if compiled else 'src'}", compiled)
                check_import_source(variants[name])
        load_before = os.getloadavg()
        times: dict[str, dict[str, list[float]]] = {v: {c: [] for c in COMMANDS} for v in variants}
        rss: dict[str, dict[str, list[float]]] = {v: {c: [] for c in COMMANDS} for v in variants}
        itime: dict[str, list[float]] = {v: [] for v in variants}
        names = list(variants)
        for r in range(args.rounds):
            order = names[r % len(names):] + names[: r % len(names)]
            for v in order:
                for cmd, argv in COMMANDS.items():
                    dt, peak, code = run_measured([sys.executable, *argv], child_env(variants[v]), work / "last.log",
                                                  cwd=variants[v])
                    if code != 0:
                        sys.exit(f"startup: {v}: {cmd} exited {code}: {(work / 'last.log').read_text()[-2000:]}")
                    times[v][cmd].append(dt)
                    rss[v][cmd].append(peak)
                itime[v].append(importtime_total(variants[v]))
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
        load_after = os.getloadavg()
        modules = {v: module_count(p) for v, p in variants.items()}
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)

    print(f"\nprocess start, {args.rounds} interleaved rounds; load average before {load_before[0]:.2f} "
          f"{load_before[1]:.2f} {load_before[2]:.2f}, after {load_after[0]:.2f} {load_after[1]:.2f} "
          f"{load_after[2]:.2f}; {os.cpu_count()} CPUs; median (min-max)")
    for v in variants:
        print(f"\n{v}: import tasks leaves {modules[v]} modules in sys.modules; "
              f"-X importtime total {med(itime[v])} s")
        for cmd in COMMANDS:
            print(f"  {cmd:<26} {med(times[v][cmd])} s   peak RSS {statistics.median(rss[v][cmd]):.0f} MiB")
    if args.baseline:
        before = f"{args.baseline} ({revs[args.baseline]}), source"
        after = f"HEAD ({revs['HEAD']}), bytecode"
        print(f"\n{before} -> {after} (what a checkout runs before and after setup):")
        for cmd in COMMANDS:
            b, a = statistics.median(times[before][cmd]), statistics.median(times[after][cmd])
            print(f"  {cmd:<26} {b:.3f} s -> {a:.3f} s ({b / a:.1f}x)")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({
            "rounds": args.rounds, "revisions": revs, "load_before": load_before, "load_after": load_after,
            "seconds": times, "peak_rss_mib": rss, "importtime_s": itime, "modules": modules,
        }, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
