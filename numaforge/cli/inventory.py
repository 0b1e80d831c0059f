"""Task: inventory-check — validate an inventory and show hosts, groups and resolved variables."""

from __future__ import annotations

from dataclasses import fields

from invoke import task
from rich.table import Table

from ..display import esc
from ..report import Report
from ..secrets import SecretRef
from . import common


def host_summary(host) -> dict:
    """JSON-safe view of a resolved host; secrets appear only as their reference."""

    def clean(obj):
        if isinstance(obj, SecretRef):
            return str(obj)
        if isinstance(obj, dict):
            return {k: clean(v) for k, v in obj.items() if v not in (None, [], {})}
        if isinstance(obj, list):
            return [clean(v) for v in obj]
        return obj

    def asdict(obj) -> dict:  # shallow: keeps SecretRef objects whole so clean() prints only the reference
        return {f.name: getattr(obj, f.name) for f in fields(obj)}

    out = {
        "defined_at": str(host.location),
        "groups": host.groups,
        "ssh": clean(asdict(host.ssh)) if host.ssh else None,
        "bmc": clean(asdict(host.bmc)) if host.bmc else None,
        "kernel": clean(asdict(host.kernel)),
        "hardware": clean(asdict(host.hardware)),
        "bios_profile": host.bios_profile,
        "vars": clean(host.vars),
    }
    return {k: v for k, v in out.items() if v not in (None, {}, [])}


@task(
    iterable=["host", "group"],
    help={k: common.SELECT_HELP[k] for k in ("inventory", "host", "group", "limit", "json",
                                               "allow_plaintext_secrets")},
)
def inventory_check(c, inventory=None, host=None, group=None, limit=None, json=None,
                    allow_plaintext_secrets=False):
    """Validate the inventory and print hosts, groups and resolved variables (secrets masked)."""

    def body(report: Report):
        inv, hosts = common.load_selected(c, report, inventory, host, group, limit, allow_plaintext_secrets)
        out = common.console
        out.print(f"[bold]{esc(inv.path)}[/] ({inv.format} format): {len(hosts)} of {len(inv.hosts)} hosts selected")
        for h in hosts:
            out.print(f"\n[bold]{esc(h.name)}[/]  ({esc(h.location)})  groups: {esc(', '.join(h.groups) or '-')}")
            rows = []
            if h.ssh:
                s = h.ssh
                extra = " ".join(f"{k}={v}" for k, v in (("key", s.key_file), ("known_hosts", s.known_hosts),
                                                          ("password", s.password)) if v)
                rows.append(("ssh", esc(f"{s.user}@{s.address}:{s.port}{' sudo' if s.sudo else ''} {extra}")))
            if h.bmc:
                b = h.bmc
                trust = "[red]INSECURE (TLS not verified)[/]" if b.insecure else \
                    esc(f"ca={b.ca_bundle}" if b.ca_bundle else "ca=system store")
                rows.append(("bmc", esc(f"{b.url} vendor={b.vendor} user={b.username} password={b.password} ")
                             + trust + esc(f" system={b.system_id}" if b.system_id else "")))
            if h.kernel.release or h.kernel.target:
                rows.append(("kernel", esc(f"release={h.kernel.release or '?'} target={h.kernel.target or '-'}")))
            hw = h.hardware
            hw_text = " ".join(f"{k}={v}" for k, v in (("vendor", hw.vendor), ("platform", hw.platform),
                                                        ("sockets", hw.sockets), ("cpu", hw.cpu_model)) if v)
            if hw.gpus or hw.nics:
                hw_text += f" gpus={','.join(hw.gpus) or '-'} nics={','.join(hw.nics) or '-'}"
            if hw_text:
                rows.append(("hardware", esc(hw_text)))
            if h.bios_profile:
                rows.append(("profile", esc(h.bios_profile)))
            if h.vars:
                rows.append(("vars", esc(", ".join(f"{k}={v!r}" for k, v in sorted(h.vars.items())))))
            for key, text in rows:
                out.print(f"  {key:<9} {text}", soft_wrap=True)  # each row escaped above
            report.host(h.name).data = host_summary(h)
        if inv.groups:
            gt = Table(title="groups")
            gt.add_column("group")
            gt.add_column("children")
            gt.add_column("hosts (nested included)", overflow="fold")
            common.console.print()
            for g in inv.groups.values():
                gt.add_row(esc(g.name), esc(", ".join(g.children) or "-"), esc(", ".join(inv.group_members(g.name)) or "-"))
            common.console.print(gt)
        report.data = {"format": inv.format, "hosts": len(inv.hosts), "groups": sorted(inv.groups)}

    common.execute("inventory-check", body, json=json,
                   options={"inventory": inventory, "host": host, "group": group, "limit": limit})


TASKS = [inventory_check]
