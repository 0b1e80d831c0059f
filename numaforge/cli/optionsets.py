"""The options every task shares, defined once: one name, one help text, one chosen short flag.

``@task(...)`` here wraps ``invoke.task``:

- Invoke's automatic short flags are off for every task, so ``-h`` is help everywhere (``invoke bios-apply -h``);
  the only short flags are the ones chosen in ``SHORT`` (none turns off a safety, e.g. ``--insecure``, or triggers
  a reboot, e.g. ``--reboot``).
- a parameter named like a shared option (``SHARED_HELP``) gets that option's help text, with the task's own
  default appended; a task's ``help=`` adds or overrides only its own options.
- host tasks (``hosts=True``) also take ``--all``, ``--output plain|table|json`` and ``--junit PATH`` without
  declaring them: the wrapper takes them off the call and hands them to numaforge.cli.common (``RUN``), which
  selects hosts, prints and writes reports; ``write=True`` marks a task that changes hosts (numaforge.cli.common
  .load_selected refuses to guess its hosts on a multi-host inventory).
- every task's options as called are recorded for its report (``RUN.options``).
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

import invoke

from ..defaults import FORKS_BMC, FORKS_LIVEPATCH, FORKS_SSH
from ..display import esc
from . import common, values

SHARED_HELP = {
    "inventory": "inventory: a file (native YAML, or Ansible YAML/INI) or `lab` for the lab lab-up started; "
    "default: numaforge.inventory in the config (`lab`)",
    "host": "host name from the inventory (repeatable)",
    "group": "group name from the inventory, nested groups included (repeatable)",
    "limit": "keep only hosts matching this Ansible host pattern: names, globs, ~regex, &and, !not, @file "
    "(comma-separated; docs/inventory.md)",
    "all": "every host of the inventory (needed by tasks that change hosts when the inventory has several)",
    "json": "write a machine-readable report of the run (schema: numaforge/schemas/report.schema.json)",
    "output": "how results print: plain (no boxes or wrapping, one row per line; the default when stdout is "
    "not a terminal), table (the default on a terminal) or json (the report on stdout)",
    "junit": "also write a JUnit XML file (one testcase per host) for CI systems",
    "forks": f"how many hosts to work on at once (default: {FORKS_BMC} for BMC/Redfish tasks, which wait on the "
    f"BMCs; {FORKS_SSH} over SSH; {FORKS_LIVEPATCH} for validate and live-patch changes)",
    "host_timeout": "seconds of budget per host (default: none); a host past it stops before its next SSH "
    "command or Redfish request (rolling back what it started) and fails; the others go on",
    "canary": "run this many hosts first, one by one; any failure stops the rollout",
    "batch": "then run the rest in batches of this many hosts (0 = all at once)",
    "max_fail": "stop the rollout once more than this percentage of attempted hosts failed",
    "allow_plaintext_secrets": "accept literal passwords in the inventory instead of env:/file: references",
    "accept_new_host_key": "add an unknown SSH host key to known_hosts (a changed key is always refused)",
}

# chosen short flags; none of them turns off a safety or reboots a host
SHORT = {"inventory": "i", "limit": "l", "forks": "f", "group": "g", "output": "o"}

# options the wrapper adds to host tasks (name -> default)
HOST_EXTRAS: dict[str, Any] = {"all": False, "output": None, "junit": None}


class NumaforgeTask(invoke.Task):
    """An invoke Task with the shared options (module docstring)."""

    def __init__(self, body: Callable, *args: Any, hosts: bool = False, write: bool = False, **kwargs: Any):
        self.hosts = hosts
        self.write = write
        kwargs["auto_shortflags"] = False
        super().__init__(body, *args, **kwargs)

    def argspec(self, body: Callable) -> inspect.Signature:
        sig = super().argspec(body)
        if not self.hosts:
            return sig
        params = list(sig.parameters.values())
        have = {p.name for p in params}
        params += [
            inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=d)
            for n, d in HOST_EXTRAS.items()
            if n not in have
        ]
        return sig.replace(parameters=params)

    def arg_opts(self, name: str, default: str, taken_names: set[str]) -> dict[str, Any]:
        opts = super().arg_opts(name, default, taken_names)
        short = SHORT.get(name)
        if short and short not in taken_names and short not in opts["names"]:
            opts["names"].append(short)
        return opts

    def __call__(self, c: Any, *args: Any, **kwargs: Any) -> Any:
        extras = {n: kwargs.pop(n, d) for n, d in HOST_EXTRAS.items()} if self.hosts else {}
        bound = inspect.signature(self.body).bind_partial(c, *args, **kwargs)
        options = {k: v for k, v in bound.arguments.items() if k != "c"}
        try:  # one check for every task: an empty value is a usage error, never a silent default
            values.reject_empty({**options, **extras})
        except values.OptionValueError as exc:
            common.err_console.print(f"[bold red]error[/]: {esc(exc.render())}")
            raise invoke.Exit(code=exc.exit_code) from None
        common.begin_run(c, self.name.replace("_", "-"), options={**options, **extras}, write=self.write, **extras)
        return super().__call__(c, *args, **kwargs)


def _with_shared_help(body: Callable, own: dict[str, str]) -> dict[str, str]:
    out = dict(own)
    for name, p in inspect.signature(body).parameters.items():
        if name in out or name not in SHARED_HELP:
            continue
        text = SHARED_HELP[name]
        if p.default not in (None, False, inspect.Parameter.empty) and "default" not in text:
            text += f" (default {p.default})"
        out[name] = text
    for name in HOST_EXTRAS:
        out.setdefault(name, SHARED_HELP[name])
    return out


def task(*args: Any, hosts: bool = False, write: bool = False, **kwargs: Any) -> Any:
    """``invoke.task`` with the shared options (module docstring). Use as ``@task(...)``."""
    iterable = list(kwargs.pop("iterable", []))
    if hosts:
        iterable += [n for n in ("host", "group") if n not in iterable]

    def wrap(body: Callable) -> Any:
        help_ = _with_shared_help(body, kwargs.pop("help", {}))
        if not hosts:
            help_ = {k: v for k, v in help_.items() if k not in HOST_EXTRAS or k in inspect.signature(body).parameters}
        return invoke.task(body, klass=NumaforgeTask, hosts=hosts, write=write, iterable=iterable, help=help_, **kwargs)

    if args and callable(args[0]):
        return wrap(args[0])
    return wrap
