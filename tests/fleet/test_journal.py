"""numaforge.journal: the resume journal of interrupted fleet runs (pure state file; no peers)."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from numaforge import journal
from numaforge.journal import PATCHED, REBOOT_REQUESTED, REBOOTED, VERIFIED, JournalError, resume_action
from numaforge.secrets import SecretRef

KEY = "bios-apply profile=epyc-gpudirect inventory=prod.yaml reboot"


def test_phases_survive_a_new_process_and_say_what_is_left(tmp_path):
    j = journal.open(KEY, tmp_path)
    assert not j.resumed and j.phases("gpu-01") == []
    j.record("gpu-01", PATCHED, changed=["NumaNodesPerSocket"])
    j.record("gpu-01", REBOOT_REQUESTED)
    j.record("gpu-02", PATCHED)
    j.record("gpu-03", PATCHED)
    j.record("gpu-03", REBOOT_REQUESTED)
    j.record("gpu-03", REBOOTED)
    j.record("gpu-03", VERIFIED)

    again = journal.open(KEY, tmp_path)  # what a re-run after Ctrl-C sees
    assert again.resumed and again.path == j.path
    assert again.hosts() == {
        "gpu-01": [PATCHED, REBOOT_REQUESTED],
        "gpu-02": [PATCHED],
        "gpu-03": [PATCHED, REBOOT_REQUESTED, REBOOTED, VERIFIED],
    }
    assert again.done("gpu-01", PATCHED) and not again.done("gpu-01", REBOOTED)
    assert again.data("gpu-01", PATCHED)["changed"] == ["NumaNodesPerSocket"]
    assert [again.action(h) for h in ("gpu-01", "gpu-02", "gpu-03", "gpu-04")] == ["verify", "reboot", "skip", "run"]


@pytest.mark.parametrize(
    "phases, action",
    [
        ([], "run"),
        ([PATCHED], "reboot"),
        ([PATCHED, REBOOT_REQUESTED], "verify"),  # crashed while the reset was in flight: never reset twice
        ([REBOOT_REQUESTED], "verify"),  # values were already pending (nothing to write)
        ([PATCHED, REBOOT_REQUESTED, REBOOTED], "verify"),
        ([PATCHED, REBOOT_REQUESTED, REBOOTED, VERIFIED], "skip"),
        ([VERIFIED], "skip"),  # a compliant host: verified without a write
    ],
)
def test_resume_action_never_reboots_a_host_whose_reset_was_requested(phases, action):
    assert resume_action(phases) == action


def test_each_run_key_has_its_own_file_and_a_foreign_file_is_refused(tmp_path):
    a = journal.open(KEY, tmp_path)
    a.record("gpu-01", PATCHED)
    b = journal.open(KEY + " --host gpu-02", tmp_path)
    assert b.path != a.path and not b.resumed and b.phases("gpu-01") == []
    with pytest.raises(JournalError) as exc:
        journal.Journal(a.path, "bios-apply profile=other")
    assert "belongs to another run" in exc.value.what and KEY in exc.value.what
    assert exc.value.where == str(a.path) and "delete" in exc.value.fix


HEADER = json.dumps({"format": "numaforge-journal/1", "run_key": KEY}) + "\n"
GOOD = json.dumps({"host": "gpu-01", "phase": "patched", "time": 1.0}) + "\n"


@pytest.mark.parametrize(
    "content, what, line",
    [
        ('{"format": "numaforge-journal/1", "run_key"\n', "not valid JSON", 1),
        ('{"format": "something-else/3", "run_key": "x"}\n', "not a numaforge journal", 1),
        ("[1, 2]\n", "not a numaforge journal", 1),
        ("", "empty or torn before its header", None),
        (HEADER + '{"host": "gpu-01", "phase": "exploded"}\n' + GOOD, "not a host/phase record", 2),
        (HEADER + GOOD + "{garbage\n" + GOOD, "not valid JSON", 3),  # only the LAST line may be torn
    ],
)
def test_a_corrupt_journal_is_a_clear_error_not_a_traceback(tmp_path, content, what, line):
    path = journal.path_for(KEY, tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    with pytest.raises(JournalError) as exc:
        journal.open(KEY, tmp_path)
    assert what in exc.value.what and exc.value.fix
    assert exc.value.where == (f"{path}:{line}" if line else str(path))
    assert JournalError.exit_code == 2


def test_a_torn_last_record_is_dropped_and_the_journal_stays_appendable(tmp_path):
    j = journal.open(KEY, tmp_path)
    j.record("gpu-01", PATCHED)
    j.record("gpu-02", PATCHED)
    with open(j.path, "a") as fh:
        fh.write('{"host": "gpu-03", "phase": "pat')  # a crash in the middle of an append
    again = journal.open(KEY, tmp_path)
    assert again.hosts() == {"gpu-01": [PATCHED], "gpu-02": [PATCHED]}
    assert again.path.read_text().endswith("\n") and "gpu-03" not in again.path.read_text()
    again.record("gpu-03", PATCHED)
    assert journal.open(KEY, tmp_path).hosts()["gpu-03"] == [PATCHED]


def test_unknown_phase_and_empty_run_key_are_refused(tmp_path):
    j = journal.open(KEY, tmp_path)
    with pytest.raises(JournalError) as exc:
        j.record("gpu-01", "half-rebooted")
    assert "half-rebooted" in exc.value.what and "reboot-requested" in exc.value.fix
    assert not j.path.exists()  # nothing written for a refused record
    with pytest.raises(JournalError):
        journal.open("  ", tmp_path)


def test_file_is_private_and_secrets_in_data_are_redacted(tmp_path, monkeypatch):
    monkeypatch.setenv("NF_JOURNAL_TEST_PW", "s3cret-Journal-pw")
    pw = SecretRef.parse("env:NF_JOURNAL_TEST_PW").resolve()
    j = journal.open(KEY, tmp_path)
    j.record("gpu-01", PATCHED, message=f"login with {pw} ok", password="hunter2")
    text = j.path.read_text()
    assert "s3cret-Journal-pw" not in text and "hunter2" not in text
    assert stat.S_IMODE(j.path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == [j.path.name]  # no temp file left behind


def test_concurrent_workers_lose_no_record(tmp_path):
    j = journal.open(KEY, tmp_path)

    def worker(i):
        for phase in (PATCHED, REBOOT_REQUESTED, REBOOTED, VERIFIED):
            j.record(f"h{i:02d}", phase)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    again = journal.open(KEY, tmp_path)
    assert len(again.hosts()) == 16 and all(again.action(f"h{i:02d}") == "skip" for i in range(16))


def test_finish_removes_the_journal_so_the_next_run_starts_fresh(tmp_path):
    j = journal.open(KEY, tmp_path)
    j.record("gpu-01", VERIFIED)
    j.finish()
    assert not j.path.exists()
    assert not journal.open(KEY, tmp_path).resumed


def test_unwritable_location_is_a_clear_error(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the journal directory should be")
    j = journal.open(KEY, blocker / "journal")
    with pytest.raises(JournalError) as exc:
        j.record("gpu-01", PATCHED)
    # issue 40: the message says what is in the way (safeio.ensure_dir), not only "cannot write"
    assert "cannot use the journal directory" in exc.value.what and "is a file, not a directory" in exc.value.what
    assert f"rm {blocker}" in exc.value.fix


def test_a_process_killed_while_recording_leaves_a_readable_prefix(tmp_path):
    """A real crash: a child process records phases as fast as it can and is SIGKILLed mid-stream. The
    journal it leaves is always a complete earlier state (atomic replace), never a torn file."""
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
        from numaforge import journal
        j = journal.open({KEY!r}, {str(tmp_path)!r})
        print("ready", flush=True)
        for i in range(100000):
            j.record(f"h{{i:06d}}", "patched")
    """)
    for _ in range(3):
        child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "ready"
        path = journal.path_for(KEY, tmp_path)
        deadline = time.monotonic() + 60
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        j = journal.open(KEY, tmp_path)  # parses: the file is one complete state
        names = sorted(j.hosts())
        assert names, "the child recorded nothing before it was killed"
        # the hosts recorded are exactly h000000..hN: a prefix, with no record missing in the middle
        assert names == [f"h{i:06d}" for i in range(len(names))]
        j.finish()
        for leftover in tmp_path.glob(".*.tmp"):  # a temp file of the killed write may remain; never read
            leftover.unlink()


def test_open_held_keeps_a_second_live_run_of_the_same_command_off_its_journal(tmp_path, monkeypatch):
    """Issue 25 item 2: a second run of the same command (same run key) must not resume from the journal the
    first run is still writing: it fails naming the holder (real flock, numaforge.hostlock)."""
    from numaforge import hostlock

    monkeypatch.setenv("NUMAFORGE_STATE", str(tmp_path / "state"))
    with journal.open_held("bios-apply k", tmp_path, task="bios-apply") as j:
        j.record("h1", journal.PATCHED)
        with pytest.raises(hostlock.HostLocked) as exc:
            with journal.open_held("bios-apply k", tmp_path, task="bios-apply"):
                pass
        assert "another run is running this command: bios-apply (pid" in exc.value.what
        with journal.open_held("bios-apply other", tmp_path, task="bios-apply"):
            pass  # another command: its own journal, free
    with journal.open_held("bios-apply k", tmp_path, task="bios-apply") as again:
        assert again.phases("h1") == [journal.PATCHED]  # released: the re-run resumes as before
