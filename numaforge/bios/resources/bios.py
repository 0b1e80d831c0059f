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

    def settings_messages(self) -> dict[str, str]:
        """What the BMC said about the last apply of the settings, per attribute: {attribute: "MessageId: Message"}
        from @Redfish.Settings.Messages (DSP0266 "Settings resource": the messages of applying the settings),
        for each message whose RelatedProperties names ``#/Attributes/<name>`` or whose MessageArgs carry an
        attribute this Bios has (iDRAC's way). Success messages are left out. Peer text, escaped where shown."""
        out: dict[str, list[str]] = {}
        attrs = self.attributes
        for m in self.settings_info.get("Messages") or []:
            if not isinstance(m, dict):
                continue
            mid = str(m.get("MessageId") or "")
            if mid.rsplit(".", 1)[-1] in ("Success", "SYS413") or str(m.get("MessageSeverity")) == "OK":
                continue
            names = {
                str(p).split("/Attributes/", 1)[1]
                for p in m.get("RelatedProperties") or []
                if isinstance(p, str) and "/Attributes/" in p
            }
            names |= {str(a) for a in m.get("MessageArgs") or [] if isinstance(a, str) and a in attrs}
            text = f"{mid}: {m.get('Message') or ''}".strip(": ")
            for name in names:
                out.setdefault(name, []).append(text)
        return {k: "; ".join(v) for k, v in out.items()}

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
