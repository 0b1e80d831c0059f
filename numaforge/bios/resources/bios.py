"""Bios: the current BIOS values, the attribute registry they follow, the settings object that stages changes
(@Redfish.Settings) and the Bios.ResetBios action (DSP0268 Bios schema)."""

from __future__ import annotations

from typing import Any

from ..errors import RedfishNotFoundError
from ..exchange import Response
from .base import Resource
from .settings import SettingsObject


class Bios(Resource):
    @property
    def attributes(self) -> dict[str, Any]:
        return self.attributes_map("Bios resource")

    @property
    def registry_id(self) -> str | None:
        return self.body.get("AttributeRegistry")

    @property
    def settings_info(self) -> dict:
        """The @Redfish.Settings annotation: SettingsObject, ETag, Time, SupportedApplyTimes, Messages."""
        return self.body.get("@Redfish.Settings") or {}

    @property
    def settings_path(self) -> str | None:
        return self.link("@Redfish.Settings", "SettingsObject")

    @property
    def supported_apply_times(self) -> list[str]:
        return list(self.settings_info.get("SupportedApplyTimes") or [])

    def settings(self) -> SettingsObject:
        path = self.settings_path
        if not path:
            raise RedfishNotFoundError(
                "Bios has no @Redfish.Settings SettingsObject",
                self.where,
                "this BMC does not accept BIOS changes through Redfish (read-only BIOS resource)",
            )
        obj = SettingsObject.load(self.client, path)
        obj.bios_etag = self.settings_info.get("ETag")
        obj.bios_apply_times = self.supported_apply_times
        return obj

    @property
    def can_reset_bios(self) -> bool:
        return self.action_target("Bios.ResetBios") is not None

    def reset_bios(self) -> Response:
        """POST Bios.ResetBios with the body its ActionInfo asks for (``action_body``; ``{}`` without one): the
        registry defaults become pending (they apply at the next host reset)."""
        return self.post_action(
            "Bios.ResetBios",
            self.action_body("Bios.ResetBios"),
            "the BMC refused to reset the BIOS to defaults; see its message",
        )
