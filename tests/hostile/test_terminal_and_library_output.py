"""Issue 25 items 1 and 7 at the unit level: one function (numaforge.textsafe.printable) escapes terminal
control codes, and every printing path uses it; the redfish library's log records are masked and silent."""

from __future__ import annotations

import io
import logging

import pytest
from rich.table import Table

from numaforge import secrets
from numaforge.bios import deadline
from numaforge.cli.common import Output
from numaforge.display import esc
from numaforge.textsafe import has_control, printable

pytestmark = pytest.mark.hostile

HOSTILE = "a\x1b[2Jb\x1b]0;title\x07c\rd\x08e\x9bf\u202eg\u2066h\x7f"


def test_printable_escapes_every_control_and_keeps_newline_and_tab():
    out = printable(HOSTILE + "\n\tz")
    assert out == ("a\\x1b[2Jb\\x1b]0;title\\x07c\\x0dd\\x08e\\x9bf\\u202eg\\u2066h\\x7f\n\tz")
    assert not has_control(out.replace("\n", "").replace("\t", ""))
    assert printable("plain text [b] 0000:3b:00.0") == "plain text [b] 0000:3b:00.0"


def test_esc_masks_then_escapes_controls_then_markup():
    secrets.register("Tok-1234567")
    assert esc("[red]Tok-1234567\x1b[2J") == "\\[red]********\\x1b[2J"


@pytest.mark.parametrize("mode", ["plain", "table"])
def test_output_never_prints_a_raw_control_code(mode, monkeypatch):
    out = Output()
    out.configure(mode)
    buf = io.StringIO()
    for console in (out._rich, out._plain):
        console.file = buf
    table = Table(title="t\x1b]0;x\x07")
    table.add_column("host\x1b[2J")
    table.add_row("h1\x08\x08ok")
    out.print(table)
    out.print("message \x1b[2J\r")
    text = buf.getvalue()
    assert "\\x1b]0;x\\x07" in text and "h1\\x08\\x08ok" in text and "message \\x1b[2J\\x0d" in text
    assert not any(c in text for c in "\x07\x08\r\x9b") and "\x1b]" not in text and "\x1b[2J" not in text


def test_the_redfish_library_logger_is_masked_and_silent(capsys, monkeypatch):
    """What redfish/rest/v1.py logs on invalid JSON (the whole body at ERROR) reaches no terminal; with
    NUMAFORGE_REDFISH_LOG=1 it does, masked and with controls escaped."""
    deadline.quiet_library_logging()
    secrets.register("X-Tok-abcdef123")
    log = logging.getLogger("redfish.rest.v1")
    log.error("Service responded with invalid JSON at URI %s\n%s", "/redfish/v1/", "X-Auth-Token=X-Tok-abcdef123\x1b[2J")
    assert capsys.readouterr().err == ""
    monkeypatch.setenv(deadline.LOG_ENV, "1")
    log.error("body %s", "X-Auth-Token=X-Tok-abcdef123\x1b[2J")
    err = capsys.readouterr().err
    assert "X-Tok-abcdef123" not in err and "X-Auth-Token=********\\x1b[2J" in err
