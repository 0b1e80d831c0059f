"""The probe scenario (docs/numa-effect-protocol.md, source spare only) with every run's raw output kept: the
probe's NUMA events (sched_move_numa with src/dst nid, sched_stick_numa, sched_swap_numa) and its once-a-second
samples, to see why an arm's moves are counted as they are. A pilot tool (docs/numa-effect-pilot.md), not the
study: bench/numa_effect.py probe runs that.

    .venv/bin/python bench/numa_probe_trace.py run --arms alt-root-cause+off --rounds 4 --seconds 20 --out T.json
    .venv/bin/python bench/numa_probe_trace.py show T.json      # events, samples and counts per run, recomputed

The arms' modules must be built (python bench/numa_effect.py build). One lab VM boot (backplane4, 2 CPUs per
node, lab kernel), arms in the given order in every round; the JSON keeps each run's topology, probe, samples and
trace sections (not /proc/vmstat), so `show` recounts them with today's numaforge.measure.scenario.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from numaforge.lab import vm
from numaforge.livepatch.arms import ArmSwitcher, loaded_arms
from numaforge.measure import metrics, scenario
from numaforge.remote.ssh import connect
from numaforge.workload import probe_binary

KEEP = ("topo", "probe", "samples", "trace", "rc")


def run(args) -> int:
    arms = args.arms.split("+")
    arts = loaded_arms(arms=arms)
    p = scenario.ScenarioParams(pref=0, src=2, mb=args.mb, seconds=args.seconds)
    state = Path(args.out).resolve().parent / ".lab-probe-trace"
    info = vm.up(kernel="lab", state_dir=state, ssh_port=args.ssh_port, topo="backplane4", cpus_per_node=2)
    print(f"booted {info.release}", flush=True)
    runs = []
    try:
        with connect(vm.lab_ssh(state, args.ssh_port), "lab-probe-trace") as r:
            sw = ArmSwitcher(r, arts, nudge=True)
            sw.open()
            try:
                r.run("mkdir -p /tmp/numaforge-probe-trace", sudo=True)
                r.put(probe_binary(), "/tmp/numaforge-probe-trace/numa_probe", mode=0o700, sudo=True)
                for rnd in range(1, args.rounds + 1):
                    for arm in arms:
                        sw.set_arm(arm)
                        tag = secrets.token_hex(4)
                        script = scenario.run_script(
                            "/tmp/numaforge-probe-trace/numa_probe", [p], f"numaforge-probe-{tag}", f"/tmp/g{tag}"
                        )
                        out = r.run(script, timeout=args.seconds + 300, sudo=True, check=False)
                        s = metrics.split_sections(out.stdout)
                        runs.append({"arm": arm, "round": rnd, "sections": {k: s.get(k, "") for k in KEEP}})
                        show_run(runs[-1], p)
            finally:
                sw.close()
    finally:
        vm.down(state)
        doc = {"params": {"pref": 0, "src": 2, "mb": args.mb, "seconds": args.seconds}, "runs": runs}
        doc["command"] = "python bench/numa_probe_trace.py run " + " ".join(sys.argv[2:])
        Path(args.out).write_text(json.dumps(doc) + "\n")
    return 0


def show_run(run: dict, p: scenario.ScenarioParams) -> None:
    s = run["sections"]
    rm = scenario.probe_metrics(run["arm"], run["round"], s, p)
    start = scenario.parse_probe(s["probe"])["start"]["t"]
    topo = metrics.parse_topo(s["topo"])
    boot = f"boot {run['boot']} " if "boot" in run else ""
    print(
        f"== {boot}round {run['round']} {run['arm']}: not-closer {rm.not_closer} closer {rm.closer} "
        f"found-nothing {rm.found_nothing} of {rm.moves} moves, ends on node {rm.final_node}"
    )
    for e in metrics.parse_trace(s["trace"]):
        if e.event == "sched_move_numa":
            f = e.fields
            print(f"  {(e.ts_ns - start) / 1e9:6.2f} s  move  node {f.get('src_nid')} -> {f.get('dst_nid')}")
        elif e.event in ("sched_stick_numa", "sched_swap_numa"):
            print(f"  {(e.ts_ns - start) / 1e9:6.2f} s  {e.event.split('_')[1]} dst_cpu {e.fields.get('dst_cpu')}")
    for x in scenario.parse_samples(s["samples"]):
        node = topo.cpu_node.get(x.cpu) if x.cpu is not None else None
        pages = " ".join(f"N{n}={c}" for n, c in sorted(x.pages.items()))
        print(f"  {(x.t_ns - start) / 1e9:6.2f} s  sample on node {node}, preferred {x.pref}, pages {pages}")
    sys.stdout.flush()


def show(args) -> int:
    doc = json.loads(Path(args.file).read_text())
    p = scenario.ScenarioParams(**doc["params"])
    for run in doc["runs"]:
        show_run(run, p)
    return 0


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--arms", default="off+winner+alt-root-cause")
    r.add_argument("--rounds", type=int, default=2)
    r.add_argument("--seconds", type=int, default=20)
    r.add_argument("--mb", type=int, default=32)
    r.add_argument("--ssh-port", type=int, default=2317)
    r.add_argument("--out", required=True)
    s = sub.add_parser("show")
    s.add_argument("file")
    args = ap.parse_args(argv)
    return run(args) if args.cmd == "run" else show(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
