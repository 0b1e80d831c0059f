"""Typed errors of the firmware pipeline. Each names what, where (file:line or host/attribute) and a fix."""

from __future__ import annotations

import re

from ..errors import NumaforgeError
from ..errors import ProfileError as ProfileError  # re-exported: host OS profiles raise it too


class VendorMapError(NumaforgeError):
    """A vendor map (bios/vendors/*.yaml) is malformed, or an abstract setting has no mapping on this BMC."""

    exit_code = 2


class VendorMismatchError(NumaforgeError):
    """The BMC is not of the vendor the inventory says (its service root or system names another maker)."""

    exit_code = 2


class BiosValidationError(NumaforgeError):
    """A desired value does not pass the BMC's attribute registry (nothing was written)."""

    exit_code = 2

    def __init__(self, problems: list[str], where: str | None = None, fix: str | None = None):
        self.problems = list(problems)
        what = "desired BIOS values rejected before any write:\n    " + "\n    ".join(self.problems)
        super().__init__(what, where, fix or "change the profile (or its raw: escape hatch) to an allowed value")


class RedfishError(NumaforgeError):
    """The BMC answered with an error, bad JSON, or not at all (after the retries that were safe)."""

    exit_code = 4


class RedfishHTTPError(RedfishError):
    """The BMC answered with an HTTP error status; ``status`` says which (typed by status, as in sushy)."""

    status = 0

    def __init__(self, what: str, where: str | None = None, fix: str | None = None, status: int | None = None):
        if status is not None:
            self.status = status
        super().__init__(what, where, fix)


class RedfishBadRequestError(RedfishHTTPError):
    """400: the BMC rejected the request body (a value, a property, or a vendor rule such as a queued job)."""

    status = 400


class RedfishAuthError(RedfishHTTPError):
    """401: the BMC refused the credentials."""

    status = 401


class RedfishForbiddenError(RedfishHTTPError):
    """403: the account lacks the privilege."""

    status = 403


class RedfishNotFoundError(RedfishHTTPError):
    """404: the BMC does not have this resource."""

    status = 404


class RedfishMethodNotAllowedError(RedfishHTTPError):
    """405: the resource does not accept this method (e.g. PATCH on the current BIOS values)."""

    status = 405


class RedfishConflictError(RedfishHTTPError):
    """409: the resource is in a state that conflicts with the request."""

    status = 409


class RedfishPreconditionFailedError(RedfishHTTPError):
    """412: If-Match did not match: the resource changed since it was read."""

    status = 412


class RedfishPreconditionRequiredError(RedfishHTTPError):
    """428: the BMC accepts this change only with If-Match (its ETag), and none was sent."""

    status = 428


class RedfishServerError(RedfishHTTPError):
    """5xx: the BMC failed internally."""

    status = 500


HTTP_ERRORS: dict[int, type[RedfishHTTPError]] = {
    400: RedfishBadRequestError,
    401: RedfishAuthError,
    403: RedfishForbiddenError,
    404: RedfishNotFoundError,
    405: RedfishMethodNotAllowedError,
    409: RedfishConflictError,
    412: RedfishPreconditionFailedError,
    428: RedfishPreconditionRequiredError,
}


def http_error(status: int, what: str, where: str | None = None, fix: str | None = None) -> RedfishHTTPError:
    """The typed error for an HTTP error status (5xx -> RedfishServerError, others -> RedfishHTTPError)."""
    cls = HTTP_ERRORS.get(status) or (RedfishServerError if status >= 500 else RedfishHTTPError)
    return cls(what, where, fix, status=status)


class RedfishRedirectError(RedfishError):
    """The BMC answered with a redirect (3xx); numaforge never follows one. The request was not carried out."""


class RedfishTLSError(RedfishError):
    """The BMC's TLS certificate could not be verified."""


class RedfishPasswordChangeRequiredError(RedfishForbiddenError):
    """The BMC accepted the credentials but allows nothing until the account's password is changed (DMTF Base
    message PasswordChangeRequired): a fault of this host's account, not of the request."""

    status = 403


class BMCETagQuirkError(NumaforgeError):
    """The BMC refused every If-Match form of its own, unchanged ETag (or requires If-Match and publishes no
    ETag): a firmware quirk, not a concurrent change. Nothing was written. Deliberately not a RedfishHTTPError:
    callers that re-read and re-plan on a 412 must not mistake it for someone else's change."""

    exit_code = 4


class JobConflictError(NumaforgeError):
    """A BIOS configuration job already exists on the BMC; it is reported, never deleted."""

    exit_code = 5


class ConcurrentChangeError(NumaforgeError):
    """The settings object changed under us twice (HTTP 412 after a re-read and re-plan)."""

    exit_code = 5


# -- texts of transport failures (numaforge.bios.redfish) ----------------------------------------------------
def password_change_uri(body: dict) -> str | None:
    """The account URI of a DMTF Base PasswordChangeRequired message in an error body ("" without one), or None
    when the body carries no such message."""
    inner = body.get("error")
    err = inner if isinstance(inner, dict) else body
    for info in err.get("@Message.ExtendedInfo") or []:
        if isinstance(info, dict) and str(info.get("MessageId", "")).endswith(".PasswordChangeRequired"):
            args = info.get("MessageArgs") or []
            return str(args[0]) if args else ""
    return None


FIX_FOR_STATUS = {
    401: "check the BMC credentials in the inventory",
    403: "the BMC account needs the ConfigureComponents privilege (Administrator/Operator role)",
    404: "the BMC does not serve a resource its own links (or an earlier run's discovery cache) named: check its "
    "firmware; --no-discovery-cache discovers its paths afresh",
    405: "the BMC does not allow this method on the resource",
    412: "the resource changed since it was read: re-read and re-plan",
    503: "the BMC is busy; re-run later",
}


def fix_for_status(status: int) -> str:
    """The fix an error report gives for an HTTP error status the caller has no better fix for."""
    return FIX_FOR_STATUS.get(status, "see the BMC message above")


def connection_refused(exc: BaseException | None) -> bool:
    """True when the TCP connection was refused (nothing listens): not worth calling the BMC busy."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, ConnectionRefusedError) or "Connection refused" in str(exc):
            return True
        exc = (
            exc.__cause__
            or exc.__context__
            or (exc.args[0] if exc.args and isinstance(exc.args[0], BaseException) else None)
        )
        seen += 1
    return False


def ssl_reason(exc: BaseException) -> str:
    """The verification failure itself (e.g. "Hostname mismatch, certificate is not valid for 'x'"), whole."""
    text = str(exc)
    m = re.search(r"certificate verify failed: ([^()\]\"']+(?:'[^']*')?[^()\]\"]*)", text)
    return m.group(1).strip(" ,") if m else text


def shorten(exc: BaseException | None) -> str:
    text = str(exc or "")
    return text if len(text) < 200 else text[:200] + "..."
