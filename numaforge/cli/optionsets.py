"""The options every task shares, defined once: one name, one help text, one chosen short flag.

``@task(...)`` here wraps ``invoke.task``:

- Invoke's automatic short flags are off for every task, so ``-h`` is help everywhere (``invoke bios-apply -h``);
  the only short flags are the ones chosen in ``SHORT`` (none turns off a safety, e.g. ``--insecure``, or triggers
  a reboot, e.g. ``--reboot``).
- a parameter named like a shared option (``SHARED_HELP``) gets that option's help text, with the task's own
  default appended; a task's ``help=`` adds or overrides only its own options.
- host tasks (``hosts=True``) take the host selection (``--inventory --host --group --limit --all
  --allow-plaintext-secrets --vault-password-file``) plus ``--output plain|table|json`` and ``--junit PATH`` without declaring them:
  the body gets one ``select`` value (numaforge.cli.values.Selection); output and junit go to
  numaforge.cli.common (``RUN``), which prints and writes reports. ``write=True`` marks a task that changes
  hosts (numaforge.cli.common.load_selected refuses to guess its hosts on a multi-host inventory).
- fleet tasks (``rollout=RolloutSpec(...)``) take the rolling options (``--forks --host-timeout``, with
  ``rolling`` also ``--canary --batch --max-fail``, with ``gate`` also ``--gate --prometheus --slo``; a writing task also
  ``--wait-lock``; with ``bmc`` also ``--bmc-connect-timeout --bmc-read-timeout --bmc-retries``, handed to the body
  as one ``bmc_policy`` value, numaforge.cli.values.BmcPolicy) without declaring them: the body gets one ``rollout`` value (numaforge.fleet.Rollout, built
  by numaforge.cli.values.rollout, holding each host's write lock when the task writes) to hand to its
  pipeline's fleet entry point.
- every option is checked before the body runs: an empty value or a bad number is a usage error (exit 2).
- every task's options as called are recorded for its report (``RUN.options``).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable

import invoke

from ..defaults import (
    BMC_CONNECT_TIMEOUT,
    BMC_READ_TIMEOUT,
    BMC_RETRIES,
    BMC_TOTAL_TIMEOUT,
)
from ..display import esc
from ..errors import NumaforgeError
from . import common, values

SHARED_HELP = {
    "inventory": "inventory: a file (native YAML, or Ansible YAML/INI) or `lab` for the lab lab-up started; "
    "default: $NUMAFORGE_INVENTORY, else numaforge.inventory in the config, else `lab`",
    "host": "host name from the inventory (repeatable)",
    "group": "group name from the inventory, nested groups included (repeatable)",
    "limit": "keep only hosts matching this Ansible host pattern: names, globs, ~regex, &and, !not, @file "
    "(comma-separated; docs/inventory.md)",
    "all": "every host of the inventory (needed by tasks that change hosts when the inventory has several)",
    "json": "write a machine-readable report of the run (schema: numaforge/schemas/report.schema.json)",
    "output": "how results print: plain (no boxes or wrapping, one row per line; the default when stdout is "
    "not a terminal), table (the default on a terminal) or json (the report on stdout)",
    "junit": "also write a JUnit XML file (one testcase per host) for CI systems",
    "forks": "how many hosts to work on at once (each task's default suits its peers: BMCs wait on Redfish, "
    "SSH hosts run commands)",
    "host_timeout": "seconds of budget per host (default: none); a host past it stops before its next SSH "
    "command or Redfish request (rolling back what it started) and fails; the others go on",
    "canary": "run this many hosts first, one by one; any failure stops the rollout",
    "batch": "then run the rest in batches, as Ansible's serial: N hosts, N% of the selected hosts (rounded "
    "down, at least 1) or a list such as 1,5,25% (successive sizes, the last repeating); 0 = the rest at once",
    "max_fail": "stop the rollout before the next batch once more than this percentage of attempted hosts failed",
    "gate": "judge each canary host before the rollout widens (the task says which gates it knows)",
    "prometheus": "--gate slo: Prometheus base URL whose HTTP API gives the service's latency histogram",
    "slo": "--gate slo: a gate setting KEY=VALUE (repeatable; also inventory var slo_gate): metric, label, window "
    "(minutes), minute (seconds), extend, widen_p99_ms (15), rollback_p99_ms (25), widen_skew (-0.3), "
    "rollback_skew (-0.8), alert_r, alert_p, prometheus_ca, prometheus_token (docs/canary-gate.md)",
    "bmc_connect_timeout": f"seconds to wait for a BMC's TCP connection and TLS handshake, per request (default "
    f"{BMC_CONNECT_TIMEOUT:g}); a timed-out connect is retried (--bmc-retries)",
    "bmc_read_timeout": f"seconds to wait for a BMC's answer, per read (default {BMC_READ_TIMEOUT:g}); not retried: "
    f"a BMC silent that long is hung. Every request also ends at its total deadline ({BMC_TOTAL_TIMEOUT:g} s) and "
    "--host-timeout",
    "bmc_retries": f"times a Redfish request is sent again after a transient failure: reset connection, HTTP "
    f"5xx/503, unparsable answer, connect timeout; writes only when the BMC cannot have acted (default "
    f"{BMC_RETRIES})",
    "wait_lock": "seconds to wait for another numaforge run that is writing the same host (default 0: that host "
    "fails at once, naming the run that holds it)",
    "allow_plaintext_secrets": "accept literal passwords in the inventory instead of env:/file: references",
    "vault_password_file": "file holding the Ansible Vault password that decrypts the inventory's !vault values "
    "and vault-encrypted vars files (readable only by you; default: $ANSIBLE_VAULT_PASSWORD_FILE)",
    "accept_new_host_key": "add an unknown SSH host key to known_hosts (a changed key is always refused)",
}

# chosen short flags; none of them turns off a safety or reboots a host
SHORT = {"inventory": "i", "limit": "l", "forks": "f", "group": "g", "output": "o"}

# options the wrapper adds to host tasks (name -> default): the selection becomes the body's ``select``
SELECT: dict[str, Any] = {"inventory": None, "host": None, "group": None, "limit": None, "all": False}
SELECT_SECRETS: dict[str, Any] = {"allow_plaintext_secrets": False, "vault_password_file": None}
HOST_EXTRAS: dict[str, Any] = {"output": None, "junit": None}
BMC: dict[str, Any] = {"bmc_connect_timeout": None, "bmc_read_timeout": None, "bmc_retries": None}
INJECTED = ("select", "rollout", "bmc_policy")  # body parameters the wrapper fills


@dataclass(frozen=True)
class RolloutSpec:
    """The rolling options of a fleet task and its defaults (numaforge.cli.values.rollout builds the value)."""

    forks: int
    canary: int = 0
    max_fail: float = 100.0
    rolling: bool = True  # --canary/--batch/--max-fail too (tasks that only read take --forks alone)
    gate: bool = False  # --gate: a canary gate the pipeline interprets
    bmc: bool = (
        False  # a Redfish task: --bmc-connect-timeout/--bmc-read-timeout/--bmc-retries (body gets ``bmc_policy``)
    )


def injected(hosts: bool, write: bool, spec: RolloutSpec | None) -> dict[str, Any]:
    """The options the wrapper adds to a task (name -> default)."""
    out: dict[str, Any] = {**SELECT, **SELECT_SECRETS, **HOST_EXTRAS} if hosts else {}
    if spec is not None:
        out.update(forks=None, host_timeout=None)
        if spec.rolling:
            out.update(canary=None, batch=None, max_fail=None)
        if spec.gate:
            out.update(gate=None, prometheus=None, slo=None)
        if write:
            out["wait_lock"] = None
        if spec.bmc:
            out.update(BMC)
    return out


class NumaforgeTask(invoke.Task):
    """An invoke Task with the shared options (module docstring)."""

    def __init__(
        self,
        body: Callable,
        *args: Any,
        hosts: bool = False,
        write: bool = False,
        rollout: RolloutSpec | None = None,
        **kwargs: Any,
    ):
        self.hosts = hosts
        self.write = write
        self.rollout = rollout
        self.extra = injected(hosts, write, rollout)
        kwargs["auto_shortflags"] = False
        super().__init__(body, *args, **kwargs)

    def argspec(self, body: Callable) -> inspect.Signature:
        sig = super().argspec(body)
        extra = injected(getattr(self, "hosts", False), getattr(self, "write", False), getattr(self, "rollout", None))
        params = [p for p in sig.parameters.values() if p.name not in INJECTED]
        have = {p.name for p in params}
        params += [
            inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=d) for n, d in extra.items() if n not in have
        ]
        return sig.replace(parameters=params)

    def arg_opts(self, name: str, default: str, taken_names: set[str]) -> dict[str, Any]:
        opts = super().arg_opts(name, default, taken_names)
        short = SHORT.get(name)
        if short and short not in taken_names and short not in opts["names"]:
            opts["names"].append(short)
        return opts

    def __call__(self, c: Any, *args: Any, **kwargs: Any) -> Any:
        raw = {n: kwargs.pop(n, d) for n, d in self.extra.items()}
        bound = inspect.signature(self.body).bind_partial(c, *args, **kwargs)
        options = {k: v for k, v in bound.arguments.items() if k not in ("c", *INJECTED)}
        name = self.name.replace("_", "-")
        try:  # one check for every task: an empty value or a bad number is a usage error, never a silent default
            values.reject_empty({**options, **raw})
            if self.hosts:
                kwargs["select"] = values.selection(raw)
            if self.rollout is not None:
                spec = self.rollout
                kwargs["rollout"] = values.rollout(
                    raw,
                    forks=spec.forks,
                    canary=spec.canary,
                    max_fail_default=spec.max_fail,
                    lock=name if self.write else None,
                )
                if spec.bmc:
                    kwargs["bmc_policy"] = values.bmc_policy(raw)
        except NumaforgeError as exc:
            common.err_console.print(f"[bold red]error[/]: {esc(exc.render())}")
            raise invoke.Exit(code=exc.exit_code) from None
        extras = {n: raw[n] for n in ("all", "output", "junit") if n in raw}
        common.begin_run(c, name, options={**options, **raw}, write=self.write, **extras)
        try:
            return super().__call__(c, *args, **kwargs)
        except NumaforgeError as exc:  # raised before the task's execute(): a message and its exit code, no traceback
            common.err_console.print(f"[bold red]error[/]: {esc(exc.render())}")
            raise invoke.Exit(code=exc.exit_code) from None


def rolling_defaults(spec: RolloutSpec, write: bool) -> dict[str, str]:
    """Each rolling option's default as -h shows it, for one task (its RolloutSpec; ``write``: a writing task,
    whose staged rollout stops at the first failed batch: numaforge.cli.values.staged_max_fail)."""
    out = {
        "forks": f"default {spec.forks}",
        "canary": f"default {spec.canary}",
        "batch": "default: the rest at once, or waves of --forks hosts when --max-fail is below 100",
    }
    if write and spec.max_fail >= 100:
        staged = values.staged_max_fail(1, (), True, spec.max_fail)
        out["max_fail"] = (
            f"default {staged:g} when --canary or --batch stages the rollout (it stops before the next batch once "
            f"a batch has a failure), else {spec.max_fail:g}"
        )
    else:
        out["max_fail"] = f"default {spec.max_fail:g}"
    return out


def _with_shared_help(
    body: Callable, own: dict[str, str], extra: dict[str, Any], spec: RolloutSpec | None, write: bool = False
) -> dict:
    out = dict(own)
    defaults = {n: p.default for n, p in inspect.signature(body).parameters.items() if n not in INJECTED}
    defaults.update(extra)
    if spec is not None:  # the task's own rolling defaults (the options default to None: parsed later)
        for name, text in rolling_defaults(spec, write).items():
            if name in extra:
                base = own.get(name, SHARED_HELP[name])
                out[name] = f"{base} ({text})"
    for name, default in defaults.items():
        if name in out or name not in SHARED_HELP:
            continue
        text = SHARED_HELP[name]
        if default not in (None, False, inspect.Parameter.empty) and "default" not in text:
            text += f" (default {default:g})" if isinstance(default, float) else f" (default {default})"
        out[name] = text
    return out


def task(
    *args: Any, hosts: bool = False, write: bool = False, rollout: RolloutSpec | None = None, **kwargs: Any
) -> Any:
    """``invoke.task`` with the shared options (module docstring). Use as ``@task(...)``."""
    iterable = list(kwargs.pop("iterable", []))
    if hosts:
        iterable += [n for n in ("host", "group") if n not in iterable]
    if rollout is not None and rollout.gate and "slo" not in iterable:
        iterable.append("slo")

    def wrap(body: Callable) -> Any:
        help_ = _with_shared_help(body, kwargs.pop("help", {}), injected(hosts, write, rollout), rollout, write)
        return invoke.task(
            body,
            klass=NumaforgeTask,
            hosts=hosts,
            write=write,
            rollout=rollout,
            iterable=iterable,
            help=help_,
            **kwargs,
        )

    if args and callable(args[0]):
        return wrap(args[0])
    return wrap
