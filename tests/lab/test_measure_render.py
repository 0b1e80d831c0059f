"""numaforge.measure.render: the table and the PNG from a report; `invoke numa-effect` input errors."""

import json
import subprocess
import sys

from numaforge.measure import metrics as mx
from numaforge.measure import render, runner
from numaforge.paths import ROOT


def report() -> dict:
    runs = [mx.RunMetrics("off", i + 1, cross_numa_rate=40.0 + i % 3, mean_latency_us=400.0 + i) for i in range(10)] + [
        mx.RunMetrics("winner", i + 1, cross_numa_rate=12.0 + i % 3, mean_latency_us=400.0 + i + (-1) ** i * 0.5)
        for i in range(10)
    ]
    return runner.report(runs)


def test_markdown_table_has_medians_intervals_and_verdicts():
    md = render.markdown(report(), keys=("cross_numa_rate", "mean_latency_us"))
    lines = md.splitlines()
    assert lines[0] == "| metric | off | winner |"
    rate = next(ln for ln in lines if ln.startswith("| cross-NUMA migration rate"))
    assert "41.0% [" in rate and "(better)" in rate
    lat = next(ln for ln in lines if ln.startswith("| mean unit latency (us)"))
    assert "(equivalent)" in lat  # paired differences +-0.5 us, inside the 5 % TOST margin


def test_plot_writes_a_png(tmp_path):
    p = render.plot({"nps2 single": report(), "2node single": report()}, tmp_path / "x.png")
    assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 5000
    assert not list(tmp_path.glob(".*"))


def test_numa_effect_task_refuses_arms_that_are_not_built(tmp_path):
    inv = tmp_path / "inv.yaml"
    inv.write_text("version: 1\nhosts:\n  h1:\n    ssh: {address: 127.0.0.1, port: 1, user: root}\n")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "invoke",
            "numa-effect",
            "--inventory",
            str(inv),
            "--host",
            "h1",
            "--target",
            "no-such-target",
            "--json",
            str(tmp_path / "r.json"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    # the preflight refuses it before any host (exit 2, numaforge.cli.values.preflight): the report says refused
    assert r.returncode == 2, r.stdout + r.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["status"] == "refused" and doc["hosts"] == [], doc
    assert "no built module" in r.stdout + r.stderr and "bench/numa_effect.py build" in r.stdout + r.stderr


def test_headline_puts_off_to_winner_and_the_null_control_side_by_side():
    rep = report()
    md = render.headline({"nps2 single": rep})
    row = md.splitlines()[2]
    assert row.startswith("| nps2 single | 41.0% [") and "-> 13.0% [" in row
    assert "| better |" in row and "| equivalent |" in row and row.count("not run") == 2


def test_table_of_a_one_round_report_says_no_verdict():
    rep = runner.report([mx.RunMetrics("off", 1, local_ratio=84.9), mx.RunMetrics("winner", 1, local_ratio=85.0)])
    row = next(r for r in render.table_rows(rep) if r[0].startswith("local NUMA hint faults"))
    assert row[2] == "85.0% [85.0%, 85.0%] (no verdict: 1 round, need >= 6 for an interval)"


def test_verdict_lines_put_the_primary_first_with_its_interval():
    runs = [
        mx.RunMetrics(a, r, third_not_closer=v + r % 2, cross_numa_rate=50.0 + r % 3)
        for r in range(1, 9)
        for a, v in (("off", 10), ("winner", 4))
    ]
    lines = render.verdict_lines(runner.report(runs), "winner")
    assert lines[0].startswith("third-node moves not closer (primary): lower: -6 [-6, -6] over 8 rounds, p=0.00781")
    rate = next(ln for ln in lines if ln.startswith("cross-NUMA migration rate"))
    assert rate.startswith("cross-NUMA migration rate: equivalent: +0 pts [+0, +0] over 8 rounds")


def test_numa_effect_task_checks_the_probe_options_before_touching_a_host(tmp_path):
    inv = tmp_path / "inv.yaml"
    inv.write_text("version: 1\nhosts:\n  h1:\n    ssh: {address: 127.0.0.1, port: 1, user: root}\n")
    base = [sys.executable, "-m", "invoke", "numa-effect", "--inventory", str(inv), "--host", "h1"]
    for extra, what in (
        (["--scenario", "nope"], "--scenario 'nope' is not one of workload, probe"),
        (["--scenario", "probe", "--pref-node", "0"], "--pref-node and --src-node go together"),
        (["--scenario", "probe", "--second-probe", "1"], "bad --second-probe '1'"),
        (["--scenario", "probe", "--second-probe", "2:2"], "two different node numbers"),
        (["--scenario", "probe", "--probe-threads", "17"], "the probe runs at most 16 threads"),
        (["--knob"], "--knob is a probe control"),
        (["--scenario", "probe", "--knob", "--probe-threads", "2"], "runs its own two arms"),
        (["--scenario", "probe", "--knob", "--arm", "winner"], "runs its own two arms"),
        (["--pairs", "all"], "--pairs is a probe option"),
        (["--scenario", "probe", "--pairs", "3:3"], "bad --pairs '3:3'"),
        (["--scenario", "probe", "--pairs", "0:1,x"], "bad --pairs 'x'"),
        (["--scenario", "probe", "--pairs", "all", "--knob"], "--pairs runs the main case per (P, S) pair"),
        (["--scenario", "probe", "--pairs", "classes", "--pref-node", "0", "--src-node", "2"], "--pairs runs"),
    ):
        r = subprocess.run(
            base + extra + ["--json", str(tmp_path / "r.json")], cwd=ROOT, capture_output=True, text=True, timeout=120
        )
        # refused by the preflight before any host (exit 2): the report says refused, with no host
        assert r.returncode == 2, (extra, r.stdout + r.stderr)
        doc = json.loads((tmp_path / "r.json").read_text())
        assert doc["status"] == "refused" and doc["hosts"] == [], (extra, doc)
        (tmp_path / "r.json").unlink()
        assert what in r.stdout + r.stderr, (extra, r.stdout + r.stderr)
