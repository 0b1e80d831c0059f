"""Benchmark: `invoke bios-plan` at N = 10, 50, 200 simulated BMCs: wall time, peak memory and open files.

    .venv/bin/python bench/bios_scaling.py [--sizes 10,50,200] [--forks 8] [--flavour generic] [--sim-procs 2]
                                           [--json out.json]

For each N: N fresh simulated BMCs (bench/bmc_farm.py, TLS on 127.0.0.1, in helper processes), one inventory,
then `invoke bios-plan -i inv.yaml --forks F --json report.json` as a user runs it. Measured per N: wall time,
peak resident memory of the bios-plan process (ru_maxrss from wait4: the process alone, simulators excluded),
its peak of open files (/proc/PID/fd, sampled every 50 ms), the simulators' start time, resident memory, open files
and threads (their processes together, /proc),
requests per BMC counted by the simulators, registry fetches. Growth is shown per host and relative to the
smallest N. Plan reads only: the benchmark checks that no BMC saw a PATCH.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bios_fleet import PW_VAR, write_numaforge_inventory
from bmc_farm import ROOT, Farm, per_host_summary

TIMEOUT = 1800


PEAK_FDS = [0]  # the most open files (/proc/PID/fd) of the last measured process, sampled every 50 ms


def _sample_fds(pid: int, done: threading.Event) -> None:
    PEAK_FDS[0] = 0
    while not done.wait(0.05):
        try:
            PEAK_FDS[0] = max(PEAK_FDS[0], len(os.listdir(f"/proc/{pid}/fd")))
        except OSError:
            return


def farm_footprint(farm: Farm) -> dict:
    """The simulators' processes together: resident MiB, open files and threads (/proc), after they started."""
    rss = files = threads = 0
    for p in farm.procs:
        status = Path(f"/proc/{p.pid}/status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        rss += int(fields["VmRSS"].split()[0]) // 1024
        threads += int(fields["Threads"])
        files += len(os.listdir(f"/proc/{p.pid}/fd"))
    return {"sim_rss_mib": rss, "sim_open_files": files, "sim_threads": threads}


def run_measured(argv: list[str], env: dict, log: Path, cwd: Path = ROOT) -> tuple[float, int, int]:
    """(seconds, peak RSS in MiB, exit status) of one child process; killed after TIMEOUT seconds. Its peak of
    open files is sampled meanwhile (PEAK_FDS)."""
    with open(log, "w") as out:
        t0 = time.monotonic()
        p = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        watchdog = threading.Timer(TIMEOUT, p.kill)
        watchdog.start()
        done = threading.Event()
        sampler = threading.Thread(target=_sample_fds, args=(p.pid, done), daemon=True)
        sampler.start()
        try:
            _pid, status, usage = os.wait4(p.pid, 0)
        finally:
            watchdog.cancel()
            done.set()
            sampler.join()
        dt = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    return dt, usage.ru_maxrss // 1024, p.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10,50,200")
    ap.add_argument("--forks", type=int, default=8)
    ap.add_argument("--flavour", default="generic")
    ap.add_argument("--profile", default="epyc-gpudirect")
    ap.add_argument("--sim-procs", type=int, default=2)
    ap.add_argument(
        "--shared-ca",
        action="store_true",
        help="the BMCs share one CA and the inventory states it once (defaults:), as a site's inventory does",
    )
    ap.add_argument("--json")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]

    work = Path(tempfile.mkdtemp(prefix="numaforge-bench-scaling-"))
    pw = "Bench-" + secrets.token_urlsafe(12)
    env = {**os.environ, PW_VAR: pw, "COLUMNS": "200"}
    results = {
        "forks": args.forks,
        "shared_ca": args.shared_ca,
        "flavour": args.flavour,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "cpus": os.cpu_count(),
        "loadavg_start": os.getloadavg(),
        "sizes": [],
    }
    try:
        with Farm(procs=args.sim_procs) as farm:
            # baseline: the same command on one host (process start, imports, one BMC)
            for n in [1] + sizes:
                t_farm = time.monotonic()
                bmcs = farm.start(n, args.flavour, pw, tls_dir=str(work / "tls") if args.shared_ca else "")
                farm_s, farm_use = round(time.monotonic() - t_farm, 1), farm_footprint(farm)
                inv = work / f"inv-{n}.yaml"
                write_numaforge_inventory(inv, bmcs, args.profile, shared=args.shared_ca)
                report = work / f"plan-{n}.json"
                dt, rss, rc = run_measured(
                    [
                        sys.executable,
                        "-m",
                        "invoke",
                        "bios-plan",
                        "-i",
                        str(inv),
                        "--forks",
                        str(args.forks),
                        "--json",
                        str(report),
                    ],
                    {**env, "NUMAFORGE_REDFISH_CACHE": str(work / f"redfish-{n}")},
                    work / f"plan-{n}.log",
                )  # each size starts with no discovery cache
                doc = json.loads(report.read_text()) if report.exists() else {"hosts": [], "data": {}}
                ok = sum(1 for h in doc["hosts"] if h["status"] in ("ok", "unchanged"))
                q = per_host_summary(farm.counts())
                if q["patch_total"]:
                    raise SystemExit(f"bios-plan wrote to a BMC (PATCH seen at N={n})")
                rec = {
                    "n": n,
                    "seconds": round(dt, 2),
                    "peak_rss_mib": rss,
                    "peak_open_files": PEAK_FDS[0],
                    "rc": rc,
                    "inventory_bytes": inv.stat().st_size,
                    "hosts_planned": ok,
                    "requests_per_host_mean": q["requests_mean"],
                    "requests_total": q["requests_total"],
                    "registry_fetches": doc.get("data", {}).get("registry_fetches"),
                    "sim_start_seconds": farm_s,
                    **farm_use,
                    "loadavg_after": os.getloadavg(),
                }
                results["sizes"].append(rec)
                print(
                    f"  N={n:4d}: {dt:7.2f} s  peak RSS {rss:4d} MiB  open files {PEAK_FDS[0]}  rc={rc}  "
                    f"planned {ok}/{n}  requests/host "
                    f"{q['requests_mean']}  registry fetches {rec['registry_fetches']}  simulators: started in "
                    f"{farm_s} s, {farm_use}  load {os.getloadavg()}",
                    flush=True,
                )
            results["simulator_errors"] = farm.errors()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results["loadavg_end"] = os.getloadavg()
    base = results["sizes"][0]
    print(f"\n{'N':>5} {'seconds':>8} {'s/host':>7} {'s/host beyond N=1':>18} {'peak MiB':>9} {'MiB over N=1':>13}")
    for r in results["sizes"]:
        extra = (r["seconds"] - base["seconds"]) / max(1, r["n"] - 1) if r["n"] > 1 else 0.0
        r["seconds_per_extra_host"] = round(extra, 3)
        print(
            f"{r['n']:>5} {r['seconds']:>8.2f} {r['seconds'] / r['n']:>7.3f} {extra:>18.3f} "
            f"{r['peak_rss_mib']:>9} {r['peak_rss_mib'] - base['peak_rss_mib']:>13}"
        )
    print(
        f"load average start {results['loadavg_start']}, end {results['loadavg_end']}; "
        f"simulator errors: {len(results['simulator_errors'])}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
