"""A write whose outcome is unknown (issue 40 item 3): any request that changes a BMC -- the Bios PATCH,
bios-clear-pending's POST or PATCH, ResetBios, the Dell config job POST, a job DELETE, a ComputerSystem.Reset POST
-- cut on the wire by Ctrl-C/SIGTERM/SIGHUP or the host's --host-timeout, or whose answer was lost (no answer,
a 5xx), may or may not have been carried out. It is never dropped from the report: ``watch_write`` notices such an
ending and runs the caller's re-read of what that write changes (the pending values, the job list, the power
state) once the peer answers -- outside the host's budget and after a stop (``budget.lifted``), each request
capped at REREAD_SECONDS -- and records what the BMC shows in the host's result (``data["unsure"]``; the PATCH's
own record is ``data["write"]``, numaforge.bios.write.reread_unsure). ``unsure_text`` is the sentence the host's
line adds (numaforge.bios.hostsession.fail).

A stop that comes before the request leaves (``budget.check`` at its start) is not an unknown outcome: nothing
was sent, and the error says "stopped before". The client's request log (``RedfishClient.requests``) tells the
two apart: a request that left is in it, answered or not."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

from .. import budget
from ..errors import NumaforgeError
from .deadline import capped
from .errors import RedfishError, RedfishHTTPError, RedfishRedirectError, RedfishTLSError
from .redfish import RedfishClient

REREAD_SECONDS = 5.0  # the re-read after a write whose outcome is unknown: each request at most this long


def unanswered(exc: BaseException) -> bool:
    """True when ``exc`` ended a write that had left without telling whether the BMC took it: cut on the wire (a
    stop, the host's budget), no answer, a 5xx, or marked so by the caller (``outcome_unknown``). A refusal
    (4xx), a redirect (never followed) and a TLS failure (nothing was sent) are answers."""
    if isinstance(exc, (budget.Stopped, budget.HostTimeout)) or getattr(exc, "outcome_unknown", False):
        return True
    if isinstance(exc, (RedfishRedirectError, RedfishTLSError)):
        return False
    if isinstance(exc, RedfishHTTPError):
        return exc.status >= 500
    return isinstance(exc, RedfishError)


def reread_record(client: RedfishClient, request: str, reread: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``{"request", "outcome": "unknown", "reread": "ok" | "failed: why", **what reread() returned}``: reread()
    runs lifted (after a stop, past the budget), each request capped at REREAD_SECONDS, and returns at least
    ``shows`` (what the BMC shows now, in words). Never raises for a BMC problem."""
    out: dict[str, Any] = {"request": request, "outcome": "unknown"}
    try:
        with budget.lifted(), capped(REREAD_SECONDS):
            found = reread()
    except NumaforgeError as exc:
        out["reread"] = f"failed: {exc.what}"
        return out
    out.update(found)
    out["reread"] = "ok"
    return out


@contextmanager
def watch_write(
    client: RedfishClient, data: dict, request: str, reread: Callable[[], dict[str, Any]], check: str = ""
) -> Iterator[None]:
    """Around one write (``request``: "METHOD /path", for the report): when it ends with an exception that leaves
    its outcome unknown (``unanswered``) after a request of that method left, ``reread`` runs (``reread_record``) and its
    record goes to ``data["unsure"]`` before the exception goes on. ``check``: the command that shows the same
    thing later, named when the re-read fails."""
    mark, method = len(client.requests), request.split(" ", 1)[0]
    try:
        yield
    except BaseException as exc:
        left = any(m == method for m, _, _ in client.requests[mark:])  # not a read before it (an ActionInfo)
        if left and unanswered(exc):
            record = reread_record(client, request, reread)
            if check:
                record["check"] = check
            data.setdefault("unsure", []).append(record)
        raise


def unsure_text(record: dict[str, Any]) -> str:
    """The report's sentence for one write of unknown outcome."""
    head = f"outcome unknown of {record['request']} (cut or unanswered)"
    if record.get("reread") == "ok":
        return f"{head}; re-read: {record['shows']}"
    return f"{head}; the re-read {record.get('reread', 'failed')}, so whether the BMC took it is unknown" + (
        f" ({record['check']} shows it)" if record.get("check") else ""
    )
