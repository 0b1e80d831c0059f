"""Pure parsers for CLI option values: each returns the value or raises OptionValueError (exit 2) naming the
option, what was given and what would be accepted. Task signatures default numeric options to None (so invoke
does not cast them itself and crash with a ValueError traceback) and parse them here, with the real default.

The shared option sets become one value each here (numaforge.cli.optionsets injects them into the tasks):
:class:`Selection` (--inventory/--host/--group/--limit/--all), numaforge.fleet.Rollout (:func:`rollout`) and
:class:`BmcPolicy` (--bmc-connect-timeout/--bmc-read-timeout/--bmc-retries, :func:`bmc_policy`).

:func:`preflight` is the one check every task's options go through before its body runs (numaforge.cli.optionsets):
no empty value, no control character, no value longer than MAX_OPTION_CHARS, then each option's own check --
the task's (``@task(checks=...)``), else the shared one of :data:`CHECKS` by option name.
"""

from __future__ import annotations

import math
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, overload
from urllib.parse import urlsplit

from .. import paths, safeio
from ..defaults import BMC_CONNECT_TIMEOUT, BMC_READ_TIMEOUT, BMC_RETRIES
from ..errors import NumaforgeError
from ..fleet import BatchSpec, FleetOptionError, Rollout, batch_spec, host_timeout_seconds
from ..textsafe import has_control, printable


class OptionValueError(NumaforgeError):
    """A command-line option value that cannot be used."""

    exit_code = 2
    refusal = True


def _number(value, option: str, kind: type, what: str, example: str):
    if isinstance(value, bool):
        raise OptionValueError(f"{option} must be {what}, got {value!r}", option, f"pass e.g. {option} {example}")
    try:
        if kind is int:
            if isinstance(value, float):
                if not value.is_integer():
                    raise ValueError
                return int(value)
            return int(str(value).strip(), 10)
        number = float(str(value).strip()) if not isinstance(value, (int, float)) else float(value)
        if not math.isfinite(number):
            raise ValueError
        return number
    except (TypeError, ValueError):
        raise OptionValueError(
            f"{option} must be {what}, got {value!r}", option, f"pass e.g. {option} {example}"
        ) from None


@overload
def positive_int(value, option: str, default: int) -> int: ...
@overload
def positive_int(value, option: str, default: None = None) -> int | None: ...
def positive_int(value, option: str, default: int | None = None) -> int | None:
    """A whole number >= 1 (e.g. --forks)."""
    if value is None:
        return default
    n = _number(value, option, int, "a whole number of at least 1", "8")
    if n < 1:
        raise OptionValueError(f"{option} must be at least 1, got {n}", option, f"pass e.g. {option} 8")
    return n


@overload
def non_negative_int(value, option: str, default: int) -> int: ...
@overload
def non_negative_int(value, option: str, default: None = None) -> int | None: ...
def non_negative_int(value, option: str, default: int | None = None) -> int | None:
    """A whole number >= 0 (e.g. --canary, --batch)."""
    if value is None:
        return default
    n = _number(value, option, int, "a whole number (0 or more)", "1")
    if n < 0:
        raise OptionValueError(f"{option} must be 0 or more, got {n}", option, f"pass e.g. {option} 1")
    return n


@overload
def positive_float(value, option: str, default: float) -> float: ...
@overload
def positive_float(value, option: str, default: None = None) -> float | None: ...
def positive_float(value, option: str, default: float | None = None) -> float | None:
    """A number of seconds (or other amount) > 0 (e.g. --graceful-timeout)."""
    if value is None:
        return default
    x = _number(value, option, float, "a number greater than 0", "300")
    if x <= 0:
        raise OptionValueError(f"{option} must be greater than 0, got {value!r}", option, f"pass e.g. {option} 300")
    return x


@overload
def non_negative_float(value, option: str, default: float) -> float: ...
@overload
def non_negative_float(value, option: str, default: None = None) -> float | None: ...
def non_negative_float(value, option: str, default: float | None = None) -> float | None:
    """A number >= 0."""
    if value is None:
        return default
    x = _number(value, option, float, "a number (0 or more)", "15")
    if x < 0:
        raise OptionValueError(f"{option} must be 0 or more, got {value!r}", option, f"pass e.g. {option} 15")
    return x


def max_fail(value, option: str = "--max-fail", default: float = 100.0) -> float:
    """The failure budget: a percentage of attempted hosts from 0 to 100 (fractions allowed: 12.5)."""
    if value is None:
        return default
    x = _number(value, option, float, "a percentage from 0 to 100", "25")
    if not 0 <= x <= 100:
        raise OptionValueError(
            f"{option} must be a percentage from 0 to 100, got {value!r}",
            option,
            f"pass e.g. {option} 25 to stop once more than a quarter of the hosts failed",
        )
    return x


def batch(value, option: str = "--batch") -> BatchSpec:
    """--batch as Ansible's serial: a number of hosts (``2``), a percentage of the selected hosts (``25%``) or a
    comma-separated list of them (``1,5,25%``: successive batch sizes, the last repeating); 0 or not given: all
    remaining hosts at once. Parsed by numaforge.fleet.batch_spec; an error names the option (exit 2)."""
    if value is None:
        return ()
    try:
        return batch_spec(value)
    except FleetOptionError as exc:
        raise OptionValueError(exc.what, option, exc.fix) from None


def staged_max_fail(canary: int, batches: BatchSpec, write: bool, default: float) -> float:
    """The --max-fail a rollout uses when the operator did not give one: 0 for a writing task run as a staged
    rollout (--canary N > 0 or --batch given), so it stops before the next batch once a batch has a failure;
    else the task's own default."""
    return 0.0 if write and (canary > 0 or batches) else default


def option_flag(name: str) -> str:
    """The command-line spelling of a task parameter: ``max_fail`` -> ``--max-fail``."""
    return "--" + name.replace("_", "-")


def reject_empty(options: dict) -> None:
    """An empty (or blank) value for any option is a usage error: nothing falls back to a default silently
    (``--inventory ''`` never means the lab inventory, ``--profile ''`` never means each host's own profile).
    Repeatable options are checked value by value. Raises OptionValueError (exit 2) naming the option."""
    for name, value in options.items():
        given = value if isinstance(value, (list, tuple)) else [value]
        blank = [v for v in given if isinstance(v, str) and not v.strip()]
        if blank:
            flag = option_flag(name)
            raise OptionValueError(
                f"the value {blank[0]!r} is empty",
                flag,
                f"pass a value after {flag}, or leave {flag} out to use its default",
            )


@dataclass(frozen=True)
class Selection:
    """Which hosts a task acts on, as given: --inventory, --host, --group, --limit, --all (and whether the
    inventory may hold literal passwords)."""

    inventory: str | None = None
    host: tuple[str, ...] = ()
    group: tuple[str, ...] = ()
    limit: str | None = None
    all: bool = False
    allow_plaintext_secrets: bool = False
    vault_password_file: str | None = None  # else $ANSIBLE_VAULT_PASSWORD_FILE (numaforge.inventory.vault)

    @property
    def narrowed(self) -> bool:
        """Hosts were named (--host/--group/--limit), not "every host" by default."""
        return bool(self.host or self.group or self.limit)


def selection(raw: dict) -> Selection:
    return Selection(
        inventory=raw.get("inventory"),
        host=tuple(raw.get("host") or ()),
        group=tuple(raw.get("group") or ()),
        limit=raw.get("limit"),
        all=bool(raw.get("all")),
        allow_plaintext_secrets=bool(raw.get("allow_plaintext_secrets")),
        vault_password_file=raw.get("vault_password_file"),
    )


def rollout(
    raw: dict, *, forks: int, canary: int = 0, max_fail_default: float = 100.0, lock: str | None = None
) -> Rollout:
    """The rolling options as given (None: not given) -> one Rollout; ``forks``/``canary``/``max_fail_default``
    are the task's defaults, ``lock`` the name of a writing task (its hosts' write lock). A writing task's
    staged rollout stops at the first failed batch unless --max-fail is given (staged_max_fail)."""
    n_canary = non_negative_int(raw.get("canary"), "--canary", canary)
    batches = batch(raw.get("batch"))
    budget = staged_max_fail(n_canary, batches, lock is not None, max_fail_default)
    return Rollout(
        forks=positive_int(raw.get("forks"), "--forks", forks),
        canary=n_canary,
        batch=batches,
        max_fail=max_fail(raw.get("max_fail"), "--max-fail", budget),
        host_timeout=host_timeout_seconds(raw.get("host_timeout")),
        gate=raw.get("gate"),
        prometheus=raw.get("prometheus"),
        slo=tuple(raw.get("slo") or ()),
        lock=lock,
        wait_lock=non_negative_float(raw.get("wait_lock"), "--wait-lock", 0.0),
    )


# the largest values accepted: beyond them a wait is a typo, not a slow BMC (and a huge number overflows sockets)
BMC_MAX = {"--bmc-connect-timeout": 600.0, "--bmc-read-timeout": 3600.0, "--bmc-retries": 10}


@dataclass(frozen=True)
class BmcPolicy:
    """The BMC tasks' Redfish timeouts and retries as given (numaforge.bios.exchange.RetryPolicy takes them)."""

    connect_timeout: float = BMC_CONNECT_TIMEOUT
    read_timeout: float = BMC_READ_TIMEOUT
    retries: int = BMC_RETRIES


def bmc_policy(raw: dict) -> BmcPolicy:
    """--bmc-connect-timeout / --bmc-read-timeout (seconds > 0) and --bmc-retries (0 or more), each at most
    BMC_MAX; None: the default (numaforge.defaults)."""
    connect = positive_float(raw.get("bmc_connect_timeout"), "--bmc-connect-timeout", BMC_CONNECT_TIMEOUT)
    read = positive_float(raw.get("bmc_read_timeout"), "--bmc-read-timeout", BMC_READ_TIMEOUT)
    retries = non_negative_int(raw.get("bmc_retries"), "--bmc-retries", BMC_RETRIES)
    for option, value in (("--bmc-connect-timeout", connect), ("--bmc-read-timeout", read), ("--bmc-retries", retries)):
        if value > BMC_MAX[option]:
            raise OptionValueError(
                f"{option} must be at most {BMC_MAX[option]:g}, got {value:g}",
                option,
                f"pass a value up to {BMC_MAX[option]:g}; for a long run use --host-timeout, not a longer wait per "
                "request",
            )
    return BmcPolicy(connect, read, retries)


def mockup_dir(value, option: str) -> Path | None:
    """A captured Redfish tree in DMTF's mockup layout (a directory holding redfish/v1/index.json), e.g. --bmc-mockup."""
    if value is None:
        return None
    path = Path(str(value)).expanduser()
    if not (path / "redfish" / "v1" / "index.json").is_file():
        raise OptionValueError(
            f"{option} {value!r} is not a captured Redfish tree (no redfish/v1/index.json in it)",
            option,
            "pass the directory bios-capture wrote, or one of tests/data/captures/*",
        )
    return path


# ---------------------------------------------------------------------------------------------- preflight
MAX_OPTION_CHARS = 4096  # PATH_MAX: no option value of numaforge is longer (a URL, a path, a pattern)
NAME_CHARS = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")  # a name that becomes a file name or a URL segment

# raises a NumaforgeError (exit 2) for a value that cannot be used: a function of the value (of the options and
# invoke's context for a task's ALL_OPTIONS check)
Check = Callable[..., object]


def check_text(options: Mapping[str, Any]) -> None:
    """Every string value (each value of a repeatable option): no terminal control character (a newline or a tab
    included: no option value has one) and at most MAX_OPTION_CHARS characters."""
    for name, value in options.items():
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if not isinstance(v, str):
                continue
            flag = option_flag(name)
            if has_control(v) or "\n" in v or "\t" in v:
                raise OptionValueError(
                    f"the value {printable(v[:80])!r} contains control characters",
                    flag,
                    f"pass {flag} a value of printable characters",
                )
            if len(v) > MAX_OPTION_CHARS:
                raise OptionValueError(
                    f"the value is {len(v)} characters long; the limit is {MAX_OPTION_CHARS}",
                    flag,
                    f"pass {flag} a shorter value",
                )


def preflight(options: Mapping[str, Any], checks: Mapping[str, Check] | None = None, context: Any = None) -> None:
    """The one check of a task's options before its body runs, the same for every task: empty values, control
    characters and sizes (every option), then each given option's own check -- ``checks`` (the task's), else
    :data:`CHECKS` (shared, by option name) -- and the task's check of its options together (``checks[ALL_OPTIONS]``,
    given ``context``, invoke's Context, for the config).
    A value that cannot be used raises a NumaforgeError naming the option (exit 2, whatever the check raised).
    Options left at their default (None/False) are not checked one by one."""
    reject_empty(dict(options))
    check_text(options)
    own = dict(checks or {})
    for name, value in options.items():
        if value is None or value is False:
            continue
        check = own.get(name, CHECKS.get(name))
        if check is None:
            continue
        for v in value if isinstance(value, (list, tuple)) else [value]:
            _usage(check, v, option_flag(name))
    across = own.get(ALL_OPTIONS)
    if across is not None:  # the task's check of options together (e.g. an --arm of the --series given)
        _usage(lambda o: across(o, context), dict(options), "")


# a task's ``checks`` key for a check of all its options together: a function of (the options, invoke's context)
ALL_OPTIONS = "*"


def check_with(check: Check, value: Any, flag: str) -> None:
    """Run one check as :func:`preflight` runs it (for a check it cannot run alone, e.g. one that needs the
    inventory): whatever it refuses is a usage error naming ``flag``."""
    _usage(check, value, flag)


def _usage(check: Check, value: Any, flag: str) -> None:
    """``check(value)``; whatever it refuses is a usage error (exit 2) that names the option, whichever error
    class said so."""
    try:
        check(value)
    except NumaforgeError as exc:
        if exc.exit_code == OptionValueError.exit_code and (not flag or flag in exc.render()):
            raise
        # the option first, then the error as it was (where the check looked -- a profile directory, an inventory
        # file -- and what it found)
        what = f"{exc.where}: {exc.what}" if exc.where and flag else exc.what
        raise OptionValueError(what, flag or exc.where, exc.fix) from None


def choice(option: str, *allowed: str) -> Check:
    """A check: the value is one of ``allowed``."""

    def check(value: Any) -> None:
        if value not in allowed:
            raise OptionValueError(
                f"{option} {printable(str(value)[:80])!r} is not one of {', '.join(allowed)}",
                option,
                f"pass {option} " + " or ".join(allowed),
            )

    return check


def name(option: str, what: str, max_chars: int = 255) -> Check:
    """A check: ``value`` is a name (letters, digits, ``. _ + -``, not starting with a punctuation mark) of at
    most ``max_chars``: it becomes a file name or a URL segment, so no ``/``, ``:``, ``@`` or space."""

    def check(value: Any) -> None:
        text = str(value)
        if not NAME_CHARS.fullmatch(text) or len(text) > max_chars:
            raise OptionValueError(
                f"{printable(text[:80])!r} is not a {what}",
                option,
                f"pass {option} a {what}: letters, digits and . _ + - (at most {max_chars} characters, starting with "
                "a letter or digit)",
            )

    return check


def existing_file(option: str, what: str) -> Check:
    """A check: a file on this machine that exists (a directory or a missing path is a usage error)."""

    def check(value: Any) -> None:
        try:
            ok = Path(str(value)).expanduser().is_file()
        except OSError:  # e.g. a name longer than the file system allows
            ok = False
        if not ok:
            raise OptionValueError(
                f"{what} {printable(str(value)[:200])!r} is not a file on this machine", option, "fix the path"
            )

    return check


def path_name(option: str, what: str) -> Check:
    """A check: a path whose every component fits a file name (255 bytes), so that looking it up is a clear
    "does not exist" (the task's own check) rather than the file system's "File name too long"."""

    def check(value: Any) -> None:
        parts = str(value).split("/")
        if any(len(p.encode()) > 255 for p in parts):
            raise OptionValueError(
                f"{what} {printable(str(value)[:80])!r}...: a path component is longer than 255 bytes",
                option,
                "fix the path",
            )

    return check


def existing_dir(option: str, what: str) -> Check:
    """A check: a directory on this machine that exists."""

    def check(value: Any) -> None:
        try:
            ok = Path(str(value)).expanduser().is_dir()
        except OSError:
            ok = False
        if not ok:
            raise OptionValueError(
                f"{what} {printable(str(value)[:200])!r} is not a directory on this machine", option, "fix the path"
            )

    return check


def new_dir(option: str, what: str) -> Check:
    """A check: a directory numaforge may create: it exists, or its parent directory does."""

    def check(value: Any) -> None:
        try:
            p = Path(str(value)).expanduser()
            ok = p.is_dir() or (not p.exists() and p.absolute().parent.is_dir())
        except OSError:
            ok = False
        if not ok:
            raise OptionValueError(
                f"{what} {printable(str(value)[:200])!r}: neither it nor its parent is a directory",
                option,
                "pass a directory, or a new one inside an existing directory",
            )

    return check


def program(option: str, what: str) -> Check:
    """A check: a program name found on PATH (or an executable path)."""

    def check(value: Any) -> None:
        text = str(value)
        if not (NAME_CHARS.fullmatch(text) or text.startswith("/")) or shutil.which(text) is None:
            raise OptionValueError(
                f"{what} {printable(text[:200])!r} is not a program on PATH",
                option,
                f"install it or pass {option} the name or path of an installed program",
            )

    return check


def no_credentials(option: str, fix: str = "") -> Check:
    """A check: a URL without a password (``user:password@``): it would end up in reports, logs and process
    lists; numaforge takes secrets by reference only. The message never shows the value."""

    def check(value: Any) -> None:
        try:
            password = urlsplit(str(value)).password
        except ValueError:
            password = None
        if password is not None:
            raise OptionValueError(
                f"{option} holds credentials (user:password@); they are not shown here",
                option,
                f"pass {option} without them" + (f"; {fix}" if fix else ""),
            )

    return check


def port_number(value: Any, option: str) -> int:
    """A TCP port: a whole number from 1 to 65535."""
    n = _number(value, option, int, "a port number from 1 to 65535", "8443")
    if not 1 <= n <= 65535:
        raise OptionValueError(
            f"{option} must be a port number from 1 to 65535, got {n}", option, f"pass e.g. {option} 8443"
        )
    return n


def _inventory(value: Any) -> None:
    """--inventory: `lab`, or an inventory file (from the current directory, else the project directory)."""
    if value == "lab":
        return
    candidates = [Path(str(value)).expanduser()]
    if not candidates[0].is_absolute():
        candidates.append(paths.project_dir() / candidates[0])
    try:  # what exists is the loader's to judge (a device or a FIFO is refused there, with its own message)
        found = any(p.exists() or p.is_symlink() for p in candidates)
    except OSError:
        found = False
    if not found:
        raise OptionValueError(
            f"{printable(str(value)[:200])}: inventory file not found",
            "--inventory",
            "pass an inventory file (native YAML, Ansible YAML or INI) or `lab` for the lab lab-up started",
        )


def output_path(option: str) -> Check:
    """A check: a file numaforge may write (numaforge.safeio.check_output: its directory exists, not a device...)."""

    def check(value: Any) -> None:
        safeio.check_output(str(value), option)

    return check


# the shared checks, by option name (a task's own ``checks=`` override them); each raises exit 2 naming the option
CHECKS: dict[str, Check] = {
    "inventory": _inventory,
    "output": choice("--output", "plain", "table", "json"),
    "json": output_path("--json"),
    "junit": output_path("--junit"),
    "forks": lambda v: positive_int(v, "--forks"),
    "canary": lambda v: non_negative_int(v, "--canary"),
    "batch": lambda v: batch(v, "--batch"),
    "vault_password_file": existing_file("--vault-password-file", "vault password file"),
    "max_fail": lambda v: max_fail(v, "--max-fail"),
    "host_timeout": host_timeout_seconds,
    "wait_lock": lambda v: non_negative_float(v, "--wait-lock"),
}
