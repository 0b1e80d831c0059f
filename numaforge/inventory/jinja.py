"""Ansible's templated inventory variables (`bmc_url: "https://{{ bmc_ip }}:{{ bmc_port }}"`), rendered as Ansible
renders them: lazily (only the variables a value needs, each once per host), over the host's merged variables
(numaforge.inventory.ansible_model's precedence), references nested to any depth, in the project's template
sandbox (numaforge.budgeted.BudgetedSandbox: jinja2's ImmutableSandboxedEnvironment with a render budget) with
StrictUndefined. Like ansible-core 2.19, a value that is one expression (`"{{ port }}"`) keeps its type; text
around an expression makes a string.

Besides the host's own variables a template sees inventory_hostname, inventory_hostname_short, group_names,
groups, inventory_dir and inventory_file, and these Ansible filters: bool, ternary, mandatory, regex_replace,
to_json, basename, dirname (jinja2's own filters are all there). An undefined variable, a loop (a -> b -> a), a
syntax error, an unknown filter or a sandbox refusal is an InventoryError naming the variable and its file:line.
A value computed from an Ansible Vault value is a secret too (numaforge.secrets.SecretText).
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable
from typing import Any

import jinja2
import jinja2.meta
from jinja2 import nodes
from jinja2.sandbox import SecurityError

from .. import budgeted
from ..errors import InventoryError
from ..secrets import SecretText
from ..templating import EXPRESSION_ERRORS
from .vault import Vaulted

TEMPLATE_RE = re.compile(r"\{\{|\{%|\{#")
MAX_CACHED = 4096  # compiled templates kept per process (an inventory repeats the same few for every host)
MISSING = object()


def _bool(value) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("yes", "on", "1", "true", "y", "t")
    return bool(value)


def _ternary(value, true_val, false_val, none_val=None):
    if value is None and none_val is not None:
        return none_val
    return true_val if value else false_val


def _mandatory(value, msg=None):
    if isinstance(value, jinja2.Undefined):
        raise jinja2.UndefinedError(msg or f"mandatory variable {value._undefined_name!r} is not defined")
    return value


def _regex_replace(value, pattern: str = "", replacement: str = "", ignorecase: bool = False, count: int = 0):
    return re.sub(pattern, replacement, str(value), count=count, flags=re.I if ignorecase else 0)


FILTERS: dict[str, Callable] = {
    "bool": _bool,
    "ternary": _ternary,
    "mandatory": _mandatory,
    "regex_replace": _regex_replace,
    "to_json": lambda v, **kw: json.dumps(v, **kw),
    "basename": lambda v: os.path.basename(str(v)),
    "dirname": lambda v: os.path.dirname(str(v)),
}

FILTER_FIX = (
    "numaforge provides jinja2's filters and " + ", ".join(FILTERS) + " (Ansible's others are not there): "
    "compute the value another way or write it out"
)

_lock = threading.Lock()
_env: budgeted.BudgetedSandbox | None = None
_cache: dict[str, tuple[Any, frozenset[str], Any]] = {}


def environment() -> budgeted.BudgetedSandbox:
    """The one sandbox inventory templates render in (a process's templates compile once)."""
    global _env
    with _lock:
        if _env is None:
            _env = budgeted.BudgetedSandbox(
                undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True
            )
            _env.filters.update(FILTERS)
        return _env


def _compiled(source: str):
    """(template, the variables it reads, a native-value callable when it is one expression, else None)."""
    hit = _cache.get(source)
    if hit is not None:
        return hit
    env = environment()
    tree = env.parse(source)
    deps = frozenset(jinja2.meta.find_undeclared_variables(tree))
    native = None
    body = tree.body
    if (
        len(body) == 1
        and isinstance(body[0], nodes.Output)
        and len(body[0].nodes) == 1
        and not isinstance(body[0].nodes[0], nodes.TemplateData)
    ):
        inner = source.strip()[2:-2]
        if source.strip().startswith("{{") and source.strip().endswith("}}") and inner[:1] not in "-+":
            if inner[-1:] not in "-+":
                native = env.compile_expression(inner, undefined_to_none=False)
    hit = (env.from_string(source), deps, native)
    with _lock:
        if len(_cache) >= MAX_CACHED:
            _cache.clear()
        _cache[source] = hit
    return hit


def is_template(value) -> bool:
    return isinstance(value, str) and TEMPLATE_RE.search(value) is not None


def has_template(value) -> bool:
    if isinstance(value, dict):
        return any(has_template(v) for v in value.values())
    if isinstance(value, list):
        return any(has_template(v) for v in value)
    return is_template(value)


class HostTemplar:
    """One host's variables, rendered on demand: ``get(name)`` is the variable's value as Ansible would give it."""

    def __init__(
        self,
        host: str,
        values: dict[str, Any],
        where: dict[str, str],
        magic: Callable[[str], Any],
        reveal: Callable[[Any, str, str], Any],
    ):
        self.host = host
        self.values = values
        self.where = where
        self.magic = magic  # inventory_hostname, groups...: MISSING when not a magic variable
        self.reveal = reveal  # (Vaulted, where, variable) -> the decrypted SecretText (or an error)
        self.done: dict[str, Any] = {}

    def get(self, name: str, chain: tuple[str, ...] = ()) -> Any:
        if name in self.done:
            return self.done[name]
        if name not in self.values:
            return self.magic(name)
        if name in chain:
            loop = " -> ".join(chain[chain.index(name) :] + (name,))
            raise InventoryError(
                f"host '{self.host}': variable {name} refers to itself ({loop})",
                self.where.get(name, ""),
                "give one of these variables a value that does not use the others (Ansible fails the same way: "
                "'recursive loop detected in template')",
            )
        value = self._value(name, self.values[name], chain + (name,))
        self.done[name] = value
        return value

    def _value(self, name: str, value: Any, chain: tuple[str, ...]) -> Any:
        if isinstance(value, Vaulted):
            return self.reveal(value, self.where.get(name, value.where), name)
        if isinstance(value, dict):
            out = type(value)() if type(value) is not dict else {}
            for k, v in value.items():
                out[k] = self._value(name, v, chain)
            for attr in ("line", "key_lines"):
                if hasattr(value, attr):
                    setattr(out, attr, getattr(value, attr))
            return out
        if isinstance(value, list):
            out_list = type(value)(self._value(name, v, chain) for v in value)
            for attr in ("line", "item_lines"):
                if hasattr(value, attr):
                    setattr(out_list, attr, getattr(value, attr))
            return out_list
        if not is_template(value):
            return value
        return self._render(name, value, chain)

    def _render(self, name: str, source: str, chain: tuple[str, ...]) -> Any:
        where = self.where.get(name, "")
        try:
            template, deps, native = _compiled(source)
        except jinja2.TemplateSyntaxError as exc:  # an unknown filter or test too (TemplateAssertionError)
            raise InventoryError(
                f"host '{self.host}': variable {name} is not a valid Jinja2 template ({exc.message})",
                where,
                FILTER_FIX
                if isinstance(exc, jinja2.TemplateAssertionError)
                else "fix the template: {{ variable }}, {{ variable | filter }}, {% if %}...{% endif %}",
            ) from None
        context: dict[str, Any] = {}
        secret = False
        for dep in sorted(deps):
            value = self.get(dep, chain)
            if value is not MISSING:
                context[dep] = value
                secret = secret or _is_secret(value)
        try:
            rendered = budgeted.render(template, context)
            if native is not None:
                rendered = native(**context)
                if isinstance(rendered, jinja2.Undefined):
                    str(rendered)  # StrictUndefined raises: the value itself is undefined
        except jinja2.UndefinedError as exc:
            missing = sorted(d for d in deps if d not in context)
            raise InventoryError(
                f"host '{self.host}': variable {name} ({source!r}) uses an undefined variable: {exc.message}"
                + (f" (needed by {' -> '.join(reversed(chain[:-1]))})" if len(chain) > 1 else ""),
                where,
                (
                    f"define {', '.join(missing)} for this host (inventory, group_vars or host_vars) or "
                    if missing
                    else ""
                )
                + "give a default with `| default(...)`; a template sees the host's own variables and "
                "inventory_hostname, inventory_hostname_short, group_names, groups, inventory_dir, inventory_file",
            ) from None
        except budgeted.RenderBudgetExceeded as exc:
            raise InventoryError(
                f"host '{self.host}': variable {name} went past the template budget: {exc}", where, "simplify it"
            ) from None
        except SecurityError as exc:
            raise InventoryError(
                f"host '{self.host}': variable {name} tried something the template sandbox forbids ({exc})",
                where,
                "an inventory template may only read variables and compute values",
            ) from None
        except jinja2.TemplateError as exc:
            raise InventoryError(
                f"host '{self.host}': variable {name} failed to render: {exc}", where, "fix the template"
            ) from None
        except EXPRESSION_ERRORS as exc:
            raise InventoryError(
                f"host '{self.host}': variable {name}: a template expression failed: {type(exc).__name__}: {exc}",
                where,
                "fix the expression (variables are numbers, strings, lists and mappings)",
            ) from None
        if secret and isinstance(rendered, str):
            return SecretText(rendered, where)
        return rendered


def _is_secret(value) -> bool:
    if isinstance(value, SecretText):
        return True
    if isinstance(value, dict):
        return any(_is_secret(v) for v in value.values())
    if isinstance(value, list):
        return any(_is_secret(v) for v in value)
    return False
