"""The BIOS operations and bios-apply's rollout options as users run them: `invoke ...` in a subprocess,
against simulator BMCs on 127.0.0.1 (and ports where nothing listens, for dead BMCs)."""

from __future__ import annotations

import json
import socket

import pytest

from numaforge.bios.presets import UNVERIFIED_VAR
from numaforge.lab.bmc import BMCSimulator

from .test_bios_cli_bmc import PASSWORD, invoke, report

pytestmark = pytest.mark.bmc


def dead_url() -> str:
    with socket.socket() as s:  # a port that was free a moment ago: connection refused
        s.bind(("127.0.0.1", 0))
        return f"https://127.0.0.1:{s.getsockname()[1]}"


def inventory(tmp_path, hosts: list[tuple[str, str, str | None]]):
    lines = ["version: 1", "hosts:"]
    for name, url, ca in hosts:
        ca_text = f", ca_bundle: '{ca}'" if ca else ""
        lines += [
            f"  {name}:",
            f"    bmc: {{url: '{url}', username: admin, password: 'env:NF_CLI_BMC_PW'{ca_text}}}",
            "    hardware: {sockets: 2, gpus: ['0000:41:00.0']}",
            "    bios_profile: epyc-gpudirect",
            f"    vars: {{{UNVERIFIED_VAR}: allow}}  # the write path under test; the policy: its own test",
        ]
    inv = tmp_path / "inv.yaml"
    inv.write_text("\n".join(lines) + "\n")
    return inv


@pytest.fixture
def sims():
    started = []

    def make(flavour="generic", n=1):
        for _ in range(n):
            started.append(
                BMCSimulator(flavour=flavour, tls=True, username="admin", password=PASSWORD, power_delay=0.3).start()
            )
        return started[-n:]

    yield make
    for s in started:
        s.stop()


def test_bios_apply_max_fail_stops_after_the_first_dead_bmc(sims, tmp_path):
    """The issue's case: two dead BMCs first, forks 1, max-fail 0 -- only the first host may run."""
    live = sims("generic", 3)
    inv = inventory(
        tmp_path,
        [("dead-1", dead_url(), None), ("dead-2", dead_url(), None)]
        + [(f"ok-{i}", s.url, str(s.ca_file)) for i, s in enumerate(live)],
    )
    r = invoke(
        "bios-apply", "-i", str(inv), "--all", "--forks", "1", "--max-fail", "0", "--json", str(tmp_path / "r.json")
    )
    assert r.returncode == 1
    doc = report(tmp_path / "r.json")
    assert [h["status"] for h in doc["hosts"]] == ["failed", "not-run", "not-run", "not-run", "not-run"]
    assert "--max-fail 0%" in doc["data"]["fleet"]["reason"]
    assert all(s.count("PATCH") == 0 for s in live)


def test_bios_apply_batch_and_max_fail(sims, tmp_path):
    live = sims("generic", 3)
    inv = inventory(
        tmp_path,
        [
            ("dead-1", dead_url(), None),
            ("ok-0", live[0].url, str(live[0].ca_file)),
            ("ok-1", live[1].url, str(live[1].ca_file)),
            ("ok-2", live[2].url, str(live[2].ca_file)),
        ],
    )
    r = invoke(
        "bios-apply", "-i", str(inv), "--all", "--batch", "2", "--max-fail", "50", "--json", str(tmp_path / "r.json")
    )
    assert r.returncode == 1
    doc = report(tmp_path / "r.json")
    assert doc["data"]["fleet"]["batches"] == [["dead-1", "ok-0"], ["ok-1", "ok-2"]]
    assert [h["status"] for h in doc["hosts"]] == ["failed", "changed", "changed", "changed"]  # 50% is not > 50%
    r = invoke(
        "bios-apply", "-i", str(inv), "--all", "--batch", "2", "--max-fail", "49", "--json", str(tmp_path / "s.json")
    )
    doc = report(tmp_path / "s.json")
    assert doc["data"]["fleet"]["batches"] == [["dead-1", "ok-0"]]
    assert [h["status"] for h in doc["hosts"]] == ["failed", "unchanged", "not-run", "not-run"]
    assert "1 of 2 hosts failed (50% > --max-fail 49%)" in doc["data"]["fleet"]["reason"]


def test_a_staged_reboot_rollout_stops_before_the_next_batch_after_a_failure(sims, tmp_path):
    """Issue 39 item 6, as reported: `bios-apply --reboot --canary 1 --batch 2` went on rebooting the next batch
    after a host of batch 2 failed (--max-fail defaulted to 100). The hosts never reached are "not run", not
    "failed on"."""
    live = sims("generic", 4)
    hosts = [("c-0", live[0]), ("b-1", live[1]), ("b-2", None), ("b-3", live[2]), ("b-4", live[3])]
    inv = inventory(tmp_path, [(n, s.url, str(s.ca_file)) if s else (n, dead_url(), None) for n, s in hosts])
    r = invoke(
        "bios-apply", "-i", str(inv), "--all", "--reboot", "--canary", "1", "--batch", "2",
        "--json", str(tmp_path / "r.json"),
    )  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    doc = report(tmp_path / "r.json")
    assert [h["status"] for h in doc["hosts"]] == ["changed", "changed", "failed", "not-run", "not-run"]
    assert doc["data"]["fleet"]["batches"] == [["c-0"], ["b-1", "b-2"]]
    assert [s.count("POST", "Reset") for s in live] == [1, 1, 0, 0], "the next batch must not be rebooted"
    assert [s.count("PATCH") for s in live[2:]] == [0, 0]
    lines = r.stderr.splitlines()
    assert "failed on: b-2" in lines, r.stderr
    assert any(line.startswith("not run (skipped): b-3, b-4 (1 of 3 hosts failed") for line in lines), r.stderr


def test_jobs_delete_clear_and_reset_through_invoke(sims, tmp_path):
    (dell,) = sims("dell")
    inv = inventory(tmp_path, [("gpu-dell", dell.url, str(dell.ca_file))])
    assert invoke("bios-apply", "-i", str(inv)).returncode == 0  # values pending, config job queued
    jid = dell.jobs()[0]["Id"]

    r = invoke("bios-jobs", "-i", str(inv), "--json", str(tmp_path / "jobs.json"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert jid in r.stdout and "Scheduled" in r.stdout
    assert report(tmp_path / "jobs.json")["hosts"][0]["data"]["operation"]["jobs"][0]["id"] == jid

    r = invoke("bios-clear-pending", "-i", str(inv))
    assert r.returncode == 1 and jid in r.stdout + r.stderr and "bios-job-delete" in r.stdout + r.stderr

    r = invoke("bios-job-delete", "-i", str(inv), "--dry-run")
    assert r.returncode == 0 and f"would delete {jid}" in r.stdout and len(dell.jobs()) == 1
    r = invoke("bios-job-delete", "-i", str(inv), "--job", jid, "--json", str(tmp_path / "del.json"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert dell.jobs() == [] and report(tmp_path / "del.json")["hosts"][0]["status"] == "changed"

    r = invoke("bios-reset-defaults", "-i", str(inv), "--dry-run", "--json", str(tmp_path / "rd.json"))
    assert r.returncode == 0 and dell.count("POST", "ResetBios") == 0
    assert json.loads((tmp_path / "rd.json").read_text())["options"]["dry_run"] is True
    r = invoke("bios-reset-defaults", "-i", str(inv))
    assert r.returncode == 0 and dell.count("POST", "ResetBios") == 1
