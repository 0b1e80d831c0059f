"""Terminal output that treats user- and BMC-supplied text as data.

rich parses ``[...]`` in printed strings as markup and ``:name:`` as emoji: a BMC message containing ``[/b]``
raised MarkupError in the middle of a fleet run, and ``domain:bus:device.function`` text could turn into an
emoji. Every console is made here (emoji off, no highlighting), and every piece of text that did not come from
our own source code goes through :func:`esc` (secrets redacted, control characters escaped, markup escaped)
before it meets markup; numaforge.cli.common's Output escapes control characters once more in all it prints.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from .secrets import redact
from .textsafe import printable

_colour = True  # --no-color turns it off for the run (set_colour); NO_COLOR is rich's own (no-color.org)


def set_colour(on: bool) -> None:
    """Colour on (the default: rich decides from the terminal and $NO_COLOR) or off for every console made after."""
    global _colour
    _colour = on


def no_color() -> bool | None:
    """Console(no_color=...) for the run: True after --no-color, else None (rich: any non-empty $NO_COLOR)."""
    return None if _colour else True


def make_console(stderr: bool = False) -> Console:
    return Console(stderr=stderr, highlight=False, emoji=False, no_color=no_color())


def esc(value) -> str:
    """``value`` as printable text: str(), secrets masked, terminal control characters shown as escapes
    (numaforge.textsafe), rich markup escaped."""
    return escape(printable(redact(value if isinstance(value, str) else str(value))))
