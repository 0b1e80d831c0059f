"""bios-verify: the BMC's word (current == desired, numaforge.bios.apply.verify_host) and the OS's proof
(host facts over SSH judged by numaforge.bios.os_verify), merged into one row per setting:

    setting | BMC value | OS evidence | verdict (ok / mismatch / cannot tell, with why)

A host fails on any BMC mismatch or OS mismatch; "cannot tell" (no lspci, no root, a setting that leaves no
trace in the OS, no SSH side in the inventory) is reported with its reason and does not fail the host.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import NumaforgeError
from ..facts import HostFacts, parse_facts, template_facts
from ..facts.collect import collect_ssh
from ..fleet import Rollout, run_fleet
from ..report import HostResult
from .apply import verify_host
from .discovery import RegistryCache, discovery_dir
from .hostplan import render_for
from .hostsession import HostOptions
from .os_verify import MISMATCH, summary
from .os_verify import verify as os_verify
from .profile import host_facts, render_profile

EXPECTED_NODES_VAR = "pci_numa_nodes"  # inventory host var: {"0000:41:00.0": 1, ...}


@dataclass
class VerifyOptions:
    os_side: bool = True  # also collect facts over SSH where the host has an ssh section
    accept_new_host_key: bool = False


def merge_rows(
    plan_items: list[dict],
    os_verdicts: list[dict] | None,
    os_unavailable: str | None,
    settings: dict[str, Any] | None = None,
    os_renders: dict[str, Any] | None = None,
) -> list[dict]:
    """Pure: one row per abstract setting (plus the OS's per-device rows). ``settings``: the profile as bios-plan
    rendered it (the row's desired value; the plan's items give each attribute's desired value, ``bmc_desired``);
    ``os_renders``: settings the profile would render otherwise over the OS's facts (named in the row's why)."""
    bmc: dict[str, list[dict]] = {}
    for item in plan_items:
        if item.get("action") in ("gap", "skipped"):
            continue
        bmc.setdefault(item["setting"], []).append(item)
    settings = settings or {}
    rows: list[dict] = []
    seen = set()

    def common(setting: str, items: list[dict], fallback: Any) -> dict:
        return {
            "setting": setting,
            "desired": settings.get(setting, fallback),
            "bmc_desired": {i["attribute"]: i["desired"] for i in items},
            "bmc_value": ", ".join(f"{i['attribute']}={i['current']}" for i in items) or "-",
            "bmc_ok": all(i["current"] == i["desired"] for i in items),
        }

    for v in os_verdicts or []:
        items = bmc.get(v["setting"], [])
        row = {
            **common(v["setting"], items, v["desired"]),
            "os_evidence": v["os_evidence"],
            "os_verdict": v["verdict"],
            "why": v["why"],
        }
        rows.append(row)
        seen.add(v["setting"])
    for setting, items in bmc.items():
        if setting in seen:
            continue
        rows.append(
            {
                **common(setting, items, items[0]["desired"]),
                "os_evidence": "",
                "os_verdict": "cannot tell",
                "why": os_unavailable or "no OS-side check for this setting",
            }
        )
    for r in rows:
        if r["setting"] in (os_renders or {}) and r["setting"] in settings:
            other = os_renders[r["setting"]]  # type: ignore[index]
            note = (
                f"judged as bios-plan planned it, over the inventory's hardware ({r['setting']}={settings[r['setting']]}); "
                f"over the OS's facts the profile would render {r['setting']}={other}: if the OS is right, correct "
                "the host's hardware section in the inventory"
            )
            r["why"] = f"{r['why']}; {note}" if r["why"] else note
    for r in rows:
        if not r["bmc_ok"] or r["os_verdict"] == "mismatch":
            r["verdict"] = "mismatch"
        else:
            r["verdict"] = r["os_verdict"] if r["os_verdict"] != "ok" else "ok"
    return rows


def _profile_facts(host, facts: HostFacts) -> dict[str, Any]:
    """Inventory facts (numaforge.bios.profile.host_facts) overlaid with what the OS really shows."""
    base = (
        host_facts(host)
        if host is not None
        else {
            "host": facts.host,
            "vendor": "generic",
            "model": "",
            "sockets": 1,
            "cpu_model": "",
            "gpus": [],
            "gpu_count": 0,
            "nics": [],
            "nic_count": 0,
            "groups": [],
            "vars": {},
        }
    )
    os_facts = {k: v for k, v in template_facts(facts).items() if v is not None}
    return {**base, **os_facts, "os": template_facts(facts)}


def check_profile(
    result: HostResult, facts: HostFacts, profile: str, host=None, settings: dict[str, Any] | None = None
) -> None:
    """Render the profile over the host's facts and store OS-side verdicts in result.data["os_verify"]
    (also the `facts --profile` check: the facts task passes this function to numaforge.facts.run).
    ``settings``: judge these (the profile as bios-plan rendered it over the inventory, bios-verify) instead;
    the settings the OS's facts would render otherwise go into result.data["os_verify"]["os_renders"]."""
    name = profile
    if profile == "auto":
        inventory_profile = getattr(host, "bios_profile", None)
        if not inventory_profile:
            raise NumaforgeError(
                "the host has no bios_profile",
                f"host {facts.host}",
                "set bios_profile in the inventory or pass --profile NAME",
            )
        name = inventory_profile
    os_renders: dict[str, Any] = {}
    label = name
    if settings is None:
        p = render_profile(name, _profile_facts(host, facts))
        settings, label = p.settings, p.name
    else:
        try:
            p = render_profile(name, _profile_facts(host, facts))
            os_renders = {k: v for k, v in p.settings.items() if k in settings and settings[k] != v}
            label = p.name
        except NumaforgeError:  # the OS's facts do not render it: nothing to compare, the plan's settings stand
            pass
    expected = {}
    if host is not None and isinstance(host.vars.get(EXPECTED_NODES_VAR), dict):
        for k, v in host.vars[EXPECTED_NODES_VAR].items():
            if isinstance(v, bool) or not isinstance(v, int):
                raise NumaforgeError(
                    f"{EXPECTED_NODES_VAR}: {k!r} maps to {v!r}, not a NUMA node number",
                    f"{host.location} (host {host.name})",
                    f'write {EXPECTED_NODES_VAR}: {{"0000:41:00.0": 1, ...}}',
                )
            expected[str(k)] = v
    verdicts = os_verify(settings, facts, expected)
    result.data["os_verify"] = {
        "profile": label,
        "summary": summary(verdicts),
        "verdicts": [v.as_dict() for v in verdicts],
        "os_renders": os_renders,
    }
    bad = [v.setting for v in verdicts if v.verdict == MISMATCH]
    if bad:
        result.status = "failed"
        result.message = f"profile {label}: OS shows a mismatch for {', '.join(bad)}"


def verify_host_full(host, opts: HostOptions, vopts: VerifyOptions, cache: RegistryCache, result: HostResult) -> None:
    if host.bmc is not None:
        verify_host(host, opts, cache, result)
    bmc_failed = result.status == "failed"
    os_verdicts, unavailable, os_renders = None, None, None
    settings: dict[str, Any] | None = None
    try:  # what bios-plan judges: the profile over the inventory's facts, as the vendor the BMC side read
        settings = render_for(host, result.data.get("vendor") or host_facts(host)["vendor"], opts).settings
    except NumaforgeError:
        settings = None  # the BMC side (or the OS side below) reports why the profile does not render
    if not vopts.os_side:
        unavailable = "OS side not checked (--no-os)"
    elif host.ssh is None:
        unavailable = "the host has no ssh section: no OS facts to check"
    else:
        try:
            with result.step("os-facts"):
                facts = parse_facts(collect_ssh(host, accept_new_host_key=vopts.accept_new_host_key), host.name)
            scratch = HostResult(host.name)
            with result.step("os-verify"):
                check_profile(scratch, facts, opts.profile or "auto", host, settings)
            os_verdicts = scratch.data["os_verify"]["verdicts"]
            os_renders = scratch.data["os_verify"]["os_renders"]
            result.data["os_summary"] = scratch.data["os_verify"]["summary"]
        except NumaforgeError as exc:
            unavailable = f"OS facts could not be collected: {exc.what}"
            result.status = "failed"
            result.message = (result.message + "; " if result.message else "") + exc.render()
    rows = merge_rows(result.data.get("plan") or [], os_verdicts, unavailable, settings, os_renders)
    result.data["verify_rows"] = rows
    os_bad = [r["setting"] for r in rows if r["os_verdict"] == "mismatch"]
    if os_bad:
        result.status = "failed"
        result.message = (
            result.message + "; " if bmc_failed and result.message else ""
        ) + f"the OS shows a mismatch for {', '.join(os_bad)}"
    elif result.status != "failed":
        result.status = "ok"
        bmc_ok = sum(1 for r in rows if r["bmc_ok"])
        proven = sum(1 for r in rows if r["verdict"] == "ok")
        result.message = f"{bmc_ok} of {len(rows)} settings verified on the BMC; " + (
            f"OS side: {unavailable}"
            if unavailable
            else f"{proven} proven by the OS, {sum(1 for r in rows if r['verdict'] == 'cannot tell')} cannot tell"
        )


def run_verify(
    hosts, opts: HostOptions, vopts: VerifyOptions, rollout: Rollout | None = None, *, progress: bool = False
):
    cache = RegistryCache(persist=discovery_dir() if opts.discovery_cache else None)

    def one(host) -> HostResult:
        result = HostResult(host.name)
        verify_host_full(host, opts, vopts, cache, result)
        return result

    outcome = run_fleet(hosts, one, rollout, progress=progress)
    outcome.registry_fetches = cache.fetches
    outcome.registry_loaded = cache.loaded
    return outcome
