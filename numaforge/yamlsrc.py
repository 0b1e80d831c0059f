"""The one YAML reader: every YAML file numaforge reads (inventories, rendered profiles, vendor maps, kernel
targets, series metadata, capture metadata) goes through here.

PyYAML's composer gives each node a start mark; we build plain dict/list/scalars but return mappings as
``LMap`` (a dict that also knows the line of every key) and sequences as ``LSeq``. What PyYAML would accept
silently and this refuses, each with file:line and a fix:

* duplicate keys (PyYAML keeps the last one, so a second ``iommu: false`` silently wins);
* alias expansion beyond ``MAX_NODES`` values added by aliases (a 459-byte "billion laughs" document expands to 10^9
  values; it now fails after ``MAX_NODES`` constructions, in well under a second);
* files larger than ``MAX_BYTES``, and anything that is not a regular file (``/dev/zero``, a FIFO, a
  directory): they are refused before a byte is read;
* tags other than the standard ones (e.g. Ansible's ``!vault``).

The error class is the caller's (InventoryError, ProfileError, VendorMapError, ...) so each pipeline keeps
its exit code.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import yaml

from . import safeio
from .errors import NumaforgeError

MAX_BYTES = 4 * 1024 * 1024  # no hand-written YAML of ours comes near this
MAX_NODES = 200_000  # values aliases add to one document (copies of what is written once)


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


_COLLECTION_TAGS = ("tag:yaml.org,2002:map", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:omap")


class _Builder:
    """Node tree -> LMap/LSeq/scalars, counting every value built (aliases expand to copies)."""

    def __init__(
        self,
        error: type[NumaforgeError],
        locate: Callable[[int], str],
        max_nodes: int,
        tags: dict[str, Callable[[str, str], Any]] | None = None,
    ):
        self.tags = tags or {}
        self.error = error
        self.locate = locate
        self.max_nodes = max_nodes
        self.built = 0  # values built again through an alias
        self.seen: set[int] = set()  # the nodes of the document (the composed tree shares an alias's nodes)
        self.loader = _Loader("")

    def _count(self, node: yaml.Node) -> None:
        """Count what aliases add: a node built a second time is a copy an alias made. A document written out
        in full is bounded by MAX_BYTES (a 10,000-host inventory is about 260,000 values and was refused here as
        an alias bomb: issue 43 item 6); what an alias repeats is bounded by ``max_nodes``."""
        key = id(node)
        if key not in self.seen:
            self.seen.add(key)
            return
        self.built += 1
        if self.built > self.max_nodes:
            raise self.error(
                f"YAML expands to more than {self.max_nodes} values through aliases, beyond those written out "
                "(aliases '*name' repeat whole structures; nested aliases multiply)",
                self.locate(node.start_mark.line + 1),
                "write the values out instead of nesting aliases (this limit stops 'billion laughs' documents)",
            )

    def build(self, node: yaml.Node):
        self._count(node)
        line = node.start_mark.line + 1
        if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and node.tag not in _COLLECTION_TAGS:
            raise self.error(
                f"YAML tag '{node.tag.replace('tag:yaml.org,2002:', '!!')}' is not supported here",
                self.locate(line),
                "use plain strings, numbers, booleans, lists and mappings",
            )
        if isinstance(node, yaml.MappingNode):
            m = LMap()
            m.line = line
            m.key_lines = {}
            self.loader.flatten_mapping(node)
            for knode, vnode in node.value:
                key = self.build(knode)
                kline = knode.start_mark.line + 1
                if isinstance(key, (dict, list)):
                    raise self.error(
                        "a mapping key must be a plain name, not a structure", self.locate(kline), "write `name: value`"
                    )
                if key in m:
                    raise self.error(
                        f"duplicate key '{key}' (first defined on line {m.key_lines[key]})",
                        self.locate(kline),
                        "remove or rename one of the two entries",
                    )
                m[key] = self.build(vnode)
                m.key_lines[key] = kline
            return m
        if isinstance(node, yaml.SequenceNode):
            s = LSeq(self.build(n) for n in node.value)
            s.line = line
            s.item_lines = [n.start_mark.line + 1 for n in node.value]
            return s
        tag = node.tag
        if tag.startswith("tag:yaml.org,2002:"):
            kind = tag.rsplit(":", 1)[1]
            if kind == "str" or kind == "timestamp":
                return node.value
            if kind in ("int", "float", "bool", "null"):
                return self.loader.construct_object(node, deep=True)
            raise self.error(
                f"YAML tag '{tag.replace('tag:yaml.org,2002:', '!!')}' is not supported here",
                self.locate(line),
                "use plain strings, numbers, booleans, lists and mappings",
            )
        if tag in self.tags:  # a caller's own scalar tag (the inventory's !vault): built from the text and where
            return self.tags[tag](node.value, self.locate(line))
        if tag == "!vault":
            raise self.error(
                "Ansible Vault values cannot be read by numaforge",
                self.locate(line),
                "reference the secret instead: env:VARIABLE or file:/path/to/secret",
            )
        raise self.error(f"unknown YAML tag '{tag}'", self.locate(line), "remove the tag")


def read_limited(
    path: str | os.PathLike,
    *,
    error: type[NumaforgeError] = NumaforgeError,
    what: str = "file",
    max_bytes: int = MAX_BYTES,
    fix_missing: str = "check the path",
) -> str:
    """The UTF-8 text of a regular file of at most ``max_bytes`` bytes; anything else is ``error``
    (numaforge.safeio.read_input, the one checked reader)."""
    where = str(path)
    data = safeio.read_input(
        path,
        what=what,
        error=error,
        max_bytes=max_bytes,
        fix_missing=fix_missing,
        fix_kind="pass a regular YAML file",
        fix_dir="pass a YAML file, not a directory",
        fix_size="this is not a hand-written YAML file; check the path",
    )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"file is not UTF-8 text (byte {exc.start})", where, "save it as UTF-8 YAML") from None


def parse(
    text: str,
    where: str,
    *,
    error: type[NumaforgeError] = NumaforgeError,
    locate: Callable[[int], str] | None = None,
    max_nodes: int = MAX_NODES,
    empty=None,
    syntax: str = "YAML syntax error",
    tags: dict[str, Callable[[str, str], Any]] | None = None,
):
    """Parse one YAML document (a string) into LMap/LSeq/scalars; every failure is ``error``.
    ``tags`` maps a scalar tag (``!vault``) to what builds its value from (text, where); other tags are refused.

    ``locate(line)`` turns a 1-based line into the "where" of a message (default ``where:line``).
    An empty document returns ``empty``; more than one document is an error.
    """
    locate = locate or (lambda line: f"{where}:{line}")
    if len(text) > MAX_BYTES:
        raise error(
            f"YAML text is {len(text)} characters, more than the {MAX_BYTES} limit",
            where,
            "this is not hand-written YAML; check where it comes from",
        )
    try:
        nodes = list(yaml.compose_all(text, Loader=_Loader))
    except yaml.MarkedYAMLError as exc:
        # where the bad construct began (an unclosed '[' ...) names the line to fix better than the stream end
        ended = exc.problem_mark is None or exc.problem_mark.index >= len(text)
        mark = (exc.context_mark or exc.problem_mark) if ended else (exc.problem_mark or exc.context_mark)
        problem = exc.problem or exc.context or "invalid YAML"
        raise error(
            f"{syntax}: {problem}",
            locate(mark.line + 1) if mark else where,
            "fix the YAML at that line (indent with spaces, quote values containing ': ' or '#')",
        ) from None
    except yaml.YAMLError as exc:
        raise error(f"YAML error: {exc}", where, "fix the YAML syntax") from None
    except RecursionError:
        raise error("YAML nesting is too deep", where, "flatten the structure") from None
    if not nodes or nodes[0] is None:
        return empty
    if len(nodes) > 1:
        raise error(
            "more than one YAML document",
            locate(nodes[1].start_mark.line + 1),
            "keep one document per file (remove '---')",
        )
    try:
        return _Builder(error, locate, max_nodes, tags).build(nodes[0])
    except RecursionError:
        raise error("YAML nesting is too deep (or a recursive alias)", where, "flatten the structure") from None
    except yaml.YAMLError as exc:
        raise error(f"YAML error: {exc}", where, "fix the YAML syntax") from None


def load(
    path: str | os.PathLike,
    *,
    error: type[NumaforgeError] = NumaforgeError,
    what: str = "YAML file",
    empty=None,
    fix_missing: str = "check the path",
    max_bytes: int = MAX_BYTES,
    syntax: str = "YAML syntax error",
):
    """read_limited() + parse(): one YAML file, with file:line in every error."""
    text = read_limited(path, error=error, what=what, max_bytes=max_bytes, fix_missing=fix_missing)
    return parse(text, str(Path(path)), error=error, empty=empty, syntax=syntax)


def plain(obj):
    """LMap/LSeq -> plain dict/list (for code that dumps or compares types exactly)."""
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [plain(v) for v in obj]
    return obj
