"""YAML loading that remembers where every value came from.

PyYAML's composer gives each node a start mark; we build plain dict/list/scalars but return mappings as
``LMap`` (a dict that also knows the line of every key) and sequences as ``LSeq``. Duplicate keys, which
PyYAML silently overwrites, are an error here. Tags other than the standard ones (e.g. Ansible's ``!vault``)
are reported with their line instead of crashing.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from ..errors import InventoryError


class LMap(dict):
    """A mapping whose keys remember their line (1-based): ``m.line_of(key)``; ``m.line`` is its own line."""

    line: int = 0
    key_lines: dict

    def line_of(self, key) -> int:
        return self.key_lines.get(key, self.line)


class LSeq(list):
    line: int = 0
    item_lines: list

    def line_of(self, index: int) -> int:
        return self.item_lines[index] if index < len(self.item_lines) else self.line


class _Loader(yaml.SafeLoader):
    pass


def _construct(node: yaml.Node, where: str):
    line = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        m = LMap()
        m.line = line
        m.key_lines = {}
        loader = _Loader("")
        loader.flatten_mapping(node)
        for knode, vnode in node.value:
            key = _construct(knode, where)
            if isinstance(key, (dict, list)):
                raise InventoryError("a mapping key must be a plain name, not a structure",
                                     f"{where}:{knode.start_mark.line + 1}", "write `name: value`")
            if key in m:
                raise InventoryError(f"duplicate key '{key}' (first defined on line {m.key_lines[key]})",
                                     f"{where}:{knode.start_mark.line + 1}",
                                     "remove or rename one of the two entries")
            m[key] = _construct(vnode, where)
            m.key_lines[key] = knode.start_mark.line + 1
        return m
    if isinstance(node, yaml.SequenceNode):
        s = LSeq(_construct(n, where) for n in node.value)
        s.line = line
        s.item_lines = [n.start_mark.line + 1 for n in node.value]
        return s
    tag = node.tag
    if tag.startswith("tag:yaml.org,2002:"):
        kind = tag.rsplit(":", 1)[1]
        if kind in ("str", "int", "float", "bool", "null", "timestamp"):
            value = _Loader("").construct_object(node, deep=True) if kind != "str" else node.value
            if kind == "timestamp":
                return node.value
            return value
        raise InventoryError(f"YAML tag '{tag.replace('tag:yaml.org,2002:', '!!')}' is not supported here",
                             f"{where}:{line}",
                             "use plain strings, numbers, booleans, lists and mappings")
    if tag == "!vault":
        raise InventoryError("Ansible Vault values cannot be read by numaforge", f"{where}:{line}",
                             "reference the secret instead: env:VARIABLE or file:/path/to/secret")
    raise InventoryError(f"unknown YAML tag '{tag}'", f"{where}:{line}", "remove the tag")


def load_yaml(path: str | Path):
    """Parse one YAML document with line information; every failure is an InventoryError."""
    p = Path(path)
    where = str(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InventoryError("inventory file not found", where,
                             "pass an existing file with --inventory, or create inventory/lab.yaml") from None
    except IsADirectoryError:
        raise InventoryError("inventory path is a directory", where, "pass a YAML file with --inventory") from None
    except UnicodeDecodeError as exc:
        raise InventoryError(f"file is not UTF-8 text (byte {exc.start})", where,
                             "save the inventory as UTF-8 YAML") from None
    except OSError as exc:
        raise InventoryError(f"cannot read inventory: {exc.strerror}", where, "check the path and permissions") from None
    return parse_yaml(text, where)


def parse_yaml(text: str, where: str):
    """Parse YAML text already read from `where` (a file name, for messages)."""
    try:
        nodes = list(yaml.compose_all(text, Loader=_Loader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark else ""
        problem = exc.problem or exc.context or "invalid YAML"
        raise InventoryError(f"YAML syntax error: {problem}", f"{where}{line}",
                             "fix the YAML at that line (indent with spaces, quote values containing ': ' or '#')") from None
    except yaml.YAMLError as exc:
        raise InventoryError(f"YAML error: {exc}", where, "fix the YAML syntax") from None
    except RecursionError:
        raise InventoryError("YAML nesting is too deep", where, "flatten the structure") from None
    if not nodes or nodes[0] is None:
        raise InventoryError("inventory file is empty", where, "add a `hosts:` mapping (see docs/inventory.md)")
    if len(nodes) > 1:
        raise InventoryError("inventory holds more than one YAML document",
                             f"{where}:{nodes[1].start_mark.line + 1}", "keep one document per file (remove '---')")
    try:
        return _construct(nodes[0], where)
    except RecursionError:
        raise InventoryError("YAML nesting is too deep (or a recursive alias)", where, "flatten the structure") from None
    except yaml.YAMLError as exc:
        raise InventoryError(f"YAML error: {exc}", where, "fix the YAML syntax") from None
