"""ServiceRoot: /redfish/v1/ -- where Systems, Registries, JobService and the sessions collection are."""

from __future__ import annotations

from ..errors import RedfishNotFoundError
from ..redfish import RedfishClient
from .base import Collection, Resource, check
from .system import System


class ServiceRoot(Resource):
    @classmethod
    def load(cls, client: RedfishClient, path: str = "/redfish/v1/") -> "ServiceRoot":
        return cls(client, path, client.ensure_root())

    @property
    def systems_path(self) -> str | None:
        return self.link("Systems")

    @property
    def registries_path(self) -> str | None:
        return self.link("Registries")

    @property
    def job_service_path(self) -> str | None:
        return self.link("JobService")

    def system_paths(self) -> list[str]:
        coll = self.systems_path
        if not coll:
            raise RedfishNotFoundError(
                "the service root has no Systems collection", self.where, "is this a Redfish BMC?"
            )
        return Collection.load(self.client, coll).member_paths

    def system(self, system_id: str | None = None) -> System:
        """The system ``system_id`` (bmc.system_id), or the only one the BMC manages."""
        coll = self.systems_path
        if not coll:
            raise RedfishNotFoundError(
                "the service root has no Systems collection", self.where, "is this a Redfish BMC?"
            )
        if system_id:
            path = coll.rstrip("/") + "/" + system_id
            r = self.client.request("GET", path)
            if r.status == 404:
                ids = [p.rstrip("/").rsplit("/", 1)[-1] for p in self.system_paths()]
                raise RedfishNotFoundError(
                    f"system '{system_id}' not found",
                    self.where,
                    f"set bmc.system_id to one of: {', '.join(ids) or 'none'}",
                )
            check(self.client, r, "GET", "check bmc.system_id")
            return System(self.client, path, r.body, r.etag)
        return System.load(self.client, self.only_system_path())

    def only_system_path(self) -> str:
        """The path of the one system this BMC manages (its Systems collection read); an error naming them when
        it manages several (bmc.system_id then picks one) or none."""
        paths = self.system_paths()
        if len(paths) != 1:
            ids = [p.rstrip("/").rsplit("/", 1)[-1] for p in paths]
            raise RedfishNotFoundError(
                f"the BMC manages {len(paths)} systems",
                self.where,
                f"set bmc.system_id in the inventory to one of: {', '.join(ids) or 'none'}",
            )
        return paths[0]
