"""collect_ssh against a real OpenSSH sshd on 127.0.0.1: the "host" is this machine, so the capture over SSH
must describe the same machine as the sysfs seen directly; non-root without sudo cannot read PCI capabilities."""

from __future__ import annotations

import pytest

from numaforge.bios.os_verify import CANNOT, verify
from numaforge.facts import captures as C
from numaforge.facts import parse_facts
from numaforge.facts.collect import SPECS, Spec, _tool, collect, collect_local
from numaforge.remote.ssh import connect

pytestmark = pytest.mark.ssh


def test_ssh_capture_equals_local_capture(sshd_host):
    remote = parse_facts(_collect(sshd_host.inventory_host()))
    local = parse_facts(collect_local())
    assert remote.numa.as_dict() == local.numa.as_dict()
    assert remote.cpu.as_dict() == local.cpu.as_dict()
    assert remote.pci.as_dict() == local.pci.as_dict()
    assert remote.kernel.release == local.kernel.release and remote.absent == local.absent


def _collect(host):
    from numaforge.facts.collect import collect_ssh

    return collect_ssh(host)


def test_missing_tool_over_ssh_becomes_a_reason(sshd_host):
    spec = Spec(
        "nosuchtool.txt",
        _tool("numaforge-no-such-tool", "numaforge-no-such-tool --all"),
        "numaforge-no-such-tool",
        "install it on the host",
    )
    with connect(sshd_host.spec(), "loop") as r:
        caps = collect(r, "loop", specs=[spec, next(s for s in SPECS if s.name == C.UNAME)])
    assert caps.absent == {
        "nosuchtool.txt": "numaforge-no-such-tool is not installed on the host; install it on "
        "the host to get these facts (numaforge installs nothing)"
    }
    assert caps.files[C.UNAME].strip()


def test_non_root_without_sudo_cannot_tell_acs_or_aspm(sshd_host, test_user):
    user = test_user(sudo=None, pubkey=f"{sshd_host.client_key}.pub")
    host = sshd_host.inventory_host(user=user)
    caps = _collect(host)
    f = parse_facts(caps)
    assert f.pci.caps_denied
    [v] = verify({"pcie_aspm": "disabled"}, f, device_rows=False)
    assert v.verdict == CANNOT and "ssh.sudo: true" in v.why


def test_non_root_with_sudo_reads_capabilities(sshd_host, test_user):
    user = test_user(sudo="nopasswd", pubkey=f"{sshd_host.client_key}.pub")
    host = sshd_host.inventory_host(user=user, sudo=True)
    f = parse_facts(_collect(host))
    assert not f.pci.caps_denied
    assert f.pci.as_dict() == parse_facts(collect_local()).pci.as_dict()


def test_facts_task_over_ssh_saves_a_corpus_and_checks_a_profile(sshd_host, tmp_path):
    """`invoke facts` end to end against the real sshd: the profile asks for NPS4, this 1-socket machine shows
    one node, so the OS side reports a mismatch and the task exits 1 with a schema-valid report."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    import jsonschema

    from numaforge.facts import Captures
    from numaforge.report import load_schema

    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "hosts:\n"
        "  loop:\n"
        f"    ssh: {{address: 127.0.0.1, port: {sshd_host.port}, key_file: {sshd_host.client_key}, agent: false,"
        f" known_hosts: {sshd_host.known_hosts}}}\n"
        "    bios_profile: epyc-gpudirect\n"
        "    vars: {pci_numa_nodes: {'0000:00:03.0': 0}}\n"
    )
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "invoke",
            "facts",
            "--inventory",
            str(inv),
            "--host",
            "loop",
            "--save",
            str(tmp_path / "corpus"),
            "--profile",
            "auto",
            "--json",
            str(tmp_path / "r.json"),
        ],
        cwd=root,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "250"},
        timeout=300,
    )
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    jsonschema.validate(doc, load_schema())
    [h] = doc["hosts"]
    verdicts = {v["setting"]: v for v in h["data"]["os_verify"]["verdicts"]}
    assert verdicts["numa_nodes_per_socket"]["verdict"] == "mismatch"
    assert "NPS4 on 1 socket(s) gives 4 node(s); the OS sees 1" in verdicts["numa_nodes_per_socket"]["why"]
    assert verdicts["numa_node 0000:00:03.0 (nic)"]["verdict"] == "mismatch"  # sysfs says -1, inventory says 0
    assert [s["name"] for s in h["steps"]] == ["collect", "save", "parse", "os-verify"]
    saved = Captures.load(tmp_path / "corpus" / "loop")
    assert saved.source == "loop" and set(saved.files) | set(saved.absent) == set(saved.commands)


def test_sudo_refused_inside_the_batch_is_a_reason_for_that_capture_only(sshd_host, test_user):
    user = test_user(sudo=None, pubkey=f"{sshd_host.client_key}.pub")
    host = sshd_host.inventory_host(user=user, sudo=True)  # the inventory asks for sudo; the host says no
    caps = _collect(host)
    assert caps.absent[C.LSPCI].startswith("`lspci -vvv -D -nn` needs root and sudo refused: ")
    assert f"sudo needs a password for {user}" in caps.absent[C.LSPCI]  # what `sudo -n` says without a rule
    assert caps.files[C.UNAME].strip() and C.LSPCI_TREE in caps.files  # the rest came back
