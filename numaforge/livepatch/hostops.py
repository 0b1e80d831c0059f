"""kpatch-grade host operations, after dynup/kpatch's `kpatch` script (kpatch/kpatch: load_module, unload_module,
wait_for_zero_refcount, MAX_LOAD_ATTEMPTS=5, RETRY_INTERVAL=2):

- EBUSY retries: insmod and writes to /sys/kernel/livepatch/<p>/enabled answer "Device or resource busy" while
  another transition runs (the livepatch core's activeness safety check); they are retried 5 times, 2 s apart.
- refcount: on 5.10 the livepatch core drops its module reference asynchronously after `enabled=0` finishes, so
  rmmod right after `transition=0` can fail; wait for /sys/module/<m>/refcnt == 0 first.
- stalled threads: every thread (/proc/PID/task/TID, not only group leaders) whose patch_state is not the
  transition's target, with its kernel stack (/proc/PID/task/TID/stack, root only).
- taint: /proc/sys/kernel/tainted decoded into the kernel's flag letters; a live patch adds K (and O for an
  out-of-tree module, E for one the kernel cannot verify); any other new flag fails the step.

Pure: is_busy, with_busy_retries (takes the runner and the sleep), decode_taint, new_taint, parse_stalled,
parse_livepatches. The shell snippets are plain strings run by the caller over its Remote.
"""

from __future__ import annotations

import time
from typing import Callable

MAX_ATTEMPTS = 5  # kpatch: MAX_LOAD_ATTEMPTS
RETRY_INTERVAL = 2.0  # kpatch: RETRY_INTERVAL (seconds)
REFCOUNT_WAIT = 60.0  # seconds to wait for the module reference to drop after a disable

BUSY_MARKERS = ("Device or resource busy", "EBUSY")


def is_busy(output: str) -> bool:
    return any(m in output for m in BUSY_MARKERS)


def with_busy_retries(
    attempt: Callable[[], tuple[int, str]],
    attempts: int = MAX_ATTEMPTS,
    interval: float = RETRY_INTERVAL,
    sleep: Callable[[float], None] = time.sleep,
    log: Callable[[str], None] = lambda m: None,
) -> tuple[int, str, int]:
    """Run attempt() -> (rc, output) until it succeeds, fails with something else than EBUSY, or `attempts`
    EBUSY answers were seen. Returns (rc, output, tries)."""
    tries = 0
    while True:
        tries += 1
        rc, out = attempt()
        if rc == 0 or not is_busy(out) or tries >= attempts:
            return rc, out, tries
        log(f"busy (try {tries}/{attempts}): {out.strip()[-120:]}; retrying in {interval:g} s")
        sleep(interval)


# Documentation/admin-guide/tainted-kernels.rst (5.10): bit -> letter, meaning
TAINT_FLAGS = [
    ("P", "proprietary module loaded"),
    ("F", "module force loaded"),
    ("S", "SMP with non-SMP-safe CPUs"),
    ("R", "module force unloaded"),
    ("M", "machine check exception"),
    ("B", "bad page referenced"),
    ("U", "taint requested by userspace"),
    ("D", "kernel died (OOPS or BUG)"),
    ("A", "ACPI table overridden"),
    ("W", "kernel issued a warning"),
    ("C", "staging driver loaded"),
    ("I", "firmware bug workaround"),
    ("O", "out-of-tree module loaded"),
    ("E", "unsigned module loaded"),
    ("L", "soft lockup occurred"),
    ("K", "kernel live patched"),
    ("X", "auxiliary taint (distribution-defined)"),
    ("T", "built with the struct randomization plugin"),
]
# what loading a live patch legitimately adds: K always, O (kpatch-build and test modules are out-of-tree),
# E (a module whose signature the kernel cannot check: unsigned or signed by a key it does not trust)
EXPECTED_LIVEPATCH_TAINT = frozenset("KOE")


def decode_taint(value: int | str | None) -> list[str]:
    """/proc/sys/kernel/tainted -> ['K', 'O'] (letters of set bits, in bit order)."""
    try:
        n = int(str(value).strip())
    except (TypeError, ValueError):
        return []
    return [letter for bit, (letter, _) in enumerate(TAINT_FLAGS) if n & (1 << bit)]


def describe_taint(letters: list[str]) -> list[str]:
    meaning = dict(TAINT_FLAGS)
    return [f"{x} ({meaning.get(x, '?')})" for x in letters]


def taint_detail(value) -> dict:
    letters = decode_taint(value)
    return {
        "value": int(str(value).strip()) if str(value).strip().isdigit() else None,
        "flags": letters,
        "meaning": describe_taint(letters),
    }


def new_taint(before, after, expected: frozenset = EXPECTED_LIVEPATCH_TAINT) -> list[str]:
    """Flags set in `after` but not in `before` that a live patch does not explain (so a failure)."""
    return [x for x in decode_taint(after) if x not in decode_taint(before) and x not in expected]


# every online CPU runs one `true` (taskset: util-linux on the hosts, busybox in the lab VM); cpu0 often has no
# `online` file (it cannot go offline)
PROD_IDLE_CPUS = (
    "for d in /sys/devices/system/cpu/cpu[0-9]*; do c=${d##*/cpu}; "
    '[ "$(cat $d/online 2>/dev/null || echo 1)" = 1 ] && taskset -c $c true; done 2>/dev/null; true'
)


def stalled_script(sysfs_dir: str, limit: int = 20, stack_lines: int = 16) -> str:
    """Shell: every thread whose patch_state is not the target (the patch's `enabled` value), as
    'T pid tid comm' followed by its kernel stack lines 'S ...' (needs root for the stack)."""
    return (
        f"t=$(cat {sysfs_dir}/enabled 2>/dev/null); n=0; "
        "for d in /proc/[0-9]*/task/[0-9]*; do "
        "s=$(cat $d/patch_state 2>/dev/null) || continue; "
        '[ "$s" = -1 ] && continue; [ "$s" = "$t" ] && continue; '
        f"n=$((n+1)); [ $n -gt {limit} ] && break; "
        'p=${d#/proc/}; p=${p%%/*}; echo "T $p ${d##*/} $(cat $d/comm 2>/dev/null)"; '
        f"head -n {stack_lines} $d/stack 2>/dev/null | sed 's/^/S /'; done"
    )


def parse_stalled(text: str) -> list[dict]:
    """Output of stalled_script -> [{'pid': 12, 'tid': 13, 'comm': 'x', 'stack': ['[<0>] f+0x1/0x2', ...]}]."""
    out: list[dict] = []
    for line in text.splitlines():
        if line.startswith("T "):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1].isdigit() and parts[2].isdigit():
                out.append(
                    {
                        "pid": int(parts[1]),
                        "tid": int(parts[2]),
                        "comm": parts[3] if len(parts) > 3 else "",
                        "stack": [],
                    }
                )
        elif line.startswith("S ") and out:
            out[-1]["stack"].append(line[2:].strip())
    return out


def stalled_summary(threads: list[dict]) -> str:
    """'nf_lp_stall 123/124 at msleep_interruptible' for messages."""
    parts = []
    for t in threads[:5]:
        top = next((s.split("] ", 1)[-1] for s in t.get("stack", []) if s), "")
        parts.append(f"{t['comm']} {t['pid']}/{t['tid']}" + (f" at {top}" if top else ""))
    return ", ".join(parts)


LIVEPATCHES_SCRIPT = r"""for p in /sys/kernel/livepatch/*; do
  [ -d "$p" ] || continue
  echo "lp=${p##*/} $(cat $p/enabled 2>/dev/null || echo -) $(cat $p/transition 2>/dev/null || echo -)"
  for o in "$p"/*/; do for f in "$o"*/; do [ -d "$f" ] && { f=${f%/}; echo "fn=${p##*/} ${f#$p/}"; }; done; done
done
"""


def parse_livepatches(text: str) -> dict[str, dict]:
    """LIVEPATCHES_SCRIPT output -> {name: {'enabled': '1', 'transition': '0', 'functions': ['vmlinux/f,1']}}."""
    out: dict[str, dict] = {}
    for line in text.splitlines():
        if line.startswith("lp="):
            parts = line[3:].split()
            if parts:
                out[parts[0]] = {
                    "enabled": parts[1] if len(parts) > 1 else None,
                    "transition": parts[2] if len(parts) > 2 else None,
                    "functions": [],
                }
        elif line.startswith("fn="):
            parts = line[3:].split(" ", 1)
            if len(parts) == 2 and parts[0] in out:
                out[parts[0]]["functions"].append(parts[1])
    return out


def refcount_script(module: str, timeout: float = REFCOUNT_WAIT, interval: float = 0.5) -> str:
    """Shell: wait until /sys/module/<m>/refcnt is 0 (or the module is gone); prints 'refcnt=N waited=S'."""
    loops = max(1, int(timeout / interval))
    return (
        f"i=0; while [ $i -lt {loops} ]; do c=$(cat /sys/module/{module}/refcnt 2>/dev/null || echo gone); "
        f'[ "$c" = 0 ] || [ "$c" = gone ] && break; i=$((i+1)); sleep {interval}; done; '
        f'echo "refcnt=$c waited=$i"'
    )
