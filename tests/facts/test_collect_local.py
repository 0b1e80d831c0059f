"""collect() through the local /bin/sh runner: how every failure shape becomes an absent reason."""

from __future__ import annotations

from numaforge.facts.collect import LocalRunner, Spec, _dir, _head, _tool, collect


def run(*specs):
    return collect(LocalRunner(), "local", specs=list(specs))


def test_missing_tool_missing_files_and_missing_dir_are_reasons(tmp_path):
    caps = run(Spec("a.txt", _tool("numaforge-no-such-tool", "numaforge-no-such-tool -x"), "numaforge-no-such-tool",
                    "install it"),
               Spec("b.txt", _head([f"{tmp_path}/nothing/*/x"]), "the x files", "create them"),
               Spec("c.txt", _dir(f"{tmp_path}/nodir", f"ls -1 {tmp_path}/nodir"), "nodir", "make the dir"))
    assert caps.files == {}
    assert caps.absent == {
        "a.txt": "numaforge-no-such-tool is not installed on the host; install it to get these facts "
                 "(numaforge installs nothing)",
        "b.txt": "the x files is not there on the host (create them)",
        "c.txt": "nodir is not there on the host (make the dir)"}


def test_timeout_becomes_a_reason():
    caps = run(Spec("slow.txt", "exec sleep 30", "sleep", "", timeout=0.5))
    assert caps.absent == {"slow.txt": "`sleep 30` did not finish within 0.5 s"}


def test_failing_command_reason_has_its_last_stderr_line():
    caps = run(Spec("f.txt", "echo first >&2; echo 'the real cause' >&2; exit 4", "f", ""))
    assert caps.absent["f.txt"].endswith("exited 4: the real cause")


def test_partial_head_keeps_output_and_the_warning(tmp_path):
    (tmp_path / "a").write_text("1\n")
    (tmp_path / "b").mkdir()                       # head cannot read a directory: partial output, exit 1
    caps = run(Spec("h.txt", _head([str(tmp_path / "a"), str(tmp_path / "b")]), "h", ""))
    assert f"==> {tmp_path / 'a'} <==\n1\n" in caps.files["h.txt"]
    assert caps.warnings["h.txt"].startswith("exit 1:") and str(tmp_path / "b") in caps.warnings["h.txt"]


def test_every_command_is_recorded():
    caps = run(Spec("u.txt", "exec uname -r", "uname", ""))
    assert caps.commands == {"u.txt": "exec uname -r"} and caps.files["u.txt"].strip()
