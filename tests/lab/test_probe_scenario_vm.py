"""The pre-registered probe scenario (numaforge.measure.scenario via numaforge.livepatch.probe) on the session lab
VM (backplane4, 1 CPU per node: P = node 0 with a pinned hog on its CPU, S = node 2), upstream only ("off", no
module: the arms need their own kpatch builds), one short block of the main case and the source-busy control.

It checks the machinery, not an effect: the probe ran its window on the VM, only its own events were traced
(tracefs filters on its pid), the once-a-second samples read its CPU and pages per node, the endpoints were
computed, and a one-block report gives no verdict. What the lab showed about the scenario itself is in
docs/numa-effect-pilot.md."""

from __future__ import annotations

import pytest

from numaforge.livepatch import probe as lprobe
from numaforge.measure import scenario

pytestmark = pytest.mark.lab_vm


def test_probe_scenario_runs_traced_and_sampled_on_the_lab_vm(lab):
    with lab.remote() as r:
        assert scenario.choose_nodes(lprobe.host_topo(r)) == (0, 2)
        data = lprobe.measure_scenario(r, {"off": None}, scenario.ScenarioParams(mb=16, seconds=12), 1)
        assert r.run("ls /sys/kernel/tracing/instances | grep -c numaforge-probe || true").stdout.strip() == "0"
        assert r.run("pgrep numa_probe || true").stdout.strip() == ""  # probe and hogs are gone
    assert set(data["cases"]) == {"source spare", "source busy (control)"}
    for name, case in data["cases"].items():
        (run,) = case["runs"]
        assert run["label"] == "off" and run["pid"] > 0 and 11.5 < run["seconds"] < 20, (name, run)
        assert run["samples"] >= 5 and run["migrations"] >= 1  # its own sched_migrate_task events
        assert run["local_share_30s"] is not None and run["time_to_90"] is not None
        assert run["vmstat_delta"]["numa_hint_faults"] > 0
        assert run["third_moves"] == run["closer"] + run["not_closer"]
        assert case["verdicts"]["not_closer_per_min"] == {}  # one arm: nothing to compare


def test_two_probes_at_once_each_traced_and_sampled_on_its_own(lab):
    """The multi-instance control (protocol amendment 4): probe A (P=0, S=2) and probe B (P=1, S=3) run at once,
    each with its own hogs, filler and tracefs instance; the run's record combines them and keeps each one's."""
    with lab.remote() as r:
        data = lprobe.measure_scenario(r, {"off": None}, scenario.ScenarioParams(mb=16, seconds=12), 1, second=(1, 3))
        assert r.run("ls /sys/kernel/tracing/instances | grep -c numaforge-probe || true").stdout.strip() == "0"
        assert r.run("pgrep numa_probe || true").stdout.strip() == ""
    (case,) = data["cases"].values()
    assert case["case"] == scenario.MULTI_CASE and [(p["pref"], p["src"]) for p in case["probes"]] == [(0, 2), (1, 3)]
    (run,) = case["runs"]
    a, b = run["instances"]
    assert a["pid"] != b["pid"] and a["pid"] > 0 and b["pid"] > 0
    for one in (a, b):
        # its own events only: every NUMA move and migration in its record is its own (filters on its pid); its
        # move onto S at the go file is always traced. Inside the window the scheduler may leave it be: with two
        # hogs and two probes on the four CPUs, every CPU is busy (0 window migrations seen once on tinyconfig)
        assert one["samples"] >= 5 and one["traced_migrations"] >= 1 and one["passes_per_s"] > 0, one
        assert one["traced_migrations"] >= one["migrations"] >= 0
        assert one["filled_pages"] > 0 and one["time_to_90"] is not None
    assert run["migrations"] == a["migrations"] + b["migrations"]
    assert run["traced_migrations"] == a["traced_migrations"] + b["traced_migrations"]
    assert run["passes_per_s"] == round((a["passes_per_s"] + b["passes_per_s"]) / 2, 3)
    assert "passes_per_s" in case["verdicts"]  # the control's fourth secondary


def test_a_two_thread_probe_traces_and_samples_each_thread(lab):
    """The two-thread control (protocol amendment 5): one probe whose two threads share its buffer; each thread
    is traced on its own tid and sampled from /proc/PID/task/TID, and the run's record keeps both."""
    with lab.remote() as r:
        data = lprobe.measure_scenario(r, {"off": None}, scenario.ScenarioParams(mb=16, seconds=12, threads=2), 1)
        assert r.run("pgrep numa_probe || true").stdout.strip() == ""
    (case,) = data["cases"].values()
    assert case["case"] == scenario.THREADS_CASE and case["params"]["threads"] == 2
    (run,) = case["runs"]
    main, other = run["instances"]
    assert other["pid"] != main["pid"] and other["pid"] > 0, run["instances"]
    for one in (main, other):
        assert one["samples"] >= 5 and one["migrations"] >= 1 and one["passes_per_s"] > 0, one
        assert one["local_share_30s"] is not None
    assert run["migrations"] == main["migrations"] + other["migrations"]


def test_numa_effect_task_runs_the_probe_scenario(lab, tmp_path):
    """`invoke numa-effect --scenario probe` on the lab VM: nodes chosen from its SLIT, JSON written, exit 0."""
    import json
    import subprocess

    from numaforge.paths import ROOT

    s = lab.host.ssh
    inv = tmp_path / "lab.yaml"
    inv.write_text(
        f"version: 1\nhosts:\n  lab-vm:\n    ssh: {{address: 127.0.0.1, port: {s.port}, user: root, "
        f"key_file: {s.key_file}, known_hosts: {s.known_hosts}, agent: false}}\n"
    )
    out = tmp_path / "m.json"
    r = subprocess.run(
        [
            str(ROOT / ".venv/bin/invoke"),
            "numa-effect",
            "--inventory",
            str(inv),
            "--host",
            "lab-vm",
            "--scenario",
            "probe",
            "--arm",
            "off",
            "--rounds",
            "1",
            "--seconds",
            "10",
            "--mb",
            "16",
            "--no-control",
            "--out",
            str(out),
            "--json",
            str(tmp_path / "r.json"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    doc = json.loads(out.read_text())
    (case,) = doc["cases"].values()
    assert case["params"]["pref"] == 0 and case["params"]["src"] == 2 and case["params"]["fill_src"] is True
    assert case["runs"][0]["filled_pages"] > 0 and case["runs"][0]["samples"] >= 4
    assert "not-closer third-node moves" in r.stdout and "measurement:" in r.stdout
