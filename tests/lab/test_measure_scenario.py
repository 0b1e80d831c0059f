"""numaforge.measure.scenario: the pre-registered probe scenario's parsers and endpoints, on a constructed capture
of one run in the shape the run script prints (backplane4 x 2 CPUs: P = node 0, S = node 2), the node choice for
real hosts, the script's syntax, and the probe's usage errors (the probe itself runs; a one-node machine cannot
run its scenario, which the lab VM tier does)."""

import json
import subprocess
from pathlib import Path

import pytest

from numaforge.livepatch import probe as lprobe
from numaforge.measure import metrics, paired, scenario
from numaforge.workload import probe_binary

S = 1_000_000_000
TOPO = "\n".join(
    f"node {n} cpus {2 * n}-{2 * n + 1} dist "
    + " ".join("10" if a == n else ("16" if a // 2 == n // 2 else "32") for a in range(4))
    for n in range(4)
)


def stat(cpu: int) -> str:
    # /proc/PID/stat: field 39 (processor) is the 37th field after "(comm)"
    rest = ["R"] + ["0"] * 35 + [str(cpu)] + ["0"] * 13
    return "321 (numa probe) " + " ".join(rest)


def sample(t: float, cpu: int, pref: int, pages: dict[int, int], group: int | None = None) -> str:
    nodes = " ".join(f"N{n}={p}" for n, p in pages.items())
    # 5.10's sched_show_numa() prints "current_node=N, numa_group_id=G" after numa_preferred_nid
    grp = "" if group is None else f"current_node={cpu // 2}, numa_group_id={group}\n"
    return (
        f"@ {t:.2f}\n{stat(cpu)}\n\nnuma_preferred_nid                           :  {pref}\n{grp}"
        f"7f0000000000 default anon={sum(pages.values())} dirty={sum(pages.values())} {nodes} kernelpagesize_kB=4\n"
        f"7ffd00000000 default stack anon=3 dirty=3 N{pages and next(iter(pages))}=3\n"
    )


def capture(moves=(), stick=0, vm_migrated=600, no_pref_until=0, group=lambda i: None) -> dict[str, str]:
    samples = []
    for i in range(61):
        t = 100 + i
        if i < 20:
            cpu, pages = 4, {0: 16384}  # on S (node 2), memory on P
        else:
            cpu, pages = 2, {0: 16384 - 600 * min(i - 19, 27), 1: 600 * min(i - 19, 27)}  # moved to node 1
        samples.append(sample(t + 0.01, cpu, -1 if i < no_pref_until else 0, pages, group(i)))
    trace = ["# tracer: nop", "#"]
    for ts, src, dst in moves:
        trace.append(
            f" numa_probe-321 [004] .... {ts:.6f}: sched_move_numa: pid=321 tgid=321 ngid=0 "
            f"src_cpu={2 * src} src_nid={src} dst_cpu={2 * dst} dst_nid={dst}"
        )
    for k in range(stick):
        trace.append(
            f" numa_probe-321 [004] .... {130 + k:.6f}: sched_stick_numa: src_pid=321 src_tgid=321 "
            "src_ngid=0 src_cpu=4 src_nid=2 dst_pid=0 dst_tgid=0 dst_ngid=0 dst_cpu=-1 dst_nid=-1"
        )
    trace.append(
        " numa_probe-321 [004] .... 105.000000: sched_migrate_task: comm=numa_probe pid=321 prio=120 "
        "orig_cpu=4 dest_cpu=6"
    )
    return {
        "topo": TOPO + "\n",
        "vmstat_before": "numa_hint_faults 10\nnuma_pages_migrated 100\n",
        "vmstat_after": f"numa_hint_faults 900\nnuma_pages_migrated {100 + vm_migrated}\n",
        "samples": "".join(samples),
        "probe": f"touched pid=321 t={99 * S}\nstart t={100 * S} cpu=4\ndone t={160 * S} passes=900\n",
        "trace": "\n".join(trace) + "\n",
        "rc": "0\n",
    }


def test_samples_parse_cpu_preferred_node_and_anonymous_pages_per_node():
    s = scenario.parse_samples(capture()["samples"])
    assert len(s) == 61 and s[0].t_ns == 100 * S + 10_000_000
    assert (s[0].cpu, s[0].pref, s[0].pages) == (4, 0, {0: 16384 + 3})
    assert s[-1].cpu == 2 and s[-1].pages[1] == 600 * 27


def test_the_share_of_samples_in_a_numa_group_is_read_from_numa_group_id():
    """Amendment 6: a design exempting grouped tasks runs 0001's code for a task in no numa_group, so each run
    records how often its task was in one; a kernel that does not print the line gives no reading, not 0."""
    assert scenario.probe_metrics("off", 1, capture(), scenario.ScenarioParams()).grouped_share is None
    never = capture(group=lambda i: 0)
    assert scenario.parse_samples(never["samples"])[0].group == 0
    assert scenario.probe_metrics("off", 1, never, scenario.ScenarioParams()).grouped_share == 0.0
    late = capture(group=lambda i: 321 if i >= 30 else 0)  # joins its own group at t=130: 30 of the 60 in window
    assert scenario.parse_samples(late["samples"])[-1].group == 321
    assert scenario.probe_metrics("off", 1, late, scenario.ScenarioParams()).grouped_share == 50.0
    a = scenario.probe_metrics("off", 1, never, scenario.ScenarioParams())
    b = scenario.probe_metrics("off", 1, late, scenario.ScenarioParams())
    assert scenario.combine([a, b]).grouped_share == 25.0


def test_endpoints_of_one_run():
    # a not-closer third-node move 2 -> 3 (dist to P: 32 -> 32), then a closer one 3 -> 1 (32 -> 16),
    # a move to the preferred node (not a third-node move), and one outside the window
    moves = [(105.0, 2, 3), (119.5, 3, 1), (140.0, 1, 0), (170.0, 2, 3)]
    rm = scenario.probe_metrics("off", 1, capture(moves, stick=3), scenario.ScenarioParams())
    assert (rm.pid, rm.seconds, rm.samples) == (321, 60.0, 60)
    assert (rm.moves, rm.third_moves, rm.closer, rm.not_closer) == (3, 2, 1, 1)
    assert rm.move_path == [[2, 3], [3, 1], [1, 0]]  # every NUMA move in the window, in order
    assert rm.not_closer_per_min == 1.0 and rm.closer_per_min == 1.0
    assert rm.found_nothing == 3 and rm.found_nothing_per_min == 3.0 and rm.migrations == 1
    # last 30 s: on node 1 (CPU 2) holding 16200 of 16387 pages after t=146 s, less before
    assert 80 < rm.local_share_30s < 100
    assert rm.reached_90 and rm.time_to_90 == pytest.approx(44.01)  # 600*25 = 15000 of 16387 = 91.5 % at 144 s
    assert rm.pages_migrated_per_min == 600.0 and rm.final_node == 1


def test_a_move_right_after_the_preferred_node_is_first_set_is_judged_against_p():
    """The kernel sets numa_preferred_nid for the first time in the same hinting fault that calls
    task_numa_migrate(), so the sample before the first move often still reads -1 (seen on the lab VM,
    docs/numa-effect-pilot.md): that is no reading, and P stands in, as before the first sample. Distances to
    node -1 are undefined; counting such a move as not closer made every first move 2 -> 1 a not-closer one."""
    moves = [(110.5, 2, 1), (112.5, 2, 3)]  # both before the first sample naming a node (t = 115.01)
    rm = scenario.probe_metrics("winner", 1, capture(moves, no_pref_until=15), scenario.ScenarioParams())
    assert (rm.moves, rm.third_moves, rm.closer, rm.not_closer) == (2, 2, 1, 1)


def test_a_run_that_never_gets_local_is_censored_at_the_window():
    cap = capture()
    cap["samples"] = "".join(sample(100 + i + 0.01, 4, 0, {0: 16384}) for i in range(61))
    rm = scenario.probe_metrics("off", 1, cap, scenario.ScenarioParams())
    assert rm.local_share_30s == 0.0 and not rm.reached_90 and rm.time_to_90 == 60.0


def test_a_censored_run_counts_as_the_registered_window_not_the_measured_one():
    """Two runs that never get local tie on time to 90 %: the window's milliseconds are no difference."""
    cap = capture()
    cap["samples"] = "".join(sample(100 + i + 0.01, 4, 0, {0: 16384}) for i in range(61))
    cap["probe"] = cap["probe"].replace(f"done t={160 * S}", f"done t={160 * S + 37_000_000}")
    rm = scenario.probe_metrics("off", 1, cap, scenario.ScenarioParams())
    assert rm.seconds == 60.037 and rm.time_to_90 == 60.0 and not rm.reached_90


def test_a_probe_that_did_not_finish_is_a_clear_error():
    cap = capture()
    cap["probe"] = "touched pid=321 t=1\nnuma_probe: node 0 or 2 has no CPUs (or does not exist)\n"
    with pytest.raises(scenario.ScenarioError) as ei:
        scenario.probe_metrics("off", 1, cap, scenario.ScenarioParams(), "lab-vm")
    assert "did not finish" in ei.value.what and "has no CPUs" in ei.value.what
    assert ei.value.where == "lab-vm" and "nodes P and S" in ei.value.fix


def test_report_primary_first_with_paired_verdicts():
    runs = []
    for r in range(1, 9):
        runs.append(
            scenario.probe_metrics("off", r, capture([(105.0, 2, 3), (110.0 + r, 2, 3)]), scenario.ScenarioParams())
        )
        runs.append(scenario.probe_metrics("winner", r, capture([(105.0, 2, 1)]), scenario.ScenarioParams()))
    rep = scenario.report(runs)
    assert rep["primary"] == "not_closer_per_min"
    assert rep["verdicts"]["not_closer_per_min"]["winner"] == paired.BETTER
    assert rep["verdicts"]["local_share_30s"]["winner"] == paired.EQUIVALENT  # same samples: difference 0
    assert rep["verdicts"]["closer_per_min"]["winner"] == paired.DESCRIPTIVE  # reported, not tested
    assert rep["paired"]["closer_per_min"]["winner"]["p_adj"] is None
    assert rep["paired"]["pages_migrated_per_min"]["winner"]["p_adj"] is not None
    short = scenario.report(runs[:4])
    assert short["verdicts"]["not_closer_per_min"]["winner"] == paired.no_verdict(2)


def test_choose_nodes_needs_a_closer_and_a_not_closer_third_node():
    assert scenario.choose_nodes(metrics.parse_topo(TOPO)) == (0, 2)
    two = metrics.parse_topo("node 0 cpus 0 dist 10 32\nnode 1 cpus 1 dist 32 10\n")
    with pytest.raises(scenario.ScenarioError, match="no node pair fits"):
        scenario.choose_nodes(two)
    flat = metrics.parse_topo(
        "\n".join(f"node {n} cpus {n} dist " + " ".join("10" if a == n else "20" for a in range(4)) for n in range(4))
    )
    with pytest.raises(scenario.ScenarioError):
        scenario.choose_nodes(flat)


def test_run_script_is_valid_sh_and_filters_on_the_probe_pid():
    sh = scenario.run_script("/tmp/x/numa_probe", [scenario.ScenarioParams(source_busy=True)], "inst", "/tmp/g")
    assert subprocess.run(["sh", "-n"], input=sh, text=True).returncode == 0
    assert "TID0=$PID0" in sh and 'echo "pid == $TID0" > $I0/events/sched/sched_move_numa/filter' in sh
    assert "src_pid == $TID0 || dst_pid == $TID0" in sh and "echo boot > $I0/trace_clock" in sh
    assert "cat /proc/$PID0/task/$TID0/stat" in sh and "/proc/$PID0/numa_maps" in sh
    assert "I0=$T/instances/inst;" in sh
    assert "/tmp/x/numa_probe -P 0 -S 2 -m 64 -d 60 -g /tmp/g -B -F" in sh
    assert '"=== samples"' in sh and '"=== trace"' in sh and '"=== samples.0"' not in sh  # one probe: plain names


def test_run_script_of_two_probes_traces_each_in_its_own_instance_on_its_own_pid():
    two = [scenario.ScenarioParams(), scenario.ScenarioParams(pref=1, src=3)]
    sh = scenario.run_script("/tmp/x/numa_probe", two, "inst", "/tmp/g")
    assert subprocess.run(["sh", "-n"], input=sh, text=True).returncode == 0
    assert "/tmp/x/numa_probe -P 0 -S 2 -m 64 -d 60 -g /tmp/g -F" in sh
    assert "/tmp/x/numa_probe -P 1 -S 3 -m 64 -d 60 -g /tmp/g -F" in sh  # one go file releases both
    assert "I0=$T/instances/inst-0;" in sh and "I1=$T/instances/inst-1;" in sh
    assert "TID1=$PID1" in sh and 'echo "pid == $TID1" > $I1/events/sched/sched_migrate_task/filter' in sh
    assert "src_pid == $TID1 || dst_pid == $TID1" in sh
    for name in ("probe", "samples", "trace", "tid", "rc"):
        assert f'"=== {name}.0"' in sh and f'"=== {name}.1"' in sh
    with pytest.raises(ValueError):
        scenario.run_script("/tmp/x/numa_probe", [], "inst", "/tmp/g")


def test_run_script_of_a_two_thread_probe_traces_each_thread_on_its_own_tid():
    sh = scenario.run_script("/tmp/x/numa_probe", [scenario.ScenarioParams(threads=2)], "inst", "/tmp/g")
    assert subprocess.run(["sh", "-n"], input=sh, text=True).returncode == 0
    assert "/tmp/x/numa_probe -P 0 -S 2 -m 64 -d 60 -g /tmp/g -t 2 -F" in sh and sh.count("numa_probe -P") == 1
    assert "TID0=$PID0" in sh and "TID1=$(grep '^thread tid=' $O0 | sed -n 1p | cut -d= -f2)" in sh
    assert 'echo "pid == $TID1" > $I1/events/sched/sched_move_numa/filter' in sh
    assert "cat /proc/$PID0/task/$TID1/stat" in sh and "grep anon= /proc/$PID0/numa_maps" in sh
    assert '"=== samples.1"' in sh and '"=== tid.1"; echo $TID1' in sh
    assert scenario.units([scenario.ScenarioParams(threads=2), scenario.ScenarioParams()]) == [(0, 0), (0, 1), (1, 0)]


def test_a_threads_record_is_its_own_tid_and_its_own_events():
    cap = capture([(105.0, 2, 3)], stick=2)
    cap["tid"] = "322\n"  # the second thread: none of the capture's events (pid 321) are its own
    rm = scenario.probe_metrics("off", 1, cap, scenario.ScenarioParams(threads=2))
    assert rm.pid == 322 and (rm.moves, rm.found_nothing) == (0, 0)
    cap["tid"] = "321\n"
    assert scenario.probe_metrics("off", 1, cap, scenario.ScenarioParams(threads=2)).moves == 1


def test_a_multi_instance_run_is_one_record_of_both_probes():
    params = scenario.ScenarioParams()
    sections = {"topo": TOPO + "\n"}
    for k, cap in enumerate((capture([(105.0, 2, 3)], stick=2), capture([(105.0, 2, 3), (120.0, 3, 2)]))):
        for name in ("probe", "samples", "trace", "rc"):
            sections[f"{name}.{k}"] = cap[name]
        sections.update({"vmstat_before": cap["vmstat_before"], "vmstat_after": cap["vmstat_after"]})
    one = scenario.instance_sections(sections, 1, 2)
    assert set(one) == {"topo", "vmstat_before", "vmstat_after", "probe", "samples", "trace", "rc"}
    a = scenario.probe_metrics("off", 3, scenario.instance_sections(sections, 0, 2), params)
    b = scenario.probe_metrics("off", 3, one, params)
    rm = scenario.combine([a, b])
    assert (rm.label, rm.round, rm.not_closer, rm.found_nothing) == ("off", 3, a.not_closer + b.not_closer, 2)
    assert rm.not_closer_per_min == round((a.not_closer_per_min + b.not_closer_per_min) / 2, 3)
    assert rm.passes_per_s == 15.0 and rm.reached_90 == (a.reached_90 and b.reached_90)
    assert rm.pages_migrated_per_min == a.pages_migrated_per_min == 600.0  # host-wide, not summed
    assert [i["pid"] for i in rm.instances] == [321, 321] and "vmstat_delta" not in rm.instances[0]
    a.final_node, b.final_node = 3, 3
    assert scenario.combine([a, b]).final_node == 3  # where both ended
    b.final_node = 2
    rm = scenario.combine([a, b])
    assert rm.final_node is None and [i["final_node"] for i in rm.instances] == [3, 2]  # each its own
    assert lprobe._ends(rm) == "nodes 3/2" and lprobe._ends(a) == "node 3"


def test_the_multi_instance_report_tests_the_probes_throughput_as_a_secondary():
    runs = []
    for r in range(1, 9):
        off = scenario.probe_metrics("off", r, capture([(105.0, 2, 3)]), scenario.ScenarioParams())
        won = scenario.probe_metrics("winner", r, capture(), scenario.ScenarioParams())
        won.passes_per_s = off.passes_per_s * (0.5 if r % 3 else 0.6)  # crowded: about half the passes
        runs += [off, won]
    multi = scenario.report(runs, multi=True)
    assert multi["verdicts"]["passes_per_s"]["winner"] == paired.WORSE
    assert multi["paired"]["passes_per_s"]["winner"]["p_adj"] is not None
    assert "passes_per_s" not in scenario.report(runs)["verdicts"]  # the main case registered three


def test_a_report_without_upstream_compares_against_its_first_arm():
    """Amendment 6's check ran winner and alt-group-exempt only; its report crashed on the missing `off`."""
    runs = [
        scenario.probe_metrics(arm, r, capture([(105.0, 2, 3)] if arm == "winner" else []), scenario.ScenarioParams())
        for r in range(1, 7)
        for arm in ("winner", "alt-group-exempt")
    ]
    rep = scenario.report(runs)
    assert rep["base"] == "winner" and rep["verdicts"][scenario.PRIMARY]["alt-group-exempt"] == paired.BETTER


def test_probe_binary_refuses_bad_usage_and_a_node_without_cpus():
    probe = probe_binary()
    r = subprocess.run([str(probe), "-P", "0"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "need -P and -S" in r.stderr
    r = subprocess.run(
        [str(probe), "-P", "0", "-S", "63", "-g", "/nonexistent"], capture_output=True, text=True, timeout=10
    )
    assert r.returncode == 3 and "node 0 or 63 has no CPUs" in r.stderr


# ---------------------------------------------------------------------------------------------- load-balancer returns

DATA = Path(__file__).resolve().parents[1] / "data" / "numa_effect"
TRACED_PILOT = Path(__file__).resolve().parents[2] / "docs" / "numa-effect" / "pilot" / "probe-backplane4-traced.json"
CPU_NODE = {c: c // 2 for c in range(8)}  # backplane4 x 2 CPUs


def ev(line: str) -> metrics.TraceEvent:
    (e,) = metrics.parse_trace(line)
    return e


def move(ts, src_cpu, dst_cpu, pid=321):
    return ev(
        f" p-{pid} [000] .... {ts:.6f}: sched_move_numa: pid={pid} tgid={pid} ngid=0 src_cpu={src_cpu} "
        f"src_nid={src_cpu // 2} dst_cpu={dst_cpu} dst_nid={dst_cpu // 2}"
    )


def mig(ts, orig, dest, pid=321):
    return ev(
        f" m-1 [000] d..1 {ts:.6f}: sched_migrate_task: comm=p pid={pid} prio=120 orig_cpu={orig} dest_cpu={dest}"
    )


def swap(ts, a_pid, a_cpu, b_pid, b_cpu):
    return ev(
        f" p-{a_pid} [000] .... {ts:.6f}: sched_swap_numa: src_pid={a_pid} src_tgid={a_pid} src_ngid=0 "
        f"src_cpu={a_cpu} src_nid={a_cpu // 2} dst_pid={b_pid} dst_tgid={b_pid} dst_ngid=0 dst_cpu={b_cpu} "
        f"dst_nid={b_cpu // 2}"
    )


def test_a_real_traced_run_has_two_load_balancer_returns_to_the_source():
    """A captured run of upstream (docs/numa-effect/pilot/probe-backplane4-traced.json, run 1 of boot 1): NUMA
    balancing moves the probe 2 -> 3, 3 -> 2, 3 -> 2; after each of the last two the load balancer takes it back
    to node 3 (cpu 4 -> 6 at 18.0 s, 4 -> 7 at 20.4 s). The migrations inside node 3 (6 -> 7) and NUMA
    balancing's own migrations are not returns; the probe's own move to S happens before the window."""
    sections = metrics.split_sections((DATA / "probe" / "probe-lab-vm-traced-off_moves-3_lb-returns-2.txt").read_text())
    rm = scenario.probe_metrics("off", 1, sections, scenario.ScenarioParams(mb=32, seconds=20))
    assert rm.move_path == [[2, 3], [3, 2], [3, 2]]
    assert (rm.lb_returns, rm.lb_returns_to_source) == (2, 2)
    assert rm.lb_returns_per_min == pytest.approx(2 / (rm.seconds / 60), abs=1e-3)
    assert rm.migrations == 8  # every sched_migrate_task in the window, for comparison
    assert rm.traced_migrations == 9  # and the move onto S (cpu 0 -> 4) just before the window


def test_load_balancer_returns_agree_with_the_move_paths_on_every_traced_run():
    """Over every run of the traced pilot: the returns that happen before the run's last NUMA move are exactly
    the breaks in its move path (a move that does not start where the one before ended: how issue 42 counted
    returns from the study's move paths), and the total counts at least as many (it also sees a return after the
    last move)."""
    runs = json.loads(TRACED_PILOT.read_text())["runs"]
    assert len(runs) >= 10
    seen_after_last = 0
    for r in runs:
        sec = r["sections"]
        marks = scenario.parse_probe(sec["probe"])
        cpu_node = metrics.parse_topo(sec["topo"]).cpu_node
        pid = marks["touched"]["pid"]
        window = [e for e in metrics.parse_trace(sec["trace"]) if marks["start"]["t"] <= e.ts_ns <= marks["done"]["t"]]
        placements = [i for i, e in enumerate(window) if e.event in ("sched_move_numa", "sched_swap_numa")]
        path = [[e.fields["src_nid"], e.fields["dst_nid"]] for e in window if e.event == "sched_move_numa"]
        breaks = sum(1 for a, b in zip(path, path[1:]) if b[0] != a[1])
        before_last = scenario.lb_returns(window[: placements[-1]], pid, cpu_node)[0] if placements else 0
        total, to_source = scenario.lb_returns(window, pid, cpu_node)
        assert before_last == breaks, (r["arm"], r["round"], path)
        assert total >= breaks and to_source <= total
        seen_after_last += total - before_last
    assert seen_after_last > 0  # the capture has returns after a run's last move, which move paths miss


def test_load_balancer_return_definition_edges():
    # NUMA balancing's own migration is not a return; one inside the node is not; the first one off the node is
    assert scenario.lb_returns([move(1, 4, 2), mig(1.001, 4, 2), mig(2, 2, 3), mig(3, 3, 4)], 321, CPU_NODE) == (1, 1)
    # a return elsewhere than the source counts, but not as to the source; a placement is returned at most once
    assert scenario.lb_returns([move(1, 4, 2), mig(1.001, 4, 2), mig(2, 2, 6), mig(3, 6, 0)], 321, CPU_NODE) == (1, 0)
    # no placement: the load balancer's moves are not returns
    assert scenario.lb_returns([mig(1, 4, 6), mig(2, 6, 2)], 321, CPU_NODE) == (0, 0)
    # another task's events are ignored
    assert scenario.lb_returns([move(1, 4, 2, pid=9), mig(2, 2, 4, pid=9), mig(3, 2, 4)], 321, CPU_NODE) == (0, 0)
    # a swap places the task whichever side of it the task is: as dst_pid it goes dst_cpu -> src_cpu
    as_dst = [swap(1, 77, 6, 321, 4), mig(1.001, 4, 6), mig(2, 6, 4)]
    assert scenario.lb_returns(as_dst, 321, CPU_NODE) == (1, 1)
    as_src = [swap(1, 321, 4, 77, 6), mig(1.001, 4, 6), mig(2, 6, 0)]
    assert scenario.lb_returns(as_src, 321, CPU_NODE) == (1, 0)
    # the placement never happened (the task was moved elsewhere first): that move leaves another node, no return
    assert scenario.lb_returns([move(1, 4, 2), mig(1.001, 4, 6), mig(2, 6, 4)], 321, CPU_NODE) == (0, 0)


def test_combined_runs_sum_returns_and_average_their_rate():
    sections = metrics.split_sections((DATA / "probe" / "probe-lab-vm-traced-off_moves-3_lb-returns-2.txt").read_text())
    a = scenario.probe_metrics("off", 1, sections, scenario.ScenarioParams(mb=32, seconds=20))
    b = scenario.probe_metrics("off", 1, capture(), scenario.ScenarioParams())
    c = scenario.combine([a, b])
    assert (c.lb_returns, c.lb_returns_to_source) == (2, 2)
    assert c.traced_migrations == a.traced_migrations + b.traced_migrations
    assert c.lb_returns_per_min == pytest.approx((a.lb_returns_per_min + 0.0) / 2, abs=1e-3)


def test_the_distance_to_its_memory_at_the_end_weighs_each_node_by_its_pages():
    """Issue 42 item 5: the run's end is judged by how far the task's node is from its pages (10 when all are
    local). capture() ends on node 1 (CPU 2) with 600 * 27 pages there and the rest on node 0, 16 away."""
    rm = scenario.probe_metrics("off", 1, capture(), scenario.ScenarioParams())
    on0, on1 = 16384 - 600 * 27 + 3, 600 * 27  # the stack's 3 pages are on node 0 (capture()'s first node)
    assert rm.final_node == 1
    assert rm.mem_distance == pytest.approx((on0 * 16 + on1 * 10) / (on0 + on1), abs=1e-3)
    s = scenario.Sample(0, 4, 0, {2: 10, 3: 30})
    topo = metrics.parse_topo(TOPO)
    assert scenario.mem_distance(s, 2, topo) == pytest.approx((10 * 10 + 30 * 16) / 40)
    assert scenario.mem_distance(s, 0, topo) == 32.0
    assert scenario.mem_distance(s, None, topo) is None
    assert scenario.mem_distance(scenario.Sample(0, 4, 0, {}), 2, topo) is None
    assert scenario.mem_distance(scenario.Sample(0, 4, 0, {7: 1}), 2, topo) is None  # no such node's distance
