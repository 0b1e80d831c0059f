"""Task: facts — what the OS on each host really shows (NUMA, CPU/L3, GPUs/NICs, ACS, ASPM, IOMMU, kernel).

Thin: parse options, call numaforge.facts.run, print. Read-only on the hosts; nothing is installed there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from ..defaults import FORKS_SSH
from ..display import esc
from ..fleet import run_fleet
from ..lazy import lazy_module
from ..report import Report
from . import common, values
from .optionsets import RolloutSpec, task

if TYPE_CHECKING:
    from ..bios import profile as bprofile
    from ..bios import verify as bverify
    from ..facts import run as facts_run
else:  # imported by the task that uses them (numaforge.lazy)
    bprofile = lazy_module("numaforge.bios.profile")
    bverify = lazy_module("numaforge.bios.verify")
    facts_run = lazy_module("numaforge.facts.run")

HELP = {
    "save": "store each host's raw command outputs under DIR/<host>/ (a corpus: file names say which command "
    "made them; capture.yaml lists the commands and what was absent and why)",
    "load": "parse captures saved with --save from DIR (one host's directory or a directory of them) instead "
    "of connecting to hosts",
    "local": "collect from this build server itself (no SSH)",
    "profile": "also check, from the OS side, that this BIOS profile took effect (NAME, path, or 'auto' for "
    "each host's bios_profile); a mismatch fails the host",
}


def _show(report: Report) -> None:
    for h in report.hosts:
        facts = (h.data or {}).get("facts")
        if not facts:
            continue
        pci = facts["pci"]
        devs = pci.get("devices", {})
        rows = [d for d in devs.values() if d["kind"] in ("gpu", "nic")]
        if rows:
            t = Table(title=esc(f"{h.host}: GPUs and NICs"))
            for col in ("address", "kind", "name", "node", "slot", "link", "aspm", "bridges above (ACS P2P bits)"):
                t.add_column(col, overflow="fold")
            for d in rows:
                above = []
                for b in _chain(devs, d["address"]):
                    acs = devs[b].get("acs_ctl")
                    on = [
                        x[:-1]
                        for x in (acs or "").split()
                        if x.endswith("+") and x[:-1] in ("SrcValid", "ReqRedir", "CmpltRedir")
                    ]
                    above.append(f"{b}{' [' + ' '.join(on) + ']' if on else ''}")
                link = f"{d.get('link_speed', '?')} x{d.get('link_width', '?')}" if d.get("link_speed") else "-"
                if d.get("link_degraded"):
                    link += " (downgraded)"
                t.add_row(
                    d["address"],
                    d["kind"],
                    d.get("name", ""),
                    str(d.get("numa_node")),
                    d.get("physical_slot", "-"),
                    link,
                    d.get("aspm", "-"),
                    "\n".join(above) or "-",
                )
            common.console.print(t)
        ov = h.data.get("os_verify")
        if ov:
            t = Table(title=esc(f"{h.host}: BIOS profile {ov['profile']} as the OS sees it"))
            for col in ("setting", "desired", "OS evidence", "verdict", "why"):
                t.add_column(col, overflow="fold")
            colour = {"ok": "green", "mismatch": "red", "cannot tell": "yellow"}
            for v in ov["verdicts"]:
                t.add_row(
                    v["setting"],
                    str(v["desired"]),
                    v["os_evidence"],
                    f"[{colour[v['verdict']]}]{v['verdict']}[/]",
                    v["why"],
                )
            common.console.print(t)
        for name, why in sorted(facts.get("absent", {}).items()):
            common.console.print(f"[yellow]{esc(h.host)}: {esc(name)} absent: {esc(why)}[/]")


def _chain(devs: dict, address: str) -> list[str]:
    out, cur, seen = [], devs.get(address), set()
    while cur and cur.get("parent") and cur["parent"] not in seen:
        seen.add(cur["parent"])
        out.append(cur["parent"])
        cur = devs.get(cur["parent"])
    return list(reversed(out))


@task(
    hosts=True,
    rollout=RolloutSpec(forks=FORKS_SSH, rolling=False),
    help=HELP,
    checks={  # run before any host is asked (numaforge.cli.values.preflight)
        "save": values.new_dir("--save", "capture directory"),
        "load": values.existing_dir("--load", "capture directory"),
        "profile": lambda v: v == "auto" or bprofile.find_profile(str(v)),
    },
)
def facts(c, select, rollout, save=None, load=None, local=False, profile=None, accept_new_host_key=False, json=None):
    """Collect and show host facts over SSH (read-only): NUMA, CPU/L3, GPUs/NICs with node, link, ACS, ASPM,
    IOMMU, SR-IOV, kernel and livepatches; --profile checks a BIOS profile from the OS side."""
    check = (lambda result, f, h: bverify.check_profile(result, f, profile, h)) if profile else None
    opts = facts_run.FactsOptions(save=save, accept_new_host_key=accept_new_host_key, check=check)

    def body(report: Report):
        if load:
            hosts_by_name = {}
            if select.inventory or select.narrowed:
                _inv, selected = common.load_selected(c, report, select)
                hosts_by_name = {h.name: h for h in selected}
            for d in facts_run.saved_dirs(load):
                report.hosts.append(facts_run.run_saved(d, opts, hosts_by_name.get(d.name)))
        elif local:
            report.hosts.append(facts_run.run_local(opts))
        else:
            _inv, hosts = common.load_selected(c, report, select)
            report.expect_hosts(h.name for h in hosts)
            outcome = run_fleet(hosts, lambda h: facts_run.run_host(h, opts), rollout, progress=len(hosts) > 1)
            report.hosts.extend(outcome.results)
            report.data["fleet"] = outcome.as_dict()
        _show(report)

    common.execute("facts", body, json=json, options={"save": save, "load": load, "local": local, "profile": profile})


TASKS = [facts]
