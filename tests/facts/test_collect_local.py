"""collect() through the local /bin/sh runner: how every failure shape becomes an absent reason."""

from __future__ import annotations

from numaforge.facts.collect import LocalRunner, Spec, _dir, _head, _tool, collect


def run(*specs):
    return collect(LocalRunner(), "local", specs=list(specs))


def test_missing_tool_missing_files_and_missing_dir_are_reasons(tmp_path):
    caps = run(
        Spec(
            "a.txt",
            _tool("numaforge-no-such-tool", "numaforge-no-such-tool -x"),
            "numaforge-no-such-tool",
            "install it",
        ),
        Spec("b.txt", _head([f"{tmp_path}/nothing/*/x"]), "the x files", "create them"),
        Spec("c.txt", _dir(f"{tmp_path}/nodir", f"ls -1 {tmp_path}/nodir"), "nodir", "make the dir"),
    )
    assert caps.files == {}
    assert caps.absent == {
        "a.txt": "numaforge-no-such-tool is not installed on the host; install it to get these facts "
        "(numaforge installs nothing)",
        "b.txt": "the x files is not there on the host (create them)",
        "c.txt": "nodir is not there on the host (make the dir)",
    }


def test_timeout_becomes_a_reason():
    caps = run(Spec("slow.txt", "exec sleep 30", "sleep", "", timeout=0.5))
    assert caps.absent == {"slow.txt": "`sleep 30` did not finish within 0.5 s"}


def test_failing_command_reason_has_its_last_stderr_line():
    caps = run(Spec("f.txt", "echo first >&2; echo 'the real cause' >&2; exit 4", "f", ""))
    assert caps.absent["f.txt"].endswith("exited 4: the real cause")


def test_partial_head_keeps_output_and_the_warning(tmp_path):
    (tmp_path / "a").write_text("1\n")
    (tmp_path / "b").mkdir()  # head cannot read a directory: partial output, exit 1
    caps = run(Spec("h.txt", _head([str(tmp_path / "a"), str(tmp_path / "b")]), "h", ""))
    assert f"==> {tmp_path / 'a'} <==\n1\n" in caps.files["h.txt"]
    assert caps.warnings["h.txt"].startswith("exit 1:") and str(tmp_path / "b") in caps.warnings["h.txt"]


def test_every_command_is_recorded():
    caps = run(Spec("u.txt", "exec uname -r", "uname", ""))
    assert caps.commands == {"u.txt": "exec uname -r"} and caps.files["u.txt"].strip()


class CountingRunner(LocalRunner):
    def __init__(self) -> None:
        self.commands: list[str] = []

    def run(self, command, timeout=30, sudo=False, check=False):
        self.commands.append(command)
        return super().run(command, timeout=timeout, sudo=sudo, check=check)


def test_all_captures_go_to_the_host_as_one_command():
    runner = CountingRunner()
    caps = collect(
        runner,
        "local",
        specs=[
            Spec("a.txt", "printf 'no newline'", "a", ""),
            Spec("b.txt", "echo two; echo 'warned' >&2", "b", ""),
            Spec("c.txt", "exit 5", "c", ""),
        ],
    )
    assert len(runner.commands) == 1
    assert caps.files == {"a.txt": "no newline", "b.txt": "two\n"}
    assert caps.warnings == {"b.txt": "warned"}
    assert caps.absent["c.txt"] == "`exit 5` exited 5: no output"


def test_a_batch_past_its_time_keeps_what_finished_and_runs_the_rest_one_by_one():
    runner = CountingRunner()
    caps = collect(
        runner,
        "local",
        specs=[
            Spec("a.txt", "echo first", "a", "", timeout=2),
            Spec("slow.txt", "exec sleep 30", "sleep", "", timeout=2),
            Spec("c.txt", "echo third", "c", "", timeout=2),
        ],
    )
    assert caps.files == {"a.txt": "first\n", "c.txt": "third\n"}
    assert caps.absent == {"slow.txt": "`sleep 30` did not finish within 2 s"}
    assert len(runner.commands) == 2 and runner.commands[1] == "echo third"


def test_batch_output_is_split_exactly_even_when_a_capture_prints_marker_like_text():
    from numaforge.facts.collect import split_batch

    t = "NUMAFORGE-0123456789abcdef"
    out = f"{t} 0\nx\n{t} 1 end 0\n\n{t} 0 end 0\n{t} 1\n\n{t} 1 end 3\n{t} 2\npartial"
    err = f"{t} 0\n\n{t} 0 end\n{t} 1\noops\n\n{t} 1 end\n{t} 2\n"
    finished, started = split_batch(out, err, t, 3)
    assert finished == {0: (0, f"x\n{t} 1 end 0\n", ""), 1: (3, "", "oops\n")}
    assert started == 2
