"""livepatch-status / -unload against real sshd hosts on this machine (its kernel has no live patches; nothing
is changed on it): the status shape, "nothing to do", the fleet rules, and the resume journal (a host an
interrupted run finished is only checked, not redone)."""

from __future__ import annotations

import pytest

from numaforge import journal
from numaforge.fleet import Rollout
from numaforge.livepatch import fleet as lpfleet

pytestmark = pytest.mark.ssh


def test_status_of_a_host_without_live_patches(sshd_host):
    out = lpfleet.status_hosts([sshd_host.inventory_host()], progress=False)
    (h,) = out.results
    assert h.status == "ok" and h.message == "no live patches loaded"
    assert h.data["livepatches"] == {} and isinstance(h.data["taint"]["flags"], list)
    assert h.data["boot"]["numaforge"] == [] and h.data["boot"]["numaforge_unit_enabled"] is False


def test_unload_of_an_absent_patch_is_a_no_op_and_the_journal_resumes(sshd_host, tmp_path):
    host = sshd_host.inventory_host()
    key = "livepatch-unload module=nf_x test"
    out = lpfleet.unload_hosts([host], module="nf-x", run_key=key, journal_dir=tmp_path, progress=False)
    (h,) = out.results
    assert h.status == "ok" and "nothing to do" in h.message
    assert not journal.path_for(key, tmp_path).exists()  # finished: the journal is removed
    # an interrupted run had recorded the host as done: the re-run only checks it
    journal.open(key, tmp_path).record(host, journal.VERIFIED, status="changed")
    out = lpfleet.unload_hosts([host], module="nf-x", run_key=key, journal_dir=tmp_path, progress=False)
    (h,) = out.results
    assert h.data["resumed"] is True and h.status == "ok" and "checked only" in h.message


def test_a_failing_canary_stops_the_rollout(sshd_host):
    from numaforge.inventory.model import Host, Location, SSHSpec

    gone = Host(
        "gone",
        Location("<test>"),
        ssh=SSHSpec(
            "127.0.0.1",
            1,
            "root",
            key_file=sshd_host.spec().key_file,
            use_agent=False,
            known_hosts=sshd_host.spec().known_hosts,
        ),
    )
    out = lpfleet.status_hosts(
        [gone, sshd_host.inventory_host()], rollout=Rollout(canary=1, max_fail=0), progress=False
    )
    assert [r.status for r in out.results] == ["failed", "not-run"] and out.stopped


def test_status_lines_say_what_loads_at_boot_in_words(sshd_host):
    """Issue 39 item 9: livepatch-status printed a Python dict ("at boot: {'kpatch': [], ...}")."""
    from numaforge.cli.livepatch import status_lines

    (h,) = lpfleet.status_hosts([sshd_host.inventory_host()], progress=False).results
    (line,) = status_lines(h)
    assert line.endswith("at boot: no live patch"), line
    assert "{" not in line and "[" not in line, line
    h.data["boot"] = {"kpatch": ["kpatch_a"], "numaforge": ["nf_b"], "numaforge_unit_enabled": True}
    assert status_lines(h)[0].endswith("at boot: kpatch: kpatch_a; numaforge unit: nf_b")
