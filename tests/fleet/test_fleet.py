"""Rolling rules of numaforge.fleet.run_fleet, with plain per-host functions (no peer involved: the runner is pure).

Core tier (unmarked). Host names say what the per-host function does with them: ``ok-*`` passes,
``fail-*`` returns a failed HostResult, ``boom-*`` raises.
"""

import fcntl
import io
import os
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from numaforge import fleet as fleet_module
from numaforge.errors import NumaforgeError
from numaforge.fleet import FleetOptionError, Interrupted, Rollout, plan_phases, run_fleet
from numaforge.inventory.model import Host, Location
from numaforge.report import HostResult


def by_name(host):
    name = host if isinstance(host, str) else host.name
    if name.startswith("boom"):
        raise RuntimeError(f"exploded on {name}")
    if name.startswith("typed"):
        raise NumaforgeError("module refused", f"host {name}", "sign it")
    return HostResult(name, "failed" if name.startswith("fail") else "ok", "did it")


class Recorder:
    """Per-host function that records call order and the peak number of concurrent calls."""

    def __init__(self, barrier_parties: int = 0) -> None:
        self.lock = threading.Lock()
        self.calls: list[str] = []
        self.active = 0
        self.peak = 0
        self.barrier = threading.Barrier(barrier_parties) if barrier_parties else None

    def __call__(self, host):
        with self.lock:
            self.calls.append(host)
            self.active += 1
            self.peak = max(self.peak, self.active)
        try:
            if self.barrier is not None:
                self.barrier.wait(timeout=30)  # proves `parties` calls are in flight together
            return by_name(host)
        finally:
            with self.lock:
                self.active -= 1


def statuses(outcome):
    return {r.host: r.status for r in outcome.results}


def test_every_host_runs_and_results_keep_the_input_order():
    hosts = [f"ok-{i}" for i in range(7)]
    out = run_fleet(hosts, by_name, rollout=Rollout(forks=3), progress=False)
    assert [r.host for r in out.results] == hosts
    assert all(r.status == "ok" for r in out.results)
    assert out.ok and not out.stopped and out.not_run == [] and out.reason == ""


def test_forks_bound_parallelism_and_are_used():
    rec = Recorder(barrier_parties=3)
    hosts = [f"ok-{i}" for i in range(6)]
    out = run_fleet(hosts, rec, rollout=Rollout(forks=3), progress=False)
    assert out.ok
    assert rec.peak == 3  # the barrier needs 3 in flight; forks=3 allows no more


def test_canaries_run_one_at_a_time_before_the_rest():
    rec = Recorder()
    hosts = ["ok-c1", "ok-c2", "ok-a", "ok-b", "ok-c"]
    out = run_fleet(hosts, rec, rollout=Rollout(forks=4, canary=2), progress=False)
    assert rec.calls[:2] == ["ok-c1", "ok-c2"]
    assert out.batches == [["ok-c1"], ["ok-c2"], ["ok-a", "ok-b", "ok-c"]]
    assert out.ok


def test_failed_canary_stops_the_rollout_and_keeps_the_done_canary():
    hosts = ["ok-c1", "fail-c2", "ok-a", "ok-b"]
    out = run_fleet(hosts, by_name, rollout=Rollout(canary=2), progress=False)
    assert out.stopped and not out.ok
    assert "canary host fail-c2 failed" in out.reason and "already done stay" in out.reason
    assert statuses(out) == {"ok-c1": "ok", "fail-c2": "failed", "ok-a": "not-run", "ok-b": "not-run"}
    assert out.not_run == ["ok-a", "ok-b"]
    assert "canary host fail-c2" in out.results[2].message


def test_max_fail_stops_after_the_batch_that_exceeds_it():
    # batch 1: 0/2 failed; batch 2: 2/4 = 50% > 25% -> stop; batches 3-5 never start
    hosts = ["ok-1", "ok-2", "fail-3", "fail-4"] + [f"ok-{i}" for i in range(5, 11)]
    rec = Recorder()
    out = run_fleet(hosts, rec, rollout=Rollout(forks=2, batch=2, max_fail=25), progress=False)
    assert out.stopped
    assert "2 of 4 hosts failed (50% > --max-fail 25%)" in out.reason
    assert sorted(rec.calls) == sorted(hosts[:4])
    assert out.not_run == hosts[4:]
    assert out.failed == ["fail-3", "fail-4"]


def test_failures_at_exactly_max_fail_do_not_stop():
    hosts = ["ok-1", "fail-2", "ok-3", "ok-4", "ok-5", "ok-6"]
    out = run_fleet(hosts, by_name, rollout=Rollout(batch=2, max_fail=50), progress=False)  # 1/2 = 50%, not > 50%
    assert not out.stopped and out.not_run == [] and out.failed == ["fail-2"]


def test_max_fail_zero_stops_on_the_first_failed_batch():
    out = run_fleet(["ok-1", "fail-2", "ok-3", "ok-4"], by_name, rollout=Rollout(batch=2, max_fail=0), progress=False)
    assert out.stopped and out.not_run == ["ok-3", "ok-4"]


def test_failure_in_the_last_batch_is_reported_but_nothing_is_left_to_stop():
    out = run_fleet(["ok-1", "ok-2", "fail-3"], by_name, rollout=Rollout(batch=2, max_fail=0), progress=False)
    assert not out.stopped and out.not_run == [] and out.failed == ["fail-3"] and not out.ok


def test_exceptions_mark_only_that_host_failed():
    hosts = ["ok-1", "boom-2", "typed-3", "ok-4"]
    out = run_fleet(hosts, by_name, rollout=Rollout(forks=4), progress=False)
    st_ = statuses(out)
    assert st_ == {"ok-1": "ok", "boom-2": "failed", "typed-3": "failed", "ok-4": "ok"}
    msgs = {r.host: r.message for r in out.results}
    assert msgs["boom-2"] == "unexpected error (a bug; please report it): RuntimeError: exploded on boom-2"
    assert out.stopped and "unexpected error on boom-2" in out.reason  # all four had started (forks=4)
    assert msgs["typed-3"] == "host typed-3: module refused\n  fix: sign it"


def test_a_function_returning_something_else_is_a_failed_host():
    out = run_fleet(["ok-1"], lambda h: {"status": "ok"}, progress=False)
    assert out.results[0].status == "failed" and "returned dict" in out.results[0].message


def test_inventory_host_objects_are_named_by_their_name():
    hosts = [Host(name=f"ok-{i}", location=Location("inv.yaml", i)) for i in range(3)]
    out = run_fleet(hosts, by_name, progress=False)
    assert [r.host for r in out.results] == ["ok-0", "ok-1", "ok-2"]


def test_duplicate_host_is_refused():
    with pytest.raises(FleetOptionError, match="selected twice"):
        run_fleet(["ok-1", "ok-1"], by_name, progress=False)


@pytest.mark.parametrize(
    "kw, option",
    [
        ({"forks": 0}, "--forks"),
        ({"canary": -1}, "--canary"),
        ({"batch": -2}, "--batch"),
        ({"max_fail": 101}, "--max-fail"),
        ({"max_fail": -1}, "--max-fail"),
    ],
)
def test_bad_options_name_the_option(kw, option):
    with pytest.raises(FleetOptionError) as exc:
        run_fleet(["ok-1"], by_name, Rollout(**kw), progress=False)
    assert exc.value.where == option and exc.value.fix


def test_progress_display_names_hosts_and_failures():
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=False, width=120)
    run_fleet(["ok-1", "fail-2"], by_name, progress=True, console=console)
    text = buf.getvalue()
    assert "ok-1: unchanged did it" in text and "fail-2: failed did it" in text  # the report vocabulary
    assert "2/2" in text


def test_empty_fleet_is_an_empty_outcome():
    out = run_fleet([], by_name, progress=False)
    assert out.results == [] and not out.stopped


def test_plan_phases():
    assert plan_phases(list("abcdefg"), 2, 2) == [["a"], ["b"], ["c", "d"], ["e", "f"], ["g"]]
    assert plan_phases(list("abc"), 0, 0) == [["a", "b", "c"]]
    assert plan_phases(list("ab"), 5, 0) == [["a"], ["b"]]


@settings(max_examples=150, deadline=None)
@given(
    fails=st.lists(st.booleans(), max_size=12),
    canary=st.integers(0, 4),
    batch=st.integers(0, 5),
    max_fail=st.sampled_from([0, 10, 25, 50, 99, 100]),
    forks=st.integers(1, 4),
)
def test_rollout_invariants(fails, canary, batch, max_fail, forks):
    hosts = [("fail-" if f else "ok-") + str(i) for i, f in enumerate(fails)]
    out = run_fleet(
        hosts, by_name, rollout=Rollout(forks=forks, canary=canary, batch=batch, max_fail=max_fail), progress=False
    )
    # every host exactly once, in order; ran hosts are whole phases from the start, the rest are not-run
    assert [r.host for r in out.results] == hosts
    ran = [h for phase in out.batches for h in phase]
    assert ran == hosts[: len(ran)]
    assert out.not_run == hosts[len(ran) :]
    assert all(statuses(out)[h] == "not-run" for h in out.not_run)
    assert all(statuses(out)[h] == ("failed" if h.startswith("fail") else "ok") for h in ran)
    assert out.stopped == bool(out.not_run)
    if out.stopped:
        last = out.batches[-1]
        n_canary = min(canary, len(hosts))
        if len(out.batches) <= n_canary:
            assert last[0].startswith("fail")  # a canary failed
        else:
            failed = sum(h.startswith("fail") for h in ran)
            assert 100 * failed / len(ran) > max_fail  # the budget was exceeded


def test_ctrl_c_lets_running_hosts_finish_and_marks_the_rest_not_run():
    import _thread

    def fn(host):
        if host == "ok-2":
            _thread.interrupt_main()  # what Ctrl-C does: KeyboardInterrupt in the main thread
        return by_name(host)

    with pytest.raises(Interrupted) as ei:  # an interrupted run is never returned as if it had finished
        run_fleet([f"ok-{i}" for i in range(1, 7)], fn, rollout=Rollout(forks=1, batch=2), progress=False)
    out = ei.value.outcome
    assert ei.value.exit_code == 130 and ei.value.signal_name == "SIGINT"
    assert out.interrupted and out.stopped and "interrupted" in out.reason
    st_ = statuses(out)
    assert st_["ok-1"] == "ok" and st_["ok-2"] == "ok"  # the running host finished and is reported
    assert out.not_run == [h for h in st_ if st_[h] == "not-run"] and "ok-6" in out.not_run


# ------------------------------------------------------------------------------ per-host budget (--host-timeout)
def test_host_over_its_budget_fails_at_a_step_boundary_and_the_others_finish() -> None:
    """``slow-*`` keeps starting steps (budget.check is what every SSH command and Redfish request calls
    first); ``ok-*`` is done at once. Only the slow host fails, with the budget and the step it did not start."""
    import time

    from numaforge import budget

    steps: dict[str, int] = {}

    def work(name):
        steps[name] = 0
        while name.startswith("slow") and steps[name] < 1000:
            budget.check(f"step {steps[name] + 1}")
            steps[name] += 1
            time.sleep(0.02)
        return HostResult(name, "ok", f"{steps[name]} steps")

    out = run_fleet(
        ["slow-1", "ok-1", "ok-2"],
        work,
        rollout=Rollout(forks=3, host_timeout=0.3),
        progress=False,
    )
    assert statuses(out) == {"slow-1": "failed", "ok-1": "ok", "ok-2": "ok"}
    slow = out.results[0]
    assert "used up its --host-timeout of 0.3 s; stopped before step " in slow.message
    assert "host slow-1" in slow.message and "raise --host-timeout" in slow.message
    assert 5 <= steps["slow-1"] < 30  # stopped after ~0.3 s, not after 1000 steps
    assert budget.remaining() is None  # the budget ends with the host


def test_without_a_budget_nothing_is_cut_and_lifted_suspends_one():
    from numaforge import budget

    budget.check("anything")  # no budget: never raises
    with budget.host_deadline(0.001, "h"):
        import time

        time.sleep(0.01)
        with pytest.raises(budget.HostTimeout):
            budget.check("the next step")
        with budget.lifted():
            budget.check("rollback")  # clean-up still runs
        assert budget.cap(30) == 0.1  # watching waits shrink to what is left (min 0.1)
    assert budget.cap(30) == 30


@pytest.mark.parametrize("bad", [-1, "soon", True])
def test_bad_host_timeout_is_refused(bad):
    with pytest.raises(FleetOptionError) as exc:
        run_fleet(["ok-1"], by_name, progress=False, rollout=Rollout(host_timeout=bad))
    assert exc.value.where == "--host-timeout" and "seconds" in exc.value.what


# ------------------------------------------------------------------------------ containment (issue 12 item 2)
def test_an_unexpected_exception_stops_scheduling_new_hosts():
    """A bug in one host's work (not a NumaforgeError) used to be just another failed host while the others
    kept being written to; now nothing new starts and the reason says why."""
    started = []

    def fn(host):
        started.append(host)
        if host == "ok-2":
            raise KeyError("Attributes")
        return by_name(host)

    out = run_fleet([f"ok-{i}" for i in range(1, 7)], fn, rollout=Rollout(forks=1), progress=False)
    assert started == ["ok-1", "ok-2"]
    st_ = statuses(out)
    assert st_["ok-1"] == "ok" and st_["ok-2"] == "failed"
    assert out.not_run == ["ok-3", "ok-4", "ok-5", "ok-6"] and out.stopped and not out.ok
    assert "unexpected error on ok-2" in out.reason and "KeyError" in out.reason
    assert "a bug" in next(r.message for r in out.results if r.host == "ok-2")


def test_a_result_flagged_unexpected_keeps_its_data_and_stops_the_rollout():
    from numaforge.report import UNEXPECTED_ERROR

    def fn(host):
        r = HostResult(host, "failed", "boom", data={"changed": ["A"]})
        if host == "b":
            r.data[UNEXPECTED_ERROR] = "TypeError: x"
        else:
            r.status = "ok"
        return r

    out = run_fleet(["a", "b", "c"], fn, rollout=Rollout(forks=1), progress=False)
    assert [r.status for r in out.results] == ["ok", "failed", "not-run"]
    assert out.results[1].data["changed"] == ["A"], "what the host wrote stays in its result"


def test_a_failing_display_never_stops_or_skews_the_run():
    """The progress display raising (rich MarkupError in the incident) must not leave hosts half-run."""
    from rich.console import Console

    class Broken(Console):
        def print(self, *a, **k):
            raise RuntimeError("display broke")

    ran = []

    def fn(host):
        ran.append(host)
        return HostResult(host, "ok", "[/b] closing tag with nothing to close")

    out = run_fleet([f"ok-{i}" for i in range(1, 5)], fn, rollout=Rollout(forks=2), progress=True, console=Broken())
    assert sorted(ran) == [f"ok-{i}" for i in range(1, 5)] and out.ok


def test_markup_in_a_host_message_is_printed_as_text():
    import io

    from rich.console import Console

    buf = io.StringIO()
    out = run_fleet(
        ["h1", "h2"],
        lambda h: HostResult(h, "ok", "BMC said [/b] and :smile: at 0000:3b:00.0"),
        rollout=Rollout(forks=1),
        progress=True,
        console=Console(file=buf, width=200, emoji=False),
    )
    assert out.ok
    assert "BMC said [/b] and :smile: at 0000:3b:00.0" in buf.getvalue()


def test_interrupt_stops_running_hosts_at_their_next_step():
    """Ctrl-C: a host in the middle of its work stops before its next request (budget.check), not after it
    has done everything (e.g. waited out a 15-minute power cycle)."""
    import _thread
    import time

    from numaforge import budget

    steps = []

    def fn(host):
        for i in range(200):
            budget.check(f"step {i}")
            steps.append(i)
            if i == 3:
                _thread.interrupt_main()
            time.sleep(0.01)
        return by_name(host)

    with pytest.raises(Interrupted) as ei:
        run_fleet(["ok-1", "ok-2"], fn, rollout=Rollout(forks=1), progress=False)
    out = ei.value.outcome
    r1 = out.results[0]
    assert r1.status == "interrupted" and "interrupted (SIGINT): stopped before step" in r1.message
    assert len(steps) < 200 and out.not_run == ["ok-2"]
    assert not budget.stop_requested(), "the stop is cleared once the run is over"


def test_report_is_never_ok_when_anything_did_not_happen():
    from numaforge.report import Report

    rep = Report("bios-apply")
    rep.expect_hosts(["a", "b"])
    assert not rep.ok, 'hosts selected but no result: not ok (the \'"ok": true, "hosts": []\' report)'
    rep.hosts = [HostResult("a", "ok"), HostResult("b", "not-run")]
    assert not rep.ok
    rep.hosts[1].status = "changed"
    assert rep.ok and rep.status == "ok"
    rep.data["fleet"] = {"stopped": True}
    assert not rep.ok
    rep.data = {}
    rep.interrupted = "SIGTERM"
    assert not rep.ok and rep.as_dict()["status"] == "interrupted"


def test_rolling_batch_makes_max_fail_effective_without_batch():
    from numaforge.fleet import rolling_batch

    assert rolling_batch(0, 8, 100) == ()  # no failure budget: all at once
    assert rolling_batch(0, 1, 0) == (1,)  # budget: waves of --forks, checked after each
    assert rolling_batch(0, 8, 25.0) == (8,)
    assert rolling_batch(3, 8, 0) == (3,)  # an explicit --batch wins
    assert rolling_batch("1,25%", 8, 0) == (1, "25%")


def test_a_writing_rollout_holds_each_hosts_lock_and_a_held_host_fails_naming_the_holder(tmp_path, monkeypatch):
    """Rollout.lock: each host's work runs holding its write lock (numaforge.hostlock, a real flock); a host
    another holder has fails at once with who holds it, the others run; a read-only rollout takes no lock."""
    from numaforge import hostlock

    monkeypatch.setenv("NUMAFORGE_STATE", str(tmp_path))
    seen = {}

    def fn(name):
        seen[name] = hostlock.holder(hostlock.lock_path(name))
        return HostResult(name, "changed")

    with hostlock.held("ok-2", "os-apply"):
        out = run_fleet(["ok-1", "ok-2"], fn, Rollout(lock="bios-apply"), progress=False)
        read = run_fleet(["ok-2"], fn, Rollout(), progress=False)
    one, two = out.results
    assert one.status == "changed" and seen["ok-1"]["task"] == "bios-apply" and one.data["lock"]["pid"]
    assert two.status == "failed" and "another run is writing this host: os-apply (pid" in two.message
    assert "--wait-lock" in two.message and "ok-2" not in seen or seen["ok-2"]["task"] == "os-apply"
    assert read.results[0].status == "changed" and "lock" not in read.results[0].data


def test_a_run_refused_before_the_holder_wrote_its_name_still_names_it(tmp_path, monkeypatch):
    """The window between a holder's flock and its name in the lock file (CI caught the refused run's error
    saying "it has not written its name yet" while the winner was a pid away): the refused run looks again."""
    from numaforge import hostlock

    monkeypatch.setenv("NUMAFORGE_STATE", str(tmp_path))
    path = hostlock.lock_path("gpu-01")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the holder has the lock, its name not yet written
        late = threading.Timer(0.3, lambda: os.pwrite(fd, b'{"pid": 4242, "task": "bios-apply"}', 0))
        late.start()
        with pytest.raises(hostlock.HostLocked) as ei:
            with hostlock.held("gpu-01", "bios-apply"):
                pass
        late.join()
        assert "another run is writing this host: bios-apply (pid 4242," in ei.value.what
        os.ftruncate(fd, 0)  # a holder that never writes its name: the error says so after the grace
        with pytest.raises(hostlock.HostLocked) as ei:
            with hostlock.held("gpu-01", "bios-apply"):
                pass
        assert "has not written its name yet" in ei.value.what
    finally:
        os.close(fd)


def test_bad_wait_lock_is_refused():
    with pytest.raises(FleetOptionError) as exc:
        Rollout(wait_lock=-1)
    assert exc.value.where == "--wait-lock"


def test_double_ctrl_c_reports_the_running_host_interrupted_with_what_it_had_done():
    """Issue 25 item 5: a second Ctrl-C while run_fleet waits for the running host used to drop its result: the
    host that had been written and reset was reported not-run with no data. Real SIGINTs to this process."""
    import _thread
    import os
    import signal
    import time

    from numaforge import budget

    def fn(host):
        r = HostResult(host)
        r.data["changed"] = ["NumaNodesPerSocket"]
        try:
            for i in range(400):
                budget.check(f"step {i}")
                if i == 3:
                    _thread.interrupt_main()  # the first Ctrl-C
                time.sleep(0.01)
        except NumaforgeError as exc:
            os.kill(os.getpid(), signal.SIGINT)  # the second, while the runner waits for this host
            time.sleep(0.3)  # the host still finishing what was on the wire
            r.data["reset_requested"] = "2026-12-04T00:00:00+00:00"
            r.status, r.message = "failed", exc.render()
        return r

    with pytest.raises(Interrupted) as ei:
        run_fleet(["h-1", "h-2"], fn, Rollout(forks=1), progress=False)
    r1, r2 = ei.value.outcome.results
    assert r1.status == "interrupted", r1
    assert r1.data["changed"] == ["NumaNodesPerSocket"] and r1.data["reset_requested"]
    assert r2.status == "not-run" and ei.value.outcome.failed == ["h-1"]


def test_reports_speak_one_host_status_vocabulary(tmp_path):
    """changed / unchanged / failed / not-run / interrupted everywhere: JSON, summary, JUnit; older words
    ("ok", "skipped") from pipelines or old journals are mapped, and interrupted is never ok."""
    from numaforge.report import HOST_STATUSES, Report, junit_xml

    rep = Report("os-apply")
    rep.hosts = [
        HostResult("a", "ok"),
        HostResult("b", "changed"),
        HostResult("c", "skipped"),
        HostResult("d", "interrupted", "interrupted (SIGINT): stopped before reboot", data={"changed": ["x"]}),
    ]
    doc = rep.as_dict()
    assert [h["status"] for h in doc["hosts"]] == ["unchanged", "changed", "not-run", "interrupted"]
    assert set(h["status"] for h in doc["hosts"]) <= set(HOST_STATUSES) and doc["ok"] is False
    rep.write(tmp_path / "r.json")  # the schema accepts exactly this vocabulary
    buf = io.StringIO()
    rep.print_summary(Console(file=buf, width=200))
    assert "unchanged" in buf.getvalue() and " ok " not in buf.getvalue()
    xml = junit_xml(rep)
    assert xml.count("<failure") == 1 and xml.count("<skipped") == 1
    rep.hosts = rep.hosts[:2]
    assert rep.ok


def test_a_third_ctrl_c_while_waiting_for_a_host_reports_it_interrupted_and_keeps_it_stopped():
    """A further Ctrl-C while the pool waits for a running host's thread: run_fleet still returns an outcome
    (Interrupted) naming that host interrupted (its result cannot be had yet), and the stop request stays set
    so the host does not go on with its next step. Real SIGINTs to this process."""
    import os
    import signal
    import time

    from numaforge import budget

    went_on = []

    def fn(host):
        r = HostResult(host)
        try:
            for i in range(400):
                budget.check(f"step {i}")
                if i == 3:
                    os.kill(os.getpid(), signal.SIGINT)  # 1st
                time.sleep(0.01)
        except NumaforgeError:
            os.kill(os.getpid(), signal.SIGINT)  # 2nd: the runner stops waiting in its phase loop
            time.sleep(0.2)
            os.kill(os.getpid(), signal.SIGINT)  # 3rd: while the pool waits for this thread
            time.sleep(0.3)
            try:
                budget.check("the step after")
                went_on.append(host)
            except NumaforgeError:
                pass
            r.status = "failed"
        return r

    with pytest.raises(Interrupted) as ei:
        run_fleet(["h-1", "h-2"], fn, Rollout(forks=1), progress=False)
    r1, r2 = ei.value.outcome.results
    assert r1.status == "interrupted" and r2.status == "not-run", (r1, r2)
    time.sleep(0.5)
    assert went_on == [], "a host still running after the run returned must not go on"
    budget.clear_stop()


def test_gate_runs_once_after_the_canaries_and_can_stop_the_rollout():
    calls = []

    def gate(canaries, canary_hosts, later):
        calls.append(([r.host for r in canaries], list(canary_hosts), list(later)))
        return verdict

    ok = lambda h: HostResult(h, "ok")
    verdict = None
    out = run_fleet(["c1", "c2", "a", "b", "c"], ok, Rollout(canary=2, batch=2), gate=gate, progress=False)
    assert calls == [(["c1", "c2"], ["c1", "c2"], ["a", "b", "c"])] and out.ok
    assert [r.status for r in out.results] == ["ok"] * 5

    calls.clear()
    verdict = "slo gate: rollback: P99 delta 90.0 ms > 25 ms"
    out = run_fleet(["c1", "a", "b"], ok, Rollout(canary=1), gate=gate, progress=False)
    assert len(calls) == 1 and out.stopped and out.reason == verdict and out.not_run == ["a", "b"]

    def broken(*_):
        raise NumaforgeError("Prometheus query failed", "http://p/api/v1/query", "check --prometheus")

    out = run_fleet(["c1", "a"], ok, Rollout(canary=1), gate=broken, progress=False)
    assert out.stopped and out.not_run == ["a"] and "could not judge" in out.reason and "http://p" in out.reason

    calls.clear()
    out = run_fleet(
        ["c1", "a"],
        lambda h: HostResult(h, "failed" if h == "c1" else "ok"),
        Rollout(canary=1),
        gate=gate,
        progress=False,
    )
    assert calls == [] and out.not_run == ["a"]  # a failed canary stops before any gate


def test_a_look_due_while_every_fork_is_busy_waits_for_a_fork_without_spinning(monkeypatch):
    """Issue 43 item 5: a waiting host whose look is due while every fork is busy waits for a fork to free up;
    the runner must not spin on it (it did: a zero timeout on every pass, ~20,000 passes in one 250-host wave,
    one core of the build server's two taken from the hosts' work). The runner's passes are counted through
    concurrent.futures.wait, which it calls once per pass (the real function, only counted)."""
    passes = [0]
    real_wait = fleet_module.wait

    def counted(*args, **kw):
        passes[0] += 1
        return real_wait(*args, **kw)

    monkeypatch.setattr(fleet_module, "wait", counted)
    busy = threading.Event()

    def fn(name: str):
        if name == "waits":
            return _waits_then_result(name)
        busy.wait(2.0)  # holds the one fork for 2 s while the other host's look is due
        return HostResult(name, "ok")

    outcome = run_fleet(["waits", "works"], fn, Rollout(forks=1), progress=False)
    assert [r.status for r in outcome.results] == ["ok", "ok"], outcome.summary()
    assert passes[0] < 30, passes[0]  # a pass per finished step or per 0.5 s, not thousands


def _waits_then_result(name: str):
    yield 0.01  # look again at once: due while the other host holds the fork
    return HostResult(name, "ok")
