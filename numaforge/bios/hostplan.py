"""What one host should hold: its profile rendered over its facts and the vendor read, translated through the
vendor map and validated against the registry it was read with, planned against its current and pending values
(numaforge.bios.plan); and the plan as the host's result records it. Nothing here talks to a BMC."""

from __future__ import annotations

from typing import Any

from ..errors import InventoryError, NumaforgeError
from ..report import HostResult
from .errors import ProfileError, VendorMapError
from .hostsession import HostOptions
from .hoststate import BiosState
from .plan import Plan, UnverifiedCheck, check_unverified, make_plan, unverified_policy
from .presets import UNVERIFIED_POLICIES, UNVERIFIED_VAR
from .profile import Profile, host_facts, render_profile
from .vendormap import Desired
from .vendors import translate


def render_for(host, vendor: str, opts: HostOptions) -> Profile:
    """The host's profile (--profile, else the inventory's bios_profile) rendered over its inventory facts as
    ``vendor``: what bios-plan, bios-apply and bios-verify all judge against."""
    name = opts.profile or host.bios_profile
    if not name:
        raise ProfileError(
            "no BIOS profile for this host",
            f"{host.name} ({host.location})",
            "set bios_profile in the inventory or pass --profile NAME",
        )
    facts = host_facts(host)
    facts["vendor"] = vendor
    return render_profile(name, facts, opts.profiles_path)


def desired_for(host, state: BiosState, opts: HostOptions) -> tuple[Profile, list[Desired]]:
    """The host's profile (--profile, else the inventory's bios_profile) and its vendor attribute values."""
    profile = render_for(host, state.vendor, opts)
    vmap = opts.vendor_map(state.vendor)
    raw = profile.raw_for(state.vendor)
    try:
        return profile, translate(
            profile.settings, raw, vmap, state.registry, host.name, profile.optional, state.model, present=state.current
        )
    except VendorMapError as exc:
        not_epyc = _not_epyc(state.system)
        if not not_epyc or raw:
            raise
        raise VendorMapError(
            f"no vendor map for this model: {state.model or 'this system'} has {not_epyc} processors, and "
            f"numaforge's vendor maps (bios/vendors/*.yaml) cover AMD EPYC platforms only; nothing is written "
            f"({exc.what.splitlines()[0]})",
            host.name,
            "leave this host out of the BIOS run (its inventory group), or set the attributes you need by name "
            f"under raw.{state.vendor} in a profile of its own",
        ) from None


def _not_epyc(system: dict | None) -> str:
    """The processor model a System's ProcessorSummary names when it is no AMD EPYC ("" when it is one, or the
    BMC does not say). The captures of Intel and ARM boards (tests/data/captures: Dell R750, Lenovo SR670 V2,
    Supermicro X13; NVIDIA GH200/GB200) name theirs there."""
    model = str(((system or {}).get("ProcessorSummary") or {}).get("Model") or "").strip()
    return "" if not model or "AMD" in model.upper() or "EPYC" in model.upper() else " ".join(model.split())


def replan(state: BiosState, desired: list[Desired], host) -> Plan:
    """The plan of ``desired`` against what ``state`` read (current, pending, registry). Pure."""
    return make_plan(desired, state.registry, state.current, state.settings_attrs, host.name)


def plan_for(host, state: BiosState, opts: HostOptions) -> tuple[Profile, list[Desired], Plan]:
    """Render the host's profile for the vendor read, translate and validate it, plan it: (profile, desired, plan)."""
    profile, desired = desired_for(host, state, opts)
    return profile, desired, replan(state, desired, host)


def desired_values(plan: Plan) -> dict[str, Any]:
    return {i.attribute: i.desired for i in plan.settable}


def record_plan(result: HostResult, state: BiosState, profile: Profile, plan: Plan) -> None:
    result.data.update(
        {
            "vendor": state.vendor,
            "vendor_from": state.detected_by,
            "profile": profile.name,
            "profile_chain": profile.chain,
            "system": state.system_path,
            "settings_object": state.settings_path,
            "registry": state.registry.id,
            "plan": [i.as_dict() for i in plan.items],
            "by_display_name": [
                f"{i.setting} -> {i.attribute} ({i.resolved})" for i in plan.items if i.by_display_name
            ],
            "unverified": [f"{i.setting} -> {i.attribute}" for i in plan.items if i.unverified],
        }
    )


class UnverifiedRefusedError(NumaforgeError):
    """The plan would write values no public source shows and the --unverified policy is refuse."""


def unverified_var(host) -> str | None:
    """The host's inventory var bios_unverified (None unset); a value that is no policy is an error naming the
    host and its inventory line (the tasks check every selected host before the first is touched)."""
    raw = host.vars.get(UNVERIFIED_VAR)
    if raw is not None and raw not in UNVERIFIED_POLICIES:
        raise InventoryError(
            f"{UNVERIFIED_VAR}: {raw!r} is not a policy",
            f"{host.location} (host {host.name})",
            f"write {UNVERIFIED_VAR}: {' | '.join(UNVERIFIED_POLICIES)}",
        )
    return raw


def unverified_check(host, opts: HostOptions, profile: Profile, plan: Plan, action: str) -> UnverifiedCheck:
    """The --unverified policy for this host (option > inventory var > profile key > the action's default) over
    its plan's unverified values to write."""
    policy, source = unverified_policy(action, opts.unverified, unverified_var(host), profile.unverified)
    return check_unverified(plan, policy, source)


def enforce_unverified(check: UnverifiedCheck, host, result: HostResult, action: str) -> None:
    """Record the policy's verdict; raise (before any write) when it refuses the plan's unverified values."""
    result.data["unverified_policy"] = check.as_dict()
    if not check.refused:
        return
    head = "refused before any write" if action == "apply" else "bios-apply would refuse this plan"
    raise UnverifiedRefusedError(
        f"{head}: {check.text()}",
        f"{host.name} ({host.location})",
        "check these values against this BMC's documentation (the plan's resolved column says what no source "
        "shows), then let them be written with --unverified warn or allow (or the inventory var "
        f"{UNVERIFIED_VAR}, or the profile's unverified: key)",
    )
