"""Text from BMCs, hosts and inventories made safe to show on a terminal or write to a log (pure, basic).

A BMC message, a host's file or an inventory value can carry terminal control sequences: ``ESC[2J`` clears the
operator's screen, ``ESC]0;...BEL`` sets the window title, CR and backspace overwrite what was printed before
(issue 25 item 7). :func:`printable` escapes every control character except newline and tab -- C0, DEL, C1,
and the Unicode bidirectional overrides that reorder what is shown -- as a visible ``\\xNN`` / ``\\uNNNN``, so
the text stays readable and nothing in it acts on the terminal. Reports (JSON) keep the text as it was.
"""

from __future__ import annotations

import re

# C0 except \t and \n, DEL, C1, and the bidi embedding/override/isolate controls
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _visible(m: re.Match) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def printable(text: str) -> str:
    """``text`` with every terminal control character shown as an escape (``\\x1b``), newline and tab kept."""
    return _CONTROL.sub(_visible, text)


def has_control(text: str) -> bool:
    return _CONTROL.search(text) is not None
