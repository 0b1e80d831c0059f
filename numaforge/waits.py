"""Work that waits, written once for both ways of waiting (issue 43 item 5).

A function that has to wait for a peer (a host's reboot: POST takes minutes on a GPU server) is written as a
generator that ``yield``s the seconds until it wants to look again and ``return``s its result::

    def reboot_steps(...):
        ...
        while not back:
            yield t.poll          # "look again in t.poll seconds"
            back = ...
        return log

``run_steps`` runs one here, sleeping in this thread (one host on its own, the tests). numaforge.fleet runs the
per-host functions that return such a generator without sleeping: a host in a wait gives its worker back and the
runner resumes it, in whichever worker is free, when its time comes; so --forks bounds the hosts at work, not the
hosts waiting for their POST. Pure apart from the sleep.
"""

from __future__ import annotations

import inspect
import time
from typing import Any, Generator, TypeVar

from . import budget

T = TypeVar("T")
Steps = Generator[float, None, T]  # yields: seconds until the next look; returns: the result


def is_steps(value: Any) -> bool:
    """True for a generator of waits (a function written as steps), False for a plain result."""
    return inspect.isgenerator(value)


def run_steps(steps: "Steps[T]") -> T:
    """Run ``steps`` to its end in this thread, sleeping each wait (shortened to this host's --host-timeout,
    budget.cap: the next look then fails the host at once); its result."""
    while True:
        try:
            delay = next(steps)
        except StopIteration as end:
            return end.value
        time.sleep(max(0.0, budget.cap(float(delay)) or 0.0))
