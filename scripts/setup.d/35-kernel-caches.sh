#!/usr/bin/env bash
# Kernel caches (issue 24), built or downloaded once per machine into the content-hash cache, like the Debian
# kernel and kpatch-build itself: the main job's build-kpatch and lab-up and the kpatch and lab_vm test tiers read
# them, and none of them should pay for them.
#  - the lab kernel: our 5.10.262 built with kpatch-build's flags (numaforge.kernel.labkernel; about 6 minutes
#    on 2 cores), and the same with the whole series built in (numaforge.measure.arms.full_kernel: an
#    incremental build of the lab kernel's tree, about 3 minutes);
#  - Debian's newest kernel source (MAINLINE_DEBIAN), the series' mainline base;
#  - each Debian kpatch target's inputs: .config and Module.symvers from the headers package, vmlinux from the
#    -dbg package (about 800 MB downloaded, only the vmlinux kept; numaforge.kernel.targets.debian_inputs).
# `invoke doctor --strict` checks that both are here. Idempotent: a warm run finds them and does nothing.
# Only the lab kernel is the main job's (build-kpatch, lab-up); the rest is the test suite's and is done when
# NUMAFORGE_SETUP_TESTS is 1: `scripts/setup.sh --tests` (scripts/test.sh) and a run of this script on its own.
# Needs 20-kernel-toolchain.sh (source) and 30-kpatch.sh (kpatch-build, gcc-10, ccache). Nothing in the steps after
# it needs what it builds, so setup.sh runs them meanwhile (issue 43):
# setup: runs beside the steps after it
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=.venv/bin/python
tests=${NUMAFORGE_SETUP_TESTS:-1}
log=$(mktemp /tmp/numaforge-labkernel.XXXXXX)
if [ "$tests" = 1 ]; then
  dlog=$(mktemp /tmp/numaforge-debian-inputs.XXXXXX)
  # the Debian inputs are a download and an extraction: fetch them while the lab kernel compiles; so is Debian's
  # newest kernel source (numaforge.defaults.MAINLINE_DEBIAN, about 150 MB, imported once by the tarball's sha256): the
  # base of the series' mainline copy, which the kernel_source tier checkpatches and applies there (issue 42 item 7)
  "$PY" - >"$dlog" 2>&1 <<'PYEOF' &
from numaforge.defaults import MAINLINE_DEBIAN
from numaforge.kernel import source as ksource
src = ksource.prepare(MAINLINE_DEBIAN, log=lambda m: print(f"setup: {m}", flush=True))
print(f"setup: {MAINLINE_DEBIAN} -> {src.repo} ({src.base_version}, {'imported' if src.imported else 'cached'})")
from numaforge.kernel import targets as tg
for name in tg.available():
    t = tg.load_target(name)
    if t.kind == "debian":
        di = tg.debian_inputs(t, log=lambda m: print(f"setup: {m}", flush=True))
        print(f"setup: kpatch target {name}: inputs in {di.vmlinux.parent}")
PYEOF
  dpid=$!
  # bullseye main's 5.10.223 source (the kernel_source tier applies the series there too; 20-kernel-toolchain.sh
  # imported only 5.10.262, the lab kernel's): imported beside the build as well
  plog=$(mktemp /tmp/numaforge-prefetch.XXXXXX)
  "$PY" -m numaforge.kernel.source prefetch "debian:linux-source-5.10=5.10.223-1" >"$plog" 2>&1 &
  ppid_=$!
fi
if ! "$PY" -m numaforge.kernel.labkernel >"$log" 2>&1; then
  tail -20 "$log"
  echo "setup: the lab kernel build failed (log above; the build's own log is named there)"
  [ "$tests" = 1 ] && { wait $dpid || true; }
  exit 1
fi
"$PY" - "$log" <<'PYEOF'
import json, pathlib, sys
text = pathlib.Path(sys.argv[1]).read_text()
st = json.loads(text[text.index("{"):])
how = f"built in {st['build_seconds']} s" if st.get("built_now") else "cached"
print(f"setup: lab kernel {st['release']} ({how}): {st['bzimage']}")
PYEOF
rm -f "$log"
[ "$tests" = 1 ] || exit 0
# the lab kernel with the whole series built in (0002's scheduler feature too): protocol amendment 7's knob
# control boots it (bench/numa_effect.py probe --knob) and so does tests/lab/test_knob_vm.py; a copy of the lab
# kernel's built tree with the series applied, only the units it reaches recompiled (docs/kpatch.md)
slog=$(mktemp /tmp/numaforge-serieskernel.XXXXXX)
if ! "$PY" - >"$slog" 2>&1 <<'PYEOF'
from numaforge.measure import arms
lk = arms.full_kernel(log=lambda m: print(m, flush=True))
how = f"built in {lk.build_seconds} s" if lk.built_now else "cached"
print(f"setup: series kernel {lk.release} ({how}): {lk.bzimage}")
PYEOF
then
  tail -20 "$slog"
  echo "setup: the series kernel build failed (log above)"
  wait $dpid || true
  exit 1
fi
tail -1 "$slog"
rm -f "$slog"
if ! wait $ppid_; then
  cat "$plog"
  echo "setup: importing linux-source-5.10=5.10.223-1 failed (above)"
  exit 1
fi
cat "$plog"
rm -f "$plog"
if ! wait $dpid; then
  cat "$dlog"
  echo "setup: downloading a Debian kpatch target's inputs failed (above)"
  exit 1
fi
cat "$dlog"
rm -f "$dlog"
