"""bios-apply's write path: one PATCH of the differing attributes to the settings object (If-Match its ETag,
through numaforge.bios.resources.SettingsObject.commit), never re-sent blindly, and what the BMC holds after it.

An error answer or a lost one is followed by a re-read of the settings object: when it holds every value sent, the
BMC did act; otherwise the report names what it holds (nothing is half-written by us: the PATCH is one request)
and the host stops. A lost answer (timeout, reset) is not a "no": the object is re-read for up to the read timeout
(the BMC may still be working on the request), and the report names the pending values and BIOS jobs then. After
an accepted PATCH the object must hold what was sent (``check_staged``, issue 25 item 5).

A PATCH whose outcome is unknown -- cut on the wire by Ctrl-C/SIGTERM or the host's --host-timeout, or any error
after it left -- is never dropped from the report (issue 40 item 3): ``reread_unsure`` re-reads the settings
object the way every write of unknown outcome is re-read (numaforge.bios.unsure: outside the host's budget, each
request capped) and says which values sent the BMC now holds; the host's result lists those as written and the
rest as of unknown outcome."""

from __future__ import annotations

import time
from typing import Any

from .. import budget
from ..errors import NumaforgeError
from ..program import prog
from .configjob import jobs_text
from .errors import (
    RedfishAuthError,
    RedfishError,
    RedfishForbiddenError,
    RedfishHTTPError,
    RedfishPreconditionFailedError,
    RedfishRedirectError,
)
from .exchange import Response
from .hoststate import BiosState, system_of
from .plan import pending_values, staged_mismatches
from .redfish import RedfishClient
from .resources import SettingsObject
from .resources.system import LOCKDOWN_FIX
from .unsure import reread_record


def reread_unsure(client: RedfishClient, state: BiosState, changes: dict) -> dict[str, Any]:
    """After a PATCH of ``changes`` whose outcome is unknown: what the BMC holds now, as the host's
    ``data["write"]`` (numaforge.bios.unsure.reread_record): ``sent`` (attribute names), ``outcome`` "unknown",
    ``reread`` "ok" or "failed: why", ``bmc_holds`` ({attribute: value} of the values sent that the settings
    object holds) and ``unknown`` (sent, not seen held: not written, or written and not shown). Runs after a stop
    or a used-up budget too (lifted), each request capped at REREAD_SECONDS. Never raises for a BMC problem."""

    def reread() -> dict[str, Any]:
        attrs = SettingsObject.load(client, state.settings_path).attributes
        now = state.registry.value_names(pending_values(state.current, attrs))
        held = {k: now[k] for k in sorted(changes) if k in now and now[k] == changes[k]}
        unknown = sorted(k for k in changes if k not in held)
        shows = f"the BMC holds {len(held)} of the {len(changes)} values sent" + (
            f", not {', '.join(unknown)}" if unknown else ""
        )
        return {"bmc_holds": held, "unknown": unknown, "shows": shows}

    out = reread_record(client, f"PATCH {state.settings_path}", reread)
    out.setdefault("bmc_holds", {})
    out.setdefault("unknown", sorted(changes))
    return {"sent": sorted(changes), **out}


def patch_settings(client: RedfishClient, state: BiosState, changes: dict, use_apply_time: bool) -> Response | None:
    """PATCH ``changes`` once (the transport retries only a 503). Returns the BMC's answer, or None when the answer
    was an error or lost and a re-read shows every value sent staged. Raises RedfishPreconditionFailedError when
    the settings object changed since it was read (the caller re-reads and re-plans), a RedfishError naming what
    the BMC holds otherwise (module docstring)."""
    try:
        sent = state.registry.as_shown(changes, state.current)  # the form the Bios shows (Supermicro: display strings)
        return state.settings_object(client).commit(sent, "OnReset" if use_apply_time else None)
    except (RedfishRedirectError, RedfishPreconditionFailedError):
        raise  # answered, and not carried out: nothing to re-read
    except (RedfishAuthError, RedfishForbiddenError) as exc:
        raise _refused(client, state, exc) from None
    except RedfishHTTPError as exc:
        answered: RedfishHTTPError | None = exc
        what = exc.what
    except RedfishError as exc:
        answered, what = None, f"PATCH {state.settings_path} got no answer ({exc.what})"
    try:
        now = _staged_after(client, state, changes, what, patient=answered is None)
    except NumaforgeError as exc:
        exc.outcome_unknown = answered is None  # type: ignore[attr-defined]
        raise
    if now is None:
        return None
    error = _not_written(client, state, now, what, answered)
    error.outcome_unknown = answered is None  # type: ignore[attr-defined]
    raise error


def outcome_unknown(exc: BaseException) -> bool:
    """True when ``exc`` ended a PATCH without telling whether the BMC took it: cut on the wire (a stop, the
    host's budget) or its answer lost (patch_settings marks those)."""
    return isinstance(exc, (budget.Stopped, budget.HostTimeout)) or bool(getattr(exc, "outcome_unknown", False))


def _refused(client: RedfishClient, state: BiosState, exc: RedfishHTTPError) -> RedfishError:
    """Refused before the BMC looked at the attributes: authentication/authorisation, not a value."""
    auth = isinstance(exc, RedfishAuthError)
    kind = RedfishAuthError if auth else RedfishError
    return kind(
        f"PATCH {state.settings_path} answered {exc.status} ("
        + ("authentication refused: the session is no longer valid" if auth else "forbidden")
        + f"): {exc.what}; the BMC refused the request, nothing was written",
        f"{client.host} ({client.base_url})",
        "check bmc.username / the password reference and the BMC's session timeout, then re-run"
        if auth
        else "the BMC account needs the ConfigureComponents privilege (Administrator/Operator role)",
    )


def _staged_after(
    client: RedfishClient, state: BiosState, changes: dict, what: str, patient: bool
) -> dict[str, Any] | None:
    """Re-read the settings object after an error or a lost answer (``patient``: for up to the read timeout):
    None once it holds every value sent, else the pending values it holds."""
    deadline = time.monotonic() + (client.policy.read_timeout if patient else 0.0)
    while True:
        try:
            attrs = SettingsObject.load(client, state.settings_path).attributes
        except NumaforgeError:
            raise RedfishError(
                what + "; the settings object could not be re-read, so the outcome is unknown",
                f"{client.host} ({client.base_url})",
                f"re-run `{prog()} bios-plan` and `{prog()} bios-jobs` to see what the BMC holds, then `bios-apply` again",
            ) from None
        now = state.registry.value_names(pending_values(state.current, attrs))
        if all(now.get(k) == v for k, v in changes.items()):
            client.warnings.append(what + "; re-read: the settings object holds every value sent, continuing")
            return None
        if time.monotonic() >= deadline:
            return now
        time.sleep(0.5)


def _not_written(
    client: RedfishClient, state: BiosState, now: dict[str, Any], what: str, answered: RedfishHTTPError | None
) -> RedfishError:
    """The error of a PATCH whose values are not all staged: what the settings object holds now."""
    before = pending_values(state.current, state.settings_attrs)
    extra = sorted(k for k in now if before.get(k) != now.get(k))
    where = f"{client.host} ({client.base_url})"
    if answered is None:
        held = (
            "the BMC now holds "
            + (", ".join(f"{k}={now[k]!r}" for k in extra) if extra else "no new pending value")
            + f"; BIOS jobs: {jobs_text(client, state)}; "
            "it may still act on the request"
        )
        return RedfishError(
            f"{what}; {held}",
            where,
            f"in a minute, `{prog()} bios-plan` and `{prog()} bios-jobs` show what the BMC holds; "
            "re-running bios-apply writes only what still differs",
        )
    held = (
        f"the settings object now holds new values for: {', '.join(extra)}"
        if extra
        else "the settings object is unchanged: nothing was written"
    )
    lockdown = system_of(client, state).lockdown() if 400 <= answered.status < 500 else None
    if lockdown is not None:  # the cause is the BMC's switch, not an attribute (issue 41 item 8)
        return RedfishError(
            f"{what}: System Lockdown is enabled on this iDRAC ({lockdown}), which refuses every configuration "
            f"change; {held}",
            where,
            LOCKDOWN_FIX,
        )
    fix = (
        "fix the attribute the BMC names, then re-run"
        if 400 <= answered.status < 500
        else "re-run when the BMC is healthy (the plan writes only what still differs)"
    )
    return RedfishError(f"{what}; {held}", where, fix)


def check_staged(client: RedfishClient, state: BiosState, changes: dict, where: str) -> list[str]:
    """The BMC accepted the PATCH: its settings object must now hold every value sent (issue 25 item 5). Returns
    the attributes it holds pending now (differing from current): what the report calls pending, never the plan's
    list plus what was sent (a BMC may drop an earlier staged value on a PATCH; issue 40 item 3). A settings
    object that cannot be read after an accepted PATCH raises an error marked ``accepted_unread``."""
    reg = state.registry
    try:
        held = reg.value_names(SettingsObject.load(client, state.settings_path).attributes)
    except NumaforgeError as exc:  # accepted, and what is staged cannot be told (issue 40: Attributes null)
        error = RedfishError(
            f"the BMC accepted the PATCH of {', '.join(sorted(changes))}, but its settings object could not be "
            f"re-read ({exc.what}): what is pending cannot be told, so nothing more was done",
            where,
            f"once the BMC answers a readable settings object, `{prog()} bios-plan` shows what is pending; "
            "re-running bios-apply writes only what still differs",
        )
        error.accepted_unread = True  # type: ignore[attr-defined]
        raise error from None
    current = reg.value_names(state.current)
    wrong = staged_mismatches(changes, current, held)
    if wrong:
        raise RedfishError(
            f"the BMC accepted the PATCH but its settings object ({state.settings_path}) does not hold "
            f"what was sent: {'; '.join(wrong)}",
            where,
            f"the BMC said yes and staged something else: check its firmware and log; `{prog()} bios-plan` shows "
            f"what is pending, `{prog()} bios-clear-pending` (Dell) or a new bios-apply replaces it",
        )
    return sorted(pending_values(current, held))
