"""Issue 39 item 1: `TASK -h` / `TASK --help` prints the task's help and exits 0 touching nothing, on every task and
both entry points (`invoke` over tasks.py, the `numaforge` command), wherever -h stands among the task's options
and values. Issue 39 item 8: a usage error of the command line (an unknown option, an option without its value)
exits 2 on both entry points.

"Touching nothing": the state, data and cache directories point into an empty temporary directory that must stay
empty, and the inventory's BMC and SSH addresses are a listening socket on this machine that counts connections
(:class:`Listener`): a task body that ran would connect to it (or write its state) and fail the test.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from invoke import main as invoke_main
from listener import Listener

from numaforge.cli import main as nf_main

ROOT = Path(__file__).parents[1]
TASKS = sorted(nf_main.namespace().task_names)


def _checkout_namespace():
    """tasks.py's namespace (every task of numaforge plus the checkout's developer tasks, e.g. lint)."""
    sys.path.insert(0, str(ROOT))
    try:
        import tasks
    finally:
        sys.path.pop(0)
    return tasks.ns


NAMESPACES = {"invoke": _checkout_namespace(), "numaforge": nf_main.namespace()}


@pytest.fixture
def world(tmp_path, monkeypatch):
    """(inventory path, listener, state root) with every numaforge output directory under the state root."""
    listener = Listener()
    state = tmp_path / "state"
    state.mkdir()
    env = {
        "NUMAFORGE_STATE": state / "nf-state",
        "NUMAFORGE_BUILD": state / "nf-build",
        "NUMAFORGE_KPATCH_BUILD": state / "nf-kpatch",
        "NUMAFORGE_CACHE": state / "nf-cache",
        "XDG_STATE_HOME": state / "xdg-state",
        "XDG_DATA_HOME": state / "xdg-data",
        "XDG_CACHE_HOME": state / "xdg-cache",
        "NF_HELP_BMC_PW": "pw",
    }
    for k, v in env.items():
        monkeypatch.setenv(k, str(v))
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "hosts:\n"
        "  h1:\n"
        f"    bmc: {{url: 'https://127.0.0.1:{listener.port}', username: admin, password: 'env:NF_HELP_BMC_PW',"
        " vendor: dell}\n"
        f"    ssh: {{address: 127.0.0.1, port: {listener.port}, user: root}}\n"
        "    hardware: {platform: t, vendor: dell, sockets: 2}\n"
        "    bios_profile: epyc-gpudirect\n"
    )
    yield inv, listener, state
    listener.close()


def _value_option(ns, task: str) -> str | None:
    """The first option of ``task`` that takes a value (from invoke's argument specs), as a flag."""
    for a in ns[task].get_arguments():
        if a.kind is not bool:
            return "--" + a.names[0].replace("_", "-")
    return None


def _placements(ns, task: str, inv: Path) -> list[list[str]]:
    """-h alone, after and before the task's options, and where an option's value would be."""
    opt = _value_option(ns, task)
    takes_inventory = any("inventory" in a.names for a in ns[task].get_arguments())
    given = ["--inventory", str(inv)] if takes_inventory else ([opt, "x"] if opt else [])
    out = [[task, "{h}"], [task, *given, "{h}"], [task, "{h}", *given]]
    if opt:
        out.append([task, *given, opt, "{h}"])
    return out


def _run_in_process(program, argv: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        program.run(argv)
    out, err = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 0 if code is None else 1), out, err


def _programs():
    """Both entry points as their console scripts run them: invoke's own program (it loads tasks.py from the
    checkout, which adopts it) and the `numaforge` command's."""
    return {"invoke": invoke_main.program, "numaforge": nf_main.program}


def _untouched(state: Path, listener: Listener, what: str) -> None:
    assert listener.accepts == 0, f"{what}: the task connected to a host"
    written = sorted(str(p.relative_to(state)) for p in state.rglob("*"))
    assert not written, f"{what}: wrote {written}"


def test_help_on_every_task_both_entry_points_prints_help_and_touches_nothing(world, monkeypatch, capsys):
    inv, listener, state = world
    monkeypatch.chdir(ROOT)
    runs = 0
    for entry, program in _programs().items():
        ns = NAMESPACES[entry]
        for task in sorted(ns.task_names):
            for placement in _placements(ns, task, inv):
                for spelling in ("-h", "--help"):
                    args = [spelling if a == "{h}" else a for a in placement]
                    code, out, err = _run_in_process(program, [entry, *args], capsys)
                    what = f"{entry} {' '.join(args)}"
                    assert code == 0, (what, err)
                    assert "Usage:" in out and f" {task} " in out and "Options:" in out, (what, out, err)
                    assert "error" not in err.lower(), (what, err)
                    _untouched(state, listener, what)
                    runs += 1
    assert runs >= len(TASKS) * 2 * 2 * 3, runs
    print(f"help: {runs} command lines over {len(TASKS)} tasks, 2 entry points, -h and --help")


@pytest.mark.parametrize("entry", ["invoke", "numaforge"])
def test_help_as_a_real_process_for_every_task(entry, world):
    """The same as the console scripts run it, in a fresh process per task (`TASK --inventory INV -h`)."""
    inv, listener, state = world
    cmd = [sys.executable, "-m", "invoke"] if entry == "invoke" else [sys.executable, "-c", NUMAFORGE_MAIN]
    ns = NAMESPACES[entry]
    for task in sorted(ns.task_names):
        given = ["--inventory", str(inv)] if any("inventory" in a.names for a in ns[task].get_arguments()) else []
        r = subprocess.run(
            [*cmd, task, *given, "-h"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert r.returncode == 0 and "Usage:" in r.stdout and task in r.stdout, (entry, task, r.stderr)
        _untouched(state, listener, f"{entry} {task} -h")


NUMAFORGE_MAIN = "import sys; sys.argv[0] = 'numaforge'; from numaforge.cli.main import main; main()"


@pytest.mark.parametrize("entry", ["invoke", "numaforge"])
@pytest.mark.parametrize(
    "args, message",
    [
        (["bios-plan", "-x"], "No idea what '-x' is!"),
        (["facts", "--verbosity"], "No idea what '--verbosity' is!"),
        (["facts", "--host"], "--host needs a value and was given none"),  # was silently "every host"
        (["facts", "--host", "--all"], "--host needs a value and was given none"),
        (["facts", "--forks"], "--forks needs a value and was given none"),
        (["bmc-power", "--host", "h1"], "bmc-power needs ACTION: a value after the task name (or --action VALUE)"),
        (["no-such-task"], "No idea what 'no-such-task' is!"),
        (["--help", "no-such-task"], "No idea what 'no-such-task' is!"),
    ],
)
def test_a_usage_error_of_the_command_line_exits_2_with_the_fix(entry, args, message, world, monkeypatch, capsys):
    inv, listener, state = world
    monkeypatch.chdir(ROOT)
    code, out, err = _run_in_process(_programs()[entry], [entry, *args], capsys)
    assert code == 2, (args, out, err)
    assert message in err and "fix: `" in err, err
    assert ("--help` lists its options" in err) or ("--list` lists the tasks" in err), err
    assert "Traceback" not in err
    _untouched(state, listener, " ".join(args))


@pytest.mark.parametrize("entry", ["invoke", "numaforge"])
def test_livepatch_unload_without_a_module_is_a_usage_error_naming_the_option(entry, world, monkeypatch, capsys):
    """It was invoke's raw "'livepatch-unload' did not receive required positional arguments: 'module'"."""
    inv, listener, state = world
    monkeypatch.chdir(ROOT)
    code, out, err = _run_in_process(_programs()[entry], [entry, "livepatch-unload", "-i", str(inv)], capsys)
    err = " ".join(err.split())
    assert code == 2, err
    assert "--module: livepatch-unload needs the live-patch module to unload" in err and "pass --module NAME" in err
    assert "positional" not in err
    _untouched(state, listener, "livepatch-unload")


def test_help_before_and_after_the_task_name_print_the_same_help(world, monkeypatch, capsys):
    """`--help TASK` (invoke's core form) and `TASK --help` print the same text, every option with its help: a
    second parser would find the options' help texts gone (invoke's Task.get_arguments pops them)."""
    monkeypatch.chdir(ROOT)
    for entry, program in _programs().items():
        ns = NAMESPACES[entry]
        for task in sorted(ns.task_names):
            _, before, _ = _run_in_process(program, [entry, "--help", task], capsys)
            _, after, _ = _run_in_process(program, [entry, task, "--help"], capsys)
            assert before == after, (entry, task)
            if task != "lint":
                assert "--verbose" in before and "more detail" in before, (entry, task, before)
