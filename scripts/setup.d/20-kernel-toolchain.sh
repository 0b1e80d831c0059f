#!/usr/bin/env bash
# Kernel backport tier (issue 3): toolchain for the 5.10 compile check and the two Debian linux-source-5.10
# packages the kernel_source tests and `invoke backport` use (5.10.262-1 default, 5.10.223-1 bullseye main).
# Idempotent: warm runs only check. Needs apt_need/$SUDO from scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=.venv/bin/python

# build deps of a 5.10 `make prepare` + object builds; dpkg-deb extracts the source tarball
apt_need $(packages kernel)

# gcc-10: what bullseye's kernels are built with; not in Debian 12, so install it from bullseye
if ! command -v gcc-10 >/dev/null 2>&1; then
  echo "setup: installing gcc-10 from bullseye (private apt config)"
  $SUDO env PATH="$PATH" NUMAFORGE_CACHE="${NUMAFORGE_CACHE:-$HOME/.cache/numaforge}" \
    "$PY" -m numaforge.debian_apt install bullseye gcc-10
fi
gcc-10 --version | head -1

# pre-fetch the linux-source-5.10 .deb the lab kernel is built from and import its tarball once (content-hash
# cache); bullseye main's 5.10.223 is imported by 35-kernel-caches.sh beside the kernel build (issue 43)
"$PY" -m numaforge.kernel.source prefetch "debian:linux-source-5.10=5.10.262-1"
