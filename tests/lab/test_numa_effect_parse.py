"""numa_effect's pure core on captured runs: the file name states the expected counts (the data is the spec)."""

import re
from pathlib import Path

import pytest

from numaforge import numa_effect as ne

DATA = Path(__file__).resolve().parents[1] / "data" / "numa_effect"
CAPTURES = sorted(DATA.glob("*.txt"))


def expected(name: str) -> dict[str, int]:
    return {k.replace("-", "_"): int(v) for k, v in re.findall(r"([a-z-]+)-(\d+)", name.split("_", 1)[1])}


def counts(path: Path) -> ne.RunCounts:
    s = ne.split_sections(path.read_text())
    delta = ne.vmstat_delta(ne.parse_vmstat(s["vmstat_before"]), ne.parse_vmstat(s["vmstat_after"]))
    return ne.count_run("off", ne.parse_trace(s["trace"]), ne.parse_phases(s["workload"]), 0, delta)


def test_there_are_captures():
    assert len(CAPTURES) >= 2


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_capture_counts_match_file_name(path):
    want = expected(path.name)
    got = counts(path)
    assert {"third_node_moves": got.third_node_moves, "stick_local": got.stick_local, "moves": got.moves,
            "swaps": got.swaps} == {"third_node_moves": want["third_node"], "stick_local": want["stick_local"],
                                    "moves": want["moves"], "swaps": want["swaps"]}


def test_handmade_vmstat_delta_keeps_only_numa_counters():
    got = counts(DATA / "handmade_third-node-2_stick-local-1_moves-3_swaps-1.txt")
    assert got.vmstat_delta == {"numa_hit": 150, "numa_hint_faults": 30, "numa_pages_migrated": 20}
    assert got.pids == [101, 102]
    assert got.unpinned_phases == 4


def test_parse_trace_reads_timestamp_and_fields():
    line = ("              nw-622     [003] ....   369.453885: sched_stick_numa: src_pid=622 src_tgid=622 "
            "src_ngid=0 src_cpu=3 src_nid=3 dst_pid=0 dst_tgid=0 dst_ngid=0 dst_cpu=-1 dst_nid=-1")
    (ev,) = ne.parse_trace("# comment\n" + line + "\nnot a trace line\n")
    assert ev.event == "sched_stick_numa"
    assert ev.ts_ns == 369_453_885_000
    assert ev.fields["dst_cpu"] == -1 and ev.fields["src_pid"] == 622


def test_parse_trace_accepts_tgid_column_format():
    line = ("   numa_workload-101   (  101) [001] d..3  1001.500000: sched_move_numa: pid=101 tgid=101 ngid=0 "
            "src_cpu=1 src_nid=1 dst_cpu=3 dst_nid=3")
    (ev,) = ne.parse_trace(line)
    assert ev.fields["dst_nid"] == 3 and ev.ts_ns == 1_001_500_000_000


def test_phases_end_where_the_next_begins_and_done_is_not_a_phase():
    ph = ne.parse_phases("phase pid=7 kind=warm t=10 preferred=-1\nphase pid=7 kind=unpinned t=20 preferred=0\n"
                         "phase pid=7 kind=done t=35 preferred=0\n")
    assert [(p.kind, p.start_ns, p.end_ns, p.preferred) for p in ph[7]] == [("warm", 10, 20, -1),
                                                                              ("unpinned", 20, 35, 0)]


def test_summarize_groups_counts_by_label_in_run_order():
    runs = [ne.RunCounts("off", third_node_moves=16, stick_local=0), ne.RunCounts("on", third_node_moves=0,
                                                                                  stick_local=17),
            ne.RunCounts("off", third_node_moves=6), ne.RunCounts("on", third_node_moves=1, stick_local=14)]
    s = ne.summarize(runs)
    assert s["third_node_moves"] == {"off": [16, 6], "on": [0, 1]}
    assert s["stick_local"] == {"off": [0, 0], "on": [17, 14]}
    assert s["third_node_moves_total"] == {"off": 22, "on": 1}


def test_run_script_uses_a_private_instance_with_mono_clock_and_the_three_events():
    text = ne.run_script("/tmp/x/numa_workload", ne.WorkloadParams(duration=12), "numaforge-abc")
    assert "instances/numaforge-abc" in text and "echo mono >" in text
    for e in ne.EVENTS:
        assert f"{e}" in text
    assert "-d 12" in text and "rmdir $I" in text
