"""Typed errors of the firmware pipeline. Each names what, where (file:line or host/attribute) and a fix."""

from __future__ import annotations

from ..errors import NumaforgeError


class ProfileError(NumaforgeError):
    """A BIOS profile cannot be found, rendered, parsed or fails its schema."""

    exit_code = 2


class VendorMapError(NumaforgeError):
    """A vendor map (bios/vendors/*.yaml) is malformed, or an abstract setting has no mapping on this BMC."""

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


class RedfishAuthError(RedfishError):
    """The BMC refused the credentials."""


class RedfishRedirectError(RedfishError):
    """The BMC answered with a redirect (3xx); numaforge never follows one. The request was not carried out."""


class RedfishTLSError(RedfishError):
    """The BMC's TLS certificate could not be verified."""


class JobConflictError(NumaforgeError):
    """A BIOS configuration job already exists on the BMC; it is reported, never deleted."""

    exit_code = 5


class ConcurrentChangeError(NumaforgeError):
    """The settings object changed under us twice (HTTP 412 after a re-read and re-plan)."""

    exit_code = 5
