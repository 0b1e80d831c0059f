"""Bios (current values + @Redfish.Settings), the settings object (pending values; PATCH with If-Match and
@Redfish.SettingsApplyTime, validated against the attribute registry), Bios.ResetBios, and the attribute
registry JSON document at the flavour's registry Location URI."""

from __future__ import annotations

import copy

from ..http import SimResponse, error, etag_of, json_ok, lit, normalise
from ..messages import error_body, message
from ..state import iso
from ..validation import validate_settings_patch


def _etag_matches(header: str, etag: str, strong_only: bool = False) -> bool:
    """If-Match against the current ETag: weak comparison (RFC 9110), or -- ``strong_only``, a BMC quirk -- a
    strong comparison that refuses the weak form of the BMC's own ETag."""

    def bare(t: str) -> str:
        t = t.strip()
        return t if strong_only else (t[2:] if t.startswith("W/") else t)

    want = etag[2:] if strong_only and etag.startswith("W/") else etag
    return any(part.strip() == "*" or bare(part) == bare(want) for part in header.split(","))


def _other_values(f, attrs: dict, current: dict) -> dict:
    """Each attribute with a value other than the one sent, and than the current one where the registry has
    such a value (the "stage_other" fault)."""
    out = {}
    for name, value in attrs.items():
        entry = f.attribute(name) or {}
        names = [v["ValueName"] for v in entry.get("Value") or [] if v["ValueName"] != value]
        names.sort(key=lambda n: n == current.get(name))  # a value that is not the current one first
        if names:
            out[name] = names[0]
        elif isinstance(value, bool):
            out[name] = not value
        elif isinstance(value, (int, float)):
            out[name] = value + 1
        else:
            out[name] = f"{value}-other"
    return out


class _Bios:
    """The handlers of one simulator's Bios, its settings object, Bios.ResetBios, the Dell clear-pending action
    and the attribute registry document."""

    def __init__(self, sim) -> None:
        self.sim, self.f, self.st = sim, sim.flavour, sim.state
        f = self.f
        # the settings object names itself exactly as the SettingsObject link spells it (iLO-like lowercase too)
        self.settings_id = normalise(f.settings_link).rsplit("/", 1)[-1]
        self.reset_bios_target = f"{f.bios_path}/Actions/Bios.ResetBios"
        # iDRAC's clear-pending action on the settings object (Dell's iDRAC Redfish API guide, DellManager.ClearPending)
        self.clear_pending_target = f"{f.settings_path}/Actions/Oem/DellManager.ClearPending"
        self.system_reset = f"{f.system_path}/Actions/ComputerSystem.Reset"

    def settings_body(self) -> dict:
        f, st = self.f, self.st
        with st.lock:
            attrs = f.shown(st.pending if f.settings_shows == "pending_only" else {**st.current, **st.pending})
            body = {
                "@odata.id": f.settings_link,
                "@odata.type": "#Bios.v1_2_3.Bios",
                "Id": self.settings_id,
                "Name": "BIOS Configuration Pending Settings",
                "AttributeRegistry": f.bios_registry,
                "Attributes": attrs,
            }
            if st.apply_time:
                body["@Redfish.SettingsApplyTime"] = {
                    "@odata.type": "#Settings.v1_4_0.PreferredApplyTime",
                    "ApplyTime": st.apply_time,
                }
            if f.jobs == "dell":
                body["Actions"] = {"Oem": {"#DellManager.ClearPending": {"target": self.clear_pending_target}}}
            return body

    def annotation_etag(self) -> bool:
        sim = self.sim
        return sim.settings_etag if sim.annotation_etag is None else sim.annotation_etag

    def bios(self, req):
        f, st = self.f, self.st
        st.advance()
        with st.lock:
            body = {
                "@odata.id": self.sim.link(f.bios_path),
                "@odata.type": "#Bios.v1_2_3.Bios",
                "Id": "Bios",
                "Name": "BIOS Configuration Current Settings",
                "AttributeRegistry": f.bios_registry,
                "Attributes": f.shown(st.current),
                "@Redfish.Settings": {
                    "@odata.type": "#Settings.v1_4_0.Settings",
                    "SettingsObject": {"@odata.id": f.settings_link},
                    # DSP8010 Settings.ETag: the ETag of the resource the settings were applied to (this Bios,
                    # as of the last apply), not the settings object's
                    **({"ETag": etag_of({"Attributes": st.current})} if self.annotation_etag() else {}),
                    "Time": iso(st.settings_time),
                    "SupportedApplyTimes": list(f.supported_apply_times),
                    "Messages": copy.deepcopy(st.settings_messages),
                },
                "Actions": {"#Bios.ResetBios": {"target": self.reset_bios_target}},
            }
        return json_ok(body)

    def get_settings(self, req):
        self.st.advance()
        resp = json_ok(self.settings_body(), allow="GET, HEAD, PATCH")
        if not self.sim.settings_etag:
            resp.headers.pop("ETag", None)
        return resp

    def patch_settings(self, req):
        f, st = self.f, self.st
        st.advance()
        with st.lock:
            body = req.body
            if isinstance(body, dict) and isinstance(body.get("Attributes"), dict):  # display strings: ValueNames
                body = {**body, "Attributes": f.stored(body["Attributes"])}
            refused = self._refusal(req, body)
            if refused is not None:
                return refused
            apply_time = (body.get("@Redfish.SettingsApplyTime") or {}).get("ApplyTime")
            kind = getattr(req.fault, "kind", None)  # faults: accepted, but nothing / something else staged
            if kind != "stage_nothing":
                attrs = body.get("Attributes") or {}
                st.stage(_other_values(f, attrs, st.effective()) if kind == "stage_other" else attrs, apply_time)
            return self._staged(apply_time, etag_of(self.settings_body()))

    def _refusal(self, req, body: dict) -> SimResponse | None:
        """The error a settings PATCH gets before anything is staged (If-Match, a running job, the registry's
        checks), or None when it is accepted. Called with the state lock held."""
        f, st, sim = self.f, self.st, self.sim
        current_etag = etag_of(self.settings_body())
        if_match = req.headers.get("if-match")
        if if_match is None and sim.require_if_match:
            return error(428, message("PreconditionRequired"))
        if if_match is not None and not _etag_matches(if_match, current_etag, sim.strong_if_match):
            return error(412, message("PreconditionFailed"), headers={"ETag": current_etag})
        if f.jobs == "dell" and st.active_job() is not None:
            return error(400, message("SYS011"))
        if f.jobs == "dell" and st.lockdown:
            # iDRAC System Lockdown refuses every configuration change; its own message id for that was in no
            # public capture found, so the simulator answers a generic refusal: the client must name the cause
            # from the Lockdown attribute (managers.py), not from the message
            return error(400, message("OperationNotAllowed"))
        problems = validate_settings_patch(f.registry, st.effective(), body, f.supported_apply_times)
        return error(400, *problems) if problems else None

    def _staged(self, apply_time: str | None, new_etag: str) -> SimResponse:
        """The answer to an accepted settings PATCH: Dell's (a config job for an apply time), else 200 +
        ResetRequired."""
        f, st = self.f, self.st
        if f.jobs == "dell":
            if apply_time is None:
                return SimResponse(200, {"@Message.ExtendedInfo": [message("SYS413")]}, {"ETag": new_etag})
            job = st.create_job(f.settings_path)
            location = f"{f.jobs_path}/{job['Id']}"
            if apply_time == "Immediate":
                st.reset("ForceRestart")
            return SimResponse(
                202, {"@Message.ExtendedInfo": [message("SYS409")]}, {"Location": location, "ETag": new_etag}
            )
        return SimResponse(
            200,
            {
                "@Message.ExtendedInfo": [
                    message("Success"),
                    message("ResetRequired", self.system_reset, "ForceRestart"),
                ]
            },
            {"ETag": new_etag},
        )

    def reset_bios(self, req):
        if self.f.jobs == "dell" and self.st.active_job() is not None:
            return error(400, message("SYS011"))
        if self.f.jobs == "dell" and self.st.lockdown:  # System Lockdown (see _refusal)
            return error(400, message("OperationNotAllowed"))
        self.st.reset_bios_defaults()
        return SimResponse(204)

    def clear_pending(self, req):
        st = self.st
        st.advance()
        with st.lock:
            if st.active_job() is not None:
                return error(400, message("SYS011"))
            if st.lockdown:  # System Lockdown (see _refusal)
                return error(400, message("OperationNotAllowed"))
            if not st.pending:
                return error(400, message("NoOperation"))
            st.clear_pending()
        return SimResponse(200, {"@Message.ExtendedInfo": [message("Success")]})

    def registry_doc(self, req):
        return json_ok(copy.deepcopy(self.f.registry))

    def patch_current(self, req):
        return SimResponse(405, error_body([message("OperationNotAllowed")]), {"Allow": "GET, HEAD"})


def register(sim) -> None:
    b, f = _Bios(sim), sim.flavour
    sim.router.add(lit(f.bios_path), get=b.bios, patch=b.patch_current, put=b.patch_current)
    sim.router.add(lit(f.settings_path), get=b.get_settings, patch=b.patch_settings)
    sim.router.add(lit(b.reset_bios_target), post=b.reset_bios)
    if f.jobs == "dell":
        sim.router.add(lit(b.clear_pending_target), post=b.clear_pending)
    sim.router.add(lit(f.registry_uri), get=b.registry_doc)
