"""Validate a live-patch module on one host over SSH, in explicit states (like kpatch's own script):

    preflight -> upload -> load -> transition -> verify -> effect -> unload | keep

- preflight: `uname -r` equals the module's vermagic release; /sys/kernel/livepatch exists; module signature
  policy (sig_enforce, lockdown, modules_disabled) lets an unsigned module load; the module is not loaded yet;
  every loaded live patch is read: a replace-mode (or unknown-mode) module is refused while others are loaded
  unless Options.replace, and none may patch the same functions; the kernel taint is recorded. Nothing is
  uploaded before preflight passes.
- upload: into a private `mktemp -d` directory (atomic put with sha256 check on the host).
- load: `kpatch load` when the host has kpatch, else insmod; EBUSY retried 5 x 2 s (hostops).
- transition: wait for /sys/kernel/livepatch/<mod>/transition == 0. After `signal_after` s (15) the stalled
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

``ArmSwitcher`` / ``measure_arms`` drive several live patches of the same function on one host (one loaded at
a time) for the NUMA outcome measurement (`invoke numa-effect`, bench/numa_effect.py).
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .. import budget, yamlsrc
from ..errors import NumaforgeError
from ..measure import runner as mrunner
from ..paths import find_data
from ..report import HostResult
from ..workload import workload_binary
from . import hostops

LIVEPATCH_SYSFS = "/sys/kernel/livepatch"
SIG_MARK = b"~Module signature appended~\n"


class LivepatchError(NumaforgeError):
    """A live patch could not be validated on a host."""


class ArtifactError(LivepatchError):
    """The module file or its manifest is unusable."""

    exit_code = 2


class PreflightError(LivepatchError):
    """The host cannot take this module (kernel, policy, conflicts). Nothing was uploaded."""


class LoadError(LivepatchError):
    """insmod / kpatch load failed."""


class TransitionError(LivepatchError):
    """The patch transition did not finish in time; it was reverted and the module unloaded."""


class VerifyError(LivepatchError):
    """The loaded patch does not look right (enabled, functions, dmesg, LOADED check)."""


class UnloadError(LivepatchError):
    """The module could not be disabled or removed."""


class TaintError(LivepatchError):
    """The kernel gained a taint flag a live patch does not explain (a warning, an oops...)."""


# ---------------------------------------------------------------------------------------------- artifact


@dataclass
class Artifact:
    path: Path
    name: str  # module name as the kernel sees it (dashes -> underscores)
    vermagic: str
    sha256: str
    signed: bool
    functions: list[str] = field(default_factory=list)  # expected patched functions ([] = any)
    check_script: Path | None = None
    series: str | None = None
    replace: bool | None = None  # atomic-replace patch (supersedes every other live patch); None = unknown
    signer: str | None = None  # the signing key's subject (manifest), None = unsigned or unknown

    @property
    def release(self) -> str:
        return self.vermagic.split()[0] if self.vermagic else ""

    def as_dict(self) -> dict:
        return {
            "file": str(self.path),
            "module": self.name,
            "vermagic": self.vermagic,
            "sha256": self.sha256,
            "signed": self.signed,
            "functions": self.functions,
            "check_script": str(self.check_script) if self.check_script else None,
            "series": self.series,
            "replace": self.replace,
            "signer": self.signer,
        }


def modinfo(data: bytes) -> dict[str, str]:
    """key=value strings of a module's .modinfo section (first occurrence wins), read from the raw .ko bytes."""
    info: dict[str, str] = {}
    for m in re.finditer(rb"(?<=\0)(vermagic|name|livepatch|license|srcversion|depends)=([^\0]*)\0", data):
        info.setdefault(m.group(1).decode(), m.group(2).decode(errors="replace"))
    return info


def load_artifact(
    ko: str | Path,
    functions: list[str] | None = None,
    check_script: str | Path | None = None,
    manifest: str | Path | None = None,
) -> Artifact:
    """A module file, with expectations from its kpatch manifest.json (next to it) when there is one."""
    ko = Path(ko)
    if not ko.is_file():
        raise ArtifactError(
            f"module file {ko} does not exist", "--module", "build it first (`invoke build-kpatch`) or fix the path"
        )
    data = ko.read_bytes()
    info = modinfo(data)
    if "vermagic" not in info:
        raise ArtifactError(
            f"{ko} has no vermagic in .modinfo (not a kernel module?)",
            str(ko),
            "pass a .ko built for the host's kernel",
        )
    name = (info.get("name") or ko.stem).replace("-", "_")
    if info.get("livepatch") != "Y":
        raise ArtifactError(
            f'{ko} is not a live patch (no MODULE_INFO(livepatch, "Y"))',
            str(ko),
            "build it with kpatch-build or as a klp module",
        )
    mpath = Path(manifest) if manifest else ko.with_name("manifest.json")
    series = None
    replace = signer = None
    funcs = list(functions or [])
    if mpath.is_file():
        try:
            man = json.loads(mpath.read_text())
        except ValueError as exc:
            raise ArtifactError(f"manifest {mpath} is not JSON: {exc}", str(mpath), "rebuild the module") from None
        sha = hashlib.sha256(data).hexdigest()
        if man.get("sha256") and man["sha256"] != sha:
            raise ArtifactError(
                f"{ko.name} sha256 {sha[:12]}... differs from its manifest ({man['sha256'][:12]}...)",
                str(mpath),
                "the module was changed after the build; rebuild it",
            )
        series = man.get("series")
        replace = man.get("replace") if isinstance(man.get("replace"), bool) else None
        signer = (man.get("signature") or {}).get("signer")
        if not funcs:
            funcs = [f["function"] if isinstance(f, dict) else str(f) for f in man.get("patched_functions", [])]
        if check_script is None and series:
            check_script = _series_check(series)
    return Artifact(
        ko,
        name,
        info["vermagic"],
        hashlib.sha256(data).hexdigest(),
        data.endswith(SIG_MARK),
        funcs,
        Path(check_script) if check_script else None,
        series,
        replace,
        signer,
    )


def _series_check(series: str) -> Path | None:
    meta = find_data("patches", series, "metadata.yaml")
    if meta is None or not meta.is_file():
        return None
    doc = yamlsrc.load(meta, error=LivepatchError, what="series metadata", empty={}) or {}
    name = doc.get("loaded_check")
    return (meta.parent / name) if name and (meta.parent / name).is_file() else None


# ---------------------------------------------------------------------------------------------- pure checks

FACTS_SCRIPT = (
    r"""echo "uname_r=$(uname -r)"
echo "livepatch_dir=$(test -d /sys/kernel/livepatch && echo yes || echo no)"
echo "sig_enforce=$(cat /sys/module/module/parameters/sig_enforce 2>/dev/null)"
echo "lockdown=$(cat /sys/kernel/security/lockdown 2>/dev/null)"
echo "modules_disabled=$(cat /proc/sys/kernel/modules_disabled 2>/dev/null)"
echo "kpatch=$(command -v kpatch 2>/dev/null)"
echo "loaded_modules=$(cut -d' ' -f1 /proc/modules 2>/dev/null | tr '\n' ' ')"
echo "tainted=$(cat /proc/sys/kernel/tainted 2>/dev/null)"
"""
    + hostops.LIVEPATCHES_SCRIPT
)


def parse_facts(text: str) -> dict:
    facts: dict = {}
    for line in text.splitlines():
        key, sep, val = line.partition("=")
        if sep and key not in ("lp", "fn"):
            facts[key] = val.strip()
    facts["loaded_modules"] = facts.get("loaded_modules", "").split()
    facts["livepatches"] = hostops.parse_livepatches(text)
    facts["patched"] = [f"{name}/{fn}" for name, lp in facts["livepatches"].items() for fn in lp["functions"]]
    return facts


def func_name(entry: str) -> str:
    """'task_numa_migrate.isra.0,1' -> 'task_numa_migrate' (sysfs func dir -> C function)."""
    return entry.split(",")[0].split(".")[0]


def preflight_problems(facts: dict, art: Artifact, allow_replace: bool = False) -> list[NumaforgeError]:
    """Why this host cannot take the module; [] when it can. Pure.

    A replace-mode module (or one whose mode is unknown: no manifest) would disable every other live patch on
    the host (a CVE fix, say); it is refused while others are loaded unless allow_replace (--replace)."""
    where = "host"
    probs: list[NumaforgeError] = []
    if facts.get("uname_r") != art.release:
        probs.append(
            PreflightError(
                f"vermagic mismatch: module {art.path.name} is built for '{art.vermagic}', host runs "
                f"'{facts.get('uname_r')}'",
                f"{where} uname -r",
                "build the module for this host's kernel (a kpatch target whose kernel_release matches), or select "
                "hosts running that kernel",
            )
        )
    if facts.get("livepatch_dir") != "yes":
        probs.append(
            PreflightError(
                "/sys/kernel/livepatch is missing: the kernel has no CONFIG_LIVEPATCH",
                f"{where} /sys/kernel/livepatch",
                "boot a kernel built with CONFIG_LIVEPATCH=y",
            )
        )
    if facts.get("modules_disabled") == "1":
        probs.append(
            PreflightError(
                "module loading is disabled (kernel.modules_disabled=1)",
                f"{where} /proc/sys/kernel/modules_disabled",
                "reboot the host; modules_disabled cannot be reset at run time",
            )
        )
    if not art.signed:
        sign_fix = SIGN_FIX
        if facts.get("sig_enforce") == "Y":
            probs.append(
                PreflightError(
                    "the host only loads signed modules (module.sig_enforce=Y) and this module is unsigned",
                    f"{where} /sys/module/module/parameters/sig_enforce",
                    sign_fix,
                )
            )
        lock = re.search(r"\[(\w+)\]", facts.get("lockdown", ""))
        if lock and lock.group(1) in ("integrity", "confidentiality"):
            probs.append(
                PreflightError(
                    f"kernel lockdown is '{lock.group(1)}': unsigned modules are refused",
                    f"{where} /sys/kernel/security/lockdown",
                    sign_fix,
                )
            )
    if art.name in facts.get("loaded_modules", []):
        probs.append(
            PreflightError(
                f"module {art.name} is already loaded",
                f"{where} /proc/modules",
                f"unload it first (`kpatch unload {art.name}` or disable it and rmmod), "
                "or leave the host alone: it already runs this patch",
            )
        )
    supersede = superseded(facts, art)
    if supersede and not allow_replace:
        mode = "a replace-mode patch" if art.replace else "of unknown mode (no manifest.json says replace: false)"
        probs.append(
            PreflightError(
                f"module {art.name} is {mode}: loading it would disable the live patch(es) loaded on the host: "
                f"{', '.join(supersede)}",
                f"{where} /sys/kernel/livepatch",
                "build it non-replace (the default; `replace: true` in kpatch/targets/ makes it replace), or pass "
                "--replace to supersede them on purpose (it then contains their fixes too: a cumulative patch)",
            )
        )
    others = [p for p in facts.get("patched", []) if p.split("/", 1)[0] != art.name]
    if art.functions:
        wanted = {func_name(f) for f in art.functions}
        clash = sorted({p for p in others if func_name(p.rsplit("/", 1)[-1]) in wanted})
        if clash:
            probs.append(
                PreflightError(
                    f"another live patch already replaces {', '.join(clash)}",
                    f"{where} /sys/kernel/livepatch",
                    "unload the other patch first, or build a cumulative patch that contains both changes",
                )
            )
    return probs


SIGN_FIX = (
    "sign the module with a key the host trusts: `invoke build-kpatch --sign-key KEY.pem --sign-cert CERT.pem` "
    "(the kernel tree's scripts/sign-file), and enroll that certificate on the host with `mokutil --import "
    "CERT.der` + a reboot to confirm in MokManager (docs/kpatch.md, 'Signing')"
)


def superseded(facts: dict, art: Artifact) -> list[str]:
    """The other live patches a replace-mode (or unknown-mode) module would disable on this host."""
    if art.replace is False:
        return []
    return sorted(n for n in facts.get("livepatches", {}) if n != art.name)


def parse_objects(text: str) -> dict[str, list[str]]:
    """Lines 'object/func,sympos' -> {object: [func,sympos...]}."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if "/" in line:
            obj, fn = line.strip().split("/", 1)
            out.setdefault(obj, []).append(fn)
    return out


_DMESG_BAD = re.compile(
    r"livepatch:.*(fail|error|unable|can't|cannot|invalid|not supported)|"
    r"WARNING: CPU|BUG: |Call Trace:|general protection|Oops",
    re.I,
)


def dmesg_problems(text: str, module: str) -> list[str]:
    """Kernel log lines (new since the load) that show a live-patch error or a kernel warning."""
    return [ln.strip() for ln in text.splitlines() if _DMESG_BAD.search(ln)]


def transition_action(elapsed: float, signalled: bool, signal_after: float, revert_after: float) -> str:
    """What the transition wait does next: 'wait' | 'signal' | 'revert'. Pure."""
    if elapsed >= revert_after:
        return "revert"
    if elapsed >= signal_after and not signalled:
        return "signal"
    return "wait"


# ---------------------------------------------------------------------------------------------- the host


@dataclass
class Options:
    keep: bool = False
    install: bool = False  # with keep: persist it (numaforge.livepatch.lifecycle.persist, fleet layer)
    signal_after: float = 15.0
    revert_after: float = 60.0
    poll: float = 0.5
    replace: bool = False  # allow a replace-mode module to supersede the host's other live patches
    effect: bool = False  # the A/B step: the fleet layer turns it on for the lab group or --measure
    effect_rounds: int = 1
    workload: mrunner.WorkloadParams = field(default_factory=mrunner.WorkloadParams)
    workload_binary: Path | None = None  # local static binary; None = build numaforge/workload
    command_timeout: float = 60.0


class _Host:
    """The state machine for one host on one open Remote."""

    def __init__(self, remote, art: Artifact, opts: Options, result: HostResult, log: Callable[[str], None]):
        self.r, self.art, self.opts, self.result, self.log = remote, art, opts, result, log
        self.sysfs = f"{LIVEPATCH_SYSFS}/{art.name}"
        self.rdir: str | None = None
        self.rko: str | None = None
        self.kpatch: str | None = None
        self.loaded = False
        self.states: list[str] = []
        self.data = result.data
        self.taint_before: str | None = None
        self.others: dict = {}

    # helpers
    def sh(self, cmd: str, check: bool = True, timeout: float | None = None):
        return self.r.run(cmd, timeout=timeout or self.opts.command_timeout, sudo=True, check=check)

    def state(self, name: str) -> None:
        self.states.append(name)
        self.data["states"] = list(self.states)

    def dmesg_lines(self) -> int:
        r = self.sh("dmesg | wc -l", check=False)
        return int(r.stdout.strip() or 0) if r.stdout.strip().isdigit() else 0

    def patch_state(self) -> tuple[str | None, str | None]:
        r = self.sh(f"cat {self.sysfs}/enabled {self.sysfs}/transition 2>/dev/null", check=False)
        vals = r.stdout.split()
        return (vals[0] if vals else None, vals[1] if len(vals) > 1 else None)

    def busy_retry(self, cmd: str, what: str, timeout: float | None = None) -> tuple[int, str, int]:
        """Run cmd, retrying EBUSY answers like kpatch (5 tries, 2 s apart); records the tries."""

        def attempt():
            r = self.sh(cmd, check=False, timeout=timeout)
            return r.rc, (r.stderr + r.stdout)

        rc, out, tries = hostops.with_busy_retries(attempt, log=lambda m: self.log(f"{what}: {m}"))
        self.data.setdefault("busy_retries", {})[what] = tries
        return rc, out, tries

    def taint(self) -> str:
        return self.sh("cat /proc/sys/kernel/tainted", check=False).stdout.strip()

    def check_taint(self, when: str) -> dict:
        now = self.taint()
        detail = {"before": hostops.taint_detail(self.taint_before), "now": hostops.taint_detail(now)}
        bad = hostops.new_taint(self.taint_before, now)
        self.data.setdefault("taint", {})[when] = detail
        if bad:
            raise TaintError(
                f"the kernel became tainted {', '.join(hostops.describe_taint(bad))} {when}",
                f"{self.r.where}: /proc/sys/kernel/tainted {self.taint_before} -> {now}",
                "read dmesg on the host: a live patch only adds K (and O/E); this taint means the "
                "kernel hit a problem while patching (the module was rolled back)",
            )
        return detail

    def livepatches(self) -> dict:
        return hostops.parse_livepatches(self.sh(hostops.LIVEPATCHES_SCRIPT, check=False).stdout)

    def check_others(self) -> dict:
        """Every other live patch that was enabled before is still loaded and enabled (non-replace)."""
        now = self.livepatches()
        lost = sorted(
            n for n, lp in self.others.items() if lp.get("enabled") == "1" and (now.get(n) or {}).get("enabled") != "1"
        )
        if lost and not self.opts.replace:
            raise VerifyError(
                f"other live patch(es) no longer enabled: {', '.join(lost)}",
                f"{self.r.where}: {LIVEPATCH_SYSFS}",
                "the module superseded them (replace mode): rebuild it non-replace (the default)",
            )
        return {n: {"enabled": (now.get(n) or {}).get("enabled")} for n in self.others}

    def module_loaded(self) -> bool:
        r = self.sh(f"grep -q '^{self.art.name} ' /proc/modules", check=False)
        return r.rc == 0

    # states
    def preflight(self) -> dict:
        facts = parse_facts(self.sh(FACTS_SCRIPT, check=False).stdout)
        self.kpatch = facts.get("kpatch") or None
        self.taint_before = facts.get("tainted") or "0"
        self.others = {n: lp for n, lp in facts["livepatches"].items() if n != self.art.name}
        detail = {
            "uname_r": facts.get("uname_r"),
            "vermagic": self.art.vermagic,
            "sig_enforce": facts.get("sig_enforce") or None,
            "lockdown": facts.get("lockdown") or None,
            "kpatch": self.kpatch,
            "signed": self.art.signed,
            "signer": self.art.signer,
            "replace": self.art.replace,
            "taint": hostops.taint_detail(self.taint_before),
            "other_patches": sorted(self.others),
            "other_livepatches": {n: {k: lp[k] for k in ("enabled", "transition")} for n, lp in self.others.items()},
        }
        sup = superseded(facts, self.art)
        if sup and self.opts.replace:
            detail["supersedes"] = sup
            self.log(f"--replace: {self.art.name} will disable the loaded live patch(es) {', '.join(sup)}")
        self.data["preflight"] = detail
        probs = preflight_problems(facts, self.art, allow_replace=self.opts.replace)
        if probs:
            first = probs[0]
            if len(probs) > 1:
                first = PreflightError(
                    "; ".join(p.what for p in probs), first.where, " / ".join(p.fix for p in probs if p.fix)
                )
            first.where = f"{self.r.where}: {first.where.removeprefix('host ')}"
            raise first
        return detail

    def upload(self) -> dict:
        self.rdir = self.sh("mktemp -d /tmp/numaforge-livepatch.XXXXXX").stdout.strip()
        if self.rdir and not self.r.is_root:
            self.sh(f"chown {shlex.quote(self.r.user)} {shlex.quote(self.rdir)}")
        self.rko = f"{self.rdir}/{self.art.path.name}"
        sha = self.r.put(self.art.path, self.rko, mode=0o600, sudo=True)
        self.data["remote_dir"] = self.rdir
        return {"path": self.rko, "sha256": sha}

    def load(self) -> dict:
        self.dmesg_mark = self.dmesg_lines()
        how = "kpatch load" if self.kpatch else "insmod"
        cmd = f"kpatch load {shlex.quote(self.rko)}" if self.kpatch else f"insmod {shlex.quote(self.rko)}"
        rc, out, tries = self.busy_retry(cmd, "load", timeout=self.opts.revert_after + 120)
        self.loaded = self.module_loaded()
        if rc != 0 and not self.loaded:
            tail = self.sh(f"dmesg | tail -n +{self.dmesg_mark + 1} | tail -5", check=False).stdout.strip()
            busy = hostops.is_busy(out)
            raise LoadError(
                f"{how} failed (rc={rc}, {tries} tr{'y' if tries == 1 else 'ies'}): {out.strip()[-300:]}"
                + (f"\n  dmesg: {tail}" if tail else ""),
                f"{self.r.where}: {self.rko}",
                "another live-patch transition kept the kernel busy: retry once it finished "
                "(cat /sys/kernel/livepatch/*/transition)"
                if busy
                else "read the kernel log on the host (dmesg); check the module matches the running kernel",
            )
        return {"via": how, "rc": rc, "tries": tries}

    def wait_transition(self, target: str = "1", name: str = "patch") -> dict:
        t0 = time.monotonic()
        signalled = False
        detail: dict = {"target": name}
        while True:
            enabled, transition = self.patch_state()
            elapsed = time.monotonic() - t0
            if enabled is None and target == "0":
                detail.update(done=True, seconds=round(elapsed, 1))
                return detail
            if enabled == target and transition == "0":
                detail.update(done=True, seconds=round(elapsed, 1))
                return detail
            action = transition_action(elapsed, signalled, self.opts.signal_after, self.opts.revert_after)
            if action == "signal":
                signalled = True
                detail["stalled_tasks"] = self.stalled_tasks()
                has_signal = self.sh(f"test -e {self.sysfs}/signal", check=False).rc == 0
                if has_signal:
                    self.sh(f"echo 1 > {self.sysfs}/signal", check=False)
                    detail["signalled"] = f"wrote 1 to {self.sysfs}/signal after {elapsed:.0f} s"
                else:
                    detail["signalled"] = (
                        f"no {self.sysfs}/signal in this kernel: it signals stalled tasks "
                        f"itself (checked after {elapsed:.0f} s)"
                    )
                self.log(f"transition not done after {elapsed:.0f} s: {detail['signalled']}")
            elif action == "revert":
                detail.update(done=False, seconds=round(elapsed, 1), stalled_tasks=self.stalled_tasks())
                return detail
            time.sleep(self.opts.poll)

    def stalled_tasks(self) -> list[dict]:
        """Every thread whose patch_state is not the transition's target, with its kernel stack (at most 20)."""
        return hostops.parse_stalled(self.sh(hostops.stalled_script(self.sysfs), check=False).stdout)

    def verify(self) -> dict:
        enabled, transition = self.patch_state()
        objs = parse_objects(
            self.sh(
                f'cd {self.sysfs} && for o in */; do for f in "$o"*/; do [ -d "$f" ] && echo "${{f%/}}"; done; done',
                check=False,
            ).stdout
        )
        patched = sorted({func_name(f) for fs in objs.values() for f in fs})
        dmesg = self.sh(f"dmesg | tail -n +{self.dmesg_mark + 1}", check=False).stdout
        bad = dmesg_problems(dmesg, self.art.name)
        detail: dict = {
            "enabled": enabled,
            "transition": transition,
            "objects": objs,
            "patched_functions": patched,
            "dmesg_problems": bad,
        }
        self.data["verify"] = detail
        problems = []
        if enabled != "1":
            problems.append(f"enabled={enabled}")
        if transition != "0":
            problems.append(f"transition={transition}")
        missing = [f for f in self.art.functions if func_name(f) not in patched]
        if missing or not patched:
            problems.append(f"patched function(s) {', '.join(missing) or '(any)'} not under {self.sysfs}/<object>/")
        if bad:
            problems.append(f"kernel log: {bad[0]}")
        detail["other_livepatches"] = self.check_others()
        detail["taint"] = self.check_taint("after the load")
        if self.art.check_script is not None:
            rpath = f"{self.rdir}/{self.art.check_script.name}"
            self.r.put(self.art.check_script, rpath, mode=0o700, sudo=True)
            r = self.sh(
                f"LIVEPATCH_MODULE={shlex.quote(self.art.name)} sh {shlex.quote(rpath)} {shlex.quote(self.art.name)}",
                check=False,
            )
            detail["loaded_check"] = {
                "script": self.art.check_script.name,
                "rc": r.rc,
                "output": (r.stdout + r.stderr).strip()[-500:],
            }
            if r.rc != 0:
                problems.append(f"{self.art.check_script.name} exited {r.rc}: {(r.stderr or r.stdout).strip()[-200:]}")
        if problems:
            raise VerifyError(
                "; ".join(problems),
                f"{self.r.where}: {self.sysfs}",
                "see the verify detail in the report; the module was unloaded",
            )
        return detail

    def disable_and_unload(self) -> dict:
        detail: dict = {}
        enabled, _ = self.patch_state()
        if enabled == "1":
            rc, out, tries = self.busy_retry(f"echo 0 > {self.sysfs}/enabled", "disable")
            detail["disable"] = self.wait_transition("0", "unpatch")
            detail["disable"]["tries"] = tries
        if self.module_loaded():
            # 5.10 drops the livepatch core's module reference asynchronously after the unpatch transition
            ref = self.sh(
                hostops.refcount_script(self.art.name), check=False, timeout=hostops.REFCOUNT_WAIT + 30
            ).stdout.strip()
            detail["refcount"] = ref
            cmd = f"kpatch unload {self.art.name}" if self.kpatch else f"rmmod {self.art.name}"
            rc, out, tries = self.busy_retry(cmd, "unload")
            detail["unload"] = {"via": cmd.split()[0], "rc": rc, "tries": tries}
        still = self.module_loaded()
        self.loaded = still
        if still:
            raise UnloadError(
                f"module {self.art.name} is still loaded after disable + unload",
                self.r.where,
                f"check `cat {self.sysfs}/transition` and dmesg on the host; rmmod {self.art.name} "
                "once the transition finished",
            )
        return detail

    def set_patch(self, on: bool) -> None:
        if on and not self.module_loaded():
            self.load()
            d = self.wait_transition("1")
            if not d.get("done"):
                raise TransitionError(
                    "the patch transition did not finish while re-enabling it for the A/B run",
                    self.r.where,
                    "see the stalled tasks in the report",
                )
        elif not on and self.module_loaded():
            self.disable_and_unload()

    def cleanup_files(self) -> None:
        if self.rdir:
            self.sh(f"rm -rf -- {shlex.quote(self.rdir)}", check=False)
            self.data["remote_dir_removed"] = True


def validate_host(
    remote, art: Artifact, opts: Options, result: HostResult, log: Callable[[str], None] = lambda m: None
) -> HostResult:
    """Run the states on one open Remote; fills result (steps, data, status). Raises nothing for host failures."""
    h = _Host(remote, art, opts, result, log)
    result.data.update({"module": art.name, "sha256": art.sha256, "vermagic": art.vermagic})
    try:
        with result.step("preflight") as s:
            h.state("preflight")
            s.detail = h.preflight()
        with result.step("upload") as s:
            h.state("upload")
            s.detail = h.upload()
        with result.step("load") as s:
            h.state("load")
            s.detail = h.load()
        with result.step("transition") as s:
            h.state("transition")
            d = h.wait_transition("1")
            s.detail = d
            result.data["transition"] = d
            if not d.get("done"):
                h.state("revert")
                rev = h.disable_and_unload()
                d["reverted"] = rev
                result.data["reverted"] = True
                raise TransitionError(
                    f"transition of {art.name} not finished after {opts.revert_after:g} s "
                    f"(stalled: {hostops.stalled_summary(d.get('stalled_tasks', [])) or 'unknown'}); "
                    "reverted and unloaded",
                    f"{remote.where}: {h.sysfs}/transition",
                    "find what keeps the patched function on a task's stack (the stalled tasks above); "
                    "retry when they are idle, or rebuild the patch to avoid that function",
                )
        with result.step("verify") as s:
            h.state("verify")
            s.detail = h.verify()
        if opts.effect:
            with result.step("effect") as s:
                h.state("effect")
                s.detail = _effect(h, remote, opts, log)
                result.data["numa_effect"] = s.detail
                if s.detail.get("skipped"):
                    s.status = "skipped"
        if opts.keep:
            with result.step("keep") as s:
                h.state("keep")
                h.set_patch(True)
                s.detail = {
                    "kept": True,
                    "other_livepatches": h.check_others(),
                    "taint": h.check_taint("after the keep"),
                }
            result.status = "changed"
            result.message = f"{art.name} loaded, verified and kept"
        else:
            with result.step("unload") as s:
                h.state("unload")
                s.detail = h.disable_and_unload()
                s.detail["other_livepatches"] = h.check_others()
                s.detail["taint"] = h.check_taint("after the unload")
            result.status = "ok"
            result.message = f"{art.name} loaded, verified and unloaded"
        result.data["final"] = "kept" if opts.keep else "unloaded"
    except NumaforgeError as exc:
        result.status = "failed"
        result.message = exc.render()
        result.data["error"] = {"kind": type(exc).__name__, "what": exc.what, "where": exc.where, "fix": exc.fix}
        _rollback(h, result)
    finally:
        try:
            with budget.lifted():
                h.cleanup_files()
        except NumaforgeError:
            result.data["remote_dir_removed"] = False
    return result


def _rollback(h: _Host, result: HostResult) -> None:
    if not h.rdir:
        result.data["final"] = "untouched"
        return
    with result.step("rollback") as s, budget.lifted():  # a host out of time is still put back
        h.state("rollback")
        try:
            s.detail = h.disable_and_unload() if h.module_loaded() else {"loaded": False}
            result.data["final"] = "reverted" if result.data.get("reverted") else "rolled-back"
        except NumaforgeError as exc:
            s.status = "failed"
            s.detail = exc.render()
            result.data["final"] = "unknown"
            result.message += f"\n  rollback failed: {exc.what}"


def _upload_workload(h: _Host, remote, binary: Path | None) -> str:
    if binary is None:
        binary = workload_binary()
    rpath = f"{h.rdir}/numa_workload"
    remote.put(binary, rpath, mode=0o700, sudo=True)
    return rpath


def _numa_ready(remote) -> dict | None:
    """None when the host can show a NUMA effect, else the 'skipped' detail."""
    numa = mrunner.host_numa(remote)
    if numa["nodes"] < 3:
        return {"skipped": True, "reason": f"host has {numa['nodes']} NUMA node(s); the effect needs >= 3", **numa}
    if numa["numa_balancing"] != "1":
        return {
            "skipped": True,
            "reason": "automatic NUMA balancing is off on the host "
            f"(kernel.numa_balancing={numa['numa_balancing']}); numaforge does not change it",
            **numa,
        }
    return None


def _effect(h: _Host, remote, opts: Options, log) -> dict:
    skip = _numa_ready(remote)
    if skip:
        return skip
    rpath = _upload_workload(h, remote, opts.workload_binary)
    runs = mrunner.run_rounds(
        remote,
        rpath,
        opts.workload,
        ["off", "on"],
        opts.effect_rounds,
        lambda arm: h.set_patch(arm == "on"),
        order="abba",
        log=log,
    )
    out = mrunner.report(runs, ["off", "on"])
    out.update(mrunner.legacy_counts(runs))
    out["workload"] = mrunner.params_dict(opts.workload)
    out["rounds"] = opts.effect_rounds
    out.update(mrunner.host_numa(remote))
    return out


# Wakes every CPU: a short busy loop pinned to each CPU makes its idle task leave and re-enter the idle loop,
# where it takes a pending livepatch state. Under qemu TCG with 8 vCPUs the idle tasks otherwise held a
# transition for ~80 s (measured on the nps2 lab VM, 2 CPUs per node); with one pass it finished at once.
SPIN = (
    "n=$(nproc); c=0; while [ $c -lt $n ]; do taskset -c $c sh -c 'i=0; while [ $i -lt 300 ]; do "
    "i=$((i+1)); done' & c=$((c+1)); done; wait"
)


class ArmSwitcher:
    """Several live patches of the same functions on one host, at most one loaded: ``set_arm(name)``.

    arms: {name: Artifact, or None for "no live patch"}. ``open()`` preflights and uploads every module before
    any is loaded; ``close()`` disables and unloads whatever is loaded and removes the uploads (always call it).
    nudge: while a switch's transition is pending, wake the host's CPUs (SPIN; for lab VMs under emulation);
    it runs in the foreground, so it never overlaps a measured run.
    """

    def __init__(
        self,
        remote,
        arms: dict[str, Artifact | None],
        opts: Options | None = None,
        log: Callable[[str], None] = lambda m: None,
        nudge: bool = False,
    ):
        self.remote, self.opts, self.log, self.nudge = remote, opts or Options(effect=False), log, nudge
        self.hosts = {
            name: _Host(remote, art, self.opts, HostResult(f"{remote.where} ({name})"), log)
            for name, art in arms.items()
            if art is not None
        }
        self.arms = list(arms)
        self.current: str | None = None

    def open(self) -> None:
        for h in self.hosts.values():
            h.preflight()
        for h in self.hosts.values():
            h.upload()

    def set_arm(self, name: str) -> None:
        if name not in self.arms:
            raise LivepatchError(f"unknown arm {name}", self.remote.where, f"one of {', '.join(self.arms)}")
        for n, h in self.hosts.items():
            if n != name and h.module_loaded():
                self._off(h)
        if name in self.hosts:
            h = self.hosts[name]
            if self.nudge and not h.module_loaded():
                h.load()
                self._settle(h)
                if not h.wait_transition("1").get("done"):
                    raise TransitionError(
                        f"the transition to arm {name} did not finish",
                        self.remote.where,
                        "see the host's stalled tasks (/proc/*/patch_state)",
                    )
            h.set_patch(True)
        self.current = name

    def _off(self, h: _Host) -> None:
        if self.nudge and h.patch_state()[0] == "1":
            h.sh(f"echo 0 > {h.sysfs}/enabled", check=False)
            self._settle(h)
        h.disable_and_unload()

    def _settle(self, h: _Host, passes: int = 60) -> None:
        """SPIN until h's transition is no longer pending (or `passes` spins)."""
        for _ in range(passes):
            if h.patch_state()[1] != "1":
                return
            self.remote.run(SPIN, sudo=True, check=False, timeout=120)

    def close(self) -> None:
        with budget.lifted():
            for h in self.hosts.values():
                try:
                    if h.module_loaded():
                        self._off(h)
                finally:
                    h.cleanup_files()

    @property
    def workdir(self) -> str | None:
        return next((h.rdir for h in self.hosts.values() if h.rdir), None)


def measure_arms(
    remote,
    arms: dict[str, Artifact | None],
    params: mrunner.WorkloadParams,
    rounds: int,
    order: str = "random",
    seed: int = 13,
    workload_binary: Path | None = None,
    log: Callable[[str], None] = lambda m: None,
    nudge: bool = False,
) -> dict:
    """Interleaved rounds of every arm on one booted host; the runner's report plus the host's NUMA facts.
    nudge: see ArmSwitcher (lab VMs under TCG)."""
    numa = mrunner.host_numa(remote)
    if numa["numa_balancing"] != "1":
        raise LivepatchError(
            f"automatic NUMA balancing is off on the host (kernel.numa_balancing={numa['numa_balancing']})",
            remote.where,
            "boot with numa_balancing=enable; numaforge does not change it",
        )
    sw = ArmSwitcher(remote, arms, log=log, nudge=nudge)
    try:
        sw.open()
        if sw.hosts:
            rpath = _upload_workload(next(iter(sw.hosts.values())), remote, workload_binary)
        else:
            rdir = remote.run("mktemp -d /tmp/numaforge-measure.XXXXXX", sudo=True).stdout.strip()
            rpath = f"{rdir}/numa_workload"
            remote.put(workload_binary or _default_workload(), rpath, mode=0o700, sudo=True)
        runs = mrunner.run_rounds(
            remote, rpath, params, list(arms), rounds, sw.set_arm, order=order, seed=seed, log=log
        )
    finally:
        sw.close()
    out = mrunner.report(runs, list(arms))
    out.update(
        {
            "workload": mrunner.params_dict(params),
            "rounds": rounds,
            "order": order,
            "seed": seed,
            "nudge": nudge,
            **numa,
            "modules": {n: (a.as_dict() if a else None) for n, a in arms.items()},
        }
    )
    return out


def _default_workload() -> Path:
    return workload_binary()
