"""Pure parsers for CLI option values: each returns the value or raises OptionValueError (exit 2) naming the
option, what was given and what would be accepted. Task signatures default numeric options to None (so invoke
does not cast them itself and crash with a ValueError traceback) and parse them here, with the real default.

The shared option sets become one value each here (numaforge.cli.optionsets injects them into the tasks):
:class:`Selection` (--inventory/--host/--group/--limit/--all), numaforge.fleet.Rollout (:func:`rollout`) and
:class:`BmcPolicy` (--bmc-connect-timeout/--bmc-read-timeout/--bmc-retries, :func:`bmc_policy`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import overload

from ..defaults import BMC_CONNECT_TIMEOUT, BMC_READ_TIMEOUT, BMC_RETRIES
from ..errors import NumaforgeError
from ..fleet import BatchSpec, FleetOptionError, Rollout, batch_spec, host_timeout_seconds


class OptionValueError(NumaforgeError):
    """A command-line option value that cannot be used."""

    exit_code = 2


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
