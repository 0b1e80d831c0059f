"""Issue 43 item 5: a host waiting for its reboot's POST holds no --forks worker. Before, each host's worker slept
through the host's whole POST, so 8 hosts at --forks 2 in one batch took four POST times; now the batch takes
about one POST time (every host of the batch is in POST at once), with the same --host-timeout, Ctrl-C, journal
and POST-safety rules as a host on its own.

Real HTTPS simulators on 127.0.0.1 (warm restarts: PowerState stays "On" while BootProgress says POST), driven
through run_hosts as bios-apply --reboot drives them; nothing mocked. A sampler thread counts how many hosts are
in POST at the same moment: that count, not the wall clock alone, tells whether waiting hosts held workers
(wall-clock limits are kept wide for a loaded 2-core machine)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from numaforge import journal
from numaforge.bios.apply import Timeouts, run_hosts
from numaforge.bios.power import PostClock
from numaforge.fleet import Interrupted, Rollout

from .test_bios_apply_bmc import _bmc_password, host_for, opts, sim_factory  # noqa: F401 (fixtures)

pytestmark = pytest.mark.bmc
HOSTS = 8
WAITS = Timeouts(graceful=120.0, power_on=120.0, job=10.0, poll=0.2, settle=5.0)


def _fleet(sim_factory, post: list[float]):
    sims = []
    for seconds in post:
        sim = sim_factory("generic", power_delay=0.2)
        sim.state.warm_restart, sim.state.post_seconds = True, seconds
        sims.append(sim)
    return sims, [host_for(s, f"gpu-{i:02d}") for i, s in enumerate(sims)]


class _InPost:
    """Samples every simulator: the most hosts in POST at one moment; ``on_all`` runs once all were."""

    def __init__(self, sims, on_all=None):
        self.sims, self.on_all, self.most = sims, on_all, 0
        self._end = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._end.wait(0.05):
            n = 0
            for sim in self.sims:
                sim.state.advance()
                with sim.state.lock:
                    n += sim.state.in_post()
            self.most = max(self.most, n)
            if n == len(self.sims) and self.on_all is not None:
                on_all, self.on_all = self.on_all, None
                on_all()

    def __enter__(self) -> "_InPost":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._end.set()
        self._thread.join()


def _resets(sims) -> list[dict]:
    return [dict(s.state.resets) for s in sims]


def test_a_batch_of_8_at_forks_2_takes_one_post_not_four(sim_factory, tmp_path):
    post = 10.0
    sims, hosts = _fleet(sim_factory, [post] * HOSTS)
    j = journal.open("bios-apply waves", tmp_path)
    start = time.monotonic()
    with _InPost(sims) as sampler:
        outcome = run_hosts(hosts, "apply", opts(reboot=True, timeouts=WAITS, journal=j), Rollout(forks=2, batch=8))
    elapsed = time.monotonic() - start
    assert [r.status for r in outcome.results] == ["changed"] * HOSTS, outcome.summary()
    assert all("rebooted" in r.message for r in outcome.results)
    # every host reset once, gracefully: no second reset, nothing forced into POST
    assert _resets(sims) == [{"GracefulRestart": 1}] * HOSTS
    # the waits overlapped: every host of the batch was in POST at once (before: at most --forks of them)
    assert sampler.most == HOSTS, sampler.most
    # one POST time plus the hosts' work, far from the four POST times (40 s) of the workers sleeping in turn
    assert post <= elapsed < 3 * post, elapsed
    assert all(journal.VERIFIED in j.phases(h.name) for h in hosts)


def test_host_timeout_fails_only_the_hosts_still_in_post(sim_factory, tmp_path):
    """--host-timeout counts during the wait: the hosts in a long POST fail with it at their next look (not
    when their POST ends); the others finish. No host is reset twice."""
    post = [2.0, 60.0] * (HOSTS // 2)
    sims, hosts = _fleet(sim_factory, post)
    start = time.monotonic()
    outcome = run_hosts(
        hosts, "apply", opts(reboot=True, timeouts=WAITS), Rollout(forks=2, batch=HOSTS, host_timeout=12)
    )
    elapsed = time.monotonic() - start
    by_name = {r.host: r for r in outcome.results}
    for h, seconds in zip(hosts, post):
        r = by_name[h.name]
        if seconds < 10:
            assert r.status == "changed", r.message
        else:
            assert r.status == "failed" and "--host-timeout" in r.message, r.message
    assert _resets(sims) == [{"GracefulRestart": 1}] * HOSTS
    assert elapsed < 40, elapsed  # failed at the budget (12 s per host), not at the end of the 60 s POST


def test_ctrl_c_during_the_wait_interrupts_every_waiting_host_and_the_journal_resumes(sim_factory, tmp_path):
    """SIGINT once all 8 hosts are in POST: each is ``interrupted`` (not failed, not not-run), none is reset
    again; the re-run with the same journal waits for the resets the first run sent and verifies."""
    post = 12.0
    sims, hosts = _fleet(sim_factory, [post] * HOSTS)
    key = "bios-apply waves interrupted"
    o = opts(reboot=True, timeouts=WAITS, journal=journal.open(key, tmp_path))
    with _InPost(sims, on_all=lambda: os.kill(os.getpid(), signal.SIGINT)) as sampler:
        with pytest.raises(Interrupted) as stopped:
            run_hosts(hosts, "apply", o, Rollout(forks=2, batch=HOSTS))
    assert sampler.most == HOSTS
    results = stopped.value.outcome.results
    assert [r.status for r in results] == ["interrupted"] * HOSTS, [(r.host, r.status, r.message) for r in results]
    assert _resets(sims) == [{"GracefulRestart": 1}] * HOSTS

    j = journal.open(key, tmp_path)
    assert all(j.action(h.name) == "verify" for h in hosts), [j.phases(h.name) for h in hosts]
    again = run_hosts(hosts, "apply", opts(reboot=True, timeouts=WAITS, journal=j), Rollout(forks=2, batch=HOSTS))
    assert [r.status for r in again.results] == ["changed"] * HOSTS, again.summary()
    assert all("resumed" in r.message for r in again.results)
    assert _resets(sims) == [{"GracefulRestart": 1}] * HOSTS  # waited for, never reset again
    assert all(s.bios_pending() == {} for s in sims)


def _reboot_seconds(r) -> float:
    return next(s.detail["seconds"] for s in r.steps if s.name == "reboot")


def _gets(sim, path: str) -> int:
    return sim.count("GET", "^" + path.rstrip("/") + "/?$")


def test_a_look_in_post_reads_the_system_alone(sim_factory):
    """While the System says the host is in POST (a DSP8010 state before OSBootStarted), a look is one GET of
    the System: the Bios is read before the reset, by the look that finds the host back and by verify, never
    in between (issue 43 item 5: fewer requests per poll for a whole batch polling on a 2-core server)."""
    sims, hosts = _fleet(sim_factory, [4.0] * 2)
    waits = Timeouts(graceful=120.0, power_on=120.0, job=10.0, poll=0.25, settle=5.0)
    outcome = run_hosts(hosts, "apply", opts(reboot=True, timeouts=waits), Rollout(forks=2, batch=2))
    assert [r.status for r in outcome.results] == ["changed"] * 2, outcome.summary()
    for sim in sims:
        system_gets, bios_gets = _gets(sim, sim.system_path), _gets(sim, sim.bios_path)
        assert system_gets >= 12, system_gets  # ~16 looks in a 4 s POST every 0.25 s
        assert bios_gets <= 6, (bios_gets, system_gets)  # before: one Bios GET with every look


def test_the_next_wave_looks_quicker_near_the_post_end_the_first_wave_took(sim_factory):
    """The run's PostClock (power.PostClock) learns from the first wave when its model's POST ended (between the
    last look that found a host down and the one that found it back); the second wave looks every
    PostClock.FAST seconds from there, so it sees its hosts back within about FAST of their POST's end instead
    of up to a whole poll later."""
    post, poll = 6.5, 5.0  # POST ends ~6.7 s after the reset (0.2 s power transition): between looks at 5 and 10
    sims, hosts = _fleet(sim_factory, [post] * 4)
    waits = Timeouts(graceful=120.0, power_on=120.0, job=10.0, poll=poll, settle=5.0)
    outcome = run_hosts(hosts, "apply", opts(reboot=True, timeouts=waits), Rollout(forks=4, batch=2))
    assert [r.status for r in outcome.results] == ["changed"] * 4, outcome.summary()
    assert _resets(sims) == [{"GracefulRestart": 1}] * 4
    first, second = [[_reboot_seconds(r) for r in outcome.results[i : i + 2]] for i in (0, 2)]
    assert all(s >= 9.5 for s in first), first  # the look at 5 s found POST running, the next is at 10 s
    assert all(s < post + 0.2 + 2 * PostClock.FAST + 0.5 for s in second), (first, second)
