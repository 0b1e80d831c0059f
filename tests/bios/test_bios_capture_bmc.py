"""bios-capture (issue 41 item 4): record a BMC's tree for the BIOS flow, scrubbed, and replay it with the
simulator's mockup mode. Against every simulator flavour (real HTTPS on 127.0.0.1, DMTF's `redfish` library as the
client): the plan against the replay equals the plan against the original, and no serial number, UUID, password or
session token of the original is in the capture. The scrubber is also run over the public captures in
tests/data/captures (real vendors' trees: iLO's, iDRAC's, XCC's, ... serials and addresses)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from numaforge.bios.apply import Timeouts, apply_host, plan_host, verify_host
from numaforge.bios.capture import PLACEHOLDER_RE, capture_host, crawl, scrub_all
from numaforge.bios.hostsession import HostOptions
from numaforge.lab.bmc import ALL_FLAVOURS
from numaforge.report import HostResult

from .conftest import capture_dirs
from .test_bios_apply_bmc import PASSWORD, _bmc_password, host_for, opts, run, sim_factory  # noqa: F401 (fixtures)

pytestmark = pytest.mark.bmc

ROOT = Path(__file__).resolve().parents[2]
TIMEOUTS = Timeouts(graceful=3.0, power_on=15.0, job=5.0, poll=0.1, settle=3.0)


def _capture(sim, out: Path) -> HostResult:
    result = HostResult("gpu-01")
    capture_host(host_for(sim), HostOptions(), out, result)
    return result


def _texts(directory: Path) -> str:
    return "\n".join(p.read_text() for p in sorted(directory.rglob("index.json")))


def _plan_items(result: HostResult) -> list[dict]:
    return [{k: v for k, v in i.items()} for i in result.data["plan"]]


@pytest.mark.parametrize("flavour", ALL_FLAVOURS)
def test_a_capture_replays_to_the_same_plan_and_holds_no_secret(sim_factory, mockup_factory, flavour, tmp_path):
    sim = sim_factory(flavour)
    original = run(plan_host, host_for(sim))
    assert original.status == "ok", original.message
    sim.reset_counts()

    out = tmp_path / "capture"
    captured = _capture(sim, out)
    assert captured.status == "ok", captured.message
    assert {m for m, _ in sim.requests} <= {"GET", "HEAD"}  # read-only
    assert (out / "redfish" / "v1" / "index.json").is_file()

    # what the original served that identifies the machine or grants access: none of it is in the capture
    secrets = {sim.password, *sim.issued_tokens}
    for path in captured.data["documents"]:
        body = json.dumps(
            __import__("requests").get(f"{sim.url}{path}", auth=("admin", PASSWORD), verify=str(sim.ca_file)).json()
        )
        secrets |= set(re.findall(r'"(?:SerialNumber|UUID)": "([^"]+)"', body))
    assert len(secrets) >= 3  # the password and (at least) the service root's and system's UUIDs
    text = _texts(out)
    leaked = sorted(s for s in secrets if s and s in text)
    assert leaked == [], leaked
    assert re.search(r"00000000-0000-4000-8000-0+1", text) and "SCRUBBED-SERIAL-1" in text

    replay = mockup_factory(out, password=PASSWORD)
    again = run(plan_host, host_for(replay))
    assert again.status == original.status, again.message
    assert _plan_items(again) == _plan_items(original)
    assert again.data["would_change"] == original.data["would_change"]
    assert replay.count("PATCH") == 0


@pytest.mark.parametrize("flavour", ALL_FLAVOURS)
def test_a_replayed_capture_converges_in_one_apply(sim_factory, mockup_factory, flavour, tmp_path):
    """The mockup mode's write path on every flavour's shape (Dell's config jobs included): one apply with
    --reboot, exactly one reset, verify ok, a re-plan of 0."""
    out = tmp_path / "capture"
    assert _capture(sim_factory(flavour), out).status == "ok"
    replay = mockup_factory(out, password=PASSWORD)
    h = host_for(replay)
    plan = run(plan_host, h)
    changes = {i["attribute"]: i["desired"] for i in plan.data["plan"] if i["action"] == "change"}
    # the value as the Bios shows it: its ValueName, or its display string on a Bios that shows those (smc-h13,
    # issue 41 item 3: the replay accepts values only in that form, as a real Supermicro)
    shown = {i["attribute"]: (i.get("display") or {}).get("desired") for i in plan.data["plan"]}
    assert changes, "the stock profile differs from every flavour's defaults"
    applied = run(apply_host, h, opts(reboot=True, timeouts=TIMEOUTS))
    assert applied.status == "changed", applied.message
    assert sum(replay.resets.values()) == 1 and replay.bios_pending() == {}
    now = replay.bios_current()
    assert all(now[k] in (v, shown[k]) for k, v in changes.items()), ({k: now[k] for k in changes}, changes)
    assert run(verify_host, h).status == "ok"
    replay.reset_counts()
    assert run(plan_host, h).data["would_change"] == [] and replay.count("PATCH") == 0 and replay.count("POST") == 0


def test_a_capture_never_overwrites_a_directory_and_reads_nothing_then(sim_factory, tmp_path):
    sim = sim_factory("dell")
    out = tmp_path / "taken"
    out.mkdir()
    (out / "mine.txt").write_text("operator's file\n")
    result = _capture(sim, out)
    assert result.status == "failed" and "exists and is not empty" in result.message
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"] and sim.count() == 0


@pytest.mark.parametrize("capture", capture_dirs(), ids=lambda p: p.name)
def test_scrub_removes_every_serial_uuid_and_address_of_a_real_capture(capture):
    """The public captures carry the real machines' serials, UUIDs, MAC and IP addresses: after scrub, not one of
    those values is left anywhere (in any key, any string), and the BIOS attribute registry is untouched."""

    def get(uri):
        f = capture / uri.strip("/") / "index.json"
        if not f.is_file():
            matches = [
                p
                for p in capture.rglob("index.json")
                if p.parent.relative_to(capture).as_posix().lower() == uri.strip("/").lower()
            ]
            f = matches[0] if matches else f
        return (uri, json.loads(f.read_text())) if f.is_file() else None

    docs = crawl(get)
    found: set[str] = set()

    def collect(doc, key=""):
        if isinstance(doc, dict):
            for k, v in doc.items():
                collect(v, k)
        elif isinstance(doc, list):
            for v in doc:
                collect(v, key)
        elif (
            isinstance(doc, str)
            and len(doc) >= 6
            and re.search(r"(?i)^(serialnumber|uuid|macaddress|permanentmacaddress|address|hostname|fqdn)$", key)
        ):
            found.add(doc)

    for d in docs.values():
        collect(d)
    found = {f for f in found if not PLACEHOLDER_RE.fullmatch(f)}
    scrubbed, _kinds = scrub_all(docs)  # as bios-capture scrubs a capture
    text = json.dumps(scrubbed)
    assert [s for s in sorted(found) if s in text] == []
    # the registry keeps its shape: the same attributes and types, as many distinct values each, and every value
    # the Bios holds is still one the registry lists (a MAC in a boot option's ValueName reads the same in both)
    bios = [p for p, d in docs.items() if isinstance(d.get("Attributes"), dict) and "AttributeRegistry" in d]
    for path, doc in docs.items():
        if "RegistryEntries" not in doc:
            continue
        before, after = doc["RegistryEntries"]["Attributes"], scrubbed[path]["RegistryEntries"]["Attributes"]
        assert [(a["AttributeName"], a["Type"]) for a in after] == [(a["AttributeName"], a["Type"]) for a in before]
        for a, b in zip(after, before):
            now = [v.get("ValueName") for v in a.get("Value") or []]
            was = [v.get("ValueName") for v in b.get("Value") or []]
            assert len(set(now)) == len(set(was)), a["AttributeName"]
            for p in bios:
                name = a["AttributeName"]
                if docs[p]["Attributes"].get(name) in was:  # a listed value before: still a listed value
                    assert scrubbed[p]["Attributes"][name] in now, (p, name, scrubbed[p]["Attributes"][name])


def test_bios_capture_task_and_lab_up_bmc_mockup_round_trip(sim_factory, tmp_path):
    """The operator's way: `bios-capture --host H DIR` against a BMC, then `lab-up --no-vm --bmc-mockup DIR` serves
    it, and the lab inventory it writes lets bios-plan read it (bmc.vendor auto)."""
    from sshd_fixture import free_port

    sim = sim_factory("hpe-gen11")
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "version: 1\nhosts:\n  bmc1:\n    bmc:\n"
        f"      url: {sim.url}\n      username: admin\n      password: env:NF_TEST_BMC_PASSWORD\n"
        f"      ca_bundle: {sim.ca_file}\n    bios_profile: epyc-gpudirect\n"
    )
    env = {**os.environ, "NUMAFORGE_STATE": str(tmp_path / "state"), "COLUMNS": "200", "PYTHONPATH": str(ROOT)}
    invoke = [sys.executable, "-m", "invoke"]
    out = tmp_path / "cap"
    r = subprocess.run(
        [*invoke, "bios-capture", "-i", str(inv), "--host", "bmc1", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert (out / "redfish" / "v1" / "index.json").is_file()
    bad = subprocess.run(
        [*invoke, "lab-up", "--no-vm", "--bmc-mockup", str(tmp_path / "nothing")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "--bmc-mockup" in bad.stdout + bad.stderr
    up = subprocess.run(
        [*invoke, "lab-up", "--no-vm", "--bmc-mockup", str(out), "--bmc-port", str(free_port())],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert "mockup:" in up.stdout
        plan = subprocess.run(
            [*invoke, "bios-plan", "--host", "lab-vm", "--json", "-"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert plan.returncode == 0, plan.stdout + plan.stderr
    finally:
        subprocess.run([*invoke, "lab-down"], cwd=ROOT, env=env, capture_output=True, timeout=120)


def test_bios_capture_without_a_directory_is_exit_2_before_any_host(tmp_path):
    env = {**os.environ, "NUMAFORGE_STATE": str(tmp_path / "state"), "PYTHONPATH": str(ROOT)}
    r = subprocess.run(
        [sys.executable, "-m", "invoke", "bios-capture"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert r.returncode == 2 and "DIRECTORY" in r.stdout + r.stderr, r.stdout + r.stderr
    # `-h` is help on every task (issue 39 item 1): it prints help and never becomes a directory named "-h"
    r = subprocess.run(
        [sys.executable, "-m", "invoke", "bios-capture", "-h"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert r.returncode == 0 and "Usage:" in r.stdout, r.stdout + r.stderr
    assert not (ROOT / "-h").exists() and not (tmp_path / "state").exists()
