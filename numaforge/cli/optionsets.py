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
- every option is checked before the body runs, by one function for every task (numaforge.cli.values.preflight:
  empty values, control characters, sizes, then each option's check -- the task's ``checks=``, else the shared
  one by name): a bad value is a usage error (exit 2) naming the option, before any host is touched.
- every task takes ``-v/--verbose`` and ``--no-color`` (numaforge.cli.common.set_style applies them first).
- every task's options as called are recorded for its report (``RUN.options``).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import invoke

from .. import paths
from ..defaults import (
    BMC_CONNECT_TIMEOUT,
    BMC_READ_TIMEOUT,
    BMC_RETRIES,
    BMC_TOTAL_TIMEOUT,
)
from ..display import esc
from ..errors import NumaforgeError
from . import common, environment, values
from .values import option_flag

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
    "detailed_exitcode": "exit 0 when no host needs a change, 2 when some host does (changes present), 1 on an "
    "error: terraform's -detailed-exitcode, for CI that catches drift (2 is also a usage error's code, as in "
    "terraform)",
    "verbose": "more detail: an internal error's traceback and the redfish library's log (masked); as "
    "NUMAFORGE_DEBUG=1",
    "no_color": "no colour in the output (also: a non-empty NO_COLOR environment variable, no-color.org)",
}

# chosen short flags; none of them turns off a safety or reboots a host
SHORT = {"inventory": "i", "limit": "l", "forks": "f", "group": "g", "output": "o", "verbose": "v"}

# options the wrapper adds to host tasks (name -> default): the selection becomes the body's ``select``
SELECT: dict[str, Any] = {"inventory": None, "host": None, "group": None, "limit": None, "all": False}
SELECT_SECRETS: dict[str, Any] = {"allow_plaintext_secrets": False, "vault_password_file": None}
HOST_EXTRAS: dict[str, Any] = {"output": None, "junit": None}
BMC: dict[str, Any] = {"bmc_connect_timeout": None, "bmc_read_timeout": None, "bmc_retries": None}
# options of every task (the conventions of command-line tools: -v/--verbose, --no-color)
EVERY: dict[str, Any] = {"verbose": False, "no_color": False}
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
    out.update(EVERY)
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
        checks: Mapping[str, values.Check] | None = None,
        renamed: Mapping[str, str] | None = None,
        **kwargs: Any,
    ):
        self.hosts = hosts
        self.write = write
        self.rollout = rollout
        self.checks = dict(checks or {})
        self.renamed = dict(renamed or {})
        self.extra = {**injected(hosts, write, rollout), **_old_names(body, self.renamed)}
        kwargs["auto_shortflags"] = False
        super().__init__(body, *args, **kwargs)

    def argspec(self, body: Callable) -> inspect.Signature:
        sig = super().argspec(body)
        extra = injected(getattr(self, "hosts", False), getattr(self, "write", False), getattr(self, "rollout", None))
        extra.update(_old_names(body, getattr(self, "renamed", {})))
        params = [p for p in sig.parameters.values() if p.name not in INJECTED]
        have = {p.name for p in params}
        params += [
            inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=d) for n, d in extra.items() if n not in have
        ]
        return sig.replace(parameters=params)

    def get_arguments(self, ignore_unknown_help: bool | None = None) -> list[invoke.Argument]:
        helps = dict(self.help)
        try:
            return super().get_arguments(ignore_unknown_help)
        finally:  # invoke pops each help text as it uses it: the next parser (a second run in one process) keeps
            self.help = helps  # them

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
        common.set_style(verbose=raw["verbose"], no_color=raw["no_color"])
        extras = {n: raw[n] for n in ("all", "output", "junit") if n in raw}
        try:  # the one preflight of every task, before its body: a bad value is a usage error, never a default
            values.reject_empty({**options, **raw})  # as given, before an old spelling becomes the new one
            values.check_text({**options, **raw})
            for old, new in self.renamed.items():  # an old spelling still works, with a note
                if raw.get(old) not in (None, False):
                    kwargs[new] = options[new] = renamed(kwargs.get(new), raw[old], option_flag(new), option_flag(old))
            # the project directory (a relative inventory or a profile name is looked up there), the output mode
            common.begin_run(c, name, options={**options, **raw}, write=self.write, **extras)
            replaced = {"NUMAFORGE_ROOT": paths.project_dir_given(), "NUMAFORGE_INVENTORY": bool(raw.get("inventory"))}
            # NUMAFORGE_* as options, those an option replaces excepted (they are not read)
            environment.check_environment({var for var, given in replaced.items() if given})
            values.preflight({**options, **raw}, self.checks, c)
            if self.hosts:
                kwargs["select"] = values.selection(raw)
                preflight_selection(c, kwargs["select"])
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
            given = {**options, **raw}  # a refusal before any host still writes its reports, saying so
            common.refuse(name, given, exc, given.get("json"), given.get("junit"), given.get("output"))
            raise invoke.Exit(code=exc.exit_code) from None
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


def preflight_selection(c: Any, select: values.Selection) -> None:
    """--host, --group and --limit, each value resolved against the inventory before the body runs (the body's
    numaforge.cli.common.load_selected reads the same file): one that names nothing is a usage error naming its
    option. Without them nothing is loaded here (some tasks run without an inventory)."""
    if not select.narrowed:
        return
    inv = common.inventory_loader.load_inventory(
        common.inventory_path(c, select.inventory),
        allow_plaintext_secrets=select.allow_plaintext_secrets,
        vault_password_file=select.vault_password_file,
    )
    given: list[tuple[str, str, tuple[list[str], list[str], str | None]]]
    given = [("--host", h, ([h], [], None)) for h in select.host]
    given += [("--group", g, ([], [g], None)) for g in select.group]
    given += [("--limit", select.limit, ([], [], select.limit))] if select.limit else []
    for flag, value, (hosts, groups, limit) in given:
        values.check_with(lambda _v, h=hosts, g=groups, lim=limit: inv.select(h, g, lim), value, flag)


def exit_on_changes(report: Any, detailed: bool, changes: Callable[[Any], Any]) -> None:
    """--detailed-exitcode of a plan task, after its run succeeded (a failed run has exited 1 already): exit 2
    naming the hosts for which ``changes(host_result)`` is non-empty, else return (exit 0)."""
    if not detailed or report is None:
        return
    hosts = [h.host for h in report.hosts if changes(h)]
    if hosts:
        common.err_console.print(
            esc(f"changes present on {len(hosts)} host(s): {', '.join(hosts)} (--detailed-exitcode: exit 2)")
        )
        raise invoke.Exit(code=DETAILED_CHANGES)


DETAILED_CHANGES = 2  # terraform's "succeeded with a non-empty diff"


def _old_names(body: Callable, renamed: dict[str, str]) -> dict[str, Any]:
    """The old spellings of renamed options (old -> new) as injected options, each with its new name's default."""
    params = inspect.signature(body).parameters
    return {old: params[new].default for old, new in renamed.items()}


def renamed(new_value: Any, old_value: Any, new: str, old: str) -> Any:
    """An option given a clearer name: the old spelling still works, with a deprecation note on stderr (its -h
    says so too); both, with different values, are a usage error naming both."""
    if old_value in (None, False):
        return new_value
    if new_value not in (None, False) and new_value != old_value:
        raise values.OptionValueError(
            f"{old} is the old name of {new} and they were given different values", f"{new}/{old}", f"pass {new} only"
        )
    common.err_console.print(esc(f"note: {old} is deprecated: use {new} (same meaning)"))
    return old_value


def deprecated_help(new: str) -> str:
    """The -h line of an option's old spelling (``@task(renamed={old: new})``, :func:`renamed`)."""
    return f"deprecated: the old name of {new} (same meaning; use {new})"


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
    *args: Any,
    hosts: bool = False,
    write: bool = False,
    rollout: RolloutSpec | None = None,
    checks: Mapping[str, values.Check] | None = None,
    renamed: Mapping[str, str] | None = None,
    **kwargs: Any,
) -> Any:
    """``invoke.task`` with the shared options (module docstring). Use as ``@task(...)``. ``checks``: the task's
    own option checks (option name -> a function of the value that raises exit 2), run by numaforge.cli.values'
    preflight with the shared ones before the body. ``renamed``: old option name -> new one; the old spelling
    stays an option (a deprecation note in -h and on stderr) and reaches the body as the new one."""
    renamed_ = dict(renamed or {})
    iterable = list(kwargs.pop("iterable", []))
    if hosts:
        iterable += [n for n in ("host", "group") if n not in iterable]
    if rollout is not None and rollout.gate and "slo" not in iterable:
        iterable.append("slo")

    def wrap(body: Callable) -> Any:
        help_ = _with_shared_help(body, kwargs.pop("help", {}), injected(hosts, write, rollout), rollout, write)
        help_.update({old: deprecated_help(option_flag(new)) for old, new in renamed_.items()})
        return invoke.task(
            body,
            klass=NumaforgeTask,
            hosts=hosts,
            write=write,
            rollout=rollout,
            checks=checks,
            renamed=renamed_,
            iterable=iterable,
            help=help_,
            **kwargs,
        )

    if args and callable(args[0]):
        return wrap(args[0])
    return wrap
