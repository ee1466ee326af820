#!/usr/bin/env bash
# Installs pcstream system-wide (or into a staging tree) from this checkout:
#
#   PREFIX/bin/pcstreamd, PREFIX/bin/pcstreamctl
#   PREFIX/lib/pcstream/libpcstream.so         (LD_PRELOAD this)
#   PREFIX/include/pcstream.h                  (the opt-in C API, io_uring)
#   PREFIX/share/doc/pcstream/*.md             (the unit's Documentation=)
#   /etc/systemd/system/pcstreamd.service      (packaging/, ExecStart= at PREFIX/bin)
#   /etc/pcstream/pcstreamd.toml               (only if none is there: never
#                                               overwrites an edited configuration)
#
# Usage: scripts/install.sh [--prefix DIR] [--destdir DIR] [--no-build [--from DIR]] [--strip] [--enable]
#   --prefix DIR   installation prefix (default /usr/local; the unit's
#                  ExecStart= is rewritten to DIR/bin/pcstreamd)
#   --destdir DIR  stage everything under DIR (a package root or an image),
#                  touching nothing of this system; implies no --enable
#   --no-build     install the release binaries already in target/
#   --from DIR     with --no-build: the binaries are in DIR (another profile)
#   --strip        strip symbols from the installed binaries
#   --enable       then `systemctl daemon-reload` and `enable --now pcstreamd`
#
# Nothing is preloaded anywhere: docs/daemon.md, "Turning it on
# system-wide", says how to give a service (or every program) the shim.
# scripts/uninstall.sh removes what this installed (not the configuration
# or the learnt state).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
prefix=/usr/local
destdir=
build=1
strip=0
enable=0
from=
while (($#)); do
    case $1 in
    --prefix) prefix=${2:?--prefix needs a directory}; shift ;;
    --destdir) destdir=${2:?--destdir needs a directory}; shift ;;
    --no-build) build=0 ;;
    --from) from=${2:?--from needs a directory}; shift ;;
    --strip) strip=1 ;;
    --enable) enable=1 ;;
    -h | --help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[[ $prefix == /* ]] || { echo "install.sh: --prefix must be an absolute path, not '$prefix'" >&2; exit 2; }
if [[ -n $destdir ]]; then
    destdir=$(mkdir -p "$destdir" && cd "$destdir" && pwd)
    enable=0
elif ((EUID != 0)); then
    echo "install.sh: installing into $prefix and /etc needs root (or give --destdir, or a --prefix you own with --destdir)" >&2
    exit 1
fi

out=${from:-${CARGO_TARGET_DIR:-$root/target}/release}
if ((build)); then
    [[ -z $from ]] || { echo "install.sh: --from goes with --no-build" >&2; exit 2; }
    cargo build --release -q -p pcstreamd -p pcstreamctl -p pcstream-preload --manifest-path "$root/Cargo.toml"
fi
for f in pcstreamd pcstreamctl libpcstream.so; do
    [[ -f $out/$f ]] || { echo "install.sh: $out/$f is missing (run without --no-build)" >&2; exit 1; }
done

d=$destdir
bin() { # src dst mode
    if ((strip)); then
        strip -o "$2" "$1"
        chmod "$3" "$2"
    else
        install -m "$3" "$1" "$2"
    fi
}
install -d -m 755 "$d$prefix/bin" "$d$prefix/lib/pcstream" "$d$prefix/include" \
    "$d$prefix/share/doc/pcstream" "$d/etc/systemd/system" "$d/etc/pcstream"
bin "$out/pcstreamd" "$d$prefix/bin/pcstreamd" 755
bin "$out/pcstreamctl" "$d$prefix/bin/pcstreamctl" 755
bin "$out/libpcstream.so" "$d$prefix/lib/pcstream/libpcstream.so" 644
install -m 644 "$root/crates/preload/include/pcstream.h" "$d$prefix/include/pcstream.h"
install -m 644 "$root"/docs/*.md "$d$prefix/share/doc/pcstream/"
# The unit as packaged, its paths moved to the prefix (unchanged for /usr).
sed -e "s|/usr/bin/pcstreamd|$prefix/bin/pcstreamd|" \
    -e "s|file:/usr/share/doc/pcstream/|file:$prefix/share/doc/pcstream/|" \
    "$root/packaging/pcstreamd.service" >"$d/etc/systemd/system/pcstreamd.service.new"
chmod 644 "$d/etc/systemd/system/pcstreamd.service.new"
mv "$d/etc/systemd/system/pcstreamd.service.new" "$d/etc/systemd/system/pcstreamd.service"
if [[ -e $d/etc/pcstream/pcstreamd.toml ]]; then
    echo "install.sh: kept $d/etc/pcstream/pcstreamd.toml (the packaged one is $d$prefix/share/doc/pcstream/pcstreamd.toml)"
else
    install -m 644 "$root/packaging/pcstreamd.toml" "$d/etc/pcstream/pcstreamd.toml"
fi
install -m 644 "$root/packaging/pcstreamd.toml" "$d$prefix/share/doc/pcstream/pcstreamd.toml"

echo "installed pcstream into ${d:-}$prefix (shim: $prefix/lib/pcstream/libpcstream.so), unit and configuration into ${d:-}/etc"
if ((enable)); then
    systemctl daemon-reload
    systemctl enable --now pcstreamd
    systemctl --no-pager --lines=0 status pcstreamd || true
elif [[ -z $destdir ]]; then
    echo "start it with: systemctl daemon-reload && systemctl enable --now pcstreamd"
fi
