"""Issue 40: every NUMAFORGE_* environment variable is checked like an option value -- a bad value is exit 2 naming
the variable, before any host and with no traceback, for the `invoke` and the `numaforge` entry points.

The list of variables is derived from the code: every string constant of numaforge/ that is a whole
``NUMAFORGE_...`` name (an f-string's fixed part, e.g. a heredoc marker, is not a variable). A variable the code
reads without a check in numaforge.cli.environment.CHECKS fails the first test. The bad values come from each
variable's kind of check, so a new variable of a known kind is exercised without editing this file.

The hosts of the inventory are a listening socket that counts connections, and every state/build/cache directory
points into an empty directory that must stay empty: "before any host" is observed, not assumed.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.hostile

sys.path.insert(0, str(Path(__file__).parent))
from harness import ROOT, cli  # noqa: E402
from listener import Listener  # noqa: E402
from test_generated_options import POSITIONAL  # noqa: E402

from numaforge.cli import environment  # noqa: E402
from numaforge.cli.main import namespace  # noqa: E402

NAME = re.compile(r"NUMAFORGE_[A-Z0-9_]+")


def variables_in_code() -> set[str]:
    """Every whole NUMAFORGE_* string constant of numaforge/ (f-string parts left out), less invoke's config
    prefix (NUMAFORGE_CFG: invoke reads NUMAFORGE_CFG_<KEY> itself)."""
    found: set[str] = set()
    for path in (ROOT / "numaforge").rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        in_fstring = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in in_fstring:
                if NAME.fullmatch(node.value):
                    found.add(node.value)
    return found - {environment.ENV_PREFIX}


def test_every_variable_the_code_reads_has_a_check():
    found = variables_in_code()
    assert "NUMAFORGE_ROOT" in found and "NUMAFORGE_KERNEL_JOBS" in found  # the scan sees the code
    assert found == set(environment.CHECKS), (
        f"without a check in numaforge.cli.environment.CHECKS: {sorted(found - set(environment.CHECKS))}; "
        f"checked but never read: {sorted(set(environment.CHECKS) - found)}"
    )


# bad values by kind of check (the check functions of numaforge.cli.environment)
CONTROL = "a\x1b]0;owned\x07b"
BAD_BY_KIND = {
    environment.project_dir: ["/nonexistent-nf40", "/etc/passwd", "", CONTROL, "x" * 5000],
    environment.output_dir: ["relative/dir", "/etc/passwd/sub", "/etc/passwd", "", CONTROL],
    environment.switch: ["yes", "true", "2", CONTROL],
    environment.positive_int: ["abc", "0", "-5", "", CONTROL],
    environment.inventory: ["/nonexistent-nf40/inv.yaml", "", CONTROL],
    environment.lab_config: ["tinyy", "Defconfig", "", CONTROL],
}


def test_every_kind_of_check_has_bad_values():
    assert set(environment.CHECKS.values()) <= set(BAD_BY_KIND)


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """(inventory, listener, state directory, work directory): every NUMAFORGE_* variable unset, the outputs
    pointed into ``state`` (which must stay empty)."""
    listener = Listener()
    for var in environment.CHECKS:
        monkeypatch.delenv(var, raising=False)
    state = tmp_path / "state"
    for var in ("XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "HOME"):
        monkeypatch.setenv(var, str(state / var.lower()))
    monkeypatch.setenv("NF_ENV40_PW", "env40-pw")
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))  # a task that went ahead finds no qemu, make, gcc...
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "hosts:\n  h1:\n"
        f"    bmc: {{url: 'https://127.0.0.1:{listener.port}', username: admin, password: 'env:NF_ENV40_PW', "
        "vendor: dell}\n"
        f"    ssh: {{address: 127.0.0.1, port: {listener.port}, user: root, agent: false}}\n"
        "    hardware: {platform: t, vendor: dell, sockets: 2}\n    bios_profile: epyc-gpudirect\n"
    )
    work = tmp_path / "cwd"
    work.mkdir()
    yield inv, listener, state, work
    listener.sock.close()


def _argv(task: str, inv: Path) -> list[str]:
    t = namespace()[task]
    args = t.get_arguments()
    argv = [task] + [POSITIONAL[(task, a.name)] for a in args if a.positional]
    if any(a.name == "inventory" for a in args):
        argv += ["--host", "h1"]  # --inventory would replace $NUMAFORGE_INVENTORY; the file comes from there
    return argv


def _written(state: Path) -> list[str]:
    return sorted(str(p) for p in state.rglob("*") if p.is_file())


def test_every_bad_value_of_every_variable_exits_2_naming_it(sandbox, monkeypatch):
    """bios-plan (a host task) under each bad value of each variable; the other variables unset."""
    inv, listener, state, work = sandbox
    failures = []
    runs = 0
    for var, check in environment.CHECKS.items():
        for value in BAD_BY_KIND[check]:
            if check is environment.switch and value == "":
                continue  # an empty switch is off, as unset
            monkeypatch.setenv(var, value)
            if var != "NUMAFORGE_INVENTORY":
                monkeypatch.setenv("NUMAFORGE_INVENTORY", str(inv))
            out = cli(*_argv("bios-plan", inv), cwd=work)
            runs += 1
            text = " ".join(out.output.split())
            if out.code != 2 or var not in text or "Traceback" in text or listener.accepts or _written(state):
                failures.append(f"{var}={value[:40]!r}: exit {out.code}, {listener.accepts} conn: {text[:300]}")
                listener.accepts = 0
            monkeypatch.delenv(var)
            monkeypatch.delenv("NUMAFORGE_INVENTORY", raising=False)
    assert runs > 30
    assert not failures, "\n".join(failures)


def test_every_task_checks_the_environment_first(sandbox, monkeypatch):
    """Every task of namespace(): NUMAFORGE_ROOT naming a missing directory is exit 2 naming it, before anything."""
    inv, listener, state, work = sandbox
    monkeypatch.setenv("NUMAFORGE_INVENTORY", str(inv))
    monkeypatch.setenv("NUMAFORGE_ROOT", "/nonexistent-nf40")
    failures = []
    tasks = sorted(namespace().task_names)
    assert len(tasks) > 20
    for task in tasks:
        out = cli(*_argv(task, inv), cwd=work)
        text = " ".join(out.output.split())
        if out.code != 2 or "NUMAFORGE_ROOT" not in text or "Traceback" in text or listener.accepts or _written(state):
            failures.append(f"{task}: exit {out.code}, {listener.accepts} conn: {text[:300]}")
            listener.accepts = 0
    assert not failures, "\n".join(failures)


def test_a_good_value_and_an_option_that_replaces_a_bad_one_are_accepted(sandbox, monkeypatch, tmp_path):
    """The checks refuse only what is bad: good values pass, and --inventory replaces a bad $NUMAFORGE_INVENTORY
    (the run gets as far as the hosts' selection, an unknown host, exit 2 naming --host)."""
    inv, listener, state, work = sandbox
    monkeypatch.setenv("NUMAFORGE_INVENTORY", "/nonexistent-nf40/inv.yaml")
    monkeypatch.setenv("NUMAFORGE_ROOT", str(ROOT))
    monkeypatch.setenv("NUMAFORGE_DEBUG", "0")
    monkeypatch.setenv("NUMAFORGE_KERNEL_JOBS", "2")
    monkeypatch.setenv("NUMAFORGE_STATE", str(state / "s"))
    out = cli("bios-plan", "--inventory", str(inv), "--host", "nosuch", cwd=work)
    text = " ".join(out.output.split())
    assert out.code == 2 and "--host" in text and "NUMAFORGE" not in text, text


# the two entry points as separate processes (the variables are read at start): the console script's main, invoke
ENTRY_POINTS = {
    "numaforge": [sys.executable, "-c", "from numaforge.cli.main import main; main()"],
    "invoke": [sys.executable, "-m", "invoke"],
}


def _run(entry: str, env: dict, *argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*ENTRY_POINTS[entry], *argv],
        cwd=cwd,
        env={**env, "PYTHONPATH": str(ROOT), "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("value", ["/nonexistent-nf40", "/etc/passwd"])
def test_numaforge_root_through_both_entry_points(value, sandbox):
    """The campaign's case: `NUMAFORGE_ROOT=/nonexistent` and `=/etc/passwd` (the numaforge command loaded the
    project config from there: a NotADirectoryError traceback; with /nonexistent the run went ahead and made a
    state directory for it). Both commands exit 2 naming NUMAFORGE_ROOT; --root DIR replaces the variable; task
    help still works (asking for help reads nothing)."""
    inv, listener, state, work = sandbox
    env = {**os.environ, "NUMAFORGE_ROOT": value, "NUMAFORGE_INVENTORY": str(inv)}
    for run in (
        _run("numaforge", env, "bios-plan", "--host", "h1", cwd=work),
        _run("invoke", env, "bios-plan", "--host", "h1"),
    ):
        text = " ".join((run.stdout + run.stderr).split())
        assert run.returncode == 2, text
        assert "NUMAFORGE_ROOT" in text and "Traceback" not in text, text
        assert "does not exist" in text or "is a file" in text, text
    assert not listener.accepts and not _written(state)
    helped = _run("numaforge", env, "bios-plan", "-h", cwd=work)
    assert helped.returncode == 0 and "--host" in helped.stdout, helped.stderr
    replaced = _run("numaforge", env, "--root", str(ROOT), "bios-plan", "--host", "nosuch", cwd=work)
    text = " ".join((replaced.stdout + replaced.stderr).split())
    assert replaced.returncode == 2 and "NUMAFORGE_ROOT" not in text and "nosuch" in text, text


def test_a_bad_kernel_jobs_value_no_longer_breaks_the_import():
    """$NUMAFORGE_KERNEL_JOBS was int()-ed when numaforge.kernel.labkernel was imported: `abc` stopped every
    command that imports it with a ValueError traceback. Now it is read when a build starts."""
    env = {**os.environ, "NUMAFORGE_KERNEL_JOBS": "abc", "PYTHONPATH": str(ROOT)}
    code = (
        "import numaforge.kernel.labkernel as k\ntry:\n    k.jobs()\nexcept k.LabKernelError as e:\n    print(e.where)"
    )
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout.strip() == "NUMAFORGE_KERNEL_JOBS", run.stderr
