"""Issue 40 item 3: a write is never lost from a report. A PATCH cut on the wire (Ctrl-C/SIGTERM, --host-timeout)
is "outcome unknown": the settings object is re-read before the host's result is made, and the result says what
the BMC now holds. Real HTTPS simulators on 127.0.0.1 (the "slow" fault with after=True: the BMC applies the
PATCH, then answers late); nothing mocked."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from numaforge import budget
from numaforge.bios import deadline
from numaforge.bios.apply import apply_host, plan_host
from numaforge.lab.bmc import FLAVOURS

from .test_bios_apply_bmc import _bmc_password, admin_session, host_for, run, sim_factory  # noqa: F401 (fixtures)

ROOT = Path(__file__).resolve().parents[2]


def _settings_re(sim) -> str:
    return "(?i)" + sim.flavour.settings_path.rstrip("/") + "/?$"


def _stop_once_patch_is_on_the_wire(sim, reason: str) -> threading.Thread:
    def watch() -> None:
        t0 = time.monotonic()
        while sim.count("PATCH", _settings_re(sim)) == 0 and time.monotonic() - t0 < 30:
            time.sleep(0.02)
        time.sleep(0.2)
        budget.request_stop(reason)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


@pytest.fixture
def quick_grace(monkeypatch):
    monkeypatch.setattr(deadline, "WRITE_GRACE", 0.5)
    yield
    budget.clear_stop()


def _held(sim, changed: list[str]) -> dict:
    pending = sim.bios_pending()
    return {k: pending[k] for k in changed if k in pending}


@pytest.mark.bmc
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_patch_cut_by_a_stop_is_reported_from_what_the_bmc_holds(sim_factory, quick_grace, flavour):
    """Ctrl-C while the PATCH is on the wire (the BMC applies it, then answers late): the report must list what
    the BMC now holds as written, and say the outcome was unknown and re-read -- main said `changed: []`."""
    sim = sim_factory(flavour)
    sim.inject("slow", _settings_re(sim), method="PATCH", after=True, seconds=3)
    watcher = _stop_once_patch_is_on_the_wire(sim, "interrupted (SIGINT)")
    r = run(apply_host, host_for(sim))
    watcher.join()
    pending = sim.bios_pending()
    assert pending, "the fault applies the PATCH"
    assert r.status == "failed"
    assert set(r.data["changed"]) == set(pending) and r.data["changed"], (r.data["changed"], pending)
    write = r.data["write"]
    assert write["outcome"] == "unknown" and write["reread"] == "ok", write
    assert set(write["sent"]) >= set(pending) and set(write["bmc_holds"]) == set(pending)
    assert "outcome unknown" in r.message and "written before it stopped" in r.message, r.message


@pytest.mark.bmc
def test_a_patch_cut_by_the_host_timeout_ends_the_host_in_time_and_is_re_read(sim_factory):
    """--host-timeout during a slow PATCH: the host ends within its budget (+1 s, +the short re-read), and the
    report says what the BMC holds (main waited out the PATCH, then lost it from the report)."""
    sim = sim_factory("generic")
    sim.inject("slow", _settings_re(sim), method="PATCH", after=True, seconds=8)
    h = host_for(sim)
    t0 = time.monotonic()
    with budget.host_deadline(3, h.name):
        r = run(apply_host, h)
    took = time.monotonic() - t0
    assert took < 4.5, took
    pending = sim.bios_pending()
    assert pending and set(r.data["changed"]) == set(pending), (r.data, pending)
    assert r.data["write"]["outcome"] == "unknown" and "--host-timeout of 3 s" in r.message, r.message


@pytest.mark.bmc
def test_a_patch_whose_re_read_fails_is_reported_as_outcome_unknown(sim_factory, quick_grace):
    """The BMC applies the PATCH, the answer is cut and the re-read fails too: nothing is claimed written, and
    every value sent is listed as of unknown outcome."""
    sim = sim_factory("generic")
    sim.inject("slow", _settings_re(sim), method="PATCH", after=True, seconds=3)
    watcher = _stop_once_patch_is_on_the_wire(sim, "interrupted (SIGTERM)")

    def break_reads() -> None:  # the reads before the PATCH are healthy, the re-read after it fails
        watcher.join()
        sim.inject("5xx", _settings_re(sim), method="GET", count=50, status=500)

    breaker = threading.Thread(target=break_reads, daemon=True)
    breaker.start()
    r = run(apply_host, host_for(sim))
    breaker.join()
    assert r.status == "failed" and r.data["changed"] == []
    write = r.data["write"]
    assert write["outcome"] == "unknown" and write["reread"].startswith("failed"), write
    assert "outcome unknown" in r.message and all(k in r.message for k in write["sent"]), r.message


@pytest.mark.bmc
def test_pending_after_a_write_is_what_the_bmc_holds_not_a_sum(sim_factory):
    """ "7 written, 8 pending" while the BMC held 7: a value pending before the PATCH that the BMC no longer holds
    after it (a BMC whose settings PATCH replaces what was staged) must not be reported pending."""
    sim = sim_factory("generic")
    h = host_for(sim)
    plan = run(plan_host, h).data["plan"]
    staged = next(i for i in plan if i["action"] == "change")
    admin = admin_session(sim)
    settings = sim.url + sim.flavour.settings_path
    assert admin.patch(settings, json={"Attributes": {staged["attribute"]: staged["desired"]}}, timeout=10).ok
    sim.inject("slow", _settings_re(sim), method="PATCH", after=True, seconds=1.0)

    def replace_staged() -> None:  # once the PATCH is processed: the settings object drops the earlier value
        t0 = time.monotonic()
        while sim.count("PATCH", _settings_re(sim)) < 2 and time.monotonic() - t0 < 30:
            time.sleep(0.02)
        time.sleep(0.4)
        doc = admin.get(settings, timeout=10).json()
        doc["Attributes"].pop(staged["attribute"])
        sim.inject("answer", _settings_re(sim), method="GET", count=100, body=doc)

    t = threading.Thread(target=replace_staged, daemon=True)
    t.start()
    r = run(apply_host, h)
    t.join()
    assert r.status == "changed", r.message
    held = set(r.data["changed"])
    assert staged["attribute"] not in r.data["pending"], (r.data["pending"], r.message)
    assert set(r.data["pending"]) == held and f"{len(held)} written, {len(held)} pending" in r.message, r.message


def signal_on_the_wire(tmp_path: Path, sim, task: list[str], request: tuple[str, str], sig, profile: bool = False):
    """The user's view of a write cut by a real signal: ``invoke TASK... -i INV --json R`` against ``sim`` (one host
    whose inventory names the simulator's CA; ``profile``: with the shipped bios profile), ``sig`` sent 0.5 s after
    the simulator saw ``request`` (method, path regex: the write a slow fault holds on the wire). Returns (exit
    code, stdout + stderr, the JSON report)."""
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "hosts:\n  gpu-01:\n"
        f"    bmc: {{url: '{sim.url}', username: admin, password: 'env:NF_TEST_BMC_PASSWORD', "
        f"ca_bundle: '{sim.ca_file}'}}\n"
        "    hardware: {sockets: 2, gpus: ['0000:41:00.0']}\n"
        + ("    bios_profile: epyc-gpudirect\n" if profile else "")
    )
    env = {**os.environ, "NUMAFORGE_STATE": str(tmp_path / "state"), "PYTHONPATH": str(ROOT), "COLUMNS": "250"}
    report = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "invoke", task[0], "-i", str(inv), *task[1:], "--json", str(report)]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    t0 = time.monotonic()
    while sim.count(*request) == 0:
        assert proc.poll() is None and time.monotonic() - t0 < 120, proc.communicate()
        time.sleep(0.05)
    time.sleep(0.5)
    os.kill(proc.pid, sig)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out + err, json.loads(report.read_text())


@pytest.mark.bmc
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_a_patch_is_on_the_wire_keeps_the_write_in_the_json_report(sim_factory, tmp_path, sig, code):
    """The user's view (`invoke bios-apply --json`, a real signal): the BMC applies the PATCH and answers after 12 s;
    the signal comes while it is on the wire. Exit 130/143, and the JSON report lists as written what the BMC now
    holds, with the write's outcome unknown and re-read (main: `changed: []`, 4 of 4 runs)."""
    sim = sim_factory("generic")
    sim.inject("slow", _settings_re(sim), method="PATCH", after=True, seconds=12)
    code_got, out, doc = signal_on_the_wire(
        tmp_path, sim, ["bios-apply", "--unverified", "allow"], ("PATCH", _settings_re(sim)), sig, profile=True
    )
    assert code_got == code, out
    held = sim.bios_pending()
    assert held, "the fault applies the PATCH"
    (h,) = doc["hosts"]
    assert doc["ok"] is False and h["status"] in ("interrupted", "failed"), h
    assert sorted(h["data"]["changed"]) == sorted(held), (h["data"], held)
    assert h["data"]["write"]["outcome"] == "unknown" and h["data"]["write"]["reread"] == "ok", h["data"]
    assert "outcome unknown" in " ".join(out.split()), out


@pytest.mark.bmc
def test_the_attributes_null_sequence_of_issue_40(sim_factory):
    """Issue 40's "7 written, 8 pending while the BMC holds 7 (Attributes: null)", replayed: one value staged by
    someone else, then bios-apply's PATCH of the other values is accepted (the BMC holds them) and every read of
    the settings object after it answers Attributes null. What is pending cannot be told from that: the report
    must list the accepted values as written, claim no pending count, and say why -- main dropped the accepted
    write from the report (changed: [])."""
    sim = sim_factory("generic")
    h = host_for(sim)
    plan = [i for i in run(plan_host, h).data["plan"] if i["action"] == "change"]
    staged, rest = plan[0], plan[1:]
    admin = admin_session(sim)
    settings = sim.url + sim.flavour.settings_path
    assert admin.patch(settings, json={"Attributes": {staged["attribute"]: staged["desired"]}}, timeout=10).ok

    def null_after_the_patch() -> None:
        t0 = time.monotonic()
        while sim.count("PATCH", _settings_re(sim)) < 2 and time.monotonic() - t0 < 30:
            time.sleep(0.01)
        doc = admin.get(settings, timeout=10).json()
        sim.inject("answer", _settings_re(sim), method="GET", count=100, body={**doc, "Attributes": None})

    sim.inject("slow", _settings_re(sim), method="PATCH", after=True, seconds=0.5)
    t = threading.Thread(target=null_after_the_patch, daemon=True)
    t.start()
    r = run(apply_host, h)
    t.join()
    held = sim.bios_pending()
    assert {i["attribute"] for i in rest} <= set(held), "the BMC holds the values sent"
    assert r.status == "failed", r.message
    assert sorted(r.data["changed"]) == sorted(i["attribute"] for i in rest), (r.data["changed"], r.message)
    assert r.data["pending"] == [] and r.data["write"]["outcome"] == "accepted", r.data
    text = " ".join(r.message.split())
    assert "Attributes as null" in text and "pending cannot be told" in text, text
    assert not re.search(r"\d+ pending", text), text  # no count of pending values the BMC did not show
