#!/usr/bin/env bash
# kpatch tier (issue 4): kpatch-build 0.9.11 built from Debian's kpatch source (not packaged for bookworm),
# the tools kpatch-build and a 5.10 kernel build call, and gcc-10 (bullseye's kernel compiler).
# Idempotent: a warm run only checks versions. Needs apt_need/$SUDO from scripts/setup.sh.
# The lab kernel prebuild is the next step (35-kernel-caches.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=.venv/bin/python
PREFIX="${KPATCH_PREFIX:-/usr/local}"
WANT=0.9.11
CACHE="${NUMAFORGE_CACHE:-$HOME/.cache/numaforge}"

apt_need $(packages kernel) $(packages kpatch)

if ! command -v gcc-10 >/dev/null 2>&1; then
  echo "setup: installing gcc-10 from bullseye (private apt config)"
  $SUDO env PATH="$PATH" NUMAFORGE_CACHE="$CACHE" "$PY" -m numaforge.debian_apt install bullseye gcc-10
fi

have="$("$PREFIX/bin/kpatch-build" --version 2>/dev/null | awk '{print $NF}' || true)"
if [ "$have" != "$WANT" ]; then
  src="$CACHE/kpatch/toolchain"
  mkdir -p "$src"
  orig="$src/kpatch_${WANT}.orig.tar.gz"
  if [ ! -s "$orig" ]; then
    echo "setup: downloading Debian's kpatch ${WANT} source (sid deb-src)"
    # apt-get source --download-only fetches .dsc, orig and debian tarballs; only the orig tarball is used,
    # so a missing debian tarball on the mirror is not fatal as long as the orig arrived.
    NUMAFORGE_CACHE="$CACHE" "$PY" -m numaforge.debian_apt source sid-src "kpatch=${WANT}-1.1" "$src" \
      >"$src/download.log" 2>&1 || true
    [ -s "$orig" ] || NUMAFORGE_CACHE="$CACHE" "$PY" -m numaforge.debian_apt source sid-src kpatch "$src" \
      >>"$src/download.log" 2>&1 || true
    [ -s "$orig" ] || cat "$src/download.log"
    [ -s "$orig" ] || { echo "setup: kpatch ${WANT} orig tarball not downloaded (see above)"; exit 1; }
  fi
  work="$(mktemp -d)"
  tar -xzf "$orig" -C "$work"
  echo "setup: building kpatch-build ${WANT} (tools only, no kmod) and installing under $PREFIX"
  make -C "$work/kpatch-${WANT}" -j2 BUILDMOD=no >"$work/build.log" 2>&1 \
    || { tail -20 "$work/build.log"; echo "setup: kpatch build failed"; exit 1; }
  $SUDO make -C "$work/kpatch-${WANT}" PREFIX="$PREFIX" BUILDMOD=no install >"$work/install.log" 2>&1 \
    || { tail -20 "$work/install.log"; echo "setup: kpatch install failed"; exit 1; }
  rm -rf "$work"
fi
echo "setup: kpatch-build $("$PREFIX/bin/kpatch-build" --version | awk '{print $NF}') at $PREFIX/bin/kpatch-build; $(gcc-10 --version | head -1)"
