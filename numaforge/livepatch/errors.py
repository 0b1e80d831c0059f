"""The live-patch pipeline's typed errors (each: what, where, fix)."""

from __future__ import annotations

from ..errors import NumaforgeError


class LivepatchError(NumaforgeError):
    """A live patch could not be validated on a host."""


class ArtifactError(LivepatchError):
    """The module file or its manifest is unusable."""

    exit_code = 2


class PreflightError(LivepatchError):
    """The host cannot take this module (kernel, policy, conflicts). Nothing was uploaded."""


class LoadError(LivepatchError):
    """insmod / kpatch load failed."""


class TransitionError(LivepatchError):
    """The patch transition did not finish in time; it was reverted and the module unloaded."""


class VerifyError(LivepatchError):
    """The loaded patch does not look right (enabled, functions, dmesg, LOADED check)."""


class UnloadError(LivepatchError):
    """The module could not be disabled or removed."""


class TaintError(LivepatchError):
    """The kernel gained a taint flag a live patch does not explain (a warning, an oops...)."""
