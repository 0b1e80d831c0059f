"""Ansible inventories (YAML, INI, group_vars/host_vars as numaforge.inventory.ansible reads them) turned into
the model: ansible_* connection variables and numaforge_* section variables become host sections."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import InventoryError
from .ansible_model import AnsibleInventory
from .context import ANSIBLE_SSH_VARS, SECTION_FIELDS, SECTION_KEYS, Ctx, hint, kind_of
from .jinja import MISSING, HostTemplar, has_template
from .model import Group, Host, Inventory, Location
from .sections import resolve_sections
from .vault import Vaulted, require
from .yamlsrc import LMap

CONNECTIONS_SSH = ("ssh", "smart", "paramiko", "paramiko_ssh")


def from_ansible(ainv: AnsibleInventory, ctx: Ctx) -> Inventory:
    """The numaforge model of an Ansible inventory: every host's variables resolved as Ansible resolves them,
    then read as numaforge sections (ansible_* SSH variables, numaforge_* sections)."""
    inv = Inventory(path=ctx.path, format="ansible")
    magic = _Magic(ainv, ctx)
    for name, h in ainv.hosts.items():
        values, where = ainv.resolve(name)
        values = _rendered(ctx, ainv, name, values, where, magic)
        host = Host(name=name, location=_location(h.where, ctx))
        host.groups = [g for g in ainv.host_groups(name) if g != "all"]
        layer, plain = _host_layer(ctx, name, h.where, values, where)
        conn = values.get("ansible_connection", "ssh")
        if not isinstance(conn, str) or not conn:
            ctx.fail(
                where.get("ansible_connection"),
                f"host '{name}': ansible_connection {conn!r} is not a name",
                "write ansible_connection: ssh (or local)",
            )
        host.connection = "ssh" if conn in CONNECTIONS_SSH else conn
        if host.connection != "ssh":
            layer.pop("ssh", None)  # a local (or winrm, docker...) host has no SSH side
        if isinstance(layer.get("bmc"), dict) and "url" not in layer["bmc"]:
            layer.pop("bmc")  # shared BMC settings (all/group vars) without a url: this host has no BMC
        host.vars = plain
        resolve_sections(ctx, host, [layer])
        inv.hosts[name] = host
    for name, g in ainv.groups.items():
        if name == "all" or (name == "ungrouped" and not g.hosts):
            continue
        group_vars = dict(g.vars)
        for data, _fname in ainv.group_files.get(name, []):
            group_vars.update(data)
        inv.groups[name] = Group(
            name=name, location=_location(g.where, ctx), hosts=list(g.hosts), children=list(g.children), vars=group_vars
        )
    return inv


def read_by_numaforge(key: str) -> bool:
    """The variables numaforge reads (rendered strictly: an error there stops the load)."""
    return key in ANSIBLE_SSH_VARS or key == "ansible_connection" or key.startswith("numaforge_")


def _rendered(ctx: Ctx, ainv: AnsibleInventory, host: str, values: dict, where: dict, magic: _Magic) -> dict:
    """The host's variables with Jinja2 templates rendered (numaforge.inventory.jinja) and `!vault` values
    decrypted. What numaforge reads must render; another variable that cannot (Ansible would only fail when a
    play uses it) keeps its text, and an encrypted one stays encrypted when no vault password was given."""

    templar = _templar(ctx, host, values, where, magic)
    out: dict = {}
    for key, value in values.items():
        if not has_template(value) and not _has_vaulted(value):
            out[key] = value
        elif read_by_numaforge(key):
            out[key] = templar.get(key)
        else:
            try:
                out[key] = templar.get(key)
            except InventoryError:
                out[key] = value
    return out


def _templar(ctx: Ctx, host: str, values: dict, where: dict, magic: _Magic) -> HostTemplar:
    def reveal(value: Vaulted, vwhere: str, var: str):
        return require(ctx.vault, vwhere, f"host '{host}': variable {var}").decrypt(value.ciphertext, value.where)

    return HostTemplar(host, values, where, lambda name: magic.get(host, name), reveal)


def rendered_values(ainv: AnsibleInventory, ctx: Ctx, host: str, names) -> dict:
    """The named variables of a host, rendered as a run renders what it reads (strictly: errors raise)."""
    values, where = ainv.resolve(host)
    templar = _templar(ctx, host, values, where, _Magic(ainv, ctx))
    return {n: templar.get(n) for n in names}


def _has_vaulted(value) -> bool:
    if isinstance(value, Vaulted):
        return True
    if isinstance(value, dict):
        return any(_has_vaulted(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_vaulted(v) for v in value)
    return False


class _Magic:
    """Ansible's magic variables a template may read (computed once per inventory, `groups` only if used)."""

    def __init__(self, ainv: AnsibleInventory, ctx: Ctx):
        self.ainv = ainv
        self.inventory_file = str(Path(ctx.path).resolve())
        self._groups: dict[str, list[str]] | None = None

    def get(self, host: str, name: str):
        if name == "inventory_hostname":
            return host
        if name == "inventory_hostname_short":
            return host.split(".")[0]
        if name == "group_names":
            return sorted(g for g in self.ainv.host_groups(host) if g != "all")
        if name == "groups":
            if self._groups is None:
                self._groups = {g: self.ainv.group_hosts(g) for g in self.ainv.groups}
            return self._groups
        if name == "inventory_file":
            return self.inventory_file
        if name == "inventory_dir":
            return str(Path(self.inventory_file).parent)
        return MISSING


def _location(where: str, ctx: Ctx) -> Location:
    file, _, line = where.rpartition(":")
    return Location(file, int(line)) if line.isdigit() else Location(where or ctx.path)


def _host_layer(ctx: Ctx, host: str, host_where: str, values: dict, where: dict) -> tuple[LMap, dict]:
    """Resolved Ansible variables -> one native host layer (sections with the file:line of every value)
    and the plain variables (everything numaforge did not read as a section)."""
    layer = _lmap(host_where)
    plain: dict[str, Any] = {}
    flat: dict[str, list[tuple[str, str]]] = {}
    for key, value in values.items():
        if key in ANSIBLE_SSH_VARS or key == "ansible_connection":
            continue
        if key.startswith("numaforge_"):
            rest = key[len("numaforge_") :]
            if rest in SECTION_KEYS:
                if rest != "bios_profile" and value is not None and not isinstance(value, dict):
                    ctx.fail(
                        where.get(key),
                        f"host '{host}': {key} must be a mapping, got {kind_of(value)}",
                        f"write {key}: {{key: value}}, or set single keys as {key}_KEY",
                    )
                _set(layer, rest, _as_lmap(value, where.get(key)) if isinstance(value, dict) else value, where.get(key))
                continue
            section = next((s for s in SECTION_FIELDS if rest.startswith(s + "_")), None)
            if section is None:
                ctx.fail(
                    where.get(key),
                    f"unknown numaforge variable '{key}'",
                    hint(key, [f"numaforge_{s}" for s in SECTION_KEYS])
                    + "; single keys are numaforge_SECTION_KEY, e.g. numaforge_bmc_password",
                )
            flat.setdefault(section, []).append((rest[len(section) + 1 :], key))
            continue
        plain[key] = value
    # flat numaforge_<section>_<key> variables override that key of the section's mapping
    for section, keys in flat.items():
        body = layer.get(section)
        if not isinstance(body, LMap):
            body = _lmap(where.get(keys[0][1]))
        for field, key in keys:
            _set(body, field, values[key], where.get(key))
        _set(layer, section, body, layer.key_lines.get(section, body.line))
    ssh = layer.get("ssh")
    if not isinstance(ssh, LMap):
        ssh = _lmap(where.get("ansible_host") or host_where)
    done: set[str] = set()
    for var, fld in ANSIBLE_SSH_VARS.items():  # the current name of each variable comes first and wins
        if var not in values or fld in done:
            continue
        done.add(fld)
        value, vline = values[var], where.get(var)
        if fld == "port" and isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if (
            fld == "sudo"
            and isinstance(value, str)
            and value.lower() in ("yes", "no", "true", "false", "on", "off", "1", "0")
        ):
            value = value.lower() in ("yes", "true", "on", "1")
        if fld in ("address", "user") and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        _set(ssh, fld, value, vline)
    if "address" not in ssh:
        _set(ssh, "address", host, ssh.line)  # Ansible connects to the inventory name without ansible_host
    _set(layer, "ssh", ssh, ssh.line)
    return layer, plain


def _as_lmap(value: dict, where) -> LMap:
    """A section mapping whose key lines are file:line strings (the file the mapping was written in)."""
    m = _lmap(where)
    file = where.rpartition(":")[0] if isinstance(where, str) else None
    for k, v in value.items():
        kline = value.line_of(k) if isinstance(value, LMap) else None
        _set(m, k, v, f"{file}:{kline}" if file and kline else where)
    return m


def _lmap(line) -> LMap:
    m = LMap()
    m.line, m.key_lines = line, {}
    return m


def _set(m: LMap, key, value, line):
    m[key] = value
    m.key_lines[key] = line
