"""Redfish BMC simulator (issue 6): vendor-shaped BMCs (dell, hpe, supermicro, lenovo, generic, and one per vendor
generation of the registry corpus in numaforge/lab/bmc/registries) with BIOS attribute registries, pending settings
applied only on a host reset, ETags, sessions, TLS, Dell-like config jobs, timed power transitions and fault
injection; and a mockup mode serving a captured tree (MockupSimulator). See docs/bmc-simulator.md."""

from .errors import BMCSimulatorError
from .flavours import ALL_FLAVOURS, CORPUS, FLAVOURS, load_flavour, vendor_of
from .mockup import MockupSimulator
from .server import BMCSimulator

__all__ = [
    "ALL_FLAVOURS",
    "BMCSimulator",
    "BMCSimulatorError",
    "CORPUS",
    "FLAVOURS",
    "MockupSimulator",
    "load_flavour",
    "vendor_of",
]
