"""Several live patches of one function on one host, one loaded at a time (ArmSwitcher), and the NUMA
outcome measurement over them (measure_arms): `invoke numa-effect`, bench/numa_effect.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

from .. import budget
from ..defaults import DEFAULT_SERIES
from ..measure import arms as marms
from ..measure import runner as mrunner
from ..report import HostResult
from ..workload import workload_binary
from .artifact import Artifact, load_artifact
from .errors import LivepatchError, TransitionError
from .host import HostRun, Options, upload_workload

SPIN = (
    "n=$(nproc); c=0; while [ $c -lt $n ]; do taskset -c $c sh -c 'i=0; while [ $i -lt 300 ]; do "
    "i=$((i+1)); done' & c=$((c+1)); done; wait"
)


def loaded_arms(
    series: str = DEFAULT_SERIES, target: str = "lab", arms: list[str] | None = None
) -> dict[str, Artifact | None]:
    """Arm name -> its built live patch, loaded (None: the arm without a module, `off`); an arm not built is an
    error (numaforge.measure.arms.built_arms)."""
    return {
        a.name: (load_artifact(a.module, functions=list(a.functions)) if a.module else None)
        for a in marms.built_arms(series, target, arms)
    }


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
            name: HostRun(remote, art, self.opts, HostResult(f"{remote.where} ({name})"), log)
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

    def _off(self, h: HostRun) -> None:
        if self.nudge and h.patch_state()[0] == "1":
            h.sh(f"echo 0 > {h.sysfs}/enabled", check=False)
            self._settle(h)
        h.disable_and_unload()

    def _settle(self, h: HostRun, passes: int = 60) -> None:
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


SCHED_FEATURES = "/sys/kernel/debug/sched_features"


def feature_state(text: str, feature: str) -> bool | None:
    """Whether `feature` is on (its name listed), off (NO_<name> listed) or not a feature of the kernel (None), from
    the text of /sys/kernel/debug/sched_features."""
    words = text.split()
    if feature in words:
        return True
    if f"NO_{feature}" in words:
        return False
    return None


class FeatureSwitcher:
    """Arms that are states of one scheduler feature on a full kernel (protocol amendment 7: the knob control):
    ``set_arm(name)`` writes the arm's word (FEATURE or NO_FEATURE) to /sys/kernel/debug/sched_features and reads
    it back; no module is loaded, so nothing of a live patch's transition is in the measurement. The same calls
    as ArmSwitcher. ``close()`` puts the feature back as ``open()`` found it.

    arms: {name: "FEATURE" | "NO_FEATURE"}, one feature."""

    def __init__(self, remote, arms: dict[str, str], log: Callable[[str], None] = lambda m: None):
        names = {w.removeprefix("NO_") for w in arms.values()}
        bad = [w for w in arms.values() if not re.fullmatch(r"[A-Z][A-Z0-9_]*", w)]
        if bad or len(names) != 1:
            raise LivepatchError(
                f"feature arms must switch one scheduler feature, not {', '.join(sorted(names)) or 'none'}"
                + (f" ({', '.join(map(repr, bad))} is not a feature name)" if bad else ""),
                "arms",
                "give each arm FEATURE or NO_FEATURE of the same feature",
            )
        self.remote, self.words, self.log = remote, dict(arms), log
        self.feature = names.pop()
        self.arms = list(arms)
        self.current: str | None = None
        self._initial: bool | None = None

    def _read(self) -> bool | None:
        r = self.remote.run(f"cat {SCHED_FEATURES}", sudo=True, check=False, timeout=30)
        if r.rc != 0:
            raise LivepatchError(
                f"cannot read {SCHED_FEATURES}: {(r.stderr or r.stdout).strip()[-300:] or 'no output'}",
                self.remote.where,
                "boot a kernel with CONFIG_SCHED_DEBUG=y and mount debugfs on /sys/kernel/debug",
            )
        return feature_state(r.stdout, self.feature)

    def open(self) -> None:
        self._initial = self._read()
        if self._initial is None:
            raise LivepatchError(
                f"the kernel has no scheduler feature {self.feature}",
                f"{self.remote.where}:{SCHED_FEATURES}",
                "boot a kernel with the whole series built in (bench/numa_effect.py probe --kernel series)",
            )

    def set_arm(self, name: str) -> None:
        if name not in self.words:
            raise LivepatchError(f"unknown arm {name}", self.remote.where, f"one of {', '.join(self.arms)}")
        self._write(self.words[name])
        self.current = name

    def _write(self, word: str) -> None:
        self.remote.run(f"echo {word} > {SCHED_FEATURES}", sudo=True, check=False, timeout=30)
        want = not word.startswith("NO_")
        got = self._read()
        if got is not want:
            raise LivepatchError(
                f"writing {word} to {SCHED_FEATURES} left {self.feature} "
                + ("unknown" if got is None else "on" if got else "off"),
                self.remote.where,
                "check the host's debugfs is writable by root (lockdown=confidentiality refuses it)",
            )
        self.log(f"{self.feature} {'on' if want else 'off'}")

    def close(self) -> None:
        if self._initial is not None:
            with budget.lifted():
                self._write(self.feature if self._initial else f"NO_{self.feature}")


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
            rpath = upload_workload(next(iter(sw.hosts.values())), remote, workload_binary)
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
