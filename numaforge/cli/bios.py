"""Tasks: bios-render, bios-plan, bios-apply, bios-verify — BIOS profiles pushed through Redfish.

Thin: parse options, call numaforge.bios.apply, print. Logic lives in numaforge/bios/.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from ..bios.errors import ProfileError
from ..bios.presets import UNVERIFIED_POLICIES
from ..defaults import FORKS_BMC
from ..display import esc
from ..lazy import lazy_module
from ..program import prog
from ..report import Report
from . import common, values
from .optionsets import RolloutSpec, exit_on_changes, task

if TYPE_CHECKING:
    from ..bios import apply as bapply
    from ..bios import capture as bcapture
    from ..bios import hostplan as bhostplan
    from ..bios import operations as bops
    from ..bios import profile as bprofile
    from ..bios import vendormap as bvendormap
    from ..bios import verify as bverify
else:  # imported by the task that uses them (numaforge.lazy)
    bapply = lazy_module("numaforge.bios.apply")
    bcapture = lazy_module("numaforge.bios.capture")
    bhostplan = lazy_module("numaforge.bios.hostplan")
    bops = lazy_module("numaforge.bios.operations")
    bprofile = lazy_module("numaforge.bios.profile")
    bverify = lazy_module("numaforge.bios.verify")
    bvendormap = lazy_module("numaforge.bios.vendormap")

BIOS_HELP = {
    "profile": "BIOS profile name (bios/profiles/NAME.yaml.j2) or path; default: each host's bios_profile",
    "insecure": "DO NOT verify the BMC's TLS certificate (lab networks only; loudly reported)",
    "discovery_cache": "reuse the attribute registries and per-model Redfish paths earlier runs learnt "
    "(~/.cache/numaforge/redfish, checked on use); --no-discovery-cache discovers afresh and "
    "keeps nothing",
}

UNVERIFIED_HELP = {
    "unverified": "values to write that no public source shows for this BMC (the plan marks them UNVERIFIED): "
    "refuse (the host fails before any write, naming them), warn, or allow; default: the inventory var "
    "bios_unverified, else the profile's unverified: key, else refuse for bios-apply and warn for bios-plan",
}
# the option checks of the bios tasks, run before any BMC is asked (numaforge.cli.values.preflight)
PROFILE_CHECK = {"profile": lambda v: bprofile.find_profile(str(v))}
_VENDOR_NAME = values.name("--vendor", "vendor name")


def _warn_insecure(insecure: bool) -> None:
    if insecure:
        common.err_console.print(
            "[bold red]WARNING: --insecure: BMC TLS certificates are NOT verified; "
            "credentials can be intercepted. Use bmc.ca_bundle instead.[/]"
        )


def _print_plans(report: Report) -> None:
    """One table per distinct plan: hosts whose vendor, profile, registry and plan rows are identical (a
    homogeneous fleet) share one table titled with all their names, so 50 alike hosts print one table, not 50."""
    groups: dict[tuple, list[str]] = {}
    for h in report.hosts:
        items = h.data.get("plan") or []
        if not items:
            continue
        head = (str(h.data.get("vendor")), str(h.data.get("profile")), str(h.data.get("registry")))
        rows = tuple(
            (
                str(i["attribute"]),
                str(i["setting"]),
                _shown(i, "current"),
                _shown(i, "pending"),
                _shown(i, "desired"),
                str(i["action"]),
                str(i["resolved"]),
            )
            for i in items
        )
        groups.setdefault((head, rows), []).append(h.host)
    colour = {"change": "yellow", "pending": "cyan", "ok": "green", "gap": "magenta", "skipped": "bright_black"}
    for ((vendor, profile, registry), rows), names in groups.items():
        who = names[0] if len(names) == 1 else f"{len(names)} hosts ({fold_names(names)})"
        t = Table(title=escape(f"{who}: {vendor} / profile {profile} / registry {registry}"))
        for col in ("attribute", "setting", "current", "pending", "desired", "action", "resolved"):
            t.add_column(col, overflow="fold")
        for attribute, setting, current, pending, desired, action, resolved in rows:
            # attribute names, values and resolved texts come from the BMC (DisplayNames): data, not markup
            t.add_row(
                escape(attribute),
                setting,
                escape(current),
                escape(pending),
                escape(desired),
                f"[{colour.get(action, 'white')}]{action}[/]",
                escape(resolved),
            )
        common.console.print(t)
    for h in report.hosts:
        if h.data.get("plan"):
            for w in h.data.get("warnings") or []:
                common.err_console.print(f"[red]{escape(h.host)}: {escape(str(w))}[/]")
            policy = h.data.get("unverified_policy") or {}
            if policy.get("values") and policy.get("policy") == "warn":
                listed = ", ".join(f"{k}={v!r}" for k, v in policy["values"].items())
                common.err_console.print(
                    f"[yellow]{escape(h.host)}: UNVERIFIED values to write (no public source shows them for this "
                    f"BMC): {escape(listed)}; --unverified warn (from {escape(str(policy.get('from')))}); "
                    "bios-apply refuses them unless --unverified warn or allow[/]"
                )


def _shown(item: dict, key: str) -> str:
    """A plan value with the registry's display name beside a code: ``3 (NPS4)``."""
    shown = (item.get("display") or {}).get(key)
    return f"{_s(item[key])} ({shown})" if shown else _s(item[key])


_NUMBERED = re.compile(r"^(.*?)(\d+)$")


def fold_names(names: list[str]) -> str:
    """Host names with runs of consecutive numbers folded: bmc000..bmc049, gpu-7 (order kept, nothing lost)."""
    out: list[str] = []
    run: list = []  # [prefix, width, first, last]

    def flush() -> None:
        if run:
            prefix, width, first, last = run
            a, b = f"{prefix}{first:0{width}d}", f"{prefix}{last:0{width}d}"
            out.append(a if first == last else f"{a}, {b}" if last == first + 1 else f"{a}..{b}")
            run.clear()

    for name in names:
        m = _NUMBERED.match(name)
        if m and run and m.group(1) == run[0] and len(m.group(2)) == run[1] and int(m.group(2)) == run[3] + 1:
            run[3] += 1
            continue
        flush()
        if m:
            run.extend([m.group(1), len(m.group(2)), int(m.group(2)), int(m.group(2))])
        else:
            out.append(name)
    flush()
    return ", ".join(out)


def _s(v) -> str:
    return "-" if v is None else str(v)


def _run(c, task_name: str, action: str, select, rollout, opts: bapply.HostOptions, options: dict, json, timeouts=None):
    """The shared body of bios-plan and bios-apply: select, (journal), run the pipeline, print."""
    _warn_insecure(opts.insecure)
    journaled = action == "apply" and opts.reboot

    def body(report: Report):
        if timeouts is not None:
            opts.timeouts = timeouts()
        _inv, hosts = common.load_selected(c, report, select)
        for h in hosts:  # before the first host is touched: a bad inventory value is exit 2, nothing read
            bhostplan.unverified_var(h)
        report.expect_hosts(h.name for h in hosts)
        if not journaled:
            outcome = bapply.run_hosts(hosts, action, opts, rollout, progress=len(hosts) > 1)
        else:
            # a run with resets keeps a journal: if it is interrupted, the same command resumes it and never
            # resets a host twice (docs/journal.md)
            key = (
                f"{task_name} profile={opts.profile or '-'} inventory={common.selected_inventory(report)} "
                f"hosts={','.join(h.name for h in hosts)} reboot={opts.reboot}"
            )
            with common.resume_journal(report, key, rollout) as opts.journal:
                outcome = bapply.run_hosts(hosts, action, opts, rollout, progress=len(hosts) > 1)
                if not outcome.stopped and all(r.status != "failed" for r in outcome.results):
                    opts.journal.finish()
        report.hosts.extend(outcome.results)
        report.data["fleet"] = outcome.as_dict()
        report.data["registry_fetches"] = outcome.registry_fetches  # from a BMC in this run
        report.data["registry_loaded"] = outcome.registry_loaded  # from the discovery cache on disk
        if outcome.reason:
            common.console.print(f"rollout: {esc(outcome.summary())}")
        if action != "verify" or any(h.status == "failed" for h in report.hosts):
            _print_plans(report)

    return common.execute(task_name, body, json=json, options=options)


BMC_READ = RolloutSpec(forks=FORKS_BMC, rolling=False, bmc=True)
BMC_ROLLING = RolloutSpec(forks=FORKS_BMC, bmc=True)


def _policy(bmc: values.BmcPolicy) -> bapply.RetryPolicy:
    """--bmc-connect-timeout / --bmc-read-timeout / --bmc-retries as the Redfish client's policy."""
    return bapply.RetryPolicy(
        connect_timeout=bmc.connect_timeout, read_timeout=bmc.read_timeout, attempts=bmc.retries + 1
    )


@task(
    hosts=True,
    rollout=BMC_READ,
    help={**BIOS_HELP, **UNVERIFIED_HELP},
    checks={**PROFILE_CHECK, "unverified": lambda v: _unverified(v)},
)
def bios_plan(
    c,
    select,
    rollout,
    bmc_policy,
    profile=None,
    insecure=False,
    unverified=None,
    discovery_cache=True,
    detailed_exitcode=False,
    json=None,
):
    """Show, per host, what bios-apply would change: current vs pending vs desired, validated against the
    BMC's attribute registry. Writes nothing."""
    opts = bapply.HostOptions(
        profile=profile,
        insecure=insecure,
        discovery_cache=discovery_cache,
        unverified=_unverified(unverified),
        policy=_policy(bmc_policy),
    )
    options = {"profile": profile, "insecure": insecure, "unverified": unverified}
    report = _run(c, "bios-plan", "plan", select, rollout, opts, options, json)
    # a change to write, or a value the BMC holds pending a reset: the host is not as the profile says yet
    exit_on_changes(report, detailed_exitcode, lambda h: h.data.get("would_change") or h.data.get("pending"))


def _unverified(value: str | None) -> str | None:
    """--unverified: one of the policies (exit 2 naming the option otherwise)."""
    if value is not None and value not in UNVERIFIED_POLICIES:
        raise values.OptionValueError(
            f"--unverified must be one of {', '.join(UNVERIFIED_POLICIES)}, got {value!r}",
            "--unverified",
            "pass --unverified refuse, --unverified warn or --unverified allow",
        )
    return value


@task(
    hosts=True,
    write=True,
    rollout=BMC_ROLLING,
    checks={
        **PROFILE_CHECK,
        "graceful_timeout": lambda v: values.positive_float(v, "--graceful-timeout"),
        "power_timeout": lambda v: values.positive_float(v, "--power-timeout"),
    },
    help={
        **BIOS_HELP,
        **UNVERIFIED_HELP,
        **{
            "reboot": "after writing, restart the host (GracefulRestart; ForceRestart after --graceful-timeout only "
            "if the BMC shows the OS still running, never in POST), wait for the OS and verify every value",
            "graceful_timeout": "seconds to wait for a graceful restart before a hung OS may be forced "
            "(default: the vendor map's reboot.graceful, 300)",
            "power_timeout": "seconds to wait for the host to boot back to its OS, then a 'still booting' verdict "
            "(default: the vendor map's reboot.power_on, 900-1200)",
        },
    },
)
def bios_apply(
    c,
    select,
    rollout,
    bmc_policy,
    profile=None,
    reboot=False,
    insecure=False,
    graceful_timeout=None,
    power_timeout=None,
    unverified=None,
    discovery_cache=True,
    json=None,
):
    """Write the profile's BIOS values: one PATCH of only the differing attributes per host (none if nothing
    differs), Dell config jobs, optional --reboot and verification."""

    def timeouts() -> bapply.Timeouts:
        return bapply.Timeouts(
            graceful=values.positive_float(graceful_timeout, "--graceful-timeout", None),
            power_on=values.positive_float(power_timeout, "--power-timeout", None),
        )

    opts = bapply.HostOptions(
        profile=profile,
        insecure=insecure,
        reboot=reboot,
        discovery_cache=discovery_cache,
        unverified=_unverified(unverified),
        policy=_policy(bmc_policy),
    )
    options = {"profile": profile, "reboot": reboot, "insecure": insecure, "unverified": unverified}
    _run(c, "bios-apply", "apply", select, rollout, opts, options, json, timeouts=timeouts)


@task(
    hosts=True,
    rollout=BMC_READ,
    checks=PROFILE_CHECK,
    help={
        **BIOS_HELP,
        "os": "also prove each setting from inside the OS over SSH (facts: NUMA nodes, L3 domains, ACS/ASPM bits, "
        "IOMMU groups, SR-IOV VFs); default on for hosts with an ssh section, --no-os for the BMC side only",
    },
)
def bios_verify(
    c,
    select,
    rollout,
    bmc_policy,
    profile=None,
    insecure=False,
    discovery_cache=True,
    os=True,
    accept_new_host_key=False,
    json=None,
):
    """Prove the profile took effect: BMC current values == desired, and the OS-visible consequence of each
    setting (one row per setting: BMC value, OS evidence, verdict ok / mismatch / cannot tell with why)."""
    _warn_insecure(insecure)
    opts = bapply.HostOptions(
        profile=profile, insecure=insecure, discovery_cache=discovery_cache, policy=_policy(bmc_policy)
    )
    vopts = bverify.VerifyOptions(os_side=os, accept_new_host_key=accept_new_host_key)

    def body(report: Report):
        _inv, hosts = common.load_selected(c, report, select)
        report.expect_hosts(h.name for h in hosts)
        outcome = bverify.run_verify(hosts, opts, vopts, rollout, progress=len(hosts) > 1)
        report.hosts.extend(outcome.results)
        report.data["fleet"] = outcome.as_dict()
        colour = {"ok": "green", "mismatch": "red", "cannot tell": "yellow"}
        for h in report.hosts:
            rows = h.data.get("verify_rows") or []
            if not rows:
                continue
            t = Table(title=esc(f"{h.host}: bios-verify (profile {h.data.get('profile', profile or '?')})"))
            for col in ("setting", "desired", "BMC value", "OS evidence", "verdict", "why"):
                t.add_column(col, overflow="fold")
            for r in rows:
                wanted = ", ".join(f"{k}={v}" for k, v in (r.get("bmc_desired") or {}).items())
                t.add_row(
                    esc(r["setting"]),
                    esc(_s(r["desired"]) + (f" ({wanted})" if wanted else "")),
                    esc(r["bmc_value"]),
                    esc(r["os_evidence"] or "-"),
                    f"[{colour[r['verdict']]}]{esc(r['verdict'])}[/]",
                    esc(r["why"] or ""),
                )
            common.console.print(t)

    common.execute("bios-verify", body, json=json, options={"profile": profile, "insecure": insecure, "os": os})


@task(
    hosts=True,
    checks={**PROFILE_CHECK, "vendor": lambda v: _VENDOR_NAME(v) or bvendormap.load_vendor_map(str(v))},
    help={
        "profile": BIOS_HELP["profile"],
        "vendor": "render as if the BMC were this vendor (default: the inventory's vendor, else generic)",
    },
)
def bios_render(c, select, profile=None, vendor=None, json=None):
    """Render each selected host's profile over its inventory facts (no BMC contact): the abstract settings."""

    def body(report: Report):
        _inv, hosts = common.load_selected(c, report, select)
        for h in hosts:
            res = report.host(h.name)
            name = profile or h.bios_profile
            if not name:
                res.status = "failed"
                res.message = f"{h.name}: no bios_profile; set it in the inventory or pass --profile"
                continue
            facts = bprofile.host_facts(h)
            if vendor:
                facts["vendor"] = vendor
            try:
                p = bprofile.render_profile(name, facts)
            except ProfileError as exc:
                res.status, res.message = "failed", exc.render()
                continue
            res.data = {
                "profile": p.name,
                "chain": p.chain,
                "vendor": facts["vendor"],
                "settings": p.settings,
                "raw": p.raw_for(facts["vendor"]),
                "set_by": p.origin,
            }
            res.message = ", ".join(f"{k}={v}" for k, v in p.settings.items())

    common.execute("bios-render", body, json=json, options={"profile": profile, "vendor": vendor})


OPS_HELP = {
    "dry_run": "show the plan (what would be deleted / cleared / reset, and why) and write nothing",
}


def _operation(c, task_name: str, name: str, oopts, select, rollout, bmc_policy, insecure: bool, json, options: dict):
    """The shared body of the bios-jobs/job-delete/clear-pending/reset-defaults tasks."""
    _warn_insecure(insecure)
    opts = bapply.HostOptions(insecure=insecure, policy=_policy(bmc_policy))

    def body(report: Report):
        _inv, hosts = common.load_selected(c, report, select)
        outcome = bops.run_operation(hosts, name, opts, oopts, rollout, progress=len(hosts) > 1)
        report.hosts.extend(outcome.results)
        report.data["fleet"] = outcome.as_dict()
        if outcome.reason:
            common.console.print(f"rollout: {esc(outcome.summary())}")
        _print_operation(report, name)

    common.execute(task_name, body, json=json, options={**options, "insecure": insecure, "dry_run": oopts.dry_run})


def _print_operation(report: Report, name: str) -> None:
    columns = {
        "jobs": ("jobs", ("id", "state", "type", "name", "percent", "message")),
        "job-delete": ("delete", ("id", "state", "why")),
        "clear-pending": ("clear", ("attribute", "current", "pending")),
        "reset-defaults": ("to_default", ("attribute", "current", "default")),
        "power": ("power", ("action", "reset", "before", "after")),
    }[name]
    for h in report.hosts:
        op = h.data.get("operation") or {}
        rows = list(op.get(columns[0]) or []) + [dict(r, why=r.get("why", "")) for r in op.get("refused") or []]
        if not rows:
            continue
        t = Table(title=esc(f"{h.host}: {name}" + (f" ({op['how']})" if op.get("how") else "")))
        for col in columns[1]:
            t.add_column(col, overflow="fold")
        for r in rows:  # job names, messages and values come from the BMC: data, never markup
            t.add_row(*(esc(_s(r.get(col))) for col in columns[1]))
        common.console.print(t)


def _ops_help(*extra: dict) -> dict:
    out = {"insecure": BIOS_HELP["insecure"]}
    for e in extra:
        out.update(e)
    return out


@task(
    hosts=True,
    rollout=BMC_ROLLING,
    help=_ops_help({"all_jobs": "list every job in the BMC's queue, not only BIOS configuration jobs"}),
)
def bios_jobs(c, select, rollout, bmc_policy, all_jobs=False, insecure=False, json=None):
    """List the BIOS configuration jobs on each host's BMC (Dell iDRAC job queue, DMTF JobService): id, state,
    message. A queued BIOS job blocks bios-apply; remove a stale one with bios-job-delete. Writes nothing."""
    oopts = bops.OpOptions(all_jobs=all_jobs)
    _operation(c, "bios-jobs", "jobs", oopts, select, rollout, bmc_policy, insecure, json, {"all_jobs": all_jobs})


@task(
    hosts=True,
    write=True,
    rollout=BMC_ROLLING,
    checks={"job": values.name("--job", "job id (e.g. JID_123456789012)")},  # a segment of the job's URL
    help=_ops_help(
        OPS_HELP, {"job": "delete only this job id (default: every queued BIOS configuration job of each host)"}
    ),
)
def bios_job_delete(c, select, rollout, bmc_policy, job=None, dry_run=False, insecure=False, json=None):
    """Delete queued BIOS configuration jobs (plan first: --dry-run shows it). A running job is never deleted
    (the host is applying it), nor any job that is not a BIOS configuration job -- a queued firmware update of
    the BIOS included: the host fails with a message saying so. iDRAC discards the pending values of a
    deleted job; the report lists what is still pending."""
    oopts = bops.OpOptions(dry_run=dry_run, job_id=job)
    _operation(c, "bios-job-delete", "job-delete", oopts, select, rollout, bmc_policy, insecure, json, {"job": job})


@task(hosts=True, write=True, rollout=BMC_ROLLING, help=_ops_help(OPS_HELP))
def bios_clear_pending(c, select, rollout, bmc_policy, dry_run=False, insecure=False, json=None):
    """Discard the BIOS values pending on each BMC (plan first: --dry-run lists them): iDRAC's ClearPending
    action where offered, else one PATCH writing the current values back. Refused while a config job would
    apply them (delete it first with bios-job-delete)."""
    oopts = bops.OpOptions(dry_run=dry_run)
    _operation(c, "bios-clear-pending", "clear-pending", oopts, select, rollout, bmc_policy, insecure, json, {})


@task(hosts=True, write=True, rollout=BMC_ROLLING, help=_ops_help(OPS_HELP))
def bios_reset_defaults(c, select, rollout, bmc_policy, dry_run=False, insecure=False, json=None):
    """Reset each host's BIOS to its defaults with Bios.ResetBios (plan first: --dry-run lists the attributes
    that differ from the registry's DefaultValue). The defaults apply at the next host reset."""
    oopts = bops.OpOptions(dry_run=dry_run)
    _operation(c, "bios-reset-defaults", "reset-defaults", oopts, select, rollout, bmc_policy, insecure, json, {})


@task(
    hosts=True,
    rollout=BMC_ROLLING,
    help=_ops_help(
        {
            "directory": "a new (or empty) directory for the capture; with several hosts, one subdirectory per host "
            "(docs/bios-profiles.md, Capturing a BMC)",
        }
    ),
    positional=["directory"],
    checks={"directory": values.new_dir("--directory", "capture directory")},  # numaforge.cli.values.preflight
)
def bios_capture(c, select, rollout, bmc_policy, directory=None, insecure=False, json=None):
    """Record what the BIOS tasks read from each host's BMC (service root, system, Bios, settings object, attribute
    registry, jobs, ActionInfo, managers) in DMTF's mockup layout, with serial numbers, UUIDs, MAC and IP
    addresses, passwords and tokens replaced by placeholders; replay it with `lab-up --bmc-mockup DIRECTORY`.
    Reads only (GET); writes nothing to the BMC."""
    if not directory or str(directory).startswith("-"):
        raise values.OptionValueError(
            "the capture directory is missing" if not directory else f"{directory!r} is an option, not a directory",
            "DIRECTORY",
            f"pass one: `{prog()} bios-capture --host H DIRECTORY` (help: `{prog()} bios-capture --help`)",
        )
    _warn_insecure(insecure)
    opts = bapply.HostOptions(insecure=insecure, policy=_policy(bmc_policy))

    def body(report: Report):
        _inv, hosts = common.load_selected(c, report, select)
        outcome = bcapture.run_capture(hosts, opts, directory, rollout, progress=len(hosts) > 1)
        report.hosts.extend(outcome.results)
        report.data["fleet"] = outcome.as_dict()
        if outcome.reason:
            common.console.print(f"rollout: {esc(outcome.summary())}")

    common.execute("bios-capture", body, json=json, options={"directory": directory, "insecure": insecure})


POWER_ACTIONS = ("status", "on", "off", "graceful-restart", "force-restart")  # numaforge.bios.power.POWER_ACTIONS
POWER_HELP = {
    "action": f"one of {', '.join(POWER_ACTIONS)}: status reads PowerState and BootProgress; on, off "
    "(GracefulShutdown, else ForceOff), graceful-restart and force-restart send ComputerSystem.Reset with a type "
    "the BMC allows. Nothing is sent to a host in POST or applying a config job; a forced reset only while the BMC "
    "shows the OS running",
}


@task(
    hosts=True,
    write=True,
    rollout=BMC_ROLLING,
    help=_ops_help(OPS_HELP, POWER_HELP),
    positional=["action"],
    checks={"action": lambda v: _power_action(v)},  # before any BMC is asked (numaforge.cli.values.preflight)
)
def bmc_power(c, select, rollout, bmc_policy, action=None, dry_run=False, insecure=False, json=None):
    """Power a host on or off, restart it, or show its power and boot state: ComputerSystem.Reset through its BMC
    (plan first: --dry-run says what would be sent), with bios-apply's POST safety -- nothing is sent to a host
    that is booting, and a forced reset only while the BMC shows its OS running. A restart applies pending BIOS
    values (after bios-reset-defaults, or a queued Dell config job) without writing any."""
    _power_action(action)
    oopts = bops.OpOptions(dry_run=dry_run, power=action)
    _operation(c, "bmc-power", "power", oopts, select, rollout, bmc_policy, insecure, json, {"action": action})


def _power_action(action: str | None) -> None:
    """bmc-power's ACTION (also --action): one of POWER_ACTIONS, else exit 2 naming it."""
    if action not in POWER_ACTIONS:
        raise values.OptionValueError(
            "no action given" if action is None else f"unknown action {action!r}",
            "bmc-power ACTION (--action)",
            f"give one of: {', '.join(POWER_ACTIONS)} (e.g. `{prog()} bmc-power --host H status`)",
        )


TASKS = [
    bios_render,
    bios_plan,
    bios_apply,
    bios_verify,
    bios_capture,
    bios_jobs,
    bios_job_delete,
    bios_clear_pending,
    bios_reset_defaults,
    bmc_power,
]
