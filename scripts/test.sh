#!/usr/bin/env bash
# Set up everything (scripts/setup.sh), then run the test suite tier by tier, printing each tier's time.
# `invoke doctor --strict` first: every tool, package and cache the suite needs is there and came from setup
# (scripts/packages.txt), so a green run here is a green run on a fresh machine; it stops the run when not.
# Then lint (ruff + mypy, `invoke lint`) and the tiers: pytest markers (see pyproject.toml), fast core first.
set -uo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
bash scripts/setup.sh || exit 1
echo "tier setup: $((SECONDS - t0)) s"
PY=.venv/bin/python
heavy="ssh or bmc or kernel_source or kpatch or lab_vm"
tiers=("core|not ($heavy)" "ssh|ssh" "bmc|bmc" "kernel_source|kernel_source" "kpatch|kpatch" "lab_vm|lab_vm")
fail=0; ran=0
s0=$SECONDS
.venv/bin/invoke doctor --strict >/tmp/numaforge-doctor.log 2>&1 \
  || { cat /tmp/numaforge-doctor.log; echo "tier doctor: this machine is not what setup makes (invoke doctor --strict)"; exit 1; }
echo "tier doctor: $((SECONDS - s0)) s"
s0=$SECONDS
.venv/bin/invoke lint || { echo "tier lint: ruff/mypy found problems (invoke lint)"; fail=1; }
echo "tier lint: $((SECONDS - s0)) s"
for t in "${tiers[@]}"; do
  name=${t%%|*}; expr=${t#*|}
  s0=$SECONDS
  $PY -m pytest -m "$expr" "$@"
  rc=$?
  echo "tier $name: rc=$rc in $((SECONDS - s0)) s"
  case $rc in
    0) ran=1 ;;
    5) echo "tier $name: no tests selected" ;;
    *) fail=1 ;;
  esac
done
echo "tests: total $((SECONDS - t0)) s"
[ $ran = 1 ] || { echo "tests: no tier ran any test"; exit 1; }
exit $fail
