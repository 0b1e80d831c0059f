"""Errors of the BMC simulator (bad flavour data, bad daemon options, port in use...)."""

from __future__ import annotations

from ...errors import NumaforgeError


class BMCSimulatorError(NumaforgeError):
    """The simulator cannot start or its flavour data is malformed."""

    exit_code = 2
