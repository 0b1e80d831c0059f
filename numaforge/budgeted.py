"""A render budget for profile templates (BIOS and host OS): a profile is data, and data must not run forever.

jinja2's sandbox stops attribute walks, and its ``range`` stops at 100000 items -- but two nested loops over
``range(100000)`` are 10^10 iterations, and ``'x' * 10**10`` is a 10 GB string: a profile that rendered forever
and ignored SIGTERM (issue 25 item 3). :class:`BudgetedSandbox` (an ImmutableSandboxedEnvironment) checks, at
every ``range`` step, every output chunk and every ``*``/``**``:

* wall time: at most :data:`RENDER_SECONDS` per render;
* output: at most :data:`MAX_OUTPUT` characters, and no ``*``/``**`` result past that size;
* a stop request (Ctrl-C / SIGTERM / SIGHUP through numaforge.budget): the render ends at its next step with
  numaforge.budget.Stopped, so the host is reported interrupted (it was "failed" with a render-budget message
  that told the operator to remove a loop).

Over budget is :class:`RenderBudgetExceeded` (a jinja2 SecurityError); the caller names the profile file:line.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from jinja2.sandbox import MAX_RANGE, ImmutableSandboxedEnvironment, SecurityError

from . import budget

RENDER_SECONDS = 10.0
MAX_OUTPUT = 1 << 20  # characters a profile may render to (the built-in ones are ~2 KiB)

_local = threading.local()


class RenderBudgetExceeded(SecurityError):
    """The template went past its render budget (time, size)."""


def _check(doing: str) -> None:
    if budget.stop_requested():  # Ctrl-C/SIGTERM/SIGHUP: budget.Stopped, so the host is interrupted, not failed
        budget.check(f"the rest of the profile render ({doing})")
    deadline = getattr(_local, "deadline", None)
    if deadline is not None and time.monotonic() > deadline:
        raise RenderBudgetExceeded(
            f"rendering took more than {RENDER_SECONDS:g} s ({doing}): nested loops over large ranges?"
        )


def _range(*args: int):
    rng = range(*args)
    if len(rng) > MAX_RANGE:
        raise RenderBudgetExceeded(f"range of {len(rng)} items, more than the {MAX_RANGE} a profile may loop over")
    for i in rng:
        _check("in a range loop")
        yield i


class BudgetedSandbox(ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset(["*", "**"])

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        self.globals["range"] = _range

    def call_binop(self, context, operator: str, left, right):
        _check(f"computing {operator}")
        if operator == "**" and isinstance(right, int) and isinstance(left, int) and abs(left) > 1 and right > 64:
            raise RenderBudgetExceeded(f"{left} ** {right} is too large a number for a profile")
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * n > MAX_OUTPUT:
                    raise RenderBudgetExceeded(
                        f"repeating a {type(seq).__name__} {n} times makes more than {MAX_OUTPUT} items"
                    )
        return super().call_binop(context, operator, left, right)


def render(template, facts: dict[str, Any]) -> str:
    """``template`` rendered over ``facts`` within the budget (RenderBudgetExceeded otherwise)."""
    saved = getattr(_local, "deadline", None)
    _local.deadline = time.monotonic() + RENDER_SECONDS
    try:
        out: list[str] = []
        size = 0
        for chunk in template.generate(**facts):
            size += len(chunk)
            if size > MAX_OUTPUT:
                raise RenderBudgetExceeded(f"the profile renders to more than {MAX_OUTPUT} characters")
            _check("writing output")
            out.append(chunk)
        return "".join(out)
    finally:
        _local.deadline = saved
