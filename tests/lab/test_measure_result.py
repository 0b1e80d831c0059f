"""The study's result document: bench/numa_effect.py result on a synthetic study file (written with
numaforge.measure.study.save, the probe's own writer) refuses below 20 blocks and, at 20, writes every
endpoint's paired line, the rules in order, the result statement and the picture."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from numaforge.measure import scenario, study
from numaforge.measure.scenario import ProbeMetrics

ROOT = Path(__file__).resolve().parents[2]
ARMS = ["off", "winner", "null"]


def write_study(path: Path, blocks: int, designs: dict | None = None) -> None:
    out: dict[str, list[list[ProbeMetrics]]] = {scenario.MAIN_CASE: [], scenario.CONTROL_CASE: []}
    for b in range(1, blocks + 1):
        j = ((b * 7) % 5 - 2) / 10
        for case, moves in ((scenario.MAIN_CASE, 4.0), (scenario.CONTROL_CASE, 0.2)):
            block = []
            for arm in ARMS:
                fixes = arm == "winner" and case == scenario.MAIN_CASE
                block.append(
                    ProbeMetrics(
                        arm,
                        b,
                        not_closer_per_min=(0.5 if fixes else moves) + j * (arm == "off"),
                        local_share_30s=60.0 + j,
                        time_to_90=30.0 - j if b % 2 == 0 else 60.0,  # censored: the registered window
                        reached_90=b % 2 == 0,
                        pages_migrated_per_min=1000.0 + 10 * j,
                        closer_per_min=1.0 if fixes else 0.0,
                        found_nothing_per_min=0.0,
                    )
                )
            out[case].append(block)
    settings = {"arms": ARMS, "modules": {"off": None, "winner": "ab" * 32, "null": "cd" * 32}, "seed": 13}
    if designs is not None:
        settings["designs"] = designs
    study.save(path, settings | {"params": {"pref": 0, "src": 2, "seconds": 60, "mb": 64}}, out, [{"from_block": 1}])


def bench(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(ROOT / "bench" / "numa_effect.py"), "result", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_a_study_short_of_20_blocks_gets_no_result(tmp_path):
    write_study(tmp_path / "s.json", 19)
    r = bench("--study", str(tmp_path / "s.json"), "--md", str(tmp_path / "r.md"))
    assert r.returncode == 2 and "19 blocks" in r.stderr and "judges at 20" in r.stderr
    assert not (tmp_path / "r.md").exists()


def test_a_finished_study_writes_its_result_document(tmp_path):
    write_study(tmp_path / "s.json", 20)
    md, png = tmp_path / "r.md", tmp_path / "r.png"
    r = bench("--study", str(tmp_path / "s.json"), "--md", str(md), "--png", str(png))
    assert r.returncode == 0, r.stderr
    text = md.read_text()
    assert "20 blocks per case" in text and "![per-block paired differences](r.png)" in text
    assert "not-closer third-node moves of the probe per minute (primary): better: -3.5" in text
    assert "closer third-node moves per minute: descriptive (not tested): +1 /min [+1, +1] over 20 rounds" in text
    assert (
        "| 1 | null | yes |" in text
        and "| 3 | winner | yes |" in text
        and "| 2 | winner | yes |" in text
        and "| 2 | null | yes |" in text
    )
    assert "No design is better than upstream on outcomes in this scenario; shipping winner is a decision" in text
    assert "(descriptive" not in text.split("Paired differences")[0]  # the table shows no verdict for them
    assert "censored at the window): off 10, winner 10, null 10" in text
    assert "2-node VM" in text and "no design is cleared" in text
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert "basis: mechanism only" in r.stdout


def test_the_result_names_each_arm_by_the_patch_the_study_recorded_not_by_the_tree_now(tmp_path):
    """The shipped 0001 was swapped after the study (winner was closer-or-gain then): the document must say what
    each arm was and take rule 5's code sizes from the study's record, not from what the arm names mean now."""
    designs = {
        "winner": {"series": "s", "patches": ["0001-then.patch"], "subject": "sched/numa: Then", "code_lines": 3},
        "null": {"series": "n", "patches": ["0001-null.patch"], "subject": "sched/numa: Null", "code_lines": 1},
    }
    write_study(tmp_path / "s.json", 20, designs)
    md = tmp_path / "r.md"
    assert bench("--study", str(tmp_path / "s.json"), "--md", str(md)).returncode == 0
    text = md.read_text()
    assert "  - winner: sched/numa: Then (0001-then.patch)" in text
    assert "(rule 5's code size): winner 3\n" in text  # recorded, not the tree's 10; null is no design
    write_study(tmp_path / "old.json", 20)
    assert bench("--study", str(tmp_path / "old.json"), "--md", str(md)).returncode == 0
    text = md.read_text()
    assert "does not record its designs: code sizes are of the arms in the tree now" in text
    assert "(rule 5's code size): winner 13\n" in text  # the tree's 0000 (4) + 0001 (group-exempt, 9)


def write_multi_study(path: Path, blocks: int, crowded: bool) -> None:
    """A multi-instance control study: winner makes no not-closer moves; `crowded`: its probes get half the passes."""
    runs = []
    for b in range(1, blocks + 1):
        j = ((b * 7) % 5 - 2) / 10
        block = []
        for arm in ("off", "winner"):
            block.append(
                ProbeMetrics(
                    arm,
                    b,
                    not_closer_per_min=(0.0 if arm == "winner" else 6.0 + j),
                    local_share_30s=1.0 + j,
                    time_to_90=60.0,
                    pages_migrated_per_min=10000.0 + 100 * j,
                    closer_per_min=0.0,
                    found_nothing_per_min=4.0,
                    passes_per_s=(100.0 if crowded and arm == "winner" else 200.0) + j,
                )
            )
        runs.append(block)
    settings = {"arms": ["off", "winner"], "modules": {"off": None, "winner": "ab" * 32}, "seed": 13}
    settings |= {"topology": "backplane4", "second": [1, 3], "params": {"pref": 0, "src": 2, "seconds": 60, "mb": 64}}
    study.save(path, settings, {scenario.MULTI_CASE: runs}, [{"from_block": 1}])


def control(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(ROOT / "bench" / "numa_effect.py"), "control", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_a_control_study_is_judged_by_its_own_rule(tmp_path):
    write_multi_study(tmp_path / "ok.json", 20, crowded=False)
    r = control("--study", str(tmp_path / "ok.json"), "--md", str(tmp_path / "ok.md"))
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "ok.md").read_text()
    assert "second probe at once with P = node 1, S = node 3" in text and "Holm over the four" in text
    assert "| passes over the probe's buffer per second (/s) |" in text
    assert "| amendments 4/5/7: no harm (every secondary better or TOST-equivalent) | winner | yes |" in text
    assert "| 3: primary better than the base (reported; amendment 7: required) | winner | yes |" in text
    assert "censored at the window): off 20, winner 20" in text
    write_multi_study(tmp_path / "crowded.json", 20, crowded=True)
    r = control("--study", str(tmp_path / "crowded.json"))
    assert r.returncode == 0, r.stderr
    assert (
        "| amendments 4/5/7: no harm (every secondary better or TOST-equivalent) | winner | no | no harm: " in r.stdout
    )
    assert "passes_per_s: worse: -100" in r.stdout


def write_threads_study(path: Path, blocks: int) -> None:
    """A two-thread study of three arms (amendment 6): winner migrates twice the pages, group-exempt as off."""
    runs = []
    for b in range(1, blocks + 1):
        j = ((b * 7) % 5 - 2) / 10
        block = []
        for arm in ("off", "winner", "alt-group-exempt"):
            block.append(
                ProbeMetrics(
                    arm,
                    b,
                    not_closer_per_min=(1.0 if arm == "winner" else 5.0) + j,
                    local_share_30s=5.0 + j,
                    time_to_90=60.0,
                    pages_migrated_per_min=(6000.0 if arm == "winner" else 3000.0) + 100 * j,
                    closer_per_min=0.0,
                    found_nothing_per_min=1.0,
                    passes_per_s=200.0 + j,
                    grouped_share=80.0 + 10 * j,
                )
            )
        runs.append(block)
    settings = {"arms": ["off", "winner", "alt-group-exempt"], "modules": {"off": None}, "seed": 13}
    settings |= {"topology": "backplane4", "params": {"pref": 0, "src": 2, "seconds": 60, "mb": 64, "threads": 2}}
    study.save(path, settings, {scenario.THREADS_CASE: runs}, [{"from_block": 1}])


def test_a_control_of_two_designs_compares_them_directly_and_shows_the_groups(tmp_path):
    write_threads_study(tmp_path / "t.json", 20)
    r = control("--study", str(tmp_path / "t.json"))
    assert r.returncode == 0, r.stderr
    assert "| amendments 4/5/7: no harm (every secondary better or TOST-equivalent) | winner | no |" in r.stdout
    assert (
        "| amendments 4/5/7: no harm (every secondary better or TOST-equivalent) | alt-group-exempt | yes |" in r.stdout
    )
    assert "in a numa_group, per run (lowest-highest): off 78-82 %, winner 78-82 %, alt-group-exempt 78-82 %" in (
        r.stdout
    )
    direct = r.stdout.split("Exploratory, no rule judges it: **alt-group-exempt - winner**", 1)[1]
    assert "numa_pages_migrated per minute: better: -3e+03 /min" in direct and "(primary): worse: +4 /min" in direct


def test_the_group_check_passes_only_when_no_run_was_ever_grouped(tmp_path):
    def runs(shares):
        return {scenario.MAIN_CASE: [[ProbeMetrics("winner", b, grouped_share=s)] for b, s in enumerate(shares, 1)]}

    for shares, rc in (([0.0] * 6, 0), ([0.0] * 5 + [2.5], 1), ([0.0] * 5 + [None], 1)):
        study.save(tmp_path / "b.json", {"arms": ["winner"]}, runs(shares), [])
        r = bench_cmd("groups", "--study", str(tmp_path / "b.json"))
        assert r.returncode == rc, r.stdout + r.stderr
        assert f"source spare / winner: 6 runs, {rc} in a numa_group or unread" in r.stdout


def bench_cmd(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(ROOT / "bench" / "numa_effect.py"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_control_refuses_a_short_study_and_the_main_study(tmp_path):
    write_multi_study(tmp_path / "short.json", 19, crowded=False)
    r = control("--study", str(tmp_path / "short.json"))
    assert r.returncode == 2 and "has 19 blocks" in r.stderr
    write_study(tmp_path / "main.json", 20)
    r = control("--study", str(tmp_path / "main.json"))
    assert r.returncode == 2 and "is the main study: its document is `result`" in r.stderr


def write_knob_study(path: Path, blocks: int, harm: bool) -> None:
    """A knob control (amendment 7): arms knob-off (the base) and knob-on, the main case's probe on a full kernel;
    knob-on makes fewer not-closer moves and, with ``harm``, migrates twice the pages."""
    runs = []
    for b in range(1, blocks + 1):
        j = ((b * 7) % 5 - 2) / 10
        block = []
        for arm in ("knob-off", "knob-on"):
            on = arm == "knob-on"
            block.append(
                ProbeMetrics(
                    arm,
                    b,
                    not_closer_per_min=(0.2 if on else 3.0) + j,
                    local_share_30s=60.0 + j,
                    time_to_90=30.0 + j,
                    reached_90=True,
                    pages_migrated_per_min=(2000.0 if on and harm else 1000.0) + 10 * j,
                    closer_per_min=1.0,
                    found_nothing_per_min=0.5,
                    grouped_share=0.0,
                )
            )
        runs.append(block)
    settings = {
        "arms": ["knob-off", "knob-on"],
        "modules": {},
        "seed": 13,
        "features": {"knob-off": "NO_NUMA_PREFER_LOCAL", "knob-on": "NUMA_PREFER_LOCAL"},
        "topology": "backplane4",
        "params": {"pref": 0, "src": 2, "seconds": 60, "mb": 64},
    }
    study.save(path, settings, {scenario.KNOB_CASE: runs}, [{"from_block": 1}])


def test_the_knob_control_is_judged_against_the_feature_off(tmp_path):
    """Amendment 7: knob-on against knob-off (the report's base, not `off`), rule 3 and no harm over the main
    case's three secondaries; knob-off gets no finding of its own and there is no direct comparison."""
    write_knob_study(tmp_path / "k.json", 20, harm=False)
    r = control("--study", str(tmp_path / "k.json"))
    assert r.returncode == 0, r.stderr
    assert "| 3: primary better than the base (reported; amendment 7: required) | knob-on | yes |" in r.stdout
    assert "| amendments 4/5/7: no harm (every secondary better or TOST-equivalent) | knob-on | yes |" in r.stdout
    assert "-equivalent) | knob-off |" not in r.stdout and "Exploratory" not in r.stdout
    assert "knob-off NO_NUMA_PREFER_LOCAL, knob-on NUMA_PREFER_LOCAL" in r.stdout
    assert "passes over the probe's buffer" not in r.stdout  # the main case's endpoints, not the multi ones
    write_knob_study(tmp_path / "h.json", 20, harm=True)
    r = control("--study", str(tmp_path / "h.json"))
    assert r.returncode == 0, r.stderr
    assert "| amendments 4/5/7: no harm (every secondary better or TOST-equivalent) | knob-on | no |" in r.stdout


def test_probe_refuses_bad_pairs_before_booting_a_vm(tmp_path):
    """Issue 42 item 1: --pairs is checked against the topology's nodes with CPUs before the VM boots (exit 2,
    nothing written); cpuless4's node 3 has no CPU, so it cannot be P or S."""
    for topo, text in (
        ("backplane4", "1:1"),
        ("backplane4", "0:4"),
        ("cpuless4", "3:0"),
        ("2node", "0:2"),
        ("nps2", "x"),
    ):
        out = tmp_path / f"out-{topo}"
        r = bench_cmd("probe", "--topology", topo, "--pairs", text, "--out", str(out))
        assert r.returncode == 2, r.stdout + r.stderr
        assert "--pairs" in r.stderr and f"topology {topo}" in r.stderr
        assert not out.exists()
    r = bench_cmd("probe", "--pairs", "classes", "--knob", "--out", str(tmp_path / "k"))
    assert r.returncode != 0 and "--pairs runs the main case" in r.stderr and not (tmp_path / "k").exists()
