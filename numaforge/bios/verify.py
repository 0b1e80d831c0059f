"""bios-verify: the BMC's word (current == desired, numaforge.bios.apply.verify_host) and the OS's proof
(host facts over SSH judged by numaforge.bios.os_verify), merged into one row per setting:

    setting | BMC value | OS evidence | verdict (ok / mismatch / cannot tell, with why)

A host fails on any BMC mismatch or OS mismatch; "cannot tell" (no lspci, no root, a setting that leaves no
trace in the OS, no SSH side in the inventory) is reported with its reason and does not fail the host.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import NumaforgeError
from ..report import HostResult
from .apply import HostOptions, RegistryCache, verify_host
from .discovery import discovery_dir


@dataclass
class VerifyOptions:
    os_side: bool = True                 # also collect facts over SSH where the host has an ssh section
    accept_new_host_key: bool = False


def merge_rows(plan_items: list[dict], os_verdicts: list[dict] | None, os_unavailable: str | None) -> list[dict]:
    """Pure: one row per abstract setting (plus the OS's per-device rows)."""
    bmc: dict[str, list[dict]] = {}
    for item in plan_items:
        bmc.setdefault(item["setting"], []).append(item)
    rows: list[dict] = []
    seen = set()
    for v in os_verdicts or []:
        items = bmc.get(v["setting"], [])
        row = {"setting": v["setting"], "desired": v["desired"],
               "bmc_value": ", ".join(f"{i['attribute']}={i['current']}" for i in items) or "-",
               "bmc_ok": all(i["current"] == i["desired"] for i in items),
               "os_evidence": v["os_evidence"], "os_verdict": v["verdict"], "why": v["why"]}
        rows.append(row)
        seen.add(v["setting"])
    for setting, items in bmc.items():
        if setting in seen:
            continue
        rows.append({"setting": setting, "desired": items[0]["desired"],
                     "bmc_value": ", ".join(f"{i['attribute']}={i['current']}" for i in items),
                     "bmc_ok": all(i["current"] == i["desired"] for i in items), "os_evidence": "",
                     "os_verdict": "cannot tell", "why": os_unavailable or "no OS-side check for this setting"})
    for r in rows:
        if not r["bmc_ok"] or r["os_verdict"] == "mismatch":
            r["verdict"] = "mismatch"
        else:
            r["verdict"] = r["os_verdict"] if r["os_verdict"] != "ok" else "ok"
    return rows


def verify_host_full(host, opts: HostOptions, vopts: VerifyOptions, cache: RegistryCache,
                     result: HostResult) -> None:
    from ..facts import parse_facts
    from ..facts.collect import collect_ssh
    from ..facts.run import check_profile

    if host.bmc is not None:
        verify_host(host, opts, cache, result)
    bmc_failed = result.status == "failed"
    os_verdicts, unavailable = None, None
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
                check_profile(scratch, facts, opts.profile or "auto", host)
            os_verdicts = scratch.data["os_verify"]["verdicts"]
            result.data["os_summary"] = scratch.data["os_verify"]["summary"]
        except NumaforgeError as exc:
            unavailable = f"OS facts could not be collected: {exc.what}"
            result.status = "failed"
            result.message = (result.message + "; " if result.message else "") + exc.render()
    rows = merge_rows(result.data.get("plan") or [], os_verdicts, unavailable)
    result.data["verify_rows"] = rows
    os_bad = [r["setting"] for r in rows if r["os_verdict"] == "mismatch"]
    if os_bad:
        result.status = "failed"
        result.message = (result.message + "; " if bmc_failed and result.message else "") + \
            f"the OS shows a mismatch for {', '.join(os_bad)}"
    elif result.status != "failed":
        result.status = "ok"
        bmc_ok = sum(1 for r in rows if r["bmc_ok"])
        proven = sum(1 for r in rows if r["verdict"] == "ok")
        result.message = f"{bmc_ok} of {len(rows)} settings verified on the BMC; " + (
            f"OS side: {unavailable}" if unavailable else
            f"{proven} proven by the OS, {sum(1 for r in rows if r['verdict'] == 'cannot tell')} cannot tell")


def run_verify(hosts, opts: HostOptions, vopts: VerifyOptions, *, forks: int = 8, progress: bool = False):
    from ..fleet import run_fleet

    cache = RegistryCache(persist=discovery_dir() if opts.discovery_cache else None)

    def one(host) -> HostResult:
        result = HostResult(host.name)
        verify_host_full(host, opts, vopts, cache, result)
        return result

    outcome = run_fleet(hosts, one, forks=forks, progress=progress, host_timeout=opts.host_timeout)
    outcome.registry_fetches = cache.fetches
    outcome.registry_loaded = cache.loaded
    return outcome
