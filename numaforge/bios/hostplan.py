"""What one host should hold: its profile rendered over its facts and the vendor read, translated through the
vendor map and validated against the registry it was read with, planned against its current and pending values
(numaforge.bios.plan); and the plan as the host's result records it. Nothing here talks to a BMC."""

from __future__ import annotations

from typing import Any

from ..errors import InventoryError, NumaforgeError
from ..report import HostResult
from .errors import ProfileError
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
    return profile, translate(
        profile.settings,
        raw,
        vmap,
        state.registry,
        host.name,
        profile.optional,
        state.model,
        present=state.current,
        processor=state.processor,
    )


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
            # the settings this host cannot hold (a documented gap, "not on this host", a refused ambiguity, an
            # optional setting it lacks), each with why: never written, never counted as verified
            "gaps": [{"setting": i.setting, "why": i.resolved} for i in plan.items if i.action in ("gap", "skipped")],
        }
    )


NOTHING_APPLICABLE = "nothing can be applied on this host"


def gap_note(plan: Plan) -> str:
    """What a host's message adds for its gaps: "" when there are none; "; N gaps, not written: a, b" when some
    settings are gaps; "; nothing can be applied on this host: every setting is a gap (...)" when no setting of
    the profile resolved to an attribute (issue 41: BlueField-3, the ARM superchips)."""
    gaps = [i.setting for i in plan.items if i.action in ("gap", "skipped")]
    if not gaps:
        return ""
    if not plan.settable:
        return f"; {NOTHING_APPLICABLE}: every setting is a gap ({', '.join(gaps)}; the plan says why)"
    return f"; {len(gaps)} gap{'s' if len(gaps) != 1 else ''}, not written: {', '.join(gaps)}"


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
