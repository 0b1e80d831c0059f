#!/usr/bin/env bash
# Set up everything (scripts/setup.sh --tests: the test suite's part too), then run the test suite tier by
# tier, printing each tier's time.
# `invoke doctor --strict` first: every tool, package and cache the suite needs is there and came from setup
# (scripts/packages.txt), so a green run here is a green run on a fresh machine; it stops the run when not.
# Then lint (ruff + mypy, `invoke lint`) and the tiers (pytest markers, see pyproject.toml) in two lanes side by
# side, then the lab VM tier alone:
#   lane "kernel": kernel_source, kpatch   -- compiles and kpatch-build, mostly one busy core (its symvers check)
#   lane "python": core, ssh, bmc, hostile -- Python, sshd peers in namespaces, BMC simulators (2 xdist workers,
#                                             bmc 4: it waits on the simulators' clocks, docs/BENCHMARKS.md);
#                                             hostile: the campaign of tests/hostile/ (docs/RELIABILITY.md), its
#                                             tally printed at the end of its log
#   then lab_vm                            -- qemu TCG: the session VM's tests on one worker, the tests that boot
#                                             their own VM on the other (tests/conftest.py's xdist groups)
# Each tier's output is printed whole, in that order, when its lane ends; the last line counts every tier's tests.
# Extra arguments go to every pytest run (e.g. -x, -k EXPR).
set -uo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
bash scripts/setup.sh --tests || exit 1
setup_s=$((SECONDS - t0))
echo "tier setup: $setup_s s"
PY=.venv/bin/python
heavy="ssh or bmc or kernel_source or kpatch or lab_vm or hostile"
logs=$(mktemp -d /tmp/numaforge-tests.XXXXXX)
s0=$SECONDS
.venv/bin/invoke doctor --strict >"$logs/doctor.log" 2>&1 \
  || { cat "$logs/doctor.log"; echo "tier doctor: this machine is not what setup makes (invoke doctor --strict)"; exit 1; }
echo "tier doctor: $((SECONDS - s0)) s"
fail=0
s0=$SECONDS
.venv/bin/invoke lint || { echo "tier lint: ruff/mypy found problems (invoke lint)"; fail=1; }
echo "tier lint: $((SECONDS - s0)) s"

# tier NAME EXPR [pytest args...]: one pytest run, its output in $logs/NAME.log, its rc and seconds in NAME.rc
tier() {
  local name=$1 expr=$2; shift 2
  local s=$SECONDS
  $PY -m pytest -m "$expr" "$@" >"$logs/$name.log" 2>&1
  echo "$? $((SECONDS - s))" >"$logs/$name.rc"
}
lane_kernel() { tier kernel_source kernel_source "$@"; tier kpatch kpatch "$@"; }
lane_python() {
  # ssh: a test marked ssh and bmc (sshd and a simulator) runs in the bmc tier only (tests/test_tiers.py)
  tier core "not ($heavy)" -n 2 "$@"; tier ssh "ssh and not bmc and not hostile" -n 2 "$@"
  # bmc: 4 workers; with 2 it kept the two cores 28 % busy (its tests wait on simulated POSTs and held requests)
  # loadgroup: the install tests' venv fixtures are built once each (their modules' xdist groups), not per worker
  tier bmc "bmc and not hostile" -n 4 --dist loadgroup "$@"
  tier hostile hostile -n 2 "$@"   # tests/hostile/conftest.py prints the campaign's tally at the end of its log
}

s0=$SECONDS
lane_kernel "$@" &
kpid=$!
lane_python "$@"
wait $kpid
echo "lanes kernel + python: $((SECONDS - s0)) s"
tier lab_vm lab_vm -n 2 --dist loadgroup "$@"

passed=0; failed=0; skipped=0; ran=0
for name in core ssh bmc hostile kernel_source kpatch lab_vm; do
  cat "$logs/$name.log"
  read -r rc secs <"$logs/$name.rc"
  echo "tier $name: rc=$rc in $secs s"
  case $rc in
    0) ran=1 ;;
    5) echo "tier $name: no tests selected" ;;
    *) fail=1 ;;
  esac
  last=$(grep -E "^=+ .* in [0-9.]+s" "$logs/$name.log" | tail -1)
  for k in passed failed skipped error errors; do
    n=$(grep -oE "[0-9]+ $k\b" <<<"$last" | grep -oE "^[0-9]+" || true)
    case $k in
      passed) passed=$((passed + ${n:-0})) ;;
      skipped) skipped=$((skipped + ${n:-0})) ;;
      *) failed=$((failed + ${n:-0})) ;;
    esac
  done
done
rm -rf "$logs"
echo "tests: $((SECONDS - t0 - setup_s)) s after setup ($((SECONDS - t0)) s with it)"
[ $ran = 1 ] || { echo "tests: no tier ran any test"; exit 1; }
echo "tests: $passed passed, $failed failed, $skipped skipped"
exit $fail
