"""The short CI version of the NUMA outcome benchmark (bench/numa_effect.py is the full run): `invoke
numa-effect` on the session lab VM (backplane4, 1 CPU per node) with the upstream kernel ("off") and the
shipped live patch ("winner"), 3 interleaved rounds of 8 s runs.

What it asserts is the machinery, not the direction of the effect: 3 rounds are too few for a paired
interval (numaforge.measure.paired needs 6, so every verdict is "no verdict") (the full benchmark, 10 rounds per arm, found "no detectable change" for
most outcomes on most topologies, docs/BENCHMARKS.md), so a direction assertion would be a coin toss. Checked:
both arms ran in every round in one boot, every run traced the workload's tasks and produced every outcome
metric, the report has medians with intervals and a verdict per metric, the JSON and the PNG are written, the
module is unloaded at the end. (With one CPU per node every migration crosses nodes, so the cross-NUMA rate is
100% here by construction; the benchmark uses 2 CPUs per node.) The alternatives and the null control need their own kpatch-builds, so they run
in the benchmark only.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from numaforge.measure import paired
from numaforge.paths import ROOT, kpatch_build_dir

pytestmark = pytest.mark.lab_vm


def test_numa_effect_task_on_the_lab_vm(lab, tmp_path):
    if not (kpatch_build_dir() / "lab" / "manifest.json").is_file() or lab.kernel.name != "lab":
        pytest.skip("needs the lab kernel and its built live patch (the kpatch tier / test_e2e_validate builds it)")
    s = lab.host.ssh
    inv = tmp_path / "lab.yaml"
    inv.write_text(f"version: 1\nhosts:\n  lab-vm:\n    ssh: {{address: 127.0.0.1, port: {s.port}, user: root, "
                   f"key_file: {s.key_file}, known_hosts: {s.known_hosts}, agent: false}}\n")
    out = tmp_path / "m.json"
    r = subprocess.run([str(ROOT / ".venv/bin/invoke"), "numa-effect", "--inventory", str(inv), "--host", "lab-vm",
                        "--arm", "off", "--arm", "winner", "--rounds", "3", "--seconds", "8", "--mb", "8",
                        "--out", str(out), "--wake-cpus", "--json", str(tmp_path / "r.json")],
                       cwd=ROOT, capture_output=True, text=True, timeout=900)
    print(r.stdout[-3000:], r.stderr[-2000:])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    (case,) = json.loads(out.read_text())["cases"].values()
    assert case["arms"] == ["off", "winner"] and case["rounds"] == 3 and case["nodes"] == 4
    runs = case["runs"]
    assert sorted((x["round"], x["label"]) for x in runs) == [(i, a) for i in (1, 2, 3) for a in ("off", "winner")]
    for x in runs:
        assert len(x["tasks"]) == 3 and x["unpinned_phases"] >= 3
        assert x["migrations"] > 0 and x["cross_numa_rate"] is not None
        assert x["units"] > 0 and x["mean_latency_us"] > 0 and x["p99_latency_us"] >= x["mean_latency_us"] * 0.1
        assert x["hint_faults"] > 0 and x["local_ratio"] is not None
        assert x["third_closer"] + x["third_not_closer"] == x["third_node_moves"]
    for key in ("cross_numa_rate", "mean_latency_us", "local_ratio"):
        for arm in ("off", "winner"):
            m = case["metrics"][key][arm]
            assert m["n"] == 3 and m["ci"][0] <= m["median"] <= m["ci"][1]
        assert case["verdicts"][key]["winner"] == paired.no_verdict(3)     # 3 rounds: too few for an interval
    assert out.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"
    assert "cross-NUMA migration" in r.stdout and "picture:" in r.stdout      # the table (rich wraps its cells)
    with lab.remote() as rr:
        assert rr.run("ls /sys/kernel/livepatch | wc -l").stdout.strip() == "0"
