"""Client-side Redfish resources (sushy-like): one class per resource, each reading itself through the
transport (numaforge.bios.redfish.RedfishClient) and raising the typed error of an HTTP status
(numaforge.bios.errors.http_error: 404 -> RedfishNotFoundError, 412 -> RedfishPreconditionFailedError, ...).

    root = ServiceRoot.load(client)
    system = root.system(system_id)          # System
    bios = system.bios()                     # Bios: current values, registry id, ResetBios
    settings = bios.settings()               # SettingsObject: pending values, ETag, apply times; commit()
    jobs = find_jobs(client, root, system)   # JobCollection (Dell Oem job queue, Manager Jobs, JobService/Jobs)

Nothing here knows profiles or plans; pipelines (apply, operations) decide, these only read and write.
"""

from .base import Collection, Resource, etag_of, link_path
from .bios import Bios
from .jobs import Job, JobCollection, find_jobs
from .root import ServiceRoot
from .settings import SettingsObject
from .system import System

__all__ = [
    "Resource",
    "Collection",
    "link_path",
    "etag_of",
    "ServiceRoot",
    "System",
    "Bios",
    "SettingsObject",
    "Job",
    "JobCollection",
    "find_jobs",
]
