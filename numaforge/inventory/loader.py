"""Inventory loaders: numaforge's native YAML and Ansible YAML inventories, with file:line errors.

Both formats end up as the same model (numaforge/inventory/model.py). Resolution order for variables and
host sections, lowest first: top-level ``vars``/``defaults`` (Ansible: ``all.vars``) -> groups by depth
(outer before inner; same depth by name, as Ansible does) -> the host itself. The format reference is
docs/inventory.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import ansible
from .context import GROUP_KEYS, HOST_KEYS, SECTION_KEYS, TOP_KEYS, Ctx, check_name, empty_map, hint, kind_of
from .from_ansible import from_ansible
from .graph import nesting_depths
from .model import Group, Host, Inventory, Location
from .sections import resolve_sections
from .vault import Vault
from .yamlsrc import LMap, LSeq, parse_yaml


def load_inventory(
    path: str | Path, allow_plaintext_secrets: bool = False, vault_password_file: str | None = None
) -> Inventory:
    """Load and validate an inventory; raises InventoryError (file:line, what, fix) on any problem.

    ``vault_password_file`` (else ANSIBLE_VAULT_PASSWORD_FILE) names the Ansible Vault password file that
    decrypts `!vault` values and vault-encrypted files (numaforge.inventory.vault).

    The file must be a regular file (no device, FIFO or directory) of at most yamlsrc.MAX_BYTES (4 MiB). Native YAML (`hosts:` at
    the top), Ansible YAML (groups at the top, usually `all:`) and Ansible INI are told apart by their shape.
    """
    path = str(path)
    vault = Vault.from_option(vault_password_file)  # checked first, whether or not the inventory needs it
    text = ansible.read_text(path, vault)
    ctx = Ctx(path, allow_plaintext_secrets, vault)
    if ansible.is_ini(path, text):
        return from_ansible(ansible.load(path, text, None, vault), ctx)
    doc = parse_yaml(text, path)
    if not isinstance(doc, LMap):
        ctx.fail(
            getattr(doc, "line", 1),
            f"the inventory must be a mapping at the top, got {kind_of(doc)}",
            "start with `hosts:` (native) or `all:` (Ansible YAML); see docs/inventory.md",
        )
    if "all" in doc or not any(k in doc for k in TOP_KEYS):
        return from_ansible(ansible.load(path, text, doc, vault), ctx)
    inv = _build(doc, ctx)
    inv.format = "native"
    return inv


# --------------------------------------------------------------------------------------------- native


def _build(doc: LMap, ctx: Ctx) -> Inventory:
    """The native format: hosts, then groups, then every reference checked, then each host's layers resolved."""
    ctx.check_keys(doc, TOP_KEYS, "the inventory top level")
    if "version" in doc and (type(doc["version"]) is not int or doc["version"] != 1):  # `true == 1` in Python
        ctx.fail(doc.line_of("version"), f"unsupported inventory version {doc['version']!r}", "use `version: 1`")
    if "hosts" not in doc:
        ctx.fail(doc.line, "the inventory has no `hosts:` mapping", "add `hosts:` with at least one host")
    hosts_m = ctx.expect_map(doc["hosts"], doc.line_of("hosts"), "hosts")
    if not hosts_m:
        ctx.fail(doc.line_of("hosts"), "`hosts:` is empty", "add at least one host")
    defaults = empty_map(doc.line_of("defaults"))
    if "defaults" in doc:
        defaults = ctx.expect_map(doc["defaults"], doc.line_of("defaults"), "defaults")
        ctx.check_keys(defaults, SECTION_KEYS, "defaults")
    inv = Inventory(path=ctx.path)
    raw: dict[str, LMap] = {}  # host or group name -> its own mapping (the layer it adds)
    lines: dict[tuple[str, str, str], int] = {}  # (group, hosts|children, name) -> line
    for name, body in hosts_m.items():
        raw[name] = _host(inv, ctx, name, body, hosts_m.line_of(name))
    groups_m = empty_map(doc.line_of("groups"))
    if "groups" in doc and doc["groups"] is not None:
        groups_m = ctx.expect_map(doc["groups"], doc.line_of("groups"), "groups")
    for gname, body in groups_m.items():
        raw[gname] = _group(inv, ctx, gname, body, groups_m.line_of(gname), lines)
    _check_references(inv, ctx, lines)
    _resolve_hosts(inv, ctx, _vars(doc, ctx, "the top-level vars"), defaults, raw)
    return inv


def _host(inv: Inventory, ctx: Ctx, name, body, line: int) -> LMap:
    check_name(ctx, name, line, "host")
    body = ctx.expect_map(empty_map(line) if body is None else body, line, f"host '{name}'")
    ctx.check_keys(body, HOST_KEYS, f"host '{name}'")
    inv.hosts[name] = Host(name=name, location=Location(ctx.path, line))
    return body


def _group(inv: Inventory, ctx: Ctx, gname, body, line: int, lines: dict) -> LMap:
    check_name(ctx, gname, line, "group")
    if gname in inv.hosts:
        ctx.fail(
            line,
            f"group '{gname}' has the same name as a host (defined on line {inv.hosts[gname].location.line})",
            "rename the group or the host: --limit could not tell them apart",
        )
    body = ctx.expect_map(empty_map(line) if body is None else body, line, f"group '{gname}'")
    ctx.check_keys(body, GROUP_KEYS, f"group '{gname}'")
    g = Group(name=gname, location=Location(ctx.path, line))
    for key, target in (("hosts", g.hosts), ("children", g.children)):
        if key in body and body[key] is not None:
            for item, iline in _names(ctx, gname, key, body):
                if item in target:
                    ctx.fail(iline, f"group '{gname}' lists '{item}' twice in `{key}`", "remove the duplicate")
                target.append(item)
                lines[(gname, key, item)] = iline
    g.vars = dict(_vars(body, ctx, f"group '{gname}' vars"))
    inv.groups[gname] = g
    return body


def _names(ctx: Ctx, gname: str, key: str, body: LMap) -> list[tuple[str, int]]:
    """A group's `hosts:`/`children:` as (name, line): a list, or Ansible-style `hosts: {a: , b: }`."""
    seq = body[key]
    if isinstance(seq, LMap):
        items = [(k, seq.line_of(k)) for k in seq]
    elif isinstance(seq, LSeq):
        items = [(v, seq.line_of(i)) for i, v in enumerate(seq)]
    else:
        ctx.fail(
            body.line_of(key),
            f"group '{gname}': `{key}` must be a list of names, got {kind_of(seq)}",
            f"write `{key}: [name1, name2]`",
        )
    for item, iline in items:
        if not isinstance(item, str):
            ctx.fail(iline, f"group '{gname}': {key} entry {item!r} is not a name", "quote the name")
    return items


def _check_references(inv: Inventory, ctx: Ctx, lines: dict) -> None:
    for g in inv.groups.values():
        for h in g.hosts:
            if h not in inv.hosts:
                ctx.fail(
                    lines[(g.name, "hosts", h)],
                    f"group '{g.name}' references host '{h}', which is not defined",
                    hint(h, inv.hosts) if inv.hosts else "define it under `hosts:`",
                )
        for c in g.children:
            if c not in inv.groups:
                ctx.fail(
                    lines[(g.name, "children", c)],
                    f"group '{g.name}' has child group '{c}', which is not defined",
                    hint(c, inv.groups) if inv.groups else "define it under `groups:`",
                )


def _resolve_hosts(inv: Inventory, ctx: Ctx, top_vars: dict, defaults: LMap, raw: dict[str, LMap]) -> None:
    """Each host's groups (outer first, then by name), vars and sections, lowest layer first."""
    depth = _depths(inv, ctx)
    membership: dict[str, list[str]] = {h: [] for h in inv.hosts}
    for g in inv.groups.values():
        for h in inv.group_members(g.name):
            membership[h].append(g.name)
    for name, host in inv.hosts.items():
        host.groups = sorted(membership[name], key=lambda gn: (depth[gn], gn))
        resolved_vars: dict[str, Any] = dict(top_vars)
        for gn in host.groups:
            resolved_vars.update(inv.groups[gn].vars)
        resolved_vars.update(_vars(raw[name], ctx, f"host '{name}' vars"))
        host.vars = resolved_vars
        resolve_sections(ctx, host, [defaults] + [raw[gn] for gn in host.groups] + [raw[name]])


def _vars(m: LMap, ctx: Ctx, what: str) -> dict:
    if "vars" not in m or m["vars"] is None:
        return {}
    v = ctx.expect_map(m["vars"], m.line_of("vars"), what)
    for key in v:
        if not isinstance(key, str):
            ctx.fail(v.line_of(key), f"{what}: variable name {key!r} must be a string", "quote the name")
    return dict(v)


def _depths(inv: Inventory, ctx: Ctx) -> dict[str, int]:
    """Group depths (outer groups 1); a cycle or nesting deeper than graph.MAX_GROUP_DEPTH is an error."""
    return nesting_depths(
        {g.name: g.children for g in inv.groups.values()},
        {g.name: ctx.at(g.location.line) for g in inv.groups.values()},
    )
