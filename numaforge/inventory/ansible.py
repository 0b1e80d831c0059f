"""Ansible inventories as Ansible reads them: YAML and INI sources, group_vars/ and host_vars/ beside the
source, host ranges, groups in any order, and the variable precedence of Ansible's variable manager.

Semantics follow Ansible's documentation ("How to build your inventory", "Variable precedence: where should I
put a variable?", docs.ansible.com) and are checked against `ansible-inventory --list` by
tests/inventory/test_ansible_conformance.py; no Ansible code is used here. In short:

- every top-level key of a YAML inventory is a group; a group may appear any number of times (as a top-level
  key or as a child) and each appearance adds hosts, children and vars; a host listed in several places is one
  host whose vars are the union (a later definition of the same variable wins);
- INI: `[group]`, `[group:vars]`, `[group:children]`; a child section may name a group defined further down;
  values are Python literals where they parse as one (`port=22` is 22), else strings;
- `host[01:10]`, `host[a:f]`, `host[1:10:2]` expand; `host:2222` sets ansible_port;
- groups without a parent are children of `all`; hosts in no group are in `ungrouped`;
- a host's variables, lowest first: `all` vars from the inventory -> its other groups' inventory vars (by depth,
  then ansible_group_priority, then name) -> group_vars/all -> group_vars/<group> (same order) -> the host's
  inventory vars -> host_vars/<host>. A higher layer replaces a whole variable (no dict merge), as Ansible does
  by default.
"""

from __future__ import annotations

import ast
import difflib
import os
import re
import shlex
import string
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import yamlsrc
from ..errors import InventoryError
from .graph import members, nesting_depths
from .yamlsrc import LMap, LSeq, parse_yaml

MAX_INVENTORY_BYTES = yamlsrc.MAX_BYTES  # one inventory or vars file (the YAML reader's own limit)
MAX_RANGE_HOSTS = 100_000  # hosts one `name[a:b]` pattern may expand to
VARS_EXTENSIONS = (".yml", ".yaml", ".json")
INTERNAL = ("all", "ungrouped")
GROUP_KEYS = ("hosts", "children", "vars")

_SECTION_RE = re.compile(r"^\[([^:\]\s]+)(?::(\w+))?\]\s*(?:#.*)?$")
_GROUPNAME_RE = re.compile(r"^([^:\]\s]+)\s*(?:#.*)?$")
_HOST_PORT_RE = re.compile(r"^((?:[^:\[\]]|\[[^\]]*\])+):(\d+)$")
_IPV6_PORT_RE = re.compile(r"^\[([0-9a-fA-F:.]+)\](?::(\d+))?$")


@dataclass
class AGroup:
    name: str
    where: str
    vars: dict[str, Any] = field(default_factory=dict)
    var_where: dict[str, str] = field(default_factory=dict)
    hosts: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    priority: int = 1


@dataclass
class AHost:
    name: str
    where: str
    vars: dict[str, Any] = field(default_factory=dict)
    var_where: dict[str, str] = field(default_factory=dict)
    groups: list[str] = field(default_factory=list)  # direct groups, in the order the host was added


@dataclass
class AnsibleInventory:
    """The inventory as Ansible's inventory manager holds it, plus where every variable came from."""

    path: str
    groups: dict[str, AGroup] = field(default_factory=dict)
    hosts: dict[str, AHost] = field(default_factory=dict)
    depth: dict[str, int] = field(default_factory=dict)  # set by reconcile()
    parents: dict[str, list[str]] = field(default_factory=dict)  # set by reconcile()
    group_files: dict[str, list[tuple[LMap, str]]] = field(default_factory=dict)  # group_vars/ contents
    host_files: dict[str, list[tuple[LMap, str]]] = field(default_factory=dict)  # host_vars/ contents

    # ------------------------------------------------------------------------------------------ building
    def add_group(self, name: str, where: str) -> AGroup:
        if not isinstance(name, str) or not name:
            raise InventoryError(f"group name {name!r} is not valid", where, "use a non-empty string name")
        if name not in self.groups:
            self.groups[name] = AGroup(name, where)
        return self.groups[name]

    def add_host(self, name: str, group: str | None, where: str, port: int | None = None) -> AHost:
        if name not in self.hosts:
            self.hosts[name] = AHost(name, where)
            if port is not None:
                self.set_var(name, "ansible_port", port, where, host=True)
        h = self.hosts[name]
        if group and group not in h.groups:  # (a host's own group list is short; a group's may be 10^5)
            self.groups[group].hosts.append(name)
            h.groups.append(group)
        return h

    def set_var(self, entity: str, key, value, where: str, host: bool) -> None:
        if not isinstance(key, str):
            raise InventoryError(f"variable name {key!r} must be a string", where, "quote the name")
        obj: AHost | AGroup = self.hosts[entity] if host else self.groups[entity]
        if not host and key == "ansible_group_priority":
            try:
                obj.priority = int(value)  # type: ignore[union-attr]
            except (TypeError, ValueError):
                raise InventoryError(
                    f"ansible_group_priority {value!r} of group '{entity}' is not an integer",
                    where,
                    "write a whole number, e.g. ansible_group_priority: 10",
                ) from None
            return
        obj.vars[key] = value
        obj.var_where[key] = where

    def add_child(self, parent: str, child: str) -> None:
        if parent == child:
            raise InventoryError(
                f"group '{parent}' lists itself as a child",
                self.groups[parent].where,
                "remove the group from its own children",
            )
        if child not in self.groups[parent].children:
            self.groups[parent].children.append(child)

    def reconcile(self) -> None:
        """Ansible's rules after parsing: parentless groups under `all`, groupless hosts in `ungrouped`."""
        self.add_group("all", self.path)
        self.add_group("ungrouped", self.path)
        has_parent = {c for g in self.groups.values() for c in g.children}
        for name in list(self.groups):
            if name != "all" and name not in has_parent:
                self.add_child("all", name)
        ungrouped = self.groups["ungrouped"]
        for h in self.hosts.values():
            real = [g for g in h.groups if g not in INTERNAL]
            if real and "ungrouped" in h.groups:
                ungrouped.hosts.remove(h.name)
                h.groups.remove("ungrouped")
            elif not real and "ungrouped" not in h.groups:
                self.add_host(h.name, "ungrouped", h.where)
        self.parents = {}
        for g in self.groups.values():
            for c in g.children:
                self.parents.setdefault(c, []).append(g.name)
        self.depth = nesting_depths(
            {g.name: g.children for g in self.groups.values()},
            {g.name: g.where for g in self.groups.values()},
            root="all",
        )

    # ------------------------------------------------------------------------------------------ queries
    def host_groups(self, host: str) -> list[str]:
        """Every group the host is in (ancestors included, `all` included), in Ansible's var order."""
        parents = self.parents
        seen: set[str] = set()
        todo = list(self.hosts[host].groups)
        while todo:
            g = todo.pop()
            if g not in seen:
                seen.add(g)
                todo.extend(parents.get(g, []))
        return sorted(seen, key=lambda g: (self.depth[g], self.groups[g].priority, g))

    def group_hosts(self, name: str) -> list[str]:
        """Hosts of a group and of every group below it: the group's own first, then its children's."""
        return members(
            {g.name: g.children for g in self.groups.values()}, {g.name: g.hosts for g in self.groups.values()}, name
        )

    def resolve(self, host: str) -> tuple[dict[str, Any], dict[str, str]]:
        """The host's variables as Ansible resolves them, and where each value was set (file:line)."""
        values: dict[str, Any] = {}
        where: dict[str, str] = {}

        def layer(vs: dict, ws: dict | str) -> None:
            for k, v in vs.items():
                values[k] = v
                where[k] = ws if isinstance(ws, str) else ws.get(k, "")

        groups = self.host_groups(host)
        others = [g for g in groups if g != "all"]
        layer(self.groups["all"].vars, self.groups["all"].var_where)
        for g in others:
            layer(self.groups[g].vars, self.groups[g].var_where)
        for g in ["all"] + others:
            for data, fname in self.group_files.get(g, []):
                layer(data, {k: f"{fname}:{data.line_of(k)}" for k in data})
        h = self.hosts[host]
        layer(h.vars, h.var_where)
        for data, fname in self.host_files.get(host, []):
            layer(data, {k: f"{fname}:{data.line_of(k)}" for k in data})
        return values, where


# ---------------------------------------------------------------------------------------------- reading


def read_regular(path: str | Path, what: str = "inventory file", limit: int = MAX_INVENTORY_BYTES) -> str:
    """The UTF-8 text of a regular file of at most `limit` bytes (numaforge.yamlsrc.read_limited: no devices,
    FIFOs or oversized files, refused before a byte is read); a directory gets a hint at the file inside."""
    if os.path.isdir(path):
        raise InventoryError(f"{what} path is a directory", str(path), _dir_fix(path, what))
    return yamlsrc.read_limited(
        path,
        error=InventoryError,
        what=what,
        max_bytes=limit,
        fix_missing="check the path"
        if what != "inventory file"
        else "pass an existing file with --inventory, or create inventory/lab.yaml",
    )


def _dir_fix(path, what) -> str:
    if what != "inventory file":
        return f"pass a {what} file"
    try:
        names = sorted(p.name for p in Path(path).iterdir() if p.is_file() and not p.name.startswith("."))[:5]
    except OSError:
        names = []
    hint = f" (this directory holds: {', '.join(names)})" if names else ""
    return f"pass the inventory file inside it with --inventory, e.g. {Path(path) / 'hosts'}{hint}"


def is_ini(path: str, text: str) -> bool:
    """INI by extension, YAML by extension; otherwise by the first meaningful line, as people write them."""
    suffix = Path(path).suffix.lower()
    if suffix in (".yml", ".yaml", ".json"):
        return False
    if suffix in (".ini", ".cfg"):
        return True
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;" or line == "---":
            continue
        if _SECTION_RE.match(line):
            return True
        return not (line.endswith(":") or ": " in line or line.startswith(("{", "-")))
    return False


def load(path: str, text: str, yaml_doc: LMap | None) -> AnsibleInventory:
    """Build the Ansible view of an inventory file (YAML document already parsed, or INI text)."""
    inv = AnsibleInventory(path=path)
    inv.add_group("all", path)  # both exist before parsing, as in Ansible: [all:vars] is valid
    inv.add_group("ungrouped", path)
    if yaml_doc is None:
        _parse_ini(inv, path, text)
    else:
        _parse_yaml(inv, path, yaml_doc)
    inv.reconcile()
    _load_vars_dirs(inv, Path(path).resolve().parent)
    return inv


# ---------------------------------------------------------------------------------------------- YAML


def _parse_yaml(inv: AnsibleInventory, path: str, doc: LMap) -> None:
    at = lambda line: f"{path}:{line}"
    if "plugin" in doc:
        raise InventoryError(
            "this is an Ansible inventory plugin configuration, not an inventory",
            at(doc.line_of("plugin")),
            "dump it with `ansible-inventory -i FILE --list -y > static.yaml` and pass that file",
        )

    def group(name, body, line: int) -> str:
        where = at(line)
        if not isinstance(name, str):
            raise InventoryError(f"group name {name!r} must be a string", where, "quote the name")
        _check_name(name, where, "group")
        if body is not None and not isinstance(body, LMap):
            raise InventoryError(
                f"Ansible group '{name}' must be a mapping (hosts:/children:/vars:), got a {_kind(body)}",
                where,
                "indent its hosts:, children: and vars: under it",
            )
        inv.add_group(name, where)
        gbody: LMap = body if body is not None else LMap()
        for key, value in gbody.items():
            kline = gbody.line_of(key)
            if key not in ("hosts", "children", "vars"):
                close = difflib.get_close_matches(str(key), GROUP_KEYS, n=1)
                raise InventoryError(
                    f"unknown key '{key}' in Ansible group '{name}'",
                    at(kline),
                    (f"did you mean '{close[0]}'? " if close else "")
                    + "(allowed: hosts, children, vars; a group's variables go under vars:)",
                )
            if isinstance(value, str):
                value = _lmap({value: None}, kline)
            if value is None:
                continue
            if not isinstance(value, LMap):
                raise InventoryError(
                    f"Ansible group '{name}' {key} must be a mapping, got a {_kind(value)}",
                    at(kline),
                    f"write `{key}:` as indented `name:` entries",
                )
            if key == "vars":
                for var in value:
                    inv.set_var(name, var, value[var], at(value.line_of(var)), host=False)
            elif key == "children":
                for child in value:
                    group(child, value[child], value.line_of(child))
                    inv.add_child(name, child)
            else:
                for pattern in value:
                    pline = value.line_of(pattern)
                    hvars = value[pattern]
                    if hvars is not None and not isinstance(hvars, LMap):
                        raise InventoryError(
                            f"vars of host '{pattern}' must be a mapping, got a {_kind(hvars)}",
                            at(pline),
                            "write `host: {var: value}` or leave it empty",
                        )
                    names, port = expand_host_pattern(pattern, at(pline))
                    for hname in names:
                        inv.add_host(hname, name, at(pline), port)
                        hv: LMap = hvars if hvars is not None else LMap()
                        for var in hv:
                            inv.set_var(hname, var, hv[var], at(hv.line_of(var)), host=True)
        return name

    for key in doc:
        group(key, doc[key], doc.line_of(key))


def _lmap(d: dict, line: int) -> LMap:
    m = LMap(d)
    m.line, m.key_lines = line, {k: line for k in d}
    return m


def _kind(v) -> str:
    return {LMap: "mapping", LSeq: "list", bool: "boolean", int: "number", float: "number", str: "string"}.get(
        type(v), type(v).__name__
    )


# ---------------------------------------------------------------------------------------------- INI


def _parse_ini(inv: AnsibleInventory, path: str, text: str) -> None:
    pending: dict[str, dict] = {}  # groups named before their own section: {state, line, parents}
    group, state = "ungrouped", "hosts"
    for n, raw in enumerate(text.splitlines(), 1):
        where = f"{path}:{n}"
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        m = _SECTION_RE.match(line)
        if m:
            group, state = m.group(1), m.group(2) or "hosts"
            if state not in ("hosts", "children", "vars"):
                raise InventoryError(
                    f"section [{group}:{state}] has an unknown type '{state}'",
                    where,
                    "use [group], [group:vars] or [group:children]",
                )
            _check_name(group, where, "group")
            if group not in inv.groups:
                if state == "vars" and group not in pending:
                    pending[group] = {"state": "vars", "line": where, "parents": []}
                inv.add_group(group, where)
            if group in pending and state != "vars":
                if pending[group]["state"] == "children":
                    _adopt(inv, group, pending)
                else:
                    del pending[group]
            continue
        if line.startswith("[") and line.endswith("]"):
            raise InventoryError(
                f"invalid section header {line!r}",
                where,
                "write [group], [group:vars] or [group:children] with no spaces inside the brackets",
            )
        if state == "hosts":
            try:
                tokens = shlex.split(line, comments=True)
            except ValueError as exc:
                raise InventoryError(f"cannot parse the host line: {exc}", where, "balance the quotes") from None
            if not tokens:
                continue
            if tokens[0].strip().endswith(":") or tokens[0].strip() == "---":
                raise InventoryError(
                    f"invalid host pattern {tokens[0]!r}",
                    where,
                    "a trailing ':' needs a port; a '---' line means this file is YAML: name it .yaml",
                )
            names, port = expand_host_pattern(tokens[0], where)
            hvars = {}
            for tok in tokens[1:]:
                if "=" not in tok:
                    raise InventoryError(
                        f"expected key=value after the host name, got {tok!r}",
                        where,
                        "write host vars as name=value (quote values containing spaces)",
                    )
                k, v = tok.split("=", 1)
                hvars[k] = ini_value(v)
            for hname in names:
                inv.add_host(hname, group, where, port)
                for k, v in hvars.items():
                    inv.set_var(hname, k, v, where, host=True)
        elif state == "vars":
            if "=" not in line:
                raise InventoryError(f"expected key=value in [{group}:vars], got {line!r}", where, "write name=value")
            k, v = (e.strip() for e in line.split("=", 1))
            inv.set_var(group, k, ini_value(v), where, host=False)
        else:
            m = _GROUPNAME_RE.match(line)
            if not m:
                raise InventoryError(
                    f"expected a group name in [{group}:children], got {line!r}", where, "list one group name per line"
                )
            child = m.group(1)
            if child in inv.groups:
                inv.add_child(group, child)
            elif child in pending:
                pending[child]["parents"].append(group)
            else:
                pending[child] = {"state": "children", "line": where, "parents": [group]}
    for name, decl in pending.items():
        if decl["state"] == "vars":
            raise InventoryError(
                f"section [{name}:vars] is for a group that is never defined",
                decl["line"],
                f"add a [{name}] or [{name}:children] section, or remove the vars",
            )
        raise InventoryError(
            f"[{decl['parents'][-1]}:children] names group '{name}', which is never defined",
            decl["line"],
            f"add a [{name}] section (it may come later in the file)",
        )


def _adopt(inv: AnsibleInventory, group: str, pending: dict) -> None:
    todo = [group]
    while todo:
        g = todo.pop()
        decl = pending.pop(g, None)
        if decl is None:
            continue
        for parent in decl["parents"]:
            inv.add_child(parent, g)
            if parent in pending and pending[parent]["state"] == "children":
                todo.append(parent)


def ini_value(text: str):
    """An INI value as Ansible reads it: a Python literal when it is one, otherwise the text."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text
    return _plain(value)


def _plain(value):
    if isinstance(value, (list, tuple, set)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if value is ...:
        return "..."
    if isinstance(value, complex):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return value


# ---------------------------------------------------------------------------------------------- hosts


def expand_host_pattern(pattern, where: str) -> tuple[list[str], int | None]:
    """`name`, `name:port`, `[v6addr]:port`, and ranges `db[01:10]`, `x[a:f]`, `n[1:9:2]` -> names, port."""
    if not isinstance(pattern, str):
        raise InventoryError(f"host name {pattern!r} must be a string", where, 'quote it, e.g. "10"')
    port = None
    name = pattern.strip()
    m6 = _IPV6_PORT_RE.match(name)
    m = _HOST_PORT_RE.match(name)
    if m6:
        name, port = m6.group(1), int(m6.group(2)) if m6.group(2) else None
        return [name], port
    if m:
        name, port = m.group(1), int(m.group(2))
    if "[" not in name:
        _check_name(name, where, "host")
        return [name], port
    names = _expand_ranges(name, where)
    for n in names:
        _check_name(n, where, "host")
    return names, port


def _expand_ranges(name: str, where: str) -> list[str]:
    out: list[str] = []
    todo = [name]
    while todo:
        item = todo.pop(0)
        if "[" not in item:
            out.append(item)
            continue
        head, _, rest = item.partition("[")
        body, close, tail = rest.partition("]")
        if not close:
            raise InventoryError(f"host range in {name!r} has no closing ']'", where, "write name[01:10]")
        bounds = body.split(":")
        if len(bounds) not in (2, 3):
            raise InventoryError(
                f"host range [{body}] in {name!r} must be begin:end or begin:end:step",
                where,
                "write e.g. gpu[01:10] or gpu[1:10:2]",
            )
        beg, end = bounds[0] or "0", bounds[1]
        step_text = bounds[2] if len(bounds) == 3 else "1"
        if not end:
            raise InventoryError(f"host range [{body}] in {name!r} has no end", where, "write begin:end")
        try:
            step = int(step_text)
        except ValueError:
            raise InventoryError(
                f"host range step {step_text!r} in {name!r} is not a number",
                where,
                "write begin:end:step with a whole-number step",
            ) from None
        if step < 1:
            raise InventoryError(f"host range step {step} in {name!r} must be at least 1", where, "use a positive step")
        width = len(beg) if beg[0] == "0" and len(beg) > 1 else 0
        if width and len(end) != width:
            raise InventoryError(
                f"host range [{body}] in {name!r}: zero-padded begin and end must have the same width",
                where,
                f"write e.g. [{beg}:{end.zfill(width)}]",
            )
        letters = string.ascii_letters
        if beg in letters and end in letters and len(beg) == 1 and len(end) == 1:
            if letters.index(beg) > letters.index(end):
                raise InventoryError(f"host range [{body}] in {name!r} has begin after end", where, "swap them")
            seq: list[str] = list(letters[letters.index(beg) : letters.index(end) + 1 : step])
        else:
            try:
                b, e = int(beg), int(end)
            except ValueError:
                raise InventoryError(
                    f"host range [{body}] in {name!r} is neither numeric nor a letter range",
                    where,
                    "write e.g. [01:10] or [a:f]",
                ) from None
            if (e - b) // step + 1 + len(out) + len(todo) > MAX_RANGE_HOSTS:
                raise InventoryError(
                    f"host range [{body}] in {name!r} expands to more than {MAX_RANGE_HOSTS} hosts",
                    where,
                    "check the bounds; split very large fleets into several patterns",
                )
            seq = [str(i).zfill(width) if width else str(i) for i in range(b, e + 1, step)]
        todo = [f"{head}{s}{tail}" for s in seq] + todo
        if len(out) + len(todo) > MAX_RANGE_HOSTS:
            raise InventoryError(
                f"host pattern {name!r} expands to more than {MAX_RANGE_HOSTS} hosts", where, "check the bounds"
            )
    return out


HOST_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]*$")


def _check_name(name: str, where: str, kind: str) -> None:
    if not isinstance(name, str) or not HOST_NAME_RE.match(name):
        raise InventoryError(
            f"{kind} name {name!r} is not valid",
            where,
            "use letters, digits, '.', '_', ':' and '-' (quote numeric names)",
        )


# ---------------------------------------------------------------------------------------------- vars dirs


def _load_vars_dirs(inv: AnsibleInventory, base: Path) -> None:
    for sub, names, target in (
        ("group_vars", list(inv.groups), inv.group_files),
        ("host_vars", list(inv.hosts), inv.host_files),
    ):
        d = base / sub
        if not d.is_dir():
            continue
        for name in names:
            files = vars_files(d, name)
            loaded = []
            for f in files:
                data = _load_vars_file(f)
                if data:
                    loaded.append((data, str(f)))
            if loaded:
                target[name] = loaded


def vars_files(directory: Path, name: str) -> list[Path]:
    """group_vars/NAME, NAME.yml, NAME.yaml, NAME.json (first that exists), or every file under NAME/ sorted."""
    for ext in ("",) + VARS_EXTENSIONS:
        p = directory / f"{name}{ext}"
        if p.is_dir():
            return _dir_files(p)
        if p.exists():
            return [p]
    return []


def _dir_files(d: Path) -> list[Path]:
    out: list[Path] = []
    for child in sorted(d.iterdir(), key=lambda p: p.name):
        if child.name.startswith(".") or child.name.endswith("~"):
            continue
        if child.is_dir() and not child.suffix:
            out.extend(_dir_files(child))
        elif child.is_file() and (not child.suffix or child.suffix in VARS_EXTENSIONS):
            out.append(child)
    return out


def _load_vars_file(path: Path) -> LMap | None:
    text = read_regular(path, "vars file")
    if text.startswith("$ANSIBLE_VAULT"):
        raise InventoryError(
            "Ansible Vault files cannot be read by numaforge",
            str(path),
            "reference secrets instead: env:VARIABLE or file:/path/to/secret",
        )
    doc = yamlsrc.parse(text, str(path), error=InventoryError)
    if doc is None:
        return None  # Ansible ignores an empty vars file
    if not isinstance(doc, LMap):
        raise InventoryError(
            f"a vars file must hold a mapping of variables, got a {_kind(doc)}",
            f"{path}:{getattr(doc, 'line', 1)}",
            "write `name: value` lines",
        )
    for k in doc:
        if not isinstance(k, str):
            raise InventoryError(f"variable name {k!r} must be a string", f"{path}:{doc.line_of(k)}", "quote the name")
    return doc


def read(path: str | Path) -> AnsibleInventory:
    """Read an Ansible inventory file (YAML, JSON or INI, told apart as load_inventory does)."""
    path = str(path)
    text = read_regular(path)
    if is_ini(path, text):
        return load(path, text, None)
    doc = parse_yaml(text, path)
    if not isinstance(doc, LMap):
        raise InventoryError(
            f"an Ansible YAML inventory must be a mapping of groups, got a {_kind(doc)}",
            f"{path}:{getattr(doc, 'line', 1)}",
            "start with `all:`",
        )
    return load(path, text, doc)
