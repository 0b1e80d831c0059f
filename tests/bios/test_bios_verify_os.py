"""bios-verify proves a profile from both sides: the BMC's current values and what the OS shows.

Real peers only: the BMC simulator over TLS and an OpenSSH sshd on loopback whose "host" is this build server
(one socket, no GPUs) — so a BMC that says NPS4 was applied is contradicted by the OS, as on a real machine
where a setting did not take.
"""

from __future__ import annotations

import pytest

from numaforge.bios.apply import apply_host
from numaforge.bios.verify import VerifyOptions, merge_rows, run_verify
from numaforge.facts import parse_facts
from numaforge.facts.collect import collect_local

from .test_bios_apply_bmc import PASSWORD, host_for, opts, run, sim_factory  # noqa: F401 (fixture)


def test_merge_rows_prefers_mismatch_and_keeps_why():
    plan = [
        {"setting": "numa_nodes_per_socket", "attribute": "NumaNodesPerSocket", "current": "4", "desired": "4"},
        {"setting": "sriov", "attribute": "SriovGlobalEnable", "current": "Disabled", "desired": "Enabled"},
        {"setting": "memory_interleaving", "attribute": "MemInterleave", "current": "Disabled", "desired": "Disabled"},
    ]
    os_rows = [
        {
            "setting": "numa_nodes_per_socket",
            "desired": 4,
            "verdict": "mismatch",
            "os_evidence": "1 node(s) with CPUs on 1 socket(s)",
            "why": "NPS4 would show 4",
        },
        {"setting": "sriov", "desired": True, "verdict": "ok", "os_evidence": "VFs", "why": ""},
    ]
    rows = {r["setting"]: r for r in merge_rows(plan, os_rows, None)}
    assert rows["numa_nodes_per_socket"]["verdict"] == "mismatch"
    assert rows["numa_nodes_per_socket"]["bmc_value"] == "NumaNodesPerSocket=4"
    assert rows["sriov"]["verdict"] == "mismatch", "the BMC side disagrees even though the OS looks right"
    assert rows["memory_interleaving"]["verdict"] == "cannot tell"
    only_bmc = {r["setting"]: r for r in merge_rows(plan, None, "the host has no ssh section")}
    assert only_bmc["numa_nodes_per_socket"]["verdict"] == "cannot tell"
    assert only_bmc["numa_nodes_per_socket"]["why"] == "the host has no ssh section"


@pytest.mark.ssh
def test_bmc_says_applied_but_the_os_disagrees(sim_factory, sshd_host, monkeypatch):
    monkeypatch.setenv("NF_TEST_BMC_PASSWORD", PASSWORD)
    sim = sim_factory("dell")
    h = host_for(sim)
    h.ssh = sshd_host.spec()
    applied = run(apply_host, h, opts(reboot=True))
    assert applied.status == "changed", applied.message

    outcome = run_verify([h], opts(), VerifyOptions(os_side=True))
    r = outcome.results[0]
    rows = {row["setting"]: row for row in r.data["verify_rows"]}
    # the BMC side is clean...
    assert r.data["mismatches"] == []
    assert rows["numa_nodes_per_socket"]["bmc_value"] == "NumaNodesPerSocket=4"
    # ...but this one-socket, single-node build server is not NPS4 (2 sockets x 4 nodes in the inventory)
    local = parse_facts(collect_local("x"), "x")
    assert len([n for n in local.numa.nodes if n.cpus]) < 8
    assert rows["numa_nodes_per_socket"]["verdict"] == "mismatch"
    assert rows["memory_interleaving"]["verdict"] == "cannot tell" and rows["memory_interleaving"]["why"]
    assert r.status == "failed" and "numa_nodes_per_socket" in r.message

    bmc_only = run_verify([h], opts(), VerifyOptions(os_side=False)).results[0]
    assert bmc_only.status == "ok", bmc_only.message
    assert "verified on the BMC" in bmc_only.message and "--no-os" in bmc_only.message
    assert {row["verdict"] for row in bmc_only.data["verify_rows"]} == {"cannot tell"}
