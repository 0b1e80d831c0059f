"""Task: inventory-check — validate an inventory and show hosts, groups and resolved variables."""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ..errors import InventoryError
from ..lazy import lazy_module
from ..report import Report
from ..secrets import MASK, SecretRef, SecretText, redact
from . import common
from .optionsets import task

if TYPE_CHECKING:
    from ..inventory import preflight
else:  # imported by the task that uses it (numaforge.lazy)
    preflight = lazy_module("numaforge.inventory.preflight")


def host_summary(host) -> dict:
    """JSON-safe view of a resolved host; secrets appear only as their reference."""

    def clean(obj):
        if isinstance(obj, SecretText):  # a decrypted Ansible Vault value
            return MASK
        if isinstance(obj, SecretRef) or not isinstance(obj, (str, int, float, bool, dict, list, tuple, type(None))):
            return str(obj)  # a reference, or a `!vault` value left encrypted: never a value
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
    hosts=True,
    help={
        "syntax_only": "only validate the inventory itself: skip checking that the key files, known_hosts, "
        "CA bundles, file: secrets and env: variables it refers to exist"
    },
)
def inventory_check(c, select, json=None, syntax_only=False):
    """Validate the inventory, print hosts, groups and resolved variables (secrets masked), and check that every
    file and environment variable it refers to is there (never printing a value)."""

    def body(report: Report):
        inv, hosts = common.load_selected(c, report, select)
        common.console.print(
            f"[bold]{escape(inv.path)}[/] ({inv.format} format): {len(hosts)} of {len(inv.hosts)} hosts selected",
            emoji=False,
        )
        for h in hosts:
            _print_host(h)
            report.host(h.name).data = host_summary(h)
        if inv.groups:
            _print_groups(inv)
        report.data = {"format": inv.format, "hosts": len(inv.hosts), "groups": sorted(inv.groups)}
        if not syntax_only:
            _preflight(report, inv, hosts)

    common.execute(
        "inventory-check",
        body,
        json=json,
        options={"syntax_only": syntax_only},
    )


def _print_host(h) -> None:
    """One host: its name, where it is defined and its groups, then a line per section it has."""
    common.console.print(
        f"\n[bold]{escape(h.name)}[/]  ({escape(str(h.location))})  groups: {escape(', '.join(h.groups) or '-')}",
        emoji=False,
    )
    for key, text in _host_rows(h):  # inventory text is data: no markup, no emoji codes
        style = "red" if key == "bmc" and h.bmc is not None and h.bmc.insecure else None
        line = redact(f"  {key:<9} {text}")  # a decrypted vault value (bmc.username...) shows as the mask
        common.console.print(line, soft_wrap=True, markup=False, emoji=False, style=style)


def _host_rows(h) -> list[tuple[str, str]]:
    """(section, text) for each section of the host that is set; secrets appear only as their reference."""
    rows = []
    if h.connection != "ssh":
        rows.append(("connect", f"{h.connection} (ansible_connection; no SSH side)"))
    if h.ssh:
        rows.append(("ssh", _ssh_text(h.ssh)))
    if h.bmc:
        rows.append(("bmc", _bmc_text(h.bmc)))
    if h.kernel.release or h.kernel.target:
        rows.append(("kernel", f"release={h.kernel.release or '?'} target={h.kernel.target or '-'}"))
    hw_text = _hardware_text(h.hardware)
    if hw_text:
        rows.append(("hardware", hw_text))
    if h.bios_profile:
        rows.append(("profile", h.bios_profile))
    if h.vars:
        rows.append(("vars", ", ".join(f"{k}={v!r}" for k, v in sorted(h.vars.items()))))
    return rows


def _ssh_text(s) -> str:
    extra = " ".join(
        f"{k}={v}" for k, v in (("key", s.key_file), ("known_hosts", s.known_hosts), ("password", s.password)) if v
    )
    return f"{s.user}@{s.address}:{s.port}{' sudo' if s.sudo else ''} {extra}"


def _bmc_text(b) -> str:
    trust = "INSECURE (TLS not verified)" if b.insecure else (f"ca={b.ca_bundle}" if b.ca_bundle else "ca=system store")
    return f"{b.url} vendor={b.vendor} user={b.username} password={b.password} {trust}" + (
        f" system={b.system_id}" if b.system_id else ""
    )


def _hardware_text(hw) -> str:
    text = " ".join(
        f"{k}={v}"
        for k, v in (("vendor", hw.vendor), ("platform", hw.platform), ("sockets", hw.sockets), ("cpu", hw.cpu_model))
        if v
    )
    if hw.gpus or hw.nics:
        text += f" gpus={','.join(hw.gpus) or '-'} nics={','.join(hw.nics) or '-'}"
    return text


def _print_groups(inv) -> None:
    """The groups table: each group's children and its hosts, nested groups' included."""
    gt = Table(title="groups")
    gt.add_column("group")
    gt.add_column("children")
    gt.add_column("hosts (nested included)", overflow="fold")
    common.console.print()
    for g in inv.groups.values():
        gt.add_row(
            *(Text(t) for t in (g.name, ", ".join(g.children) or "-", ", ".join(inv.group_members(g.name)) or "-"))
        )
    common.console.print(gt)


def _preflight(report: Report, inv, hosts) -> None:
    """Every referenced file and env: variable, all problems listed with host/attribute; exit 2 if any."""
    problems = preflight.check_hosts(hosts)
    report.data["preflight"] = {"checked_hosts": len(hosts), "problems": len(problems)}
    if not problems:
        common.console.print(
            f"\npreflight: every file and environment variable referenced by {len(hosts)} host(s) is present"
        )
        return
    common.console.print(f"\npreflight: {len(problems)} problem(s)", markup=False)
    for p in problems:
        at = f"\n    set at: {p.where}" if p.where else ""
        common.console.print(f"  {p.host}: {p.attribute}: {p.what}{at}\n    fix: {p.fix}", markup=False, soft_wrap=True)
        hr = report.host(p.host)
        hr.status = "failed"
        hr.message = f"{p.attribute}: {p.what}" if not hr.message else f"{hr.message}; {p.attribute}: {p.what}"
        hr.data.setdefault("problems", []).append(
            {"attribute": p.attribute, "what": p.what, "fix": p.fix, "where": p.where}
        )
    raise InventoryError(
        f"{len(problems)} problem(s) with files or environment variables the inventory refers to "
        f"(on {len({p.host for p in problems})} host(s), listed above)",
        inv.path,
        "fix each one listed, or pass --syntax-only to check only the inventory file",
    )


TASKS = [inventory_check]
