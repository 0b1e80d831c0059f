"""Host patterns as Ansible's --limit reads them (docs.ansible.com, "Patterns: targeting hosts and groups").

`limit_hosts(hosts, groups, pattern)` is pure: `hosts` is every host name in inventory order, `groups` maps each
group name (`all` and `ungrouped` included) to its hosts, nested groups included. A pattern is a list separated
by commas (or, without commas, by colons outside brackets, the legacy form):

- `name` a host or a group; `*`, `?`, `[...]` globs match group and host names; `~regex` matches from the start;
- `group[0]`, `group[1:3]`, `group[-1]` pick hosts of a group by position;
- `&pat` keeps only hosts also matched by pat; `!pat` removes hosts matched by pat; with only `&`/`!` parts the
  base is `all`; regular parts are applied first, then `&`, then `!` (whatever their order in the pattern);
- `@file` reads one pattern per line from a file.

Nothing here touches an inventory object; numaforge.inventory.model.Inventory.select and the CLI call it.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from ..errors import InventoryError, SelectionError
from ..program import prog
from .hostranges import expand_host_pattern

_SUBSCRIPT_RE = re.compile(r"^(.+)\[(?:(-?[0-9]+)|([0-9]+)([:-])([0-9]*))\]$")
_LEGACY_SPLIT_RE = re.compile(r"(?:[^\s:\[\]]|\[[^\]]*\])+")
_SINGLE_RE = re.compile(r"^(?:(?:[^:\[\]]|\[[^\]]*\])+(?::\d+)?|\[[0-9a-fA-F:.]+\](?::\d+)?|[0-9a-fA-F:.]+)$")
_RANGE_DASH_RE = re.compile(r"\[([0-9]+)[-:]([0-9]+)\]")
MAX_LIMIT_FILE_BYTES = 1024 * 1024


def split_patterns(pattern: str | Sequence[str]) -> list[str]:
    """'a,b[1], c[2:3] , d' -> ['a', 'b[1]', 'c[2:3]', 'd']; 'web:!db' -> ['web', '!db'] (legacy colons)."""
    if not isinstance(pattern, str):
        return [p for item in pattern for p in split_patterns(item)]
    if "," in pattern:
        parts = pattern.split(",")
    elif _SINGLE_RE.match(pattern.strip()):
        parts = [pattern]
    else:
        parts = _LEGACY_SPLIT_RE.findall(pattern)
    return [p.strip() for p in parts if p.strip()]


def expand_files(parts: Iterable[str], base: Path | None = None) -> list[str]:
    """Replace each `@file` by the lines of that file (one pattern per line, blank lines dropped)."""
    out: list[str] = []
    for p in parts:
        if not p.startswith("@"):
            out.append(p)
            continue
        path = Path(p[1:])
        if base is not None and not path.is_absolute() and not path.exists():
            path = base / path
        if not path.exists():
            raise SelectionError(f"limit file {p[1:]} not found", p, "write @PATH to an existing file of host names")
        if not path.is_file():
            raise SelectionError(
                f"limit file {p[1:]} is not a regular file", p, "write @PATH to a file, one name a line"
            )
        if path.stat().st_size > MAX_LIMIT_FILE_BYTES:
            raise SelectionError(
                f"limit file {p[1:]} is larger than {MAX_LIMIT_FILE_BYTES} bytes",
                p,
                "list host names or patterns, one a line",
            )
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SelectionError(f"cannot read limit file {p[1:]}: {exc}", p, "check the file") from None
        out.extend(line.strip() for line in text.split("\n") if line.strip())
    return out


def limit_hosts(
    hosts: Sequence[str],
    groups: Mapping[str, Sequence[str]],
    pattern: str | Sequence[str],
    base: Path | None = None,
    strict: bool = True,
) -> list[str]:
    """The hosts a --limit pattern selects, in inventory order.

    strict: a plain word (no glob, regex or subscript) that names neither a host nor a group is an error with a
    did-you-mean (Ansible only warns and ignores it; a typo in a limit should not silently widen or empty a run).
    """
    parts = expand_files(split_patterns(pattern), base)
    regular = [p for p in parts if p[0] not in "!&"]
    inter = [p for p in parts if p[0] == "&"]
    exclude = [p for p in parts if p[0] == "!"]
    known = set(hosts)
    selected: dict[str, None] = {}
    for p in (regular or ["all"]) + inter + exclude:
        body = p[1:] if p[0] in "!&" else p
        if not body:
            raise SelectionError(f"empty pattern '{p}' in the limit", str(pattern), "write !NAME or &NAME")
        if p in known:
            selected[p] = None
            continue
        matched = match_one(hosts, groups, body)
        if strict and not matched and p[0] != "!" and _split_subscript(body)[1] is not None:
            raise _empty_subscript(body, hosts, groups, str(pattern))
        if strict and not matched and p[0] != "!" and _plain_word(body) and body not in groups:
            raise SelectionError(
                f"'{body}' in the limit names no host or group",
                str(pattern),
                did_you_mean(body, list(groups) + list(hosts)),
            )
        if p[0] == "!":
            drop = set(matched)
            selected = {h: None for h in selected if h not in drop}
        elif p[0] == "&":
            keep = set(matched)
            selected = {h: None for h in selected if h in keep}
        else:
            selected.update(dict.fromkeys(matched))
    order = {h: i for i, h in enumerate(hosts)}
    return sorted(selected, key=lambda h: order.get(h, len(order)))


def match_one(hosts: Sequence[str], groups: Mapping[str, Sequence[str]], pattern: str) -> list[str]:
    """Hosts of one pattern without its !/& prefix: group names first, then host names for globs/regexes."""
    expr, subscript = _split_subscript(pattern)
    try:
        rx = re.compile(expr[1:]) if expr[0] == "~" else re.compile(fnmatch.translate(expr))
    except re.error as exc:
        raise SelectionError(
            f"invalid pattern '{pattern}' in the limit: {exc}",
            pattern,
            "fix the regular expression after ~ (or quote a glob)",
        ) from None
    results: dict[str, None] = {}
    matching_groups = [g for g in groups if rx.match(g)]
    for g in matching_groups:
        results.update(dict.fromkeys(groups[g]))
    if not matching_groups or expr[0] == "~" or any(ch in expr for ch in ".?*["):
        results.update(dict.fromkeys(h for h in hosts if rx.match(h)))
    out = list(results)
    if subscript is not None and out:
        start, end = subscript
        try:
            if not end:  # [i] (and [i:0], as Ansible reads it) is one host
                out = [out[start]]
            else:
                out = out[start : (len(out) - 1 if end == -1 else end) + 1]
        except IndexError:
            raise SelectionError(
                f"no host matched the subscripted pattern '{pattern}'",
                pattern,
                f"it selects among {len(out)} hosts, counting from 0",
            ) from None
    return out


def _split_subscript(pattern: str) -> tuple[str, tuple[int, int | None] | None]:
    if pattern[0] == "~":
        return pattern, None
    m = _SUBSCRIPT_RE.match(pattern)
    if not m:
        return pattern, None
    expr, idx, start, _sep, end = m.groups()
    if idx:
        return expr, (int(idx), None)
    return expr, (int(start), int(end) if end else -1)


def _empty_subscript(body: str, hosts: Sequence[str], groups: Mapping[str, Sequence[str]], pattern: str):
    """Why `gpu0[1-3]` selected nothing: Ansible reads the brackets as a subscript of what `gpu0` matches (an
    inventory range like `gpu[01:03]` is not a limit pattern); the error says so and suggests the likely form."""
    expr, (start, end) = _split_subscript(body)  # type: ignore[misc]
    base = match_one(hosts, groups, expr)
    sub = body[len(expr) :]
    if not base:
        reading = f"and '{expr}' names no host or group"
    else:
        last = start if not end else (len(base) - 1 if end == -1 else end)
        reading = f"and '{expr}' matches {len(base)} host(s), none at position(s) {start} to {last}"
    what = (
        f"'{body}' in the limit selects no host: Ansible reads '{sub}' as a subscript (the hosts at those "
        f"positions, counting from 0, of whatever '{expr}' matches), {reading}"
    )
    return SelectionError(what, pattern, "if you meant " + suggest_for(body, hosts))


def intended_hosts(pattern: str, hosts: Sequence[str]) -> list[str]:
    """The hosts someone writing `gpu0[1-3]` or `gpu[01:03]` most likely meant: the brackets read as a glob's
    character class or as an inventory range (`[1-3]` like `[1:3]`), kept in inventory order."""
    want: set[str] = {h for h in hosts if fnmatch.fnmatchcase(h, pattern)}
    try:
        want.update(expand_host_pattern(_RANGE_DASH_RE.sub(r"[\1:\2]", pattern), pattern)[0])
    except InventoryError:  # not an inventory range either: the glob reading is all there is
        pass
    return [h for h in hosts if h in want]


def _as_regex(pattern: str) -> str | None:
    """`gpu0[1-3]` -> `~gpu0[1-3]$` when every bracket is a one-digit range (a regex character class)."""
    parts = _RANGE_DASH_RE.split(pattern)  # text, begin, end, text, ...
    if len(parts) == 1 or any(len(d) != 1 for d in parts[1::3] + parts[2::3]):
        return None
    out = "".join(
        part.replace(".", "\\.") if i % 3 == 0 else (f"[{part}-" if i % 3 == 1 else f"{part}]")
        for i, part in enumerate(parts)
    )
    return f"~{out}$"


def suggest_for(pattern: str, hosts: Sequence[str]) -> str:
    """How to write what `pattern` probably meant, as a --limit value (a comma list, else a ~regex)."""
    meant = intended_hosts(pattern, hosts)
    regex = _as_regex(pattern)
    also = f" (or the regex --limit '{regex}')" if regex else ""
    if meant and len(meant) <= 8:
        return f"{', '.join(meant)}: write --limit '{','.join(meant)}'{also}"
    if meant:
        return (
            f"{meant[0]} ... {meant[-1]} ({len(meant)} hosts): "
            + (f"write the regex --limit '{regex}'" if regex else "list them in a file, one a line")
            + " or pass --limit @FILE with one name a line"
        )
    return (
        "several hosts by number: list them with commas (--limit 'gpu01,gpu02'), use a glob without brackets "
        "(--limit 'gpu0*') or a regex (--limit '~gpu0[1-3]$'); an inventory range like gpu[01:03] is not a pattern"
    )


def _plain_word(p: str) -> bool:
    return p[0] != "~" and not any(ch in p for ch in "*?[")


def did_you_mean(word: str, choices, fallback: str | None = None) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    if close:
        return f"did you mean '{close[0]}'?"
    return fallback if fallback is not None else f"list hosts and groups with `{prog()} inventory-check`"
