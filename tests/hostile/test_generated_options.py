"""Issue 40 item 6 (first half): the option campaign derived from the code, not from memory.

Every task of ``namespace()`` and every option of every task (invoke's argument specs: the same list `--help`
prints) gets each invalid value below; each run must exit 2 (a usage error) with a message naming the option and no
host touched: the
inventory's BMC and SSH addresses are a listening socket on this machine that counts connections, and every
numaforge state/build/cache directory points into an empty directory that must stay empty (apart from what the
run's own --json/--junit/--out option names, which is refused anyway).

Flags (options without a value) have no value to spoil and are counted apart. An option may accept one of the
values only through :data:`VALID`, a commented table with the reason for each entry: a new option without a
check, or a check that lets a bad value through, fails this test.

Runs in-process through the hostile harness's program (invoke's Program over tasks.py, with the parse rules
tasks.py gives the `invoke` command), every case with a 60 s alarm. The counts go to the tier's log
(conftest.py prints them).
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.hostile

sys.path.insert(0, str(Path(__file__).parent))
from harness import cli  # noqa: E402
from listener import Listener  # noqa: E402

from numaforge.cli.main import namespace  # noqa: E402

PASSWORD = "gen-opt-Pw-5"
PW_VAR = "NF_GENOPT_BMC_PW"


def bad_values(port: int) -> dict[str, str]:
    """The invalid values, by class. ``port``: the listener's (a URL that would reach "a host")."""
    return {
        "empty": "",
        "huge": "x" * 100_000,
        "control": "a\x1b]0;owned\x07b\x1b[2J",
        "wrong-type": "abc",
        "negative": "-5",
        "url-credentials": f"https://admin:{PASSWORD}@127.0.0.1:{port}/",
    }


# (option, value class) -> why that value is valid for that option: the run goes ahead, so it is not made.
# Every entry says why the value cannot be refused; an option not listed here must refuse every value.
_PATH = "an output path: any name is a valid file name in the current directory"
_NAME = "a name numaforge resolves itself after this check in a way this campaign cannot predict"
VALID: dict[tuple[str, str], str] = {
    ("json", "wrong-type"): _PATH,
    ("json", "negative"): _PATH,
    ("junit", "wrong-type"): _PATH,
    ("junit", "negative"): _PATH,
    ("out", "wrong-type"): _PATH + " (numa-effect --out)",
    ("out", "negative"): _PATH + " (numa-effect --out)",
    ("save", "wrong-type"): _PATH + " (facts --save)",
    ("save", "negative"): _PATH + " (facts --save)",
    ("directory", "wrong-type"): _PATH + " (bios-capture DIRECTORY: a new directory)",
    ("job", "wrong-type"): "a job id is the BMC's own token (JID_..., RID_..., any name): only the BMC knows it",
    ("job", "negative"): "a job id is the BMC's own token: '-5' is a possible one",
    ("module", "wrong-type"): "livepatch-unload --module NAME: whether a module of that name is loaded only the "
    "host knows (validate and livepatch-install take a file and refuse it)",
    ("process", "wrong-type"): "numa-audit --process GLOB: any printable text is a glob on process names",
    ("process", "negative"): "numa-audit --process GLOB: any printable text is a glob on process names",
    ("process", "url-credentials"): "numa-audit --process GLOB: a glob, never sent anywhere (no secret to leak)",
    ("case", "wrong-type"): "numa-effect --case NAME: a free-text label of the output",
    ("case", "negative"): "numa-effect --case NAME: a free-text label of the output",
    ("case", "url-credentials"): "numa-effect --case NAME: a free-text label of the output",
}


# (task, positional argument) -> a valid value, given whenever another option is under test: a positional
# argument has no default, and without it every case would be invoke's "missing argument" error. A task with a
# positional argument missing here fails the test (its value must be read-only: the case must never run).
POSITIONAL: dict[tuple[str, str], str] = {
    ("bmc-power", "action"): "status",  # reads PowerState; and no case runs anyway (every value is refused)
    ("bios-capture", "directory"): "capture",  # a new directory in the case's empty working directory
}


def _inventory(path: Path, port: int) -> Path:
    path.write_text(
        "hosts:\n"
        "  h1:\n"
        f"    bmc: {{url: 'https://127.0.0.1:{port}', username: admin, password: 'env:{PW_VAR}', vendor: dell}}\n"
        f"    ssh: {{address: 127.0.0.1, port: {port}, user: root, agent: false}}\n"
        "    hardware: {platform: t, vendor: dell, sockets: 2}\n"
        "    bios_profile: epyc-gpudirect\n"
    )
    return path


def _options(task) -> tuple[list[str], list[str]]:
    """(options that take a value, flags) of a task, as invoke parses them."""
    args = task.get_arguments()
    return [a.name for a in args if a.kind is not bool], [a.name for a in args if a.kind is bool]


class _Alarm(BaseException):
    pass


def _alarm(signum, frame):
    raise _Alarm("a case ran for 60 s: the task went ahead with a bad value")


def test_every_option_of_every_task_refuses_every_invalid_value(tmp_path, monkeypatch, record_property):
    listener = Listener()
    state = tmp_path / "state"
    for var in (
        "NUMAFORGE_STATE",
        "NUMAFORGE_BUILD",
        "NUMAFORGE_KPATCH_BUILD",
        "NUMAFORGE_CACHE",
        "XDG_STATE_HOME",
        "XDG_DATA_HOME",
        "XDG_CACHE_HOME",
    ):
        monkeypatch.setenv(var, str(state / var.lower()))
    monkeypatch.setenv(PW_VAR, PASSWORD)
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))  # a task that went ahead finds no qemu, git, gcc...
    monkeypatch.delenv("NUMAFORGE_ROOT", raising=False)
    inv = _inventory(tmp_path / "inv.yaml", listener.port)
    work = tmp_path / "cwd"
    work.mkdir()
    values = bad_values(listener.port)
    ns = namespace()
    previous = signal.signal(signal.SIGALRM, _alarm)
    failures: list[str] = []
    counts = {"tasks": 0, "options": 0, "flags": 0, "runs": 0, "valid": 0}
    try:
        for name in sorted(ns.task_names):
            counts["tasks"] += 1
            with_value, flags = _options(ns[name])
            counts["flags"] += len(flags)
            takes_inventory = "inventory" in with_value
            positional = [a.name for a in ns[name].get_arguments() if a.positional]
            missing = [p for p in positional if (name, p) not in POSITIONAL]
            assert not missing, f"{name}: add a valid value of its positional argument(s) {missing} to POSITIONAL"
            for option in with_value:
                counts["options"] += 1
                for kind, value in values.items():
                    if (option, kind) in VALID:
                        counts["valid"] += 1
                        continue
                    argv = [name, "--" + option.replace("_", "-"), value]
                    argv += [POSITIONAL[(name, p)] for p in positional if p != option]
                    if takes_inventory and option != "inventory":
                        argv += ["--inventory", str(inv)]
                    signal.alarm(60)
                    try:
                        out = cli(*argv, cwd=work)
                    finally:
                        signal.alarm(0)
                    counts["runs"] += 1
                    shown = f"{name} --{option.replace('_', '-')} <{kind}>"
                    touched = sorted(str(p.relative_to(tmp_path)) for p in state.rglob("*") if p.is_file())
                    # the option, or a positional argument by its name (bmc-power ACTION, bios-capture DIRECTORY)
                    named = f"--{option.replace('_', '-')}" in out.output or (
                        option in positional and option.upper() in out.output
                    )
                    if out.code != 2 or not named or listener.accepts or touched or "Traceback" in out.output:
                        text = out.output.replace(value, f"<{kind}>") if value else out.output
                        failures.append(
                            f"{shown}: exit {out.code}, {listener.accepts} connection(s), wrote {touched[:3]}: "
                            f"{' '.join(text.split())[:300]}"
                        )
                        listener.accepts = 0
                        for p in sorted(state.rglob("*"), reverse=True):
                            p.unlink() if p.is_file() or p.is_symlink() else p.rmdir()
                    for p in work.iterdir():  # an output path a case named (refused or not): the next case starts clean
                        p.unlink() if p.is_file() else None
    finally:
        signal.signal(signal.SIGALRM, previous)
        listener.sock.close()
    summary = (
        f"generated option campaign: {counts['tasks']} tasks x {counts['options']} options with a value "
        f"({counts['flags']} flags have none) x {len(values)} invalid values = {counts['runs']} runs "
        f"(+{counts['valid']} valid by the VALID table); {len(failures)} not refused cleanly"
    )
    record_property("generated_options", summary)  # conftest.py prints it in the tier's log
    print(summary)
    assert not failures, f"{len(failures)} case(s):\n" + "\n".join(failures)
