#!/usr/bin/env bash
# The NVMe target driven by a real Linux kernel: builds (and caches under
# target/qemu-cache, never committed) a Debian trixie minbase guest with
# nvme-cli and a trixie-backports kernel (≥ 6.16), packs it with the
# `pcstreamctl` binary into an initramfs, boots it under QEMU/TCG with no
# network device, and inside the guest runs `pcstreamctl target` on
# 127.0.0.1 and checks it through the kernel's nvme-tcp driver and nvme-cli
# (guest-init.sh). Results come back over the serial console as
# `CHECK <name> ok|FAIL` lines; the script fails if any check fails.
# Needs root (debootstrap, chroot); prints a skip line otherwise.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cache=${QEMU_CACHE:-$root/target/qemu-cache}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
if [ "$(id -u)" != 0 ]; then
  echo "qemu: SKIP (needs root for debootstrap/chroot)"
  exit 0
fi
for t in qemu-system-x86_64 debootstrap cpio zstd; do
  command -v "$t" >/dev/null || { echo "qemu: $t missing: run scripts/install-deps.sh" >&2; exit 1; }
done
start=$(date +%s)
mkdir -p "$cache"

# 1. The guest root file system and kernel (cached).
if [ ! -e "$cache/rootfs.done" ]; then
  rm -rf "$cache/rootfs"
  echo "qemu: debootstrap trixie (minbase) into $cache/rootfs"
  debootstrap --variant=minbase --include=nvme-cli,e2fsprogs,kmod,iproute2,procps \
    trixie "$cache/rootfs" "$mirror" >"$cache/debootstrap.log" 2>&1 \
    || { tail -20 "$cache/debootstrap.log" >&2; exit 1; }
  touch "$cache/rootfs.done"
fi
if [ ! -e "$cache/kernel.done" ]; then
  echo "qemu: linux-image from trixie-backports"
  r=$cache/rootfs
  echo "deb $mirror trixie-backports main" >"$r/etc/apt/sources.list.d/backports.list"
  chroot "$r" apt-get update -qq
  rm -f "$r"/var/cache/apt/archives/*.deb
  chroot "$r" env DEBIAN_FRONTEND=noninteractive apt-get install -qq -y --download-only \
    --no-install-recommends -t trixie-backports linux-image-amd64 >/dev/null
  rm -rf "$cache/kernel" && mkdir -p "$cache/kernel"
  for d in "$r"/var/cache/apt/archives/linux-*.deb; do dpkg-deb -x "$d" "$cache/kernel"; done
  rm -f "$r"/var/cache/apt/archives/*.deb
  touch "$cache/kernel.done"
fi
echo "qemu: guest root file system and kernel ready after $(( $(date +%s) - start )) s"
kver=$(ls "$cache/kernel/lib/modules" 2>/dev/null | head -1 || true)
[ -n "$kver" ] || kver=$(ls "$cache/kernel/usr/lib/modules" | head -1)
vmlinuz=$(ls "$cache"/kernel/boot/vmlinuz-* "$cache/kernel/usr/lib/modules/$kver/vmlinuz" 2>/dev/null | head -1 || true)
echo "qemu: kernel $kver"

# 2. The base initramfs: rootfs + the modules the checks need (cached).
if [ ! -e "$cache/base.cpio.zst" ]; then
  stage=$cache/stage
  rm -rf "$stage" && cp -a "$cache/rootfs" "$stage"
  rm -rf "$stage"/usr/share/{doc,man,locale,info} "$stage"/var/cache/apt/* "$stage"/var/lib/apt/lists/*
  src=$cache/kernel/lib/modules/$kver
  [ -d "$src" ] || src=$cache/kernel/usr/lib/modules/$kver
  dst=$stage/lib/modules/$kver
  mkdir -p "$dst/kernel"
  for p in drivers/nvme fs/ext4 fs/jbd2 fs/mbcache.ko.xz fs/configfs lib crypto arch net/tls net/handshake security/keys; do
    if [ -e "$src/kernel/$p" ]; then mkdir -p "$dst/kernel/$(dirname "$p")"; cp -a "$src/kernel/$p" "$dst/kernel/$p"; fi
  done
  cp -a "$src"/modules.builtin* "$src"/modules.order "$dst/" 2>/dev/null || true
  chroot "$stage" depmod "$kver"
  (cd "$stage" && find . | cpio -o -H newc --quiet | zstd -q -T0 -9 >"$cache/base.cpio.zst")
  rm -rf "$stage"
fi

echo "qemu: base initramfs ready after $(( $(date +%s) - start )) s"

# 3. This build's pcstreamctl and the guest's init (every run).
cargo build --release -q -p pcstreamctl --manifest-path "$root/Cargo.toml"
over=$(mktemp -d)
trap 'rm -rf "$over"' EXIT
mkdir -p "$over/usr/local/bin"
cp "$root/target/release/pcstreamctl" "$over/usr/local/bin/"
cc -O2 -Wall -o "$over/usr/local/bin/hintwrite" "$here/hintwrite.c"
cc -O2 -Wall -o "$over/usr/local/bin/uringwrite" "$here/uringwrite.c"
cp "$here/guest-init.sh" "$over/init" && chmod 755 "$over/init"
(cd "$over" && find . | cpio -o -H newc --quiet | zstd -q >"$cache/overlay.cpio.zst")
cat "$cache/base.cpio.zst" "$cache/overlay.cpio.zst" >"$cache/initrd.zst"

# 4. Boot (TCG, no network device); the guest powers off when done.
log=$cache/console.log
echo "qemu: pcstreamctl built after $(( $(date +%s) - start )) s"
echo "qemu: booting (console log: $log)"
timeout 900 qemu-system-x86_64 -machine q35 -cpu max -m 3072 -smp 2 -nic none -nographic -no-reboot \
  -kernel "$vmlinuz" -initrd "$cache/initrd.zst" \
  -append "console=ttyS0 rdinit=/init panic=-1 quiet loglevel=3" >"$log" 2>&1 || true
tr -d '\r' <"$log" | grep -E '^(CHECK|INFO|  \|)' || true
fails=$(tr -d '\r' <"$log" | grep -c '^CHECK .* FAIL' || true)
oks=$(tr -d '\r' <"$log" | grep -c '^CHECK .* ok' || true)
done_=$(tr -d '\r' <"$log" | grep -c '^ALL-DONE' || true)
echo "qemu: $oks checks ok, $fails failed, $(( $(date +%s) - start )) s"
[ "$fails" = 0 ] && [ "$done_" = 1 ] && [ "$oks" -gt 0 ]
