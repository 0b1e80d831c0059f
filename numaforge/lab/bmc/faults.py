"""Fault injection: a queue of faults, each matching request paths by regex (and optionally a method), used
up after ``count`` matches.

Kinds: "5xx" (status, default 500, Base.InternalError; ``message`` replaces its text: hostile text such as
terminal control sequences), "503" (Retry-After header, default 1 s),
"slow" (sleep ``seconds`` then serve normally), "reset" (close the connection without an answer; with
``body_bytes=N``: the status line, headers announcing the whole body and its first N bytes, then the reset -- a
connection cut mid-body),
"bad_json" (200 with a truncated JSON body), "redirect" (``status``, default 302, with ``location``: a
hostile or misconfigured BMC sending the client elsewhere), "echo" (``status``, default 400, an error whose
message repeats the request's X-Auth-Token and Authorization headers, as some firmware does; ``bad_json`` with
``echo=True`` puts those headers in its truncated body), "drip" (the whole answer, status line included, one
byte every ``interval`` seconds, default 5: each read sees data, so only a total deadline ends it), "drip_body"
(the status line and headers at once, then the body one byte every ``interval`` seconds: a client whose deadline
stops watching once the headers are in waits for ever), "huge" (200 with a valid JSON body of ``size`` bytes,
default 100 MB, streamed; ``length=False`` sends no Content-Length, so only counting the bytes finds it too big),
"answer" (``status``, default 200, with the JSON ``body`` given and ``headers``: a BMC answering a document of
the wrong shape, e.g. a settings object whose Attributes is null or a list),
"stage_nothing" (a settings PATCH is answered as accepted, but nothing is staged) and "stage_other" (accepted,
but every attribute is staged with another value than the one sent): BMCs that say yes and do something else.
A fault fires
BEFORE the request is processed (nothing changes on the BMC) unless ``after=True`` (the change happens, then the
answer is lost: the retry hazard; "slow" with after=True answers only ``seconds`` after the change was made, e.g.
after the client's read timeout). ``when`` (a function of no arguments, called at each matching request in the
process that runs the simulator) makes the fault fire only when it returns true: a test that holds the one
request of a step that repeats another step's request (bios-apply's verify read is the reboot poll's GET Bios,
sent right after it) tells them apart by what came before.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Callable

KINDS = (
    "5xx",
    "503",
    "slow",
    "reset",
    "bad_json",
    "redirect",
    "echo",
    "drip",
    "drip_body",
    "huge",
    "answer",
    "stage_nothing",
    "stage_other",
)
AFTER_KINDS = (
    "5xx",
    "reset",
    "bad_json",
    "slow",
    "echo",
    "drip",
    "drip_body",
    "huge",
    "answer",
)  # also an answer lost late
STAGING = ("stage_nothing", "stage_other")  # not an answer of their own: the handler serves the request with them


@dataclass
class Fault:
    kind: str
    pattern: re.Pattern
    count: int
    method: str | None = None
    after: bool = False
    options: dict = field(default_factory=dict)
    when: Callable[[], bool] | None = None


class FaultPlan:
    def __init__(self) -> None:
        self._faults: list[Fault] = []
        self._lock = threading.Lock()
        self.fired: list[tuple[str, str, str]] = []  # (kind, method, path)

    def add(
        self,
        kind: str,
        path_regex: str = ".*",
        count: int = 1,
        method: str | None = None,
        after: bool = False,
        when: Callable[[], bool] | None = None,
        **options,
    ) -> Fault:
        if kind not in KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; use one of {', '.join(KINDS)}")
        if count < 1:
            raise ValueError("count must be >= 1")
        if after and kind not in AFTER_KINDS:
            raise ValueError(f"after=True only makes sense for {', '.join(AFTER_KINDS)}")
        allowed = {
            "5xx": {"status", "message"},
            "503": {"retry_after"},
            "slow": {"seconds"},
            "reset": {"body_bytes"},
            "bad_json": {"echo"},
            "redirect": {"status", "location"},
            "echo": {"status"},
            "drip": {"interval"},
            "drip_body": {"interval"},
            "huge": {"size", "length"},
            "answer": {"status", "body", "headers"},
            "stage_nothing": set(),
            "stage_other": set(),
        }
        unknown = set(options) - allowed[kind]
        if unknown:
            raise ValueError(f"fault {kind} takes no option(s) {sorted(unknown)}")
        fault = Fault(kind, re.compile(path_regex), count, method.upper() if method else None, after, options, when)
        with self._lock:
            self._faults.append(fault)
        return fault

    def take(self, method: str, path: str, after: bool) -> Fault | None:
        """The first live fault matching this request at this stage (before/after processing), used once."""
        with self._lock:
            for fault in self._faults:
                if fault.after != after or (fault.method and fault.method != method):
                    continue
                if fault.pattern.search(path) and (fault.when is None or fault.when()):
                    fault.count -= 1
                    if fault.count == 0:
                        self._faults.remove(fault)
                    self.fired.append((fault.kind, method, path))
                    return fault
        return None

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def pending(self) -> int:
        with self._lock:
            return sum(f.count for f in self._faults)
