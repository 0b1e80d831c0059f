#!/usr/bin/env bash
# Set up a Debian 12 build server for numaforge: apt packages, the Python venv (.venv), and every
# toolchain/cache the pipelines need (scripts/setup.d/*.sh, run in order). Idempotent: a second run only
# checks. Needs root (or sudo) for apt.
#
#   bash scripts/setup.sh            # what the tasks need (the README's first command: setup + the main job)
#   bash scripts/setup.sh --tests    # and what only the test suite and bench/ need (scripts/test.sh runs this)
#
# The test suite's part (issue 43: a newcomer's first result should not wait for it): a step whose header has
# the line "# setup: the test suite's only" runs with --tests only; steps that hold both read
# NUMAFORGE_SETUP_TESTS (1 with --tests; a step run on its own does both).
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  "") NUMAFORGE_SETUP_TESTS=0 ;;
  --tests) NUMAFORGE_SETUP_TESTS=1 ;;
  *) echo "setup: unknown argument '$1' (usage: bash scripts/setup.sh [--tests])" >&2; exit 2 ;;
esac
export NUMAFORGE_SETUP_TESTS
export DEBIAN_FRONTEND=noninteractive
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
t0=$SECONDS

# Base packages; each setup.d script installs what its own tier needs with apt_need (below).
apt_need() {
  local missing=()
  for p in "$@"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ ! -f /tmp/.numaforge-apt-updated ]; then $SUDO apt-get update -qq && touch /tmp/.numaforge-apt-updated; fi
  echo "setup: apt-get install ${missing[*]}"
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/tmp/numaforge-apt.log 2>&1 \
    || { tail -20 /tmp/numaforge-apt.log; echo "setup: apt-get install failed (log: /tmp/numaforge-apt.log)"; exit 1; }
}
export -f apt_need; export SUDO

# The apt packages of one tier of scripts/packages.txt (the one list setup installs and `doctor --strict` checks)
packages() { awk -v t="$1" '!/^#/ && NF == 4 && $1 == t && ($2 == "apt") {print $3}' "$PWD/scripts/packages.txt"; }
export -f packages

apt_need $(packages base)

# The venv is made from Debian's python3, never from whatever `python3` is first on PATH (pyenv, a hand-built
# one): a fresh machine has only Debian's. A venv made from another interpreter is made again.
if [ -f .venv/pyvenv.cfg ] && ! grep -qx 'home = /usr/bin' .venv/pyvenv.cfg; then
  echo "setup: .venv was made from $(sed -n 's/^home = //p' .venv/pyvenv.cfg)/python3, not Debian's: making it again"
  rm -rf .venv
fi
if [ ! -x .venv/bin/python ]; then /usr/bin/python3 -m venv .venv; fi
stamp=.venv/.numaforge-deps
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  if ! .venv/bin/pip install -q --disable-pip-version-check -e '.[test]'; then
    echo "setup: pip install -e '.[test]' into .venv failed (output above): nothing after it can run"
    echo "  fix: check that PyPI is reachable (a proxy's CA in /usr/local/share/ca-certificates + PIP_CERT), then re-run"
    exit 1
  fi
  touch "$stamp"
fi
export PATH="$PWD/.venv/bin:$PATH"

# A step whose header has the line "# setup: runs beside the steps after it" (35-kernel-caches: the kernel builds,
# ~5 minutes of both cores) starts in the background and the next steps (apt, downloads, pip: mostly waiting on
# the network) run meanwhile (issue 43); setup waits for it at the end, prints its output then, and fails if it did.
beside=(); beside_logs=(); beside_pids=(); beside_t0=()
stop_beside() { for p in "${beside_pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done; }
trap 'stop_beside' EXIT
trap 'stop_beside; exit 130' INT
trap 'stop_beside; exit 143' TERM
for step in scripts/setup.d/*.sh; do
  [ -e "$step" ] || continue
  s0=$SECONDS
  if [ "$NUMAFORGE_SETUP_TESTS" = 0 ] && grep -qx "# setup: the test suite's only" "$step"; then
    echo "setup: $(basename "$step") skipped: the test suite's (bash scripts/setup.sh --tests)"
    continue
  fi
  if grep -qx '# setup: runs beside the steps after it' "$step"; then
    log=$(mktemp /tmp/numaforge-setup-step.XXXXXX)
    setsid bash "$step" >"$log" 2>&1 &   # its own process group: stopped whole if setup stops first
    beside+=("$step"); beside_logs+=("$log"); beside_pids+=($!); beside_t0+=("$s0")
    echo "setup: $(basename "$step") started beside the next steps (its output follows when it ends)"
    continue
  fi
  bash "$step"
  echo "setup: $(basename "$step") done in $((SECONDS - s0)) s"
done
for i in "${!beside[@]}"; do
  rc=0; wait "${beside_pids[$i]}" || rc=$?
  cat "${beside_logs[$i]}"; rm -f "${beside_logs[$i]}"
  if [ "$rc" != 0 ]; then echo "setup: $(basename "${beside[$i]}") failed (exit $rc; its output is above)"; exit 1; fi
  echo "setup: $(basename "${beside[$i]}") done in $((SECONDS - ${beside_t0[$i]})) s (beside the steps after it)"
done
beside_pids=()
echo "setup: ready in $((SECONDS - t0)) s$([ "$NUMAFORGE_SETUP_TESTS" = 1 ] && echo ", the test suite's part included")"
