#!/usr/bin/env bash
# Lab VM tier (issue 5): qemu (TCG), the initramfs parts (busybox-static, dropbear, sftp-server, cpio for the
# archive check), gcc + static libc for the NUMA workload, gcc-10 for test live patches, and the cached Debian
# bullseye 5.10.0-46 kernel + headers (the VM's kernel until/alongside the lab kernel). Idempotent: warm runs
# only check. Needs apt_need/$SUDO from scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=.venv/bin/python

apt_need $(packages lab) $(packages kpatch) $(packages ssh)

# gcc-10 (bullseye's kernel compiler) builds the test live patches against Debian's 5.10 headers
if ! command -v gcc-10 >/dev/null 2>&1; then
  echo "setup: installing gcc-10 from bullseye (private apt config)"
  $SUDO env PATH="$PATH" NUMAFORGE_CACHE="${NUMAFORGE_CACHE:-$HOME/.cache/numaforge}" \
    "$PY" -m numaforge.debian_apt install bullseye gcc-10
fi

# The static workload (validate's NUMA A/B runs it in the VM); for the test suite (NUMAFORGE_SETUP_TESTS=1:
# `scripts/setup.sh --tests`, or this script on its own) also Debian's kernel + headers (downloaded and extracted
# once into the cache; `lab-up --kernel debian` fetches it on first use otherwise) and the test live patches
# compiled against it (cached by content hash)
NUMAFORGE_SETUP_TESTS=${NUMAFORGE_SETUP_TESTS:-1} "$PY" - <<'PYEOF'
import os
from numaforge.lab import vm
from numaforge.workload import workload_binary
from numaforge.paths import ROOT
print(f"setup: NUMA workload {workload_binary()}")
if os.environ["NUMAFORGE_SETUP_TESTS"] == "1":
    k = vm.debian_kernel()
    print(f"setup: lab kernel 'debian' {k.release}: {k.image}")
    for name in ("nf_lp_cmdline", "nf_lp_stall"):
        print(f"setup: test live patch {vm.build_module(ROOT / 'tests/data/livepatch' / name, k)}")
PYEOF
qemu-system-x86_64 --version | head -1
