"""Staged rollouts of writing tasks stop at the first failed batch; --batch is Ansible's serial; -h shows every
rolling option's default; the summary tells hosts that failed from hosts never reached (issue 39 item 6).

Core tier: the fleet runner is pure (plain per-host functions, no peer); the tasks are read from tasks.py, so a
new writing task with rolling options is covered without editing this file.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import invoke
import pytest
from rich.console import Console

import tasks as tasks_module
from numaforge.cli import common, values
from numaforge.cli.optionsets import NumaforgeTask
from numaforge.fleet import Interrupted, Rollout, batch_size, plan_phases, run_fleet
from numaforge.report import HostResult, Report


def _tasks() -> list[NumaforgeTask]:
    coll = tasks_module.ns if hasattr(tasks_module, "ns") else invoke.Collection.from_module(tasks_module)
    return [t for t in coll.tasks.values() if isinstance(t, NumaforgeTask)]


ROOT = Path(__file__).parents[2]
ROLLING = [t for t in _tasks() if t.rollout is not None and t.rollout.rolling]
WRITING = [t for t in ROLLING if t.write]


def test_the_task_lists_are_derived_and_not_empty():
    names = {t.name.replace("_", "-") for t in WRITING}
    assert {"bios-apply", "os-apply", "validate"} <= names, names


def by_name(host: str) -> HostResult:
    return HostResult(host, "failed" if host.startswith("fail") else "changed", "did it")


@pytest.mark.parametrize("task", WRITING, ids=lambda t: t.name)
def test_a_staged_write_rollout_stops_before_the_next_batch_after_a_failure(task):
    """`bios-apply --reboot --canary 1 --batch 2` rebooted the next batch after a host of batch 2 failed:
    --max-fail defaulted to 100 on every task."""
    spec = task.rollout
    rollout = values.rollout(
        {"canary": "1", "batch": "2"}, forks=spec.forks, canary=spec.canary, max_fail_default=spec.max_fail, lock="x"
    )
    hosts = ["ok-c", "ok-1", "fail-2", "ok-3", "ok-4"]
    out = run_fleet(hosts, by_name, rollout, progress=False)
    assert out.stopped and out.not_run == ["ok-3", "ok-4"], out.summary()
    assert "--max-fail 0%" in out.reason
    assert [r.status for r in out.results if r.host in out.not_run] == ["not-run", "not-run"]


@pytest.mark.parametrize("task", WRITING, ids=lambda t: t.name)
def test_an_explicit_max_fail_still_lets_a_staged_rollout_go_on(task):
    spec = task.rollout
    raw = {"canary": "1", "batch": "2", "max_fail": "50"}
    rollout = values.rollout(raw, forks=spec.forks, canary=spec.canary, max_fail_default=spec.max_fail, lock="x")
    assert rollout.max_fail == 50
    out = run_fleet(["ok-c", "ok-1", "fail-2", "ok-3", "ok-4"], by_name, rollout, progress=False)
    assert not out.stopped and out.not_run == []


def test_an_unstaged_or_read_only_rollout_keeps_the_tasks_default():
    assert values.rollout({}, forks=8, lock="bios-apply").max_fail == 100
    assert values.rollout({"canary": "0"}, forks=8, lock="bios-apply").max_fail == 100
    assert values.rollout({"canary": "1", "batch": "2"}, forks=8).max_fail == 100  # read-only task


def _help(task) -> dict[str, str]:
    """Each option's help as `invoke --help TASK` prints it (one line per option, whitespace joined)."""
    name = task.name.replace("_", "-")
    proc = subprocess.run(
        [sys.executable, "-m", "invoke", "--help", name],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "100"},
    )
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout.split("Options:", 1)[1]
    out: dict[str, str] = {}
    for chunk in re.split(r"\n(?=  \S)", text):
        m = re.search(r"--(?:\[no-\])?([a-z-]+)", chunk)
        if m:
            out[m.group(1)] = " ".join(chunk.split())
    return out


@pytest.mark.parametrize("task", ROLLING, ids=lambda t: t.name)
def test_help_shows_every_rolling_options_default(task):
    spec, shown = task.rollout, _help(task)
    assert f"(default {spec.canary})" in shown["canary"]
    assert f"(default {spec.forks})" in shown["forks"]
    assert "default: the rest at once" in shown["batch"] and "25%" in shown["batch"]
    text = shown["max-fail"]
    if task.write and spec.max_fail >= 100:
        assert "default 0 when --canary or --batch" in text and f"else {spec.max_fail:g}" in text, text
    else:
        assert f"(default {spec.max_fail:g})" in text, text


# Ansible's serial: a percentage of the selected hosts, rounded down (pct_to_int), at least 1; a list gives
# successive batch sizes, the last repeating
@pytest.mark.parametrize(
    "n, canary, batch, sizes",
    [
        (8, 0, "25%", [2, 2, 2, 2]),
        (10, 0, "25%", [2, 2, 2, 2, 2]),  # 2.5 -> 2
        (3, 0, "25%", [1, 1, 1]),  # 0.75 -> 0 -> at least 1
        (20, 0, "1,5,25%", [1, 5, 5, 5, 4]),
        (20, 1, "1,5,25%", [1, 1, 5, 5, 5, 3]),  # the canary first, then the list (of all 20 selected)
        (7, 0, "100%", [7]),
        (5, 0, "2", [2, 2, 1]),
        (5, 0, "0", [5]),
        (5, 2, 0, [1, 1, 3]),
    ],
)
def test_batches_follow_ansible_serial(n, canary, batch, sizes):
    names = [f"h{i}" for i in range(n)]
    phases = plan_phases(names, canary, values.batch(batch))
    assert [len(p) for p in phases] == sizes
    assert [h for p in phases for h in p] == names


def test_batch_size_rounds_as_ansible_pct_to_int():
    assert [batch_size("33%", n) for n in (1, 2, 3, 4, 10, 100)] == [1, 1, 1, 1, 3, 33]


@pytest.mark.parametrize(
    "bad", ["abc", "-1", "0%", "150%", "1,,2", "1.5", "25%%", "1,0", "x%", "\u00b2", "\u00b2%", ""]
)
def test_bad_batch_values_are_refused_naming_the_option(bad):
    with pytest.raises(values.OptionValueError) as exc:
        values.batch(bad)
    assert exc.value.where == "--batch" and exc.value.exit_code == 2
    assert "25%" in exc.value.fix


def _stderr(fn) -> str:
    buf = io.StringIO()
    saved = common.err_console._plain, common.err_console.mode
    common.err_console._plain = Console(file=buf, no_color=True, soft_wrap=True, width=1000)
    common.err_console.mode = "plain"
    try:
        fn()
    except invoke.Exit:
        pass
    finally:
        common.err_console._plain, common.err_console.mode = saved
    return buf.getvalue()


def test_failed_on_lists_only_hosts_that_ran_and_failed():
    """ "failed on:" listed hosts that never ran; they are "not run" (skipped), with why."""
    out = run_fleet(
        ["ok-c", "ok-1", "fail-2", "ok-3", "ok-4"],
        by_name,
        values.rollout({"canary": "1", "batch": "2"}, forks=8, lock="bios-apply"),
        progress=False,
    )
    report = Report("bios-apply", hosts=list(out.results), data={"fleet": out.as_dict()})
    text = _stderr(lambda: common._exit_unless_ok(report, None, None))
    failed = next(line for line in text.splitlines() if line.startswith("failed on:"))
    assert failed == "failed on: fail-2", text
    skipped = next(line for line in text.splitlines() if line.startswith("not run"))
    assert "ok-3, ok-4" in skipped and "--max-fail 0%" in skipped, text


# ---------------------------------------------------------------- what the progress display says (issue 39 item 9)
def _run_shown(hosts, fn, rollout, gate=None) -> tuple[str, object]:
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=False, width=80)
    try:
        out = run_fleet(hosts, fn, rollout, progress=True, console=console, gate=gate)
    except Interrupted as exc:
        out = exc.outcome
    return buf.getvalue(), out


def test_host_lines_are_not_wrapped_off_a_terminal():
    """Plain mode promises no wrapping: a CI log (stderr not a terminal, 80 columns) got each long host line
    cut in two."""
    long = "x" * 150
    text, _ = _run_shown(["ok-1"], lambda h: HostResult(h, "changed", long), Rollout())
    assert f"ok-1: changed {long}" in text, text


def test_after_ctrl_c_the_display_says_interrupted_not_failed():
    """After Ctrl-C the progress bar said "failed 1" while the table said interrupted."""
    import _thread
    import time

    from numaforge import budget

    def fn(host):
        for i in range(200):
            budget.check(f"step {i}")
            if i == 3:
                _thread.interrupt_main()
            time.sleep(0.01)
        return HostResult(host, "changed")

    text, out = _run_shown(["h1", "h2"], fn, Rollout(forks=1))
    assert [r.status for r in out.results] == ["interrupted", "not-run"]
    assert "h1: interrupted" in text and "failed 1" not in text, text
    assert "1 interrupted, 1 not run" in text, text


def test_after_a_gate_rollback_the_display_counts_the_rolled_back_canary():
    """After a gate rollback the bar said "1/2 failed 0"."""

    def gate(canaries, canary_hosts, later):
        canaries[0].status, canaries[0].message = "failed", "rolled back by the slo gate"
        return "slo gate: rollback"

    text, out = _run_shown(["c1", "a"], lambda h: HostResult(h, "changed"), Rollout(canary=1), gate=gate)
    assert out.not_run == ["a"]
    last = [line for line in text.splitlines() if "fleet" in line][-1]
    assert "1 failed, 1 not run" in last and "failed 0" not in last, text
