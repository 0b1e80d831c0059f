"""collect_ssh against a real OpenSSH sshd on 127.0.0.1: the "host" is this machine, so the capture over SSH
must describe the same machine as the sysfs seen directly; non-root without sudo cannot read PCI capabilities."""

from __future__ import annotations

import pytest

from numaforge.bios.os_verify import CANNOT, verify
from numaforge.facts import parse_facts
from numaforge.facts import captures as C
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
    spec = Spec("nosuchtool.txt", _tool("numaforge-no-such-tool", "numaforge-no-such-tool --all"),
                "numaforge-no-such-tool", "install it on the host")
    with connect(sshd_host.spec(), "loop") as r:
        caps = collect(r, "loop", specs=[spec, next(s for s in SPECS if s.name == C.UNAME)])
    assert caps.absent == {"nosuchtool.txt": "numaforge-no-such-tool is not installed on the host; install it on "
                                             "the host to get these facts (numaforge installs nothing)"}
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
