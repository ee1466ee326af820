#!/usr/bin/env bash
# Removes what scripts/install.sh installed (same --prefix / --destdir),
# after stopping and disabling the unit. Keeps the configuration
# (/etc/pcstream) and the learnt state (/var/lib/pcstream) unless --purge.
# Check /etc/ld.so.preload and services' LD_PRELOAD drop-ins first: a
# program told to preload a library that is gone gets a loader warning.
# Usage: scripts/uninstall.sh [--prefix DIR] [--destdir DIR] [--purge]
set -euo pipefail
prefix=/usr/local
destdir=
purge=0
while (($#)); do
    case $1 in
    --prefix) prefix=${2:?--prefix needs a directory}; shift ;;
    --destdir) destdir=${2:?--destdir needs a directory}; shift ;;
    --purge) purge=1 ;;
    -h | --help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "uninstall.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
d=$destdir
if [[ -z $d ]] && grep -qs "$prefix/lib/pcstream/libpcstream.so" /etc/ld.so.preload; then
    echo "uninstall.sh: /etc/ld.so.preload still names $prefix/lib/pcstream/libpcstream.so: remove that line first" >&2
    exit 1
fi
if [[ -z $d ]] && command -v systemctl >/dev/null && [[ -e /etc/systemd/system/pcstreamd.service ]]; then
    systemctl disable --now pcstreamd || true
fi
rm -f "$d$prefix/bin/pcstreamd" "$d$prefix/bin/pcstreamctl" \
    "$d$prefix/lib/pcstream/libpcstream.so" "$d$prefix/include/pcstream.h" \
    "$d/etc/systemd/system/pcstreamd.service"
rm -rf "$d$prefix/share/doc/pcstream"
rmdir "$d$prefix/lib/pcstream" 2>/dev/null || true
if ((purge)); then
    rm -rf "$d/etc/pcstream" "$d/var/lib/pcstream" "$d/var/lib/private/pcstream"
fi
[[ -z $d ]] && command -v systemctl >/dev/null && systemctl daemon-reload || true
echo "removed pcstream from ${d:-}$prefix$( ((purge)) && echo ', with its configuration and state')"
