#!/usr/bin/env bash
# Follow the README the way a new user's machine would: in a clean Debian 12 root made by debootstrap, from a
# fresh clone of this repository's HEAD, with nothing from this machine but its kernel and its apt mirror (issue
# 24: "a fresh machine is the truth"), run the README's first command (setup + the main job on the lab default),
# stop the lab, then its second (setup + the test suite, what .ci/run runs). Both commands are read from README.md,
# so what is timed is what the README says. Needs root, debootstrap (apt-get install debootstrap) and about 30 GB
# free under the root's directory.
#
#   sudo bash scripts/fresh-root.sh [DIR]          # DIR: where the root is made (default /var/tmp/numaforge-root)
#
# The mirror is read from this machine's apt configuration (deb822 .sources or sources.list), never written here.
# The root gets /proc, /sys, /dev, /dev/pts and a fresh /run and /tmp; the clone is at /root/numaforge inside it.
# Prints each phase's time; the log of the run is DIR.log. The root is kept (a second run reuses the
# debootstrap but makes a new clone; delete DIR for a fully fresh one).
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "fresh-root: needs root (debootstrap, chroot, mounts)"; exit 2; }
command -v debootstrap >/dev/null || { echo "fresh-root: apt-get install debootstrap"; exit 2; }
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-/var/tmp/numaforge-root}
log="$dir.log"

mirror() {   # the first Debian mirror of this machine's apt config
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk '/^URIs:/ {print $2; exit}' "$f" | grep -v security && return 0
  done
  awk '$1 == "deb" && $0 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null
}
url=$(mirror | head -1)
[ -n "$url" ] || { echo "fresh-root: no Debian mirror in /etc/apt (sources.list or *.sources)"; exit 2; }

cleanup() {
  for m in dev/pts dev sys proc run tmp; do
    mountpoint -q "$dir/$m" && umount -l "$dir/$m" || true
  done
  mountpoint -q "$dir" && umount -l "$dir" || true
}
trap cleanup EXIT
t0=$SECONDS
if [ ! -x "$dir/usr/bin/apt-get" ]; then
  echo "fresh-root: debootstrap bookworm into $dir"
  debootstrap --variant=minbase bookworm "$dir" "$url" >"$log" 2>&1 || { tail -20 "$log"; exit 1; }
  echo "fresh-root: debootstrap done in $((SECONDS - t0)) s"
fi
cp /etc/resolv.conf "$dir/etc/resolv.conf"
# what the Debian installer (and every cloud image) writes and debootstrap does not: the tests reach their local
# peers as localhost
[ -s "$dir/etc/hosts" ] || printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$dir/etc/hosts"
# this machine's apt mirror as apt here uses it: its Debian sources (not debootstrap's one-line list) and the
# Acquire:: settings that go with it (a mirror that serves a frozen snapshot needs its Release files' dates
# accepted); numaforge.debian_apt derives its bullseye and sid views from these, as on any machine
if ls /etc/apt/sources.list.d/*.sources >/dev/null 2>&1; then
  : >"$dir/etc/apt/sources.list"
  cp /etc/apt/sources.list.d/*.sources "$dir/etc/apt/sources.list.d/"
fi
[ -s /etc/apt/sources.list ] && cp /etc/apt/sources.list "$dir/etc/apt/sources.list"
for f in /etc/apt/apt.conf.d/*; do
  grep -q '^Acquire::' "$f" 2>/dev/null && cp "$f" "$dir/etc/apt/apt.conf.d/"
done
# this network's own trust anchors (a TLS-inspecting egress proxy's CA, a company CA), as any machine on it has them:
# setup's ca-certificates puts them into the root's bundle, which pip is pointed at (PIP_CERT, below)
mkdir -p "$dir/usr/local/share/ca-certificates"
cp /usr/local/share/ca-certificates/*.crt "$dir/usr/local/share/ca-certificates/" 2>/dev/null || true
# the root is a mount point of its own, as / is on a machine: `ip netns`/`ip -n` make / a slave mount, which the
# kernel refuses for a directory that is not one (the ssh tier's namespace hosts failed with exit 255)
mountpoint -q "$dir" || mount --bind "$dir" "$dir"
mount -t proc proc "$dir/proc"
mount --rbind /sys "$dir/sys"
mount --rbind /dev "$dir/dev"
mount -t tmpfs tmpfs "$dir/run"
mount -t tmpfs -o size=8g tmpfs "$dir/tmp"
rm -rf "$dir/root/numaforge"
# a clone (not a copy of this work tree) made with the host's git: minbase has no git until setup installs it
git clone -q "$repo" "$dir/root/numaforge"
echo "fresh-root: clone of $(git -C "$repo" rev-parse --short HEAD) at /root/numaforge"
# the README's two commands: the first two lines of its first ```sh block
mapfile -t cmds < <(awk '/^```sh$/ {on=1; next} on && /^```/ {exit} on' "$dir/root/numaforge/README.md" | head -2)
[ ${#cmds[@]} = 2 ] || { echo "fresh-root: README.md does not start with two commands in a \`\`\`sh block"; exit 1; }
in_root() {
  chroot "$dir" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 CI=true PIP_CERT=/etc/ssl/certs/ca-certificates.crt bash -c "cd /root/numaforge && $1" \
    </dev/null >>"$log" 2>&1
}
rc=0
for i in 0 1; do
  echo "fresh-root: \$ ${cmds[$i]}" | tee -a "$log"
  s0=$SECONDS
  set +e
  in_root "${cmds[$i]}"
  r=$?
  set -e
  echo "fresh-root: command $((i + 1)) exited $r in $((SECONDS - s0)) s" | tee -a "$log"
  [ $r = 0 ] || rc=$r
  [ $i = 0 ] && in_root ".venv/bin/invoke lab-down" || true
done
echo "fresh-root: log $log"
grep -E "^(setup: ready|setup: [0-9]+-.* done|tier |lanes |tests: )" "$log" | tail -40
exit $rc
