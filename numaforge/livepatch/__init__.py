"""Validate a live-patch module on one host over SSH, in explicit states (like kpatch's own script):

    preflight -> upload -> load -> transition -> verify -> effect -> unload | keep

- preflight: `uname -r` equals the module's vermagic release; /sys/kernel/livepatch exists; module signature
  policy (sig_enforce, lockdown, modules_disabled) lets an unsigned module load; the module is not loaded yet;
  every loaded live patch is read: a replace-mode (or unknown-mode) module is refused while others are loaded
  unless Options.replace, and none may patch the same functions; the kernel taint is recorded. Nothing is
  uploaded before preflight passes.
- upload: into a private `mktemp -d` directory (atomic put with sha256 check on the host).
- load: `kpatch load` when the host has kpatch, else insmod; EBUSY retried 5 x 2 s (hostops).
- transition: wait for /sys/kernel/livepatch/<mod>/transition == 0. From 2 s in, once a second, the host's idle
  CPUs are prodded (`true` pinned to each: checks.prod_due; 5.10 never wakes an idle CPU, so its idle task
  holds the transition until something runs there). After `signal_after` s (15) the stalled
  threads (with kernel stacks) are recorded and signalled through the `signal` file where the kernel has one
  (5.10 signals them itself); after `revert_after` s (60) the patch is reverted (enabled=0), the module
  unloaded, and the host fails.
- verify: enabled=1, the patched functions under the module's sysfs object dir, no livepatch errors in dmesg,
  the other live patches still enabled, no new taint but K/O/E, the series' LOADED check script on the host.
- effect: A/B NUMA outcomes on hosts with >= 3 nodes (numaforge.measure: interleaved off/on runs); the fleet
  layer turns it on only for group lab or --measure.
- unload (default: disable with EBUSY retries, wait, refcount 0, rmmod) or keep (--keep; the fleet layer
  persists it with install=True: numaforge.livepatch.lifecycle).

Any failure after the load rolls back: disable, wait, unload, remove the uploaded files; the report says so.
Pure parts (artifact modinfo, preflight verdicts, sysfs/dmesg parsing) are plain functions tested without a host.

Modules: errors.py, artifact.py (the module as built), checks.py (pure verdicts), host.py (the state machine on
one host: HostRun, validate_host), arms.py (ArmSwitcher, measure_arms), hostops.py (kpatch-grade host
operations), lifecycle.py (status/install/unload), fleet.py (validate and lifecycle over a fleet).

``ArmSwitcher`` / ``measure_arms`` drive several live patches of the same function on one host (one loaded at
a time) for the NUMA outcome measurement (`invoke numa-effect`, bench/numa_effect.py).
"""

from __future__ import annotations

from .arms import ArmSwitcher, measure_arms
from .artifact import SIG_MARK, Artifact, load_artifact, modinfo
from .checks import (
    FACTS_SCRIPT,
    dmesg_problems,
    func_name,
    parse_facts,
    parse_objects,
    preflight_problems,
    prod_due,
    superseded,
    transition_action,
)
from .errors import (
    ArtifactError,
    HostPreflightError,
    LivepatchError,
    LoadError,
    TaintError,
    TransitionError,
    UnloadError,
    VerifyError,
)
from .host import LIVEPATCH_SYSFS, HostRun, Options, validate_host

__all__ = [
    "LIVEPATCH_SYSFS",
    "SIG_MARK",
    "FACTS_SCRIPT",
    "ArmSwitcher",
    "Artifact",
    "ArtifactError",
    "HostRun",
    "LivepatchError",
    "LoadError",
    "Options",
    "HostPreflightError",
    "TaintError",
    "TransitionError",
    "UnloadError",
    "VerifyError",
    "dmesg_problems",
    "func_name",
    "load_artifact",
    "measure_arms",
    "modinfo",
    "parse_facts",
    "parse_objects",
    "preflight_problems",
    "superseded",
    "prod_due",
    "transition_action",
    "validate_host",
]
