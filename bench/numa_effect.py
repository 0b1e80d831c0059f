"""The NUMA outcome benchmark of the scheduler series: every arm (upstream, the shipped patch, its alternatives,
a null live patch) in interleaved rounds, one lab VM boot per topology.

    .venv/bin/python bench/numa_effect.py build              # backport + kpatch-build every arm (lab kernel)
    .venv/bin/python bench/numa_effect.py run [--cases nps2:single,...] [--rounds 10] [--seconds 20]
    .venv/bin/python bench/numa_effect.py render             # tables + PNG from the saved cases
    .venv/bin/python bench/numa_effect.py probe [--arms off+winner] [--rounds 20] [--seconds 60] [--pilot]
        # the pre-registered probe scenario (docs/numa-effect-protocol.md) with its source-busy control
    .venv/bin/python bench/numa_effect.py probe --study reports/probe-study.json --blocks-now 4
        # the study in chunks: blocks kept in the study file after each one, the next chunk goes on from there
    .venv/bin/python bench/numa_effect.py result --study reports/probe-study.json --md R.md --png R.png
        # the result document of a finished study (>= 20 blocks): endpoints, decision rules 1-5 in order
    .venv/bin/python bench/numa_effect.py probe --arms off+winner --second 1:3 --study S.json   # multi-instance
    .venv/bin/python bench/numa_effect.py probe --arms off+winner --threads 2 --cpus-per-node 3 --study S.json
    .venv/bin/python bench/numa_effect.py probe --knob --rounds 20 --study S.json   # full kernel, knob off/on
    .venv/bin/python bench/numa_effect.py probe --pairs classes --topology nps2 --no-control --study S.json
        # the configuration space (issue 42): one case per (P, S) class of the topology's SLIT (or `all` pairs)
    .venv/bin/python bench/numa_effect.py control --study S.json --md S.md
        # a control study (2-node, multi-instance, two-thread, knob; protocol amendments 4, 5, 7) and its rule;
        # a study of amendment 8's cases (probe --pairs classes): its rule per case and over the cases, at any
        # number of blocks (a case short of its registered block count gives no verdict, and says so)

Cases are TOPOLOGY:WORKLOAD[:ARM+ARM...]; WORKLOAD is single (independent processes) or grouped (threads
sharing memory). Default plan (CASES): every arm on backplane4 and nps2 (single), off/winner/null for the
grouped workload on backplane4, for 2node and for cpuless4 (buffers first-touched on memory-only node 3),
run in that order (one boot per consecutive run of cases on one topology). Defaults: 10 rounds, 16 s runs
(3 s pinned warm-up on node 0, then 4 s unpinned / 2 s pinned), 4 tasks x 16 MB, 2 CPUs per node.
Each case is written to --out (default reports/numa-effect-bench/<topology>-<workload>.json) as soon as it
finishes, so a cut-short run keeps what it measured; `render` writes summary.md and numa-effect.png beside
them (docs/BENCHMARKS.md "NUMA outcomes" quotes them; copy the PNG to docs/ with --docs).
The lab VMs use 127.0.0.1:--ssh-port and a private state dir under the output directory.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from numaforge import livepatch
from numaforge.kernel import kpatch, labkernel
from numaforge.lab import vm
from numaforge.lab.kernels import built_kernel
from numaforge.livepatch import probe as lprobe
from numaforge.livepatch.arms import loaded_arms
from numaforge.measure import arms as marms
from numaforge.measure import configs, decision, render, runner, scenario, study
from numaforge.measure import metrics as mx
from numaforge.measure import result as mresult
from numaforge.measure.runner import WorkloadParams
from numaforge.paths import ROOT
from numaforge.remote.ssh import connect

OUT = ROOT / "reports" / "numa-effect-bench"
DEFAULT_PROBE_ARMS = "off+winner+alt-closer-or-gain+alt-root-cause+null"
CASES = [
    "nps2:single",
    "backplane4:single",
    "2node:single:off+winner+null",
    "cpuless4:single:off+winner+null",
    "backplane4:grouped:off+winner+null",
]


def parse_case(text: str) -> tuple[str, str, list[str] | None]:
    parts = text.split(":")
    if len(parts) not in (2, 3) or parts[0] not in vm.TOPOLOGIES or parts[1] not in ("single", "grouped"):
        raise SystemExit(
            f"bad case {text!r}: TOPOLOGY:single|grouped[:ARM+ARM] with TOPOLOGY in {', '.join(vm.TOPOLOGIES)}"
        )
    return parts[0], parts[1], parts[2].split("+") if len(parts) == 3 else None


def run(args) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cases = [parse_case(c) for c in args.cases.split(",")]
    # one boot per run of consecutive cases on the same topology, in the order given
    groups: list[tuple[str, list]] = []
    for c in cases:
        if groups and groups[-1][0] == c[0]:
            groups[-1][1].append(c)
        else:
            groups.append((c[0], [c]))
    for topo, topo_cases in groups:
        state = out / f".lab-{topo}"
        t0 = time.monotonic()
        info = vm.up(
            kernel=args.kernel, state_dir=state, ssh_port=args.ssh_port, topo=topo, cpus_per_node=args.cpus_per_node
        )
        print(
            f"{topo}: booted {info.release}, {info.nodes} nodes, {args.cpus_per_node} CPU(s) per node, "
            f"in {info.ssh_seconds} s",
            flush=True,
        )
        ssh = vm.lab_ssh(state, args.ssh_port)
        try:
            for _t, workload, arm_names in topo_cases:
                arts = loaded_arms(args.series, args.target, arm_names)
                params = WorkloadParams(
                    procs=args.procs,
                    mb=args.mb,
                    warm=args.warm,
                    unpinned=args.unpinned,
                    pinned=args.pinned,
                    duration=args.seconds,
                    grouped=workload == "grouped",
                    mem_node=3 if topo == "cpuless4" else -1,
                )
                name = f"{topo} {workload}"
                c0 = time.monotonic()
                with connect(ssh, f"lab-{topo}") as r:
                    data = livepatch.measure_arms(
                        r,
                        arts,
                        params,
                        args.rounds,
                        order=args.order,
                        seed=args.seed,
                        log=functools.partial(_log, name),
                        nudge=True,
                    )
                data.update(
                    {
                        "case": name,
                        "topology": topo,
                        "workload_kind": workload,
                        "kernel": info.release,
                        "cpus_per_node": args.cpus_per_node,
                        "seconds": round(time.monotonic() - c0, 1),
                        "command": "python bench/numa_effect.py run " + " ".join(sys.argv[2:]),
                    }
                )
                path = out / f"{topo}-{workload}.json"
                path.write_text(json.dumps(data, indent=1) + "\n")
                print(f"{name}: wrote {path} ({data['seconds']} s)", flush=True)
                render_all(out, docs=False)
        finally:
            vm.down(state)
        print(f"{topo}: done in {time.monotonic() - t0:.0f} s", flush=True)
    return 0


def probe(args) -> int:
    """The pre-registered probe scenario on one lab VM boot (backplane4 x --cpus-per-node, P=0, S=2)."""
    second = _second(args.second) if args.second else None  # bad input: refused before the VM boots
    pairs = _pairs(args.pairs, args.topology) if args.pairs else None
    if pairs and (args.knob or second or args.threads > 1):
        raise SystemExit("--pairs runs the main case (and its control) per pair: drop --knob/--second/--threads")
    if args.knob and (second or args.threads > 1 or args.arms != DEFAULT_PROBE_ARMS):
        raise SystemExit(
            "--knob runs its own two arms (knob-off, knob-on) on the main case: drop --arms/--second/--threads"
        )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    state = out / ".lab-probe"
    kernel = args.kernel
    spath = Path(args.study) if args.study else None
    booting = None  # the lab kernel about to boot, pinned by a study (its recipe and content key)
    if kernel == "lab" and not args.knob:  # the knob's kernel records its own build (settings["kernel_build"])
        lab = kpatch.lab_kernel(log=lambda m: print(m, flush=True))  # what vm.up would boot for --kernel lab
        kernel = built_kernel(lab, "lab")
        booting = {"config": labkernel.lab_config().name, "key": lab.key}
    try:  # before the VM boots: a study measured on another lab kernel is not continued on this one
        pin = study.pin_lab_kernel({}, study.read(spath)[0] if spath and spath.exists() else None, booting, str(spath))
    except study.LabKernelMismatch as exc:
        print(f"error: {exc.render()}", file=sys.stderr)
        return exc.exit_code
    if args.knob:  # amendment 7: the lab kernel with the whole series built in, the feature switched per run
        lk = marms.full_kernel(args.series, log=lambda m: print(m, flush=True))
        kernel = built_kernel(lk, "series")
        print(f"full kernel with the series: {lk.bzimage} (key {lk.key})", flush=True)
    info = vm.up(
        kernel=kernel,
        state_dir=state,
        ssh_port=args.ssh_port,
        topo=args.topology,
        cpus_per_node=args.cpus_per_node,
    )
    print(f"{args.topology}: booted {info.release}, {info.nodes} nodes in {info.ssh_seconds} s", flush=True)
    ssh = vm.lab_ssh(state, args.ssh_port)
    try:
        features = dict(marms.KNOB_ARMS) if args.knob else None
        names = list(features) if features else args.arms.split("+")
        arts = {} if features else loaded_arms(args.series, args.target, names)
        params = scenario.ScenarioParams(
            pref=args.pref,
            src=args.src,
            mb=args.mb,
            seconds=args.seconds,
            fill_src=not args.no_fill,
            threads=args.threads,
        )
        t0 = time.monotonic()
        settings = {
            "arms": names,
            "modules": {n: (a.sha256 if a else None) for n, a in arts.items()},
            "designs": marms.knob_designs(args.series) if features else marms.designs(args.series, names),
            # threads only when > 1: a study recorded before the two-thread control goes on with the same settings
            "params": {k: v for k, v in dataclasses.asdict(params).items() if k != "threads" or v > 1},
            "seed": args.seed,
            "kernel": info.release,
            "topology": args.topology,
            "cpus_per_node": args.cpus_per_node,
        }
        if features:
            settings["features"] = features  # the knob control (protocol amendment 7): no module, no source-busy case
            settings["kernel_build"] = {"name": "series", "key": lk.key, "source": lk.source_hash}
        elif args.no_control:
            settings["control"] = False  # the main case alone (amendment 6's check)
        if second:
            settings["second"] = list(second)  # the multi-instance control (protocol amendment 4)
        if pairs:
            settings["pairs"] = [list(p) for p in pairs]  # one case per configuration (issue 42 item 1)
        settings.update(pin)  # the lab kernel's recipe and key, from the first block of a study on
        done = study.load(spath, settings) if spath else {}
        have = min((len(b) for b in done.values()), default=0)
        upto = min(args.rounds, have + args.blocks_now) if args.blocks_now else args.rounds
        chunks = study.chunks_of(spath) if spath else []
        chunk = {"started": _utc(), "from_block": have + 1, "load_at_start": os.getloadavg()[0]}
        if spath:
            print(f"study {spath}: {have} blocks done, running blocks {have + 1}..{upto} of {args.rounds}", flush=True)

        def saved(blocks):
            if spath:
                n = min(len(b) for b in blocks.values())
                chunk.update({"ended": _utc(), "to_block": n, "load_at_end": os.getloadavg()[0]})
                study.save(spath, settings, blocks, [*chunks, chunk])

        with connect(ssh, f"lab-{args.topology}") as r:
            data = lprobe.measure_scenario(
                r,
                arts,
                params,
                upto,
                control=not args.no_control,
                seed=args.seed,
                log=lambda m: print(m, flush=True),
                nudge=True,
                done=done,
                on_block=saved,
                second=second,
                features=features,
                pairs=pairs,
            )
        rounds = min(c["rounds"] for c in data["cases"].values())
        data.update(
            {
                "kernel": info.release,
                "topology": args.topology,
                "cpus_per_node": args.cpus_per_node,
                "pilot": args.pilot or rounds < 20 or args.seconds < 60,
                "rounds": rounds,
                "study": str(spath) if spath else None,
                "seconds": round(time.monotonic() - t0, 1),
                "command": "python bench/numa_effect.py probe " + " ".join(sys.argv[2:]),
            }
        )
        path = out / f"probe-{args.topology}.json"
        path.write_text(json.dumps(data, indent=1) + "\n")
        for name, case in data["cases"].items():
            outcomes = scenario.outcomes_of(name)
            print(f"## {name}\n" + render.markdown(case, outcomes=outcomes))
            for a in case["arms"][1:]:
                print("\n".join(f"{a}: {ln}" for ln in render.verdict_lines(case, a, outcomes=outcomes)))
        print(f"wrote {path} ({data['seconds']} s)", flush=True)
    finally:
        vm.down(state)
    return 0


def result(args) -> int:
    """The result document of a finished study (docs/numa-effect-protocol.md): refused below 20 blocks."""
    spath = Path(args.study)
    settings, chunks, blocks = study.read(spath)
    if any(decision.registered_case(settings, name) for name in blocks):
        print(
            f"error: {spath} is a study of protocol amendment 8's cases (the configuration matrix): its report, with "
            f"the amendment's rule, is `control --study {spath}`",
            file=sys.stderr,
        )
        return 2
    n = min((len(b) for b in blocks.values()), default=0)
    if n < mresult.MIN_STUDY_BLOCKS or scenario.MAIN_CASE not in blocks:
        print(
            f"error: {spath}: {n} blocks; the protocol judges at {mresult.MIN_STUDY_BLOCKS} blocks of the main case "
            f"and its control, not before. Run the remaining blocks with `probe --study {spath} --blocks-now N`.",
            file=sys.stderr,
        )
        return 2
    arms = settings.get("arms") or []
    cases = {name: scenario.report([r for b in bl for r in b], arms) for name, bl in blocks.items()}
    # the study's own record of what each arm was; a study from before it was recorded: the tree's arms now
    sizes = marms.code_sizes(settings.get("designs") or marms.designs(args.series, arms))
    dec = decision.apply_rules(cases[scenario.MAIN_CASE], cases.get(scenario.CONTROL_CASE), sizes)
    png = mresult.plot(cases, args.png) if args.png else None
    rel = os.path.relpath(png, Path(args.md).parent) if png and args.md else None
    command = "python bench/numa_effect.py result " + " ".join(sys.argv[2:])
    text = mresult.markdown(settings, chunks, cases, dec, sizes, command, rel)
    _emit(text, args.md, f" and {png}" if png else "")
    print(f"result: {dec.statement} (basis: {dec.basis})", flush=True)
    return 0


def control(args) -> int:
    """The report of a control study (the 2-node, multi-instance, two-thread or knob control): refused below 20
    blocks and for the main study (whose document is `result`)."""
    spath = Path(args.study)
    settings, chunks, blocks = study.read(spath)
    if any(decision.registered_case(settings, name) for name in blocks):
        return amendment8(args, settings, chunks, blocks)
    n = min((len(b) for b in blocks.values()), default=0)
    main = scenario.MAIN_CASE in blocks and settings.get("topology") != "2node"
    if n < mresult.MIN_STUDY_BLOCKS or main:
        why = "is the main study: its document is `result`" if main else f"has {n} blocks"
        print(f"error: {spath} {why}; `control` reports a control study of >= 20 blocks", file=sys.stderr)
        return 2
    arms = settings.get("arms") or []
    cases, direct = {}, {}
    for name, bl in blocks.items():
        runs, multi = [r for b in bl for r in b], name in scenario.UNIT_CASES
        cases[name] = scenario.report(runs, arms, multi=multi)
        patched = [a for a in arms if a != cases[name]["base"]]
        # the patched arms against each other (exploratory: no rule judges them)
        direct[name] = {
            f"{a} vs {b}": scenario.report(runs, [a, b], base=a, multi=multi)
            for i, a in enumerate(patched)
            for b in patched[i + 1 :]
        }
    _emit(mresult.control_markdown(settings, chunks, cases, _control_command(), direct), args.md)
    return 0


def _control_command() -> str:
    return "python bench/numa_effect.py control " + " ".join(sys.argv[2:])


def _emit(text: str, md: str | None, also: str = "") -> None:
    """The report into --md (saying so, with ``also`` written beside it), else on stdout."""
    if md:
        Path(md).write_text(text)
        print(f"wrote {md}{also}", flush=True)
    else:
        print(text)


def amendment8(args, settings: dict, chunks: list[dict], blocks: dict) -> int:
    """The report of a study of protocol amendment 8's cases (the configuration matrix): every case judged by
    the amendment's rule, whatever its number of blocks (below its registered n a case gives no verdict, and the
    report says so), and the amendment's decision over the cases."""
    arms = settings.get("arms") or []
    if decision.BASE not in arms:
        print(
            f"error: {args.study}: amendment 8 measures every arm against `{decision.BASE}`, and this study ran "
            f"{'+'.join(arms) or 'no arms'}; run its cases with --arms {decision.BASE}+...",
            file=sys.stderr,
        )
        return 2
    cases, verdicts = {}, {}
    for name, bl in blocks.items():
        runs = [r for b in bl for r in b]
        key = decision.registered_case(settings, name)
        cases[name] = scenario.report(runs, arms, amendment8=key is not None)
        if key:
            cv = decision.judge_case(decision.case_blocks(cases[name]["runs"], arms), decision.REGISTERED_BLOCKS[key])
            verdicts[name] = (decision.case_name(*key), cv)
    _emit(mresult.amendment8_markdown(settings, chunks, cases, verdicts, _control_command()), args.md)
    print(f"result: {decision.across_cases({k: v for k, v in verdicts.values()}).statement}", flush=True)
    return 0


def render_all(out: Path, docs: bool, more: list[Path] | None = None) -> None:
    cases = {}
    order = {f"{t} {w}": i for i, (t, w, _) in enumerate(parse_case(c) for c in CASES)}
    for p in sorted(out.glob("*.json")) + sorted(q for d in more or [] for q in d.glob("*.json")):
        d = json.loads(p.read_text())
        # verdicts recomputed from the stored runs with today's statistics (numaforge.measure.paired)
        d.update(runner.report([mx.RunMetrics.from_dict(r) for r in d["runs"]], d["arms"]))
        cases[d["case"]] = d
    if not cases:
        print(f"no cases in {out}", file=sys.stderr)
        return
    cases = dict(sorted(cases.items(), key=lambda kv: order.get(kv[0], 99)))
    md = []
    for name, d in cases.items():
        md.append(
            f"### {name} ({d['rounds']} rounds per arm, {d['workload']['duration']} s runs, "
            f"{d.get('cpus_per_node', 1)} CPU(s) per node, {d['workload']['procs']} tasks, "
            f"{d['order']} order, {d['kernel']})\n\n{render.markdown(d)}"
        )
    head = "## Beside the talk's claim (38.2% -> 12.7%, 421 -> 289 us)\n\n" + render.headline(cases) + "\n"
    (out / "summary.md").write_text(head + "\n".join(md))
    png = render.plot(cases, out / "numa-effect.png")
    print(f"rendered {out / 'summary.md'} and {png}", flush=True)
    if docs:
        shutil.copy2(png, ROOT / "docs" / "numa-effect.png")
        print(f"copied to {ROOT / 'docs' / 'numa-effect.png'}")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--series", default=marms.kbackport.DEFAULT_SERIES)
    r = sub.add_parser("run")
    r.add_argument("--cases", default=",".join(CASES))
    r.add_argument("--rounds", type=int, default=10)
    r.add_argument("--seconds", type=int, default=16, help="workload run length")
    r.add_argument("--warm", type=int, default=3, help="pinned warm-up seconds (node 0 becomes preferred)")
    r.add_argument("--unpinned", type=int, default=4, help="seconds of each unpinned phase")
    r.add_argument("--pinned", type=int, default=2, help="seconds of each pinned phase")
    r.add_argument(
        "--cpus-per-node", type=int, default=2, help="CPUs per NUMA node (2: a migration can stay inside a node)"
    )
    r.add_argument("--procs", type=int, default=4, help="workload tasks (node 0 has --cpus-per-node CPUs)")
    r.add_argument("--mb", type=int, default=16)
    r.add_argument("--order", default="random", choices=["random", "abba"])
    r.add_argument("--seed", type=int, default=13)
    r.add_argument("--kernel", default="lab")
    r.add_argument("--target", default="lab")
    r.add_argument("--series", default=marms.kbackport.DEFAULT_SERIES)
    r.add_argument("--ssh-port", type=int, default=2313)
    r.add_argument("--out", default=str(OUT))
    pr = sub.add_parser("probe")
    pr.add_argument("--arms", default=DEFAULT_PROBE_ARMS)
    pr.add_argument("--rounds", type=int, default=20, help="blocks (the protocol: >= 20)")
    pr.add_argument("--seconds", type=int, default=60, help="measured window per run (the protocol: 60)")
    pr.add_argument("--mb", type=int, default=64)
    pr.add_argument("--pref", type=int, default=0)
    pr.add_argument("--src", type=int, default=2)
    pr.add_argument("--topology", default="backplane4", choices=list(vm.TOPOLOGIES))
    pr.add_argument(
        "--pairs",
        help="the configuration space (issue 42 item 1): `all` (every (P, S) of the topology's nodes with CPUs), "
        "`classes` (one pair per class, numaforge.measure.configs.scan_classes) or P:S,P:S,...; each pair a case "
        "(with its source-busy control unless --no-control); replaces --pref/--src",
    )
    pr.add_argument("--cpus-per-node", type=int, default=2)
    pr.add_argument(
        "--second",
        metavar="P:S",
        help="the multi-instance control (protocol amendment 4): a second probe with memory on P, started on S, "
        "running at once with the first; runs only that case",
    )
    pr.add_argument(
        "--threads",
        type=int,
        default=1,
        help="the two-thread control (protocol amendment 5): the probe's threads sharing its buffer; runs only "
        "that case",
    )
    pr.add_argument(
        "--no-control",
        action="store_true",
        help="the main case only, without its source-busy control (amendment 6's check of the probe's numa_group)",
    )
    pr.add_argument(
        "--knob",
        action="store_true",
        help="the full-kernel knob control (protocol amendment 7): boot the lab kernel with the whole series built "
        "in (built once, about 6 min) and switch NUMA_PREFER_LOCAL off/on per run; the main case only",
    )
    pr.add_argument("--no-fill", action="store_true", help="do not fill node S's memory (the first pilot's setup)")
    pr.add_argument("--pilot", action="store_true", help="mark the run a pilot (always so below 20 blocks or 60 s)")
    pr.add_argument("--seed", type=int, default=13)
    pr.add_argument("--kernel", default="lab")
    pr.add_argument("--target", default="lab")
    pr.add_argument("--series", default=marms.kbackport.DEFAULT_SERIES)
    pr.add_argument("--ssh-port", type=int, default=2315)
    pr.add_argument("--out", default=str(ROOT / "reports" / "numa-probe-bench"))
    pr.add_argument(
        "--study",
        help="keep the blocks in this study file (rewritten after every block) and go on from its last block",
    )
    pr.add_argument(
        "--blocks-now", type=int, default=0, help="with --study: run at most this many more blocks in this chunk"
    )
    g = sub.add_parser("render")
    g.add_argument("--out", default=str(OUT))
    g.add_argument("--docs", action="store_true", help="copy the PNG to docs/numa-effect.png")
    g.add_argument(
        "--also",
        action="append",
        default=[],
        help="another output directory whose cases to include (e.g. a second run on another port)",
    )
    rs = sub.add_parser("result")
    rs.add_argument("--study", required=True, help="a study file of >= 20 blocks")
    rs.add_argument("--md", help="write the result document here (else print it)")
    rs.add_argument("--png", help="write the per-block paired differences picture here")
    rs.add_argument("--series", default=marms.kbackport.DEFAULT_SERIES)
    gc = sub.add_parser("groups", help="protocol amendment 6's check: was any run's probe ever in a numa_group?")
    gc.add_argument("--study", required=True)
    ct = sub.add_parser("control")
    ct.add_argument(
        "--study", required=True, help="a control study file of >= 20 blocks, or a study of amendment 8's cases"
    )
    ct.add_argument("--md", help="write the report here (else print it)")
    args = ap.parse_args(argv)
    if args.cmd == "control":
        return control(args)
    if args.cmd == "groups":
        ok, lines = mresult.group_check(study.read(Path(args.study))[2])
        print("\n".join(lines))
        print("passed: no run's task was ever in a numa_group" if ok else "failed: see the runs above")
        return 0 if ok else 1
    if args.cmd == "result":
        return result(args)
    if args.cmd == "build":
        for a in marms.build_arms(args.series, log=lambda m: print(m, flush=True)):
            print(f"{a.name}: {a.module or '(no live patch)'}")
        return 0
    if args.cmd == "run":
        return run(args)
    if args.cmd == "probe":
        return probe(args)
    render_all(Path(args.out), args.docs, [Path(d) for d in args.also])
    return 0


def _second(text: str) -> tuple[int, int]:
    try:
        return scenario.node_pair(text, "--second")
    except scenario.ScenarioError as exc:
        raise SystemExit(f"{exc.what}: {exc.fix}") from None


def _pairs(text: str, topology: str) -> list[tuple[int, int]]:
    """--pairs against the lab topology's SLIT (numaforge.measure.configs); a bad value exits 2 before any boot."""
    tp = vm.topology(topology)
    try:
        return configs.parse_pairs(text, tp.distances, tp.cpus)
    except ValueError as exc:
        print(f"error: {exc} (topology {tp.name})", file=sys.stderr)
        raise SystemExit(2) from None


def _utc() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _log(name: str, message: str) -> None:
    print(f"{name}: {message}", flush=True)


def stop_on_signals() -> None:
    """SIGTERM and SIGHUP end the run like Ctrl-C does: as an exception (SystemExit 128+n), so each `finally`
    runs and the lab VM is stopped (`timeout`'s SIGTERM killed Python and left qemu running in its own
    session)."""

    def stop(signum, frame):
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)


if __name__ == "__main__":
    stop_on_signals()
    sys.exit(main(sys.argv[1:]))
