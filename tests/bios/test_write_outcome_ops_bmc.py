"""Issue 40 item 3, the writes besides the Bios PATCH: bios-clear-pending (Dell's ClearPending POST, elsewhere a
PATCH), bios-reset-defaults (POST Bios.ResetBios), bios-job-delete (DELETE of a job), bmc-power (POST
ComputerSystem.Reset), and bios-apply's own Dell config job POST and reset POST. Each cut on the wire by a stop
(Ctrl-C/SIGTERM) while the BMC has already acted must be reported "outcome unknown" and re-read -- pending values,
job list, power state -- like the PATCH (tests/bios/test_write_outcome_bmc.py). Real HTTPS simulators on
127.0.0.1 (the "slow" fault with after=True: the BMC acts, then answers late); nothing mocked."""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from numaforge import budget
from numaforge.bios import deadline
from numaforge.bios.apply import RegistryCache, apply_host, plan_host
from numaforge.bios.operations import OPERATIONS, OpOptions, operate_host
from numaforge.report import HostResult

from .test_bios_apply_bmc import _bmc_password, admin_session, host_for, opts, run, sim_factory  # noqa: F401
from .test_bios_operations_bmc import queue_dell_job
from .test_write_outcome_bmc import signal_on_the_wire

pytestmark = pytest.mark.bmc

ROOT = Path(__file__).resolve().parents[2]

READ_ONLY_OPERATIONS = {"jobs"}  # lists, never writes


@pytest.fixture
def quick_grace(monkeypatch):
    monkeypatch.setattr(deadline, "WRITE_GRACE", 0.5)
    yield
    budget.clear_stop()


def _stage(sim, attrs: dict) -> None:
    admin_session(sim).patch(sim.url + sim.settings_path, json={"Attributes": attrs}, timeout=10).raise_for_status()


def _desired(sim) -> dict:
    plan = run(plan_host, host_for(sim)).data["plan"]
    return {i["attribute"]: i["desired"] for i in plan if i["action"] == "change"}


def _op(name: str, **kw) -> Callable:
    def go(sim) -> HostResult:
        r = HostResult("gpu-01")
        operate_host(name, host_for(sim), opts(), OpOptions(**kw), RegistryCache(), r)
        return r

    return go


def _apply(sim) -> HostResult:
    return run(apply_host, host_for(sim), opts(reboot=True))


@dataclass
class Case:
    """One write: the flavour, what makes it needed, how it is run, the request (method, path regex) cut on the
    wire, and what the re-read must show once the BMC acted."""

    flavour: str
    setup: Callable
    act: Callable
    method: str
    path: str  # a regex; "SETTINGS": the flavour's settings object
    shows: str
    operation: str = ""  # the bios operation this write belongs to ("" for bios-apply's own)
    power_delay: float = 0.3  # a reset: 1.5 s, so the new BootProgress time stamp is another second


CASES = {
    "clear-pending-post": Case(
        "dell", lambda s: _stage(s, {"AssetTag": "other"}), _op("clear-pending"), "POST", "ClearPending",
        "values pending now (1 before); changed: AssetTag", "clear-pending",
    ),
    "clear-pending-patch": Case(
        "generic", lambda s: _stage(s, _desired(s)), _op("clear-pending"), "PATCH", "SETTINGS",
        "values pending now", "clear-pending",
    ),
    "reset-defaults": Case(
        "generic", _apply, _op("reset-defaults"), "POST", "ResetBios", "; changed: ", "reset-defaults",
    ),
    "job-delete": Case(
        "dell", queue_dell_job, _op("job-delete"), "DELETE", "Jobs/JID", "is gone: the BMC took the DELETE",
        "job-delete",
    ),
    "power-restart": Case(
        "generic", lambda s: None, _op("power", power="graceful-restart"), "POST", "ComputerSystem.Reset",
        "the BMC took the GracefulRestart", "power", 1.5,
    ),
    "apply-job-post": Case(
        "dell", lambda s: _stage(s, _desired(s)), _apply, "POST", "Jobs/?$", "BIOS jobs: JID_",
    ),
    "apply-reset-post": Case(
        "generic", lambda s: None, _apply, "POST", "ComputerSystem.Reset", "the BMC took the GracefulRestart", "",
        1.5,
    ),
}  # fmt: skip


def test_every_writing_operation_has_a_case():
    """A new bios operation that writes must get a row here (the list comes from OPERATIONS)."""
    assert {c.operation for c in CASES.values()} - {""} == set(OPERATIONS) - READ_ONLY_OPERATIONS


def _stop_once_on_the_wire(sim, method: str, path: str) -> threading.Thread:
    def watch() -> None:
        t0 = time.monotonic()
        while sim.count(method, path) == 0 and time.monotonic() - t0 < 60:
            time.sleep(0.02)
        time.sleep(0.2)
        budget.request_stop("interrupted (SIGINT)")

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_a_write_cut_by_a_stop_is_reported_outcome_unknown_and_re_read(sim_factory, quick_grace, case):
    """The BMC acts on the request, then answers 3 s late; Ctrl-C comes while it is on the wire. The host's
    result must say the outcome is unknown and what a re-read shows -- main said only "stopped" (or nothing)."""
    c = CASES[case]
    sim = sim_factory(c.flavour, power_delay=c.power_delay)
    c.setup(sim)
    sim.reset_counts()
    path = c.path if c.path != "SETTINGS" else "(?i)" + sim.settings_path.rstrip("/") + "/?$"
    sim.inject("slow", path, method=c.method, after=True, seconds=3)
    watcher = _stop_once_on_the_wire(sim, c.method, path)
    r = c.act(sim)
    watcher.join()
    assert sim.count(c.method, path) == 1, "sent once, never again"
    assert r.status in ("failed", "interrupted"), r.message
    (record,) = r.data.get("unsure") or [None]
    assert record is not None, (r.message, r.data)
    assert record["outcome"] == "unknown" and record["reread"] == "ok", record
    assert record["request"].startswith(c.method + " "), record
    assert c.shows in record["shows"], record
    text = " ".join(r.message.split())
    assert f"outcome unknown of {record['request']}" in text and record["shows"] in text, text


def test_a_write_whose_re_read_fails_says_so_and_names_the_command(sim_factory, quick_grace):
    """The ClearPending POST is cut and every read after it fails: the outcome stays unknown, said as such, with
    the command that shows it later; nothing is claimed done."""
    sim = sim_factory("dell")
    _stage(sim, {"AssetTag": "other"})
    sim.inject("slow", "ClearPending", method="POST", after=True, seconds=3)
    watcher = _stop_once_on_the_wire(sim, "POST", "ClearPending")

    def break_reads() -> None:
        watcher.join()
        sim.inject("5xx", ".*", method="GET", count=200, status=500)

    breaker = threading.Thread(target=break_reads, daemon=True)
    breaker.start()
    r = _op("clear-pending")(sim)
    breaker.join()
    (record,) = r.data["unsure"]
    assert record["reread"].startswith("failed"), record
    text = " ".join(r.message.split())
    assert "whether the BMC took it is unknown" in text and "bios-plan --host gpu-01" in text, text


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_clear_pending_is_on_the_wire_keeps_it_in_the_json_report(sim_factory, tmp_path, sig, code):
    """The user's view (`invoke bios-clear-pending --json`, a real signal): the iDRAC clears the values and answers
    after 12 s; the signal comes while the POST is on the wire. Exit 130/143, the host's line says the outcome is
    unknown and what the re-read shows, and the JSON report carries the record."""
    sim = sim_factory("dell")
    _stage(sim, {"AssetTag": "other"})
    sim.inject("slow", "ClearPending", method="POST", after=True, seconds=12)
    got, out, doc = signal_on_the_wire(
        tmp_path, sim, ["bios-clear-pending", "--host", "gpu-01"], ("POST", "ClearPending"), sig
    )
    text = " ".join(out.split())
    assert got == code, text
    assert sim.bios_pending() == {}, "the slow fault carries the clear out"
    (host,) = doc["hosts"]
    (record,) = host["data"]["unsure"]
    assert record["outcome"] == "unknown" and record["reread"] == "ok" and record["pending_after"] == [], record
    assert "outcome unknown of POST" in text and "0 values pending now (1 before)" in text, text


def test_a_reset_cut_by_the_host_timeout_ends_in_time_and_is_re_read(sim_factory):
    """--host-timeout 3 while bmc-power's reset POST is on the wire (the BMC restarts the host, then answers after
    8 s): the host ends within its budget (+ the short re-read) and says what the BMC shows, never sends it again."""
    sim = sim_factory("generic", power_delay=1.5)
    sim.inject("slow", "ComputerSystem.Reset", method="POST", after=True, seconds=8)
    t0 = time.monotonic()
    with budget.host_deadline(3, "gpu-01"):
        r = _op("power", power="graceful-restart")(sim)
    took = time.monotonic() - t0
    assert took < 6.5, took
    assert r.status == "failed" and "--host-timeout of 3 s" in r.message, r.message
    (record,) = r.data["unsure"]
    assert record["reread"] == "ok" and "the BMC took the GracefulRestart" in record["shows"], record
    assert sim.count("POST", "ComputerSystem.Reset") == 1
