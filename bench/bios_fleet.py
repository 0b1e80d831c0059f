"""Benchmark: `invoke bios-apply` vs Ansible community.general.redfish_config SetBiosAttributes, side by side.

    .venv/bin/python bench/bios_fleet.py [--hosts 50] [--forks 8] [--flavour generic] [--sim-procs 2]
                                         [--rounds 1] [--load-procs 0] [--sweep 5,8,16,32,50]
                                         [--bmc-latency 0.05]
                                         [--json bench-bios-fleet.json]
    .venv/bin/python bench/bios_fleet.py --slow-bmcs 0.2,1.0 [--equal-forks 5,32] [--hosts 50] [--json ...]

N simulated BMCs (numaforge.lab.bmc, TLS on 127.0.0.1, in ``--sim-procs`` helper processes: bench/bmc_farm.py)
all get the same BIOS values:

1. desired values: `invoke bios-plan --host bmc000` (profile epyc-gpudirect) -> {attribute: desired}; nothing
   written. The same dict is Ansible's ``bios_attributes``.
2. first apply, fresh fleet each: `invoke bios-apply -i inv.yaml --all --forks F` and
   `ansible-playbook -f F` (one task: redfish_config category=Systems command=SetBiosAttributes,
   validate_certs=true, ca_path=<the BMC's CA>, username/password from an environment variable; everything else
   Ansible's defaults: linear strategy, connection local, python = this venv's). Rounds alternate the order.
   Then the same command again on the same fleet before any reboot ("again": the values are pending).
3. compliant fleet (current values == desired, nothing pending): the same two commands again. numaforge runs
   it twice: "compliant" with the discovery cache its first apply left (numaforge.bios.discovery: a re-run, as
   users check a fleet they applied) and "compliant-cold" with an empty one (a first run ever on this server).

numaforge's discovery cache (NUMAFORGE_REDFISH_CACHE) is a fresh directory per round, so each "first apply" starts
cold; "again" and "compliant" reuse it.

Both are timed as the user runs them (process start included). The simulators count every HTTP request, per BMC.
Prints wall times, Ansible/numaforge ratios and requests/PATCHes per host; ``--json`` writes everything.
Before each timed run the CPUs must have been 90 % idle over a second (at most 30 s of waiting; not under
``--load-procs``), so one tool does not inherit the previous run's stragglers; the idle share is printed with the
run. Every timed run prints the 1-minute load average at its end; ``--load-procs N`` keeps N cores busy for the whole
benchmark (the stated load of a "under load" run); ``--sweep`` adds first applies at other forks for both tools.
The simulators also count TLS connections per BMC and the sequential round trips each BMC saw (requests that
overlap in time count once: BMCSimulator.round_trips).

``--slow-bmcs 0.2,1.0`` (issue 29) replaces the rounds: for each per-request BMC latency, each tool runs first
apply, again and compliant at its default forks (numaforge's numaforge.defaults.FORKS_BMC, Ansible's 5) and at
each of ``--equal-forks`` (the same forks for both); one table per latency gives every phase's seconds and the
Ansible / numaforge ratio at the defaults and at each equal forks (a run both tools share is run once).
Targets (issue 8): >= 5x faster; <= 4 requests and 0 PATCH per compliant host. Issue 18: >= 8x in every phase on
a quiet machine, >= 5x under load. Issue 29: with 200 ms and 1 s BMCs, >= 8x at the defaults and >= 1.5x at
equal forks in every phase. Nothing here asserts them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bmc_farm import ROOT, Farm, per_host_summary

sys.path.insert(0, str(ROOT))
from numaforge.defaults import FORKS_BMC  # imports nothing: numaforge's BMC default forks

CACHE_VAR = "NUMAFORGE_REDFISH_CACHE"
PW_VAR = "NF_BENCH_BMC_PW"
VENV_BIN = Path(sys.executable).parent
TIMEOUT = 1800
ANSIBLE_FORKS = 5  # Ansible's default forks (ansible-config: DEFAULT_FORKS)
LAST_LOAD: list[float] = [0.0]  # 1-min load average when the last timed command ended
SETTLE = [True]  # wait for idle CPUs before each timed command (off under --load-procs: a stated load)
LAST_IDLE: list[float] = [1.0]  # the CPUs' idle share over the second before the last timed command


def _cpu_times() -> tuple[int, int]:
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return sum(fields), fields[3] + fields[4]  # all, idle + iowait


def settle(idle_share: float = 0.9, max_wait: float = 30.0) -> float:
    """Wait until the CPUs were at least ``idle_share`` idle over one second (the previous command's
    stragglers -- Ansible's workers exiting, the simulators' threads -- done), at most ``max_wait`` s, so the
    fixed order of the combinations does not hand one tool the previous one's load. The 1-minute load average
    is no guide: it lags by a minute. Returns the idle share of the last second."""
    deadline = time.monotonic() + max_wait
    while True:
        a0, i0 = _cpu_times()
        time.sleep(1.0)
        a1, i1 = _cpu_times()
        share = (i1 - i0) / max(1, a1 - a0)
        if share >= idle_share or time.monotonic() >= deadline:
            return round(share, 3)


def start_load(procs: int) -> list[subprocess.Popen]:
    """The stated load: ``procs`` processes that each keep one core busy (a pure-Python loop, as a compiler
    job would) for as long as the benchmark runs."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(procs)]


def write_numaforge_inventory(
    path: Path, bmcs: list[dict], profile: str, vendor: str = "auto", shared: bool = False
) -> None:
    # a fleet inventory states each BMC's vendor (inventory/example-fleet.yaml does); with `auto` every host
    # reads the service root to detect it (--vendor-auto measures that case). ``shared``: the BMCs share one CA
    # (Farm.start tls_dir) and the inventory says what every host shares once, in `defaults:` (as a site's
    # inventory of 10,000 hosts is written: one line per host, under the 4 MiB inventory limit)
    if shared:
        lines = [
            "version: 1",
            "defaults:",
            f"  bmc: {{username: admin, password: 'env:{PW_VAR}', ca_bundle: '{bmcs[0]['ca']}', vendor: {vendor}}}",
            "  hardware: {sockets: 2, gpus: ['0000:41:00.0'], nics: ['0000:81:00.0']}",
            f"  bios_profile: {profile}",
            "hosts:",
        ]
        lines += [f"  {b['name']}: {{bmc: {{url: '{b['url']}'}}}}" for b in bmcs]
        path.write_text("\n".join(lines) + "\n")
        return
    lines = ["version: 1", "hosts:"]
    for b in bmcs:
        lines += [
            f"  {b['name']}:",
            f"    bmc: {{url: '{b['url']}', username: admin, password: 'env:{PW_VAR}', ca_bundle: '{b['ca']}', "
            f"vendor: {vendor}}}",
            "    hardware: {sockets: 2, gpus: ['0000:41:00.0'], nics: ['0000:81:00.0']}",
            f"    bios_profile: {profile}",
        ]
    path.write_text("\n".join(lines) + "\n")


def write_ansible_inventory(path: Path, bmcs: list[dict]) -> None:
    hosts = {b["name"]: {"baseuri": b["url"].split("://", 1)[1], "bmc_ca": b["ca"]} for b in bmcs}
    doc = {
        "all": {"hosts": hosts, "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}
    }
    path.write_text(json.dumps(doc, indent=1))  # JSON is YAML


PLAYBOOK = (
    """\
- name: BIOS attributes through Redfish (community.general.redfish_config)
  hosts: all
  gather_facts: false
  tasks:
    - name: SetBiosAttributes
      community.general.redfish_config:
        category: Systems
        command: SetBiosAttributes
        bios_attributes: "{{ bios_attrs }}"
        baseuri: "{{ baseuri }}"
        username: admin
        password: "{{ lookup('ansible.builtin.env', '%s') }}"
        validate_certs: true
        ca_path: "{{ bmc_ca }}"
        timeout: 60
"""
    % PW_VAR
)


def run_timed(argv: list[str], env: dict, cwd: Path, log: Path) -> tuple[float, subprocess.CompletedProcess]:
    LAST_IDLE[:] = [settle() if SETTLE[0] else -1.0]
    t0 = time.monotonic()
    r = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    dt = time.monotonic() - t0
    LAST_LOAD[:] = [round(os.getloadavg()[0], 2)]
    log.write_text(
        f"$ {' '.join(argv)}\nrc={r.returncode} seconds={dt:.2f}\n--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}"
    )
    return dt, r


def numaforge_apply(work: Path, tag: str, inv: Path, forks: int, env: dict) -> dict:
    report = work / f"numaforge-{tag}.json"
    dt, r = run_timed(
        [
            sys.executable,
            "-m",
            "invoke",
            "bios-apply",
            "-i",
            str(inv),
            "--unverified",  # the simulator's registries carry values no public source shows (issue 39 item 5)
            "allow",
            "--all",
            "--forks",
            str(forks),
            "--json",
            str(report),
        ],
        env,
        ROOT,
        work / f"numaforge-{tag}.log",
    )
    doc = json.loads(report.read_text()) if report.exists() else {"hosts": []}
    statuses: dict[str, int] = {}
    for h in doc["hosts"]:
        statuses[h["status"]] = statuses.get(h["status"], 0) + 1
    return {
        "seconds": round(dt, 2),
        "rc": r.returncode,
        "statuses": statuses,
        "registry_fetches": doc.get("data", {}).get("registry_fetches"),
    }


RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def ansible_apply(work: Path, tag: str, inv: Path, play: Path, varsfile: Path, forks: int, env: dict) -> dict:
    dt, r = run_timed(
        [str(VENV_BIN / "ansible-playbook"), "-i", str(inv), str(play), "-f", str(forks), "-e", f"@{varsfile}"],
        env,
        work,
        work / f"ansible-{tag}.log",
    )
    statuses = {"changed": 0, "ok": 0, "failed": 0, "unreachable": 0}
    for _host, _ok, changed, unreach, failed in RECAP.findall(r.stdout):
        if int(failed):
            statuses["failed"] += 1
        elif int(unreach):
            statuses["unreachable"] += 1
        elif int(changed):
            statuses["changed"] += 1
        else:
            statuses["ok"] += 1
    return {"seconds": round(dt, 2), "rc": r.returncode, "statuses": statuses}


def desired_attributes(work: Path, bmcs: list[dict], profile: str, env: dict) -> dict:
    inv = work / "probe.yaml"
    write_numaforge_inventory(inv, bmcs[:1], profile)
    out = work / "probe-plan.json"
    r = subprocess.run(
        [sys.executable, "-m", "invoke", "bios-plan", "-i", str(inv), "--json", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if r.returncode not in (0,) or not out.exists():
        raise SystemExit(f"bios-plan on the probe BMC failed (rc {r.returncode}):\n{r.stdout}\n{r.stderr}")
    plan = json.loads(out.read_text())["hosts"][0]["data"]["plan"]
    return {i["attribute"]: i["desired"] for i in plan}


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument(
        "--forks",
        type=int,
        default=8,
        help=f"forks for both tools (kept equal; numaforge's BMC default is {FORKS_BMC}, Ansible's {ANSIBLE_FORKS})",
    )
    ap.add_argument("--flavour", default="generic", help="simulator flavour of every BMC (default generic)")
    ap.add_argument("--profile", default="epyc-gpudirect")
    ap.add_argument("--sim-procs", type=int, default=2, help="helper processes hosting the simulators")
    ap.add_argument("--rounds", type=int, default=1, help="repeat both phases; order alternates per round")
    ap.add_argument(
        "--vendor-auto",
        action="store_true",
        help="leave bmc.vendor at auto in numaforge's inventory (default: the flavour, as a fleet inventory states it)",
    )
    ap.add_argument(
        "--bmc-latency",
        type=float,
        default=0.0,
        help="seconds every simulated BMC waits before each answer (real BMCs take 10s to 100s of ms)",
    )
    ap.add_argument(
        "--load-procs",
        type=int,
        default=0,
        help="run this many busy processes (one core each) during the whole benchmark: a stated load",
    )
    ap.add_argument(
        "--sweep",
        default="",
        help="also run the first apply at each of these forks (comma list, e.g. 5,8,16,32,50) for both "
        "tools, to find each tool's own best setting",
    )
    ap.add_argument(
        "--slow-bmcs",
        default="",
        help="issue 29 mode instead of the rounds: for each of these BMC latencies (comma list of "
        "seconds, e.g. 0.2,1.0) every phase with both tools at their default forks (numaforge "
        f"{FORKS_BMC}, Ansible {ANSIBLE_FORKS}) and at equal forks (--equal-forks), ratio table",
    )
    ap.add_argument(
        "--equal-forks",
        default=f"{ANSIBLE_FORKS},{FORKS_BMC}",
        help="--slow-bmcs: the equal forks both tools also run at (comma list)",
    )
    ap.add_argument("--json", help="write all measurements here")
    ap.add_argument("--keep", action="store_true", help="keep the work dir (logs, inventories, reports)")
    return ap


def main() -> int:
    args = _parser().parse_args()
    if not (VENV_BIN / "ansible-playbook").exists():
        raise SystemExit("ansible-playbook not found next to this python; run scripts/setup.d/60-bench.sh")

    work = Path(tempfile.mkdtemp(prefix="numaforge-bench-bios-"))
    pw = "Bench-" + secrets.token_urlsafe(12)
    env = {
        **os.environ,
        PW_VAR: pw,
        "COLUMNS": "200",
        "ANSIBLE_HOME": str(work / "ansible-home"),
        "ANSIBLE_LOCAL_TEMP": str(work / "ansible-tmp"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_DEPRECATION_WARNINGS": "0",
    }
    env.pop("REQUESTS_CA_BUNDLE", None)
    play = work / "play.yml"
    play.write_text(PLAYBOOK)
    results: dict = {
        "hosts": args.hosts,
        "forks": args.forks,
        "flavour": args.flavour,
        "profile": args.profile,
        "sim_procs": args.sim_procs,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "cpus": os.cpu_count(),
        "loadavg_start": os.getloadavg(),
        "ansible": _ansible_version(),
        "rounds": [],
    }
    farm = Farm(procs=args.sim_procs)
    loaders = start_load(args.load_procs)
    results["load_procs"] = args.load_procs
    SETTLE[0] = not args.load_procs
    results["bmc_latency"] = args.bmc_latency
    try:
        bmcs = farm.start(args.hosts, args.flavour, pw, latency=args.bmc_latency)
        attrs = desired_attributes(work, bmcs, args.profile, {**env, CACHE_VAR: str(work / "redfish-plan")})
        results["attributes"] = attrs
        varsfile = work / "vars.json"
        varsfile.write_text(json.dumps({"bios_attrs": attrs}))
        print(
            f"{args.hosts} {args.flavour} BMCs, forks {args.forks}, {len(attrs)} attributes: "
            + ", ".join(f"{k}={v}" for k, v in attrs.items()),
            flush=True,
        )
        if args.slow_bmcs:
            slow_bmcs(results, args, farm, work, play, varsfile, env, pw)
        else:
            _rounds(results, args, farm, work, play, varsfile, env)
        results["simulator_errors"] = farm.errors()
    finally:
        for p in loaders:
            p.kill()
        farm.close()
    results["loadavg_end"] = os.getloadavg()
    (summarize_slow if args.slow_bmcs else summarize)(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
        print(f"wrote {args.json}")
    failed = _failed_runs(results)
    if failed:
        print("FAILED runs (their times do not count; see the logs with --keep): " + "; ".join(failed))
    if args.keep or failed:
        print(f"work dir kept: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


def _rounds(results, args, farm, work, play, varsfile, env) -> None:
    attrs = results["attributes"]
    for rnd in range(args.rounds):
        order = ["numaforge", "ansible"] if rnd % 2 == 0 else ["ansible", "numaforge"]
        rec: dict = {"order": order, "first": {}, "compliant": {}}
        env = {**env, CACHE_VAR: str(work / f"redfish-{rnd}")}  # cold for this round's first apply
        # first apply: a fresh fleet per tool
        for tool in order:
            bmcs = farm.restart()
            rec["first"][tool] = run_tool(tool, farm, work, f"first-{rnd}", bmcs, args, play, varsfile, env)
            # correctness: after the write, every BMC holds every desired value (pending or current)
            rec["first"][tool]["hosts_holding_desired"] = _holding(farm, attrs)
            _show("first apply", tool, rec["first"][tool])
            # the same command again before any reboot: the values are pending, not current yet
            rec.setdefault("again", {})[tool] = run_tool(
                tool, farm, work, f"again-{rnd}", bmcs, args, play, varsfile, env
            )
            _show("again", tool, rec["again"][tool])
        # compliant fleet: current == desired, nothing pending; both tools against the same fleet
        bmcs = farm.restart()
        farm.comply(attrs)
        for tool in order:
            farm.reset_counts()
            rec["compliant"][tool] = run_tool(tool, farm, work, f"compliant-{rnd}", bmcs, args, play, varsfile, env)
            _show("compliant", tool, rec["compliant"][tool])
        rec["compliant_cold"] = {
            "numaforge": run_tool(
                "numaforge",
                farm,
                work,
                f"compliant-cold-{rnd}",
                bmcs,
                args,
                play,
                varsfile,
                {**env, CACHE_VAR: str(work / f"redfish-cold-{rnd}")},
            )
        }
        _show("compliant-cold", "numaforge", rec["compliant_cold"]["numaforge"])
        results["rounds"].append(rec)
    for forks in [int(f) for f in args.sweep.split(",") if f.strip()]:
        fargs = argparse.Namespace(**{**vars(args), "forks": forks})
        env = {**env, CACHE_VAR: str(work / f"redfish-sweep-{forks}")}
        sweep = results.setdefault("sweep", {})[str(forks)] = {}
        for tool in ("numaforge", "ansible"):
            bmcs = farm.restart()
            sweep[tool] = run_tool(tool, farm, work, f"sweep-{forks}", bmcs, fargs, play, varsfile, env)
            _show(f"first f={forks}", tool, sweep[tool])


def _holding(farm, attrs: dict) -> int:
    return sum(
        1
        for cur, pend in zip(farm.current(), farm.pending())
        if all(pend.get(k, cur.get(k)) == v for k, v in attrs.items())
    )


def _failed_runs(results: dict) -> list[str]:
    failed = [
        f"round {i} {phase} {tool} (rc {r[phase][tool]['rc']}, {r[phase][tool]['statuses']})"
        for i, r in enumerate(results["rounds"])
        for phase in ("first", "again", "compliant")
        for tool in ("numaforge", "ansible")
        if r[phase][tool]["rc"] != 0
    ]
    failed += [
        f"round {i} compliant-cold numaforge (rc {r['compliant_cold']['numaforge']['rc']})"
        for i, r in enumerate(results["rounds"])
        if r["compliant_cold"]["numaforge"]["rc"] != 0
    ]
    failed += [
        f"latency {lat} {key} {phase} (rc {r['rc']}, {r['statuses']})"
        for lat, runs in results.get("slow", {}).items()
        for key, phases in runs.items()
        for phase, r in phases.items()
        if r["rc"] != 0
    ]
    return failed


# -- issue 29: slow BMCs ---------------------------------------------------------------------------------------
SLOW_PHASES = ("first", "again", "compliant")


def slow_bmcs(results, args, farm, work, play, varsfile, env, pw) -> None:
    """Every phase at each BMC latency, for each tool at each forks it runs at (its default, the equal ones).
    A combination's phases run on a fresh fleet: first apply (cold discovery cache), again, compliant (the
    fleet set to the profile; numaforge keeps the cache of its first apply, as a re-run does)."""
    attrs = results["attributes"]
    equal = [int(f) for f in args.equal_forks.split(",") if f.strip()]
    combos = sorted({("numaforge", f) for f in [FORKS_BMC, *equal]} | {("ansible", f) for f in [ANSIBLE_FORKS, *equal]})
    results["slow"] = {}
    for latency in [float(x) for x in args.slow_bmcs.split(",") if x.strip()]:
        farm.start(args.hosts, args.flavour, pw, latency=latency)
        runs: dict[str, Any] = {}
        results["slow"][str(latency)] = runs
        for tool, forks in combos:
            fargs = argparse.Namespace(**{**vars(args), "forks": forks})
            cenv = {**env, CACHE_VAR: str(work / f"redfish-slow-{latency}-{forks}")}
            tag = f"{latency}-{tool}-{forks}"
            rec = runs[f"{tool}@{forks}"] = {}
            bmcs = farm.restart()
            rec["first"] = run_tool(tool, farm, work, f"first-{tag}", bmcs, fargs, play, varsfile, cenv)
            rec["first"]["hosts_holding_desired"] = _holding(farm, attrs)
            rec["again"] = run_tool(tool, farm, work, f"again-{tag}", bmcs, fargs, play, varsfile, cenv)
            bmcs = farm.restart()
            farm.comply(attrs)
            rec["compliant"] = run_tool(tool, farm, work, f"compliant-{tag}", bmcs, fargs, play, varsfile, cenv)
            for phase in SLOW_PHASES:
                _show(f"{phase} {latency:g}s f={forks}", tool, rec[phase])


def summarize_slow(results: dict) -> None:
    """One table per latency: each phase, each tool's seconds and the Ansible / numaforge ratio at the tools'
    defaults and at each equal forks."""
    equal = sorted(
        {
            int(k.split("@")[1])
            for runs in results["slow"].values()
            for k in runs
            if k.startswith("ansible")
            and k.split("@")[1] in {r.split("@")[1] for r in runs if r.startswith("numaforge")}
        }
    )
    pairs = [("defaults", FORKS_BMC, ANSIBLE_FORKS)] + [(f"equal {f}", f, f) for f in equal]
    for latency, runs in results["slow"].items():
        print(f"\nBMC latency {latency} s per request, {results['hosts']} BMCs:")
        print(
            "| phase | "
            + " | ".join(f"{name}: numaforge@{nf} s / Ansible@{an} s / ratio" for name, nf, an in pairs)
            + f" | requests (round trips) per BMC, numaforge@{FORKS_BMC} / Ansible@{ANSIBLE_FORKS} | load at end |"
        )
        print("|---|" + "---|" * len(pairs) + "---|---|")
        for phase in SLOW_PHASES:
            cells = []
            for _name, nf, an in pairs:
                n, a = runs[f"numaforge@{nf}"][phase], runs[f"ansible@{an}"][phase]
                ratio = round(a["seconds"] / n["seconds"], 2)
                results.setdefault("slow_ratios", {}).setdefault(latency, {})[f"{phase} {_name}"] = ratio
                cells.append(f"{n['seconds']:.2f} / {a['seconds']:.2f} / **{ratio:.2f}x**")
            n, a = runs[f"numaforge@{FORKS_BMC}"][phase], runs[f"ansible@{ANSIBLE_FORKS}"][phase]
            qn, qa = n["requests"], a["requests"]
            print(
                f"| {phase} | "
                + " | ".join(cells)
                + f" | {qn['requests_mean']} ({qn['round_trips_mean']}, max {qn['round_trips_max']}) / "
                f"{qa['requests_mean']} ({qa['round_trips_mean']}) | {n['load_end']:.1f} / {a['load_end']:.1f} |"
            )
    print(
        f"load average start {results['loadavg_start']}, end {results['loadavg_end']}; "
        f"simulator errors: {len(results['simulator_errors'])}"
    )


def run_tool(tool, farm, work, tag, bmcs, args, play, varsfile, env) -> dict:
    farm.reset_counts()
    if tool == "numaforge":
        inv = work / f"nf-{tag}.yaml"
        write_numaforge_inventory(inv, bmcs, args.profile, "auto" if args.vendor_auto else args.flavour)
        res = numaforge_apply(work, tag, inv, args.forks, env)
    else:
        inv = work / f"ansible-{tag}.json"
        write_ansible_inventory(inv, bmcs)
        res = ansible_apply(work, tag, inv, play, varsfile, args.forks, env)
    counts = farm.counts()
    res["load_end"] = LAST_LOAD[0]
    res["idle_before"] = LAST_IDLE[0]
    res["requests"] = per_host_summary(counts)
    res["request_paths_host0"] = counts[0]["paths"] if counts else {}
    return res


def _show(phase: str, tool: str, r: dict) -> None:
    q = r["requests"]
    print(
        f"  {phase:11s} {tool:9s} {r['seconds']:8.2f} s  idle before {r.get('idle_before', -1):.2f}  load "
        f"{r['load_end']:5.2f}  rc={r['rc']}  {r['statuses']}  "
        f"requests/host mean {q['requests_mean']} max {q['requests_max']}  TLS connections/host mean "
        f"{q['connections_mean']}  round trips/host mean {q['round_trips_mean']} max {q['round_trips_max']}  "
        f"PATCH total {q['patch_total']}"
        + (f"  holding desired {r['hosts_holding_desired']}" if "hosts_holding_desired" in r else ""),
        flush=True,
    )


def summarize(results: dict) -> None:
    for phase in ("first", "again", "compliant"):
        nf = [r[phase]["numaforge"]["seconds"] for r in results["rounds"]]
        an = [r[phase]["ansible"]["seconds"] for r in results["rounds"]]
        ratio = statistics.median(an) / statistics.median(nf)
        results[f"{phase}_ratio"] = round(ratio, 2)
        loads = [r[phase][t]["load_end"] for r in results["rounds"] for t in ("numaforge", "ansible")]
        print(
            f"{phase:9s}: numaforge median {statistics.median(nf):.2f} s, ansible median "
            f"{statistics.median(an):.2f} s -> ansible/numaforge = {ratio:.2f}x  (load average "
            f"{min(loads):.2f}-{max(loads):.2f})"
        )
    for forks, sw in results.get("sweep", {}).items():
        print(
            f"first apply at forks {forks:>3s}: numaforge {sw['numaforge']['seconds']:.2f} s, ansible "
            f"{sw['ansible']['seconds']:.2f} s"
        )
    cold = [r["compliant_cold"]["numaforge"]["seconds"] for r in results["rounds"]]
    an = [r["compliant"]["ansible"]["seconds"] for r in results["rounds"]]
    results["compliant_cold_ratio"] = round(statistics.median(an) / statistics.median(cold), 2)
    print(
        f"compliant, numaforge with an empty discovery cache: median {statistics.median(cold):.2f} s -> "
        f"ansible/numaforge = {results['compliant_cold_ratio']:.2f}x"
    )
    print(
        f"stated load: {results['load_procs']} busy process(es); BMC latency {results['bmc_latency']} s; "
        f"load average start {results['loadavg_start']}, end {results['loadavg_end']}; "
        f"simulator errors: {len(results['simulator_errors'])}"
    )


def _ansible_version() -> str:
    try:
        out = subprocess.run(
            [str(VENV_BIN / "ansible-playbook"), "--version"], capture_output=True, text=True, timeout=120
        ).stdout.splitlines()
        core = out[0] if out else "?"
        from importlib.metadata import version

        return f"{core.strip()}; ansible {version('ansible')}; community.general {_cg_version()}"
    except Exception as exc:  # informational only
        return f"unknown ({exc})"


def _cg_version() -> str:
    import importlib.util

    spec = importlib.util.find_spec("ansible_collections")
    for loc in (spec.submodule_search_locations if spec else None) or []:
        m = Path(loc) / "community" / "general" / "MANIFEST.json"
        if m.exists():
            return json.loads(m.read_text())["collection_info"]["version"]
    return "?"


if __name__ == "__main__":
    sys.exit(main())
