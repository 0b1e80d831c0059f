"""Plan = registry validation + diff of current vs pending vs desired (pure core).

``validate`` checks EVERY desired value against the registry before anything is written: the attribute
exists, the type, the allowed values, bounds/lengths/expression, ReadOnly/GrayOut, and Map dependencies
evaluated on the state the BIOS would have after the change. All problems are reported at once.

``make_plan`` classifies each desired attribute:

* ``ok``      current == desired and nothing different is pending;
* ``pending`` the settings object already holds the desired value (applied on the next reset) -- no PATCH;
* ``change``  the value to write; only these go into the PATCH;
* ``gap``     a documented platform gap: this platform has no such setting (nothing to write, not a failure);
* ``skipped`` an ``optional`` setting the platform lacks (nothing to write).

Values are compared and written in the registry's ValueName space: a BMC that shows current values as display
strings (a Supermicro: "Enabled" where the registry's ValueName is "1") plans 0 changes when compliant, and a
raw value given as a display string is written as its ValueName (``in_value_names``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import BiosValidationError
from .presets import UNVERIFIED_POLICIES, UNVERIFIED_VAR
from .registry import Registry
from .vendors import Desired


@dataclass
class PlanItem:
    attribute: str
    setting: str
    desired: Any
    current: Any
    pending: Any  # value in the settings object, or None when nothing is pending for it
    action: str  # ok | pending | change | gap | skipped
    resolved: str = ""
    unverified: str = ""  # the vendor map's reason when no public source shows this entry (Desired.unverified)
    by_display_name: bool = False
    # the registry's ValueDisplayName of each value where it says more than the code ("3" is "NPS4"), else ""
    display: dict[str, str] = field(default_factory=dict)  # "current" / "pending" / "desired" -> display name

    def as_dict(self) -> dict:
        out = {
            "attribute": self.attribute,
            "setting": self.setting,
            "current": self.current,
            "pending": self.pending,
            "desired": self.desired,
            "action": self.action,
            "resolved": self.resolved,
        }
        if self.display:
            out["display"] = dict(self.display)
        if self.unverified:
            out["unverified"] = self.unverified
        return out


@dataclass
class Plan:
    registry_id: str
    items: list[PlanItem] = field(default_factory=list)

    @property
    def changes(self) -> dict[str, Any]:
        """The PATCH body's Attributes: only values that differ from what the BIOS will have."""
        return {i.attribute: i.desired for i in self.items if i.action == "change"}

    @property
    def pending(self) -> list[str]:
        return [i.attribute for i in self.items if i.action == "pending"]

    @property
    def settable(self) -> list[PlanItem]:
        """Items naming an attribute on this BMC (not gaps or skipped settings)."""
        return [i for i in self.items if i.action not in ("gap", "skipped")]

    @property
    def needs_reset(self) -> bool:
        return any(i.action in ("change", "pending") for i in self.items)

    def as_dict(self) -> dict:
        return {
            "registry": self.registry_id,
            "items": [i.as_dict() for i in self.items],
            "changes": self.changes,
            "pending": self.pending,
        }


def pending_values(current: dict[str, Any], settings_attrs: dict[str, Any] | None) -> dict[str, Any]:
    """Values in the settings object that differ from current (some BMCs echo every attribute there)."""
    return {k: v for k, v in (settings_attrs or {}).items() if current.get(k, object()) != v}


def staged_mismatches(sent: dict[str, Any], current: dict[str, Any], settings_attrs: dict[str, Any]) -> list[str]:
    """After a PATCH the BMC accepted: each value sent that its settings object does not hold, as
    "Name: sent 'x', staged 'y'" or "..., staged nothing". A value equal to the current one may be dropped from
    the settings object (nothing to stage). Pure; all values in the registry's ValueName space."""
    out = []
    for k, v in sent.items():
        staged = settings_attrs.get(k, current.get(k))
        if staged == v:
            continue
        what = "nothing" if k not in settings_attrs or staged == current.get(k) else repr(staged)
        out.append(f"{k}: sent {v!r}, staged {what}")
    return out


def _check_value(attr, value, host: str) -> str | None:
    t = attr.type
    if t == "Enumeration":
        if not isinstance(value, str) or value not in attr.values:
            return f"{attr.name}={value!r} is not allowed; {attr.allowed_text()}"
    elif t == "Integer":
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{attr.name}={value!r} must be an integer; {attr.allowed_text()}"
        if attr.lower is not None and value < attr.lower:
            return f"{attr.name}={value} is below the lower bound {attr.lower}; {attr.allowed_text()}"
        if attr.upper is not None and value > attr.upper:
            return f"{attr.name}={value} is above the upper bound {attr.upper}; {attr.allowed_text()}"
        if attr.increment and attr.lower is not None and (value - attr.lower) % attr.increment:
            return f"{attr.name}={value} is not a step of {attr.increment} from {attr.lower}"
    elif t == "Boolean":
        if not isinstance(value, bool):
            return f"{attr.name}={value!r} must be true or false"
    elif t in ("String", "Password"):
        if not isinstance(value, str):
            return f"{attr.name}={value!r} must be a string; {attr.allowed_text()}"
        if attr.max_length is not None and len(value) > attr.max_length:
            return f"{attr.name} is {len(value)} characters, longer than MaxLength {attr.max_length}"
        if attr.min_length is not None and len(value) < attr.min_length:
            return f"{attr.name} is {len(value)} characters, shorter than MinLength {attr.min_length}"
        if attr.expression and not re.fullmatch(attr.expression, value):
            return f"{attr.name}={value!r} does not match /{attr.expression}/"
    return None


def validate(
    desired: list[Desired],
    registry: Registry,
    current: dict[str, Any],
    pending: dict[str, Any] | None = None,
    host: str = "",
) -> None:
    """Raise BiosValidationError listing every problem; return None when all desired values may be written."""
    import difflib

    problems: list[str] = []
    after = {**current, **(pending or {}), **{d.attribute: d.value for d in desired if d.status == "set"}}
    for d in desired:
        if d.status in ("gap", "skipped"):
            continue
        attr = registry.attributes.get(d.attribute)
        if attr is None:
            close = difflib.get_close_matches(d.attribute, list(registry.attributes), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            problems.append(f"{host}/{d.attribute}: not in registry {registry.id}{hint} [from {d.setting}]")
            continue
        eff = registry.effective(d.attribute, after, current)
        bad = _check_value(eff, d.value, host)
        if bad:
            problems.append(f"{host}/{bad} [from {d.setting}]")
            continue
        unchanged = current.get(d.attribute) == d.value and (pending or {}).get(d.attribute, d.value) == d.value
        if eff.immutable or eff.hidden:
            if unchanged:
                continue  # already right: nothing to write
            problems.append(_never_written(registry, eff, d, current, after, host))
            continue
        if eff.read_only or eff.gray_out:
            if unchanged:
                # kept, not written: the value the plan's other values force on it must be this one, or the BMC
                # changes it at the reset and the host never converges (issue 41 item 8)
                problems += [
                    f"{host}/{d.attribute} is read-only and registry dependency: {dep.describe()} forces "
                    f"{forced!r} once the plan's values apply; {d.value!r} cannot be kept [from {d.setting}]"
                    for dep, forced in registry.forced_values(d.attribute, after)
                    if forced != d.value
                ]
                continue
            why = "is ReadOnly"
            blockers = registry.blocking(d.attribute, after)
            if blockers:
                why = "is made read-only by registry dependency: " + "; ".join(b.describe() for b in blockers)
            problems.append(
                f"{host}/{d.attribute} {why}; it cannot be set to {d.value!r} "
                f"(current {current.get(d.attribute)!r}) [from {d.setting}]"
            )
            continue
        for dep, forced in registry.forced_values(d.attribute, after):
            if forced != d.value:
                problems.append(
                    f"{host}/{d.attribute}={d.value!r} conflicts with registry dependency: "
                    f"{dep.describe()} [from {d.setting}]"
                )
    if problems:
        raise BiosValidationError(problems, host or None)


def _never_written(registry: Registry, eff, d: Desired, current: dict, after: dict, host: str) -> str:
    """Why an Immutable or Hidden attribute the plan would change is not written (DSP8010 AttributeRegistry:
    "Immutable attributes shall not be modified"; a Hidden one is not offered to be set, by the registry or by a
    dependency that holds): the plan says it needs it."""
    if eff.immutable:
        why = f"is Immutable in registry {registry.id} (DSP8010: immutable attributes shall not be modified)"
    else:
        deps = registry.hiding(d.attribute, after)
        why = f"is Hidden in registry {registry.id}" + (
            " by registry dependency: " + "; ".join(x.describe() for x in deps) if deps else ""
        )
    return (
        f"{host}/{d.attribute} {why}; the plan needs it {current.get(d.attribute)!r} -> {d.value!r}, and it is never "
        f"written [from {d.setting}]"
    )


def in_value_names(desired: list[Desired], registry: Registry) -> list[Desired]:
    """Desired values in the registry's ValueName space: a value that is an enumeration's ValueDisplayName (a raw
    ``Enabled`` where the ValueName is ``1``) becomes that ValueName, and the item says so. Pure."""
    out = []
    for d in desired:
        attr = registry.attributes.get(d.attribute)
        name = attr.value_name(d.value) if attr is not None and d.status not in ("gap", "skipped") else d.value
        if name != d.value:
            d = replace(d, value=name, resolved=f"{d.resolved}; {d.value!r} is the display name of ValueName {name!r}")
        out.append(d)
    return out


def make_plan(
    desired: list[Desired],
    registry: Registry,
    current: dict[str, Any],
    settings_attrs: dict[str, Any] | None = None,
    host: str = "",
) -> Plan:
    """Validate, then diff. ``settings_attrs`` is the settings object's Attributes (pending values). Everything
    is compared in the registry's ValueName space (current and pending values a BMC shows as display strings,
    and desired display strings, are mapped to their ValueNames first: Registry.value_names)."""
    desired = in_value_names(desired, registry)
    current = registry.value_names(current)
    settings_attrs = registry.value_names(settings_attrs)
    pending = pending_values(current, settings_attrs)
    validate(desired, registry, current, pending, host)
    plan = Plan(registry.id)
    for d in desired:
        if d.status in ("gap", "skipped"):
            plan.items.append(
                PlanItem(
                    d.attribute, d.setting, None, None, None, d.status, d.resolved, d.unverified, d.by_display_name
                )
            )
            continue
        cur = current.get(d.attribute)
        pend = pending.get(d.attribute)
        effective = pend if d.attribute in pending else cur
        if effective == d.value:
            action = "ok" if cur == d.value else "pending"
        else:
            action = "change"
        attr = registry.attributes.get(d.attribute)
        values = (("current", cur), ("pending", pend), ("desired", d.value))
        shown = {k: attr.display(v) for k, v in values} if attr is not None else {}
        plan.items.append(
            PlanItem(
                d.attribute,
                d.setting,
                d.value,
                cur,
                pend,
                action,
                d.resolved,
                d.unverified,
                d.by_display_name,
                {k: v for k, v in shown.items() if v},
            )
        )
    return plan


# -- unverified values: refuse / warn / allow (issue 39 item 5) -------------------------------------------------
DEFAULT_UNVERIFIED = {"plan": "warn", "apply": "refuse"}


def unverified_policy(
    action: str, option: str | None = None, inventory: str | None = None, profile: str | None = None
) -> tuple[str, str]:
    """(policy, where it came from): --unverified, else the inventory var, else the profile's key, else the
    action's default (bios-plan warn, bios-apply refuse). Pure; the values were checked where they were read."""
    for value, source in (
        (option, "--unverified"),
        (inventory, f"inventory var {UNVERIFIED_VAR}"),
        (profile, "the profile's unverified: key"),
    ):
        if value is not None:
            return value, source
    return DEFAULT_UNVERIFIED[action], f"the bios-{action} default"


@dataclass(frozen=True)
class UnverifiedCheck:
    """What the policy says of a plan's unverified values to write (items whose vendor-map entry no public
    source shows and whose action is ``change``)."""

    policy: str
    source: str
    items: tuple[PlanItem, ...] = ()

    @property
    def refused(self) -> bool:
        return self.policy == "refuse" and bool(self.items)

    @property
    def warned(self) -> bool:
        return self.policy == "warn" and bool(self.items)

    def names(self) -> list[str]:
        return [f"{i.attribute}={_shown(i.desired, i.display.get('desired'))} ({i.setting})" for i in self.items]

    def text(self) -> str:
        n = len(self.items)
        head = f"{n} value{'s' if n != 1 else ''} no public source shows for this BMC"
        return f"{head}: {', '.join(self.names())} (--unverified {self.policy}, from {self.source})"

    def as_dict(self) -> dict:
        return {
            "policy": self.policy,
            "from": self.source,
            "values": {i.attribute: i.desired for i in self.items},
            "why": {i.attribute: i.unverified for i in self.items},
            "refused": self.refused,
        }


def check_unverified(plan: Plan, policy: str, source: str) -> UnverifiedCheck:
    """The plan's unverified values to write under ``policy``. Pure."""
    if policy not in UNVERIFIED_POLICIES:
        raise ValueError(policy)
    return UnverifiedCheck(policy, source, tuple(i for i in plan.items if i.unverified and i.action == "change"))


def _shown(value: Any, display: str | None) -> str:
    return f"{value!r} ({display})" if display else repr(value)
