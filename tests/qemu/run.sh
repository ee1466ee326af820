#!/usr/bin/env bash
# The NVMe target driven by a real Linux kernel: builds (and caches under
# target/qemu-cache, never committed) a Debian trixie minbase guest with
# nvme-cli and a trixie-backports kernel (≥ 6.16), packs it with the
# `pcstreamctl` binary into an initramfs, boots it under QEMU/TCG with no
# network device, and inside the guest runs `pcstreamctl target` on
# 127.0.0.1 and checks it through the kernel's nvme-tcp driver and nvme-cli
# (guest-init.sh), then F2FS on the target: each write hint's RUH, and
# pcstreamd with the shim placing a short- and a long-lived call path of
# lifewrite.c on different RUHs. A second boot of the same initramfs runs systemd as PID 1
# (rdinit=/lib/systemd/systemd), which starts pcstreamd from
# packaging/pcstreamd.service, unchanged; pcstream-check.service then runs
# systemd-check.sh against it (sockets, status, a program under the shim,
# stop/save/restart/reload). Results come back over the serial console as
# `CHECK <name> ok|FAIL` lines; the script fails if any check fails.
# Needs root (debootstrap, chroot); prints a skip line otherwise.
# bench/fdp.sh boots the same guest for its benchmark through these
# settings (defaults: the CI checks): QEMU_CACHE (cache dir), QEMU_PACKAGES
# (more Debian packages, comma-separated; give them their own QEMU_CACHE),
# QEMU_INIT (the first boot's /init), QEMU_OVERLAY (a dir copied over the
# guest's /), QEMU_APPEND (kernel arguments), QEMU_MEM (MiB), QEMU_TIMEOUT
# (seconds for the first boot), QEMU_BOOTS.
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

# 1. The guest root file system and kernel (cached). rootfs.done holds the
# package list it was built with: a cache from another list (e.g. one
# without systemd) is rebuilt, and the base initramfs with it.
include=nvme-cli,e2fsprogs,f2fs-tools,kmod,iproute2,procps,systemd${QEMU_PACKAGES:+,$QEMU_PACKAGES}
stamp="trixie minbase $include"
if [ "$(cat "$cache/rootfs.done" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$cache/rootfs" "$cache/rootfs.done" "$cache/base.cpio.zst"
  echo "qemu: debootstrap trixie (minbase) into $cache/rootfs"
  debootstrap --variant=minbase --include=$include \
    trixie "$cache/rootfs" "$mirror" >"$cache/debootstrap.log" 2>&1 \
    || { tail -20 "$cache/debootstrap.log" >&2; exit 1; }
  echo "$stamp" >"$cache/rootfs.done"
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
  for p in drivers/nvme fs/ext4 fs/f2fs fs/jbd2 fs/mbcache.ko.xz fs/configfs lib crypto arch net/tls net/handshake security/keys; do
    if [ -e "$src/kernel/$p" ]; then mkdir -p "$dst/kernel/$(dirname "$p")"; cp -a "$src/kernel/$p" "$dst/kernel/$p"; fi
  done
  cp -a "$src"/modules.builtin* "$src"/modules.order "$dst/" 2>/dev/null || true
  chroot "$stage" depmod "$kver"
  (cd "$stage" && find . | cpio -o -H newc --quiet | zstd -q -T0 -9 >"$cache/base.cpio.zst")
  rm -rf "$stage"
fi

echo "qemu: base initramfs ready after $(( $(date +%s) - start )) s"

# 3. This build's pcstreamctl, pcstreamd, libpcstream.so, the unit and the
# guest's init (every run).
cargo build --release -q -p pcstreamctl -p pcstreamd -p pcstream-preload --manifest-path "$root/Cargo.toml"
over=$(mktemp -d)
trap 'rm -rf "$over"' EXIT
# The overlay's "." becomes the guest's / (mktemp makes it 0700: a dynamic
# user could then not even chdir to /).
chmod 755 "$over"
mkdir -p "$over/usr/local/bin" "$over/usr/share/pcstream" "$over/etc/systemd/system/multi-user.target.wants"
# pcstreamd, pcstreamctl, the shim, the unit and its configuration as a
# user installs them (scripts/install.sh, prefix /usr as the unit expects;
# symbols stripped to keep the initramfs small); a copy of the packaged
# unit is kept to check systemd saw this very file.
bash "$root/scripts/install.sh" --prefix /usr --destdir "$over" --no-build --strip >/dev/null
cp "$root/packaging/pcstreamd.service" "$over/usr/share/pcstream/pcstreamd.service.packaged"
cp "$here/pcstream-check.service" "$over/etc/systemd/system/"
cp "$here/systemd-check.sh" "$over/usr/local/bin/" && chmod 755 "$over/usr/local/bin/systemd-check.sh"
# `systemctl enable` for both units; no login prompt on the console; a fixed
# machine id (no first-boot logic).
ln -s ../pcstreamd.service "$over/etc/systemd/system/multi-user.target.wants/"
ln -s ../pcstream-check.service "$over/etc/systemd/system/multi-user.target.wants/"
ln -s /dev/null "$over/etc/systemd/system/serial-getty@ttyS0.service"
ln -s /dev/null "$over/etc/systemd/system/getty@tty1.service"
echo 5c0e5e0b1dd94c5f9b8f6a8e2f0c1d2e >"$over/etc/machine-id"
cc -O2 -Wall -o "$over/usr/local/bin/hintwrite" "$here/hintwrite.c"
cc -O2 -Wall -o "$over/usr/local/bin/uringwrite" "$here/uringwrite.c"
cc -O2 -Wall -o "$over/usr/local/bin/lifewrite" "$here/lifewrite.c"
cc -O2 -Wall -o "$over/usr/local/bin/rawlife" "$here/rawlife.c"
cp "${QEMU_INIT:-$here/guest-init.sh}" "$over/init" && chmod 755 "$over/init"
if [ -n "${QEMU_OVERLAY:-}" ]; then cp -a "$QEMU_OVERLAY"/. "$over"/; fi
(cd "$over" && find . | cpio -o -H newc --quiet | zstd -q >"$cache/overlay.cpio.zst")
cat "$cache/base.cpio.zst" "$cache/overlay.cpio.zst" >"$cache/initrd.zst"

# 4. Boot (TCG, no network device); the guest powers off when done.
# QEMU_BOOTS=systemd runs only the systemd boot (a quicker loop when working
# on the daemon's unit); the default runs both.
boots=${QEMU_BOOTS:-nvme,systemd}
# QEMU's serial console is its standard input and output (-nographic): its
# input is /dev/null, since CI runs with standard input closed and QEMU then
# refuses to start ("Failed to set FD nonblocking: Bad file descriptor").
# A boot that printed no check shows the end of its console log (QEMU's own
# error or the guest's last words).
no_checks() { echo "qemu: no CHECK line in $1; its last lines:"; tr -d '\r' <"$1" | tail -20 | sed 's/^/  | /'; }
# One boot: `boot SECONDS LOG KERNEL-ARGS`. Two vCPUs on one host thread
# (`thread=single`): with multi-threaded TCG a vCPU can run code another one
# has just patched (the kernel's int3-based text poking) and the guest
# kernel oopses early ("Oops: int3", seen once in CI with 7.3.4). A guest
# that panics before its first check (the emulator, not the code under
# test) is booted once more, and says so.
boot() {
  local secs=$1 out=$2 args=$3 try
  for try in 1 2; do
    timeout "$secs" qemu-system-x86_64 -machine q35 -accel tcg,thread=single -cpu max -m "${QEMU_MEM:-3072}" -smp 2 \
      -nic none -nographic -no-reboot -kernel "$vmlinuz" -initrd "$cache/initrd.zst" \
      -append "console=ttyS0 $args panic=-1 quiet loglevel=3" </dev/null >"$out" 2>&1 || true
    if [ "$try" = 1 ] && ! tr -d '\r' <"$out" | grep -q '^CHECK ' && grep -q 'Kernel panic' "$out"; then
      echo "qemu: the guest kernel panicked before its first check; booting again (its log: $out.panic)"
      cp "$out" "$out.panic"
      continue
    fi
    break
  done
}
log=$cache/console.log
echo "qemu: pcstreamctl built after $(( $(date +%s) - start )) s"
: >"$log"
case ,$boots, in *,nvme,*)
echo "qemu: booting (console log: $log)"
boot "${QEMU_TIMEOUT:-900}" "$log" "rdinit=/init ${QEMU_APPEND:-}"
tr -d '\r' <"$log" | grep -E '^(CHECK|INFO|  \|)' || no_checks "$log"
echo "qemu: NVMe/TCP boot done after $(( $(date +%s) - start )) s"
;; esac

# 5. Boot again with systemd as PID 1 (an initramfs root without
# /etc/initrd-release is the real root to systemd): pcstreamd.service and
# pcstream-check.service start; the check powers the guest off.
slog=$cache/console-systemd.log
: >"$slog"
case ,$boots, in *,systemd,*)
echo "qemu: booting with systemd as init (console log: $slog)"
boot 300 "$slog" "rdinit=/lib/systemd/systemd systemd.unit=multi-user.target"
tr -d '\r' <"$slog" | grep -E '^(CHECK|INFO|  \|)' || no_checks "$slog"
;; esac
fails=$(cat "$log" "$slog" | tr -d '\r' | grep -c '^CHECK .* FAIL' || true)
oks=$(cat "$log" "$slog" | tr -d '\r' | grep -c '^CHECK .* ok' || true)
done_=$(cat "$log" "$slog" | tr -d '\r' | grep -c '^ALL-DONE' || true)
nboots=$(echo "$boots" | tr ',' '\n' | grep -c .)
echo "qemu: $oks checks ok, $fails failed, $done_ of $nboots boots complete, $(( $(date +%s) - start )) s"
[ "$fails" = 0 ] && [ "$done_" = "$nboots" ] && [ "$oks" -gt 0 ]
