#!/usr/bin/env bash
# Host OS tier (issue 17): Debian's irqbalance for the lab VM (its --policyscript is what os-apply configures).
# Downloaded with `apt-get download` and extracted into the cache -- never installed, so no irqbalance daemon ever
# runs on this build server -- plus the shared libraries it links (the initramfs copies them via ldd).
# Idempotent: warm runs only check. Needs apt_need/$SUDO from scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."

apt_need $(packages hostos)
dest="${NUMAFORGE_CACHE:-$HOME/.cache/numaforge}/hostos/irqbalance"
if [ ! -x "$dest/usr/sbin/irqbalance" ]; then
  tmp=$(mktemp -d /tmp/numaforge-irqbalance.XXXXXX)
  trap 'rm -rf "$tmp"' EXIT
  chmod 755 "$tmp"                   # apt-get download drops privileges to _apt
  if [ ! -f /tmp/.numaforge-apt-updated ]; then $SUDO apt-get update -qq && touch /tmp/.numaforge-apt-updated; fi
  (cd "$tmp" && apt-get download -q irqbalance >/dev/null)
  dpkg-deb -x "$tmp"/irqbalance_*.deb "$tmp/tree"
  mkdir -p "$(dirname "$dest")"
  rm -rf "$dest.new" && mv "$tmp/tree" "$dest.new" && rm -rf "$dest" && mv "$dest.new" "$dest"
fi
ldd "$dest/usr/sbin/irqbalance" | grep -q "not found" && { echo "setup: irqbalance misses libraries:"; ldd "$dest/usr/sbin/irqbalance" | grep "not found"; exit 1; }
echo "setup: irqbalance $(zcat "$dest/usr/share/doc/irqbalance/changelog.Debian.gz" | head -1 | cut -d'(' -f2 | cut -d')' -f1) in $dest"
