"""Issue 39 item 8: the conventions of command-line tools on every task -- -v/--verbose and --no-color accepted by
every task, NO_COLOR (no-color.org: any non-empty value) honoured by every rich console -- on both entry points.

Colour is only drawn on a terminal, so the colour cases run the command on a pseudo-terminal (pty)."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from numaforge.cli.main import namespace

ROOT = Path(__file__).parents[1]
BAD_INVENTORY = "tests/data/inventory/bad/ansible-bmc-url-http.yaml"  # inventory-check prints a red "error"
ENTRY = {
    "invoke": [sys.executable, "-m", "invoke"],
    "numaforge": [sys.executable, "-c", "from numaforge.cli.main import main; main()"],
}
SGR = re.compile(r"\x1b\[([0-9;]*)m")


def _colour_codes(text: str) -> list[str]:
    """The SGR sequences of ``text`` that set a foreground or background colour (bold/dim/reset are not colour)."""
    out = []
    for m in SGR.finditer(text):
        params = [p for p in m.group(1).split(";") if p]
        if any(p in ("38", "48") or (len(p) == 2 and p[0] in "3492" and p[1] != "9" and p[0] != "2") for p in params):
            out.append(m.group(0))
        elif any(len(p) == 3 and p.startswith("10") for p in params):
            out.append(m.group(0))
    return out


def _on_a_terminal(args: list[str], env: dict) -> tuple[int, str]:
    master, slave = pty.openpty()
    env = {k: v for k, v in {**os.environ, "PYTHONPATH": str(ROOT), **env}.items() if v is not None}
    proc = subprocess.Popen(args, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return proc.wait(timeout=60), out.decode(errors="replace")


def test_every_task_takes_verbose_and_no_color():
    ns = namespace()
    for name in ns.task_names:
        flags = {n for a in ns[name].get_arguments() for n in a.names}
        assert {"verbose", "v", "no-color"} <= flags, (name, sorted(flags))


@pytest.mark.parametrize("entry", sorted(ENTRY))
def test_no_color_and_NO_COLOR_take_the_colour_out(entry):
    cmd = [*ENTRY[entry], "inventory-check", "-i", BAD_INVENTORY]
    code, out = _on_a_terminal(cmd, {"NO_COLOR": None, "COLUMNS": "200"})
    assert code == 2 and "plain http" in out and _colour_codes(out), out  # the baseline: colour on a terminal
    for extra, env in (([], {"NO_COLOR": "1"}), ([], {"NO_COLOR": "yes please"}), (["--no-color"], {"NO_COLOR": None})):
        code, out = _on_a_terminal([*cmd, *extra], {**env, "COLUMNS": "200"})
        assert code == 2 and "plain http" in out, out  # the task ran (the option was accepted)
        assert not _colour_codes(out), (extra, env, out)


@pytest.mark.parametrize("entry", sorted(ENTRY))
def test_verbose_and_no_color_are_accepted_before_and_after_other_options(entry):
    for args in (["-v", "--no-color", "-i", FLEET], ["-i", FLEET, "--verbose"], ["--no-color", "-i", FLEET, "-v"]):
        r = subprocess.run(
            [*ENTRY[entry], "inventory-check", *args, "--syntax-only"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert r.returncode == 0 and "gpu" in r.stdout, (args, r.stderr)


FLEET = "inventory/example-fleet.yaml"


def test_verbose_shows_an_internal_errors_traceback(capsys, monkeypatch):
    """A bug (an exception that is not a NumaforgeError) exits 70 without a traceback; -v shows it, as
    NUMAFORGE_DEBUG=1 does. (common.execute is what every task body runs in.)"""
    from invoke.exceptions import Exit

    from numaforge.cli import common

    monkeypatch.delenv(common.DEBUG_ENV, raising=False)
    monkeypatch.setenv(common.REDFISH_LOG_ENV, "0")

    def body(report):
        raise ValueError("a bug")

    for verbose in (False, True):
        common.set_style(verbose=verbose)
        with pytest.raises(Exit) as exc:
            common.execute("doctor", body)
        err = capsys.readouterr().err
        assert exc.value.code == 70 and "internal error" in err and "re-run with -v" in err, err
        assert ("Traceback" in err) is verbose, err
    common.set_style()
