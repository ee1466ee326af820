#!/bin/sh
# The second boot of the QEMU guest (see run.sh): systemd is PID 1 and has
# started pcstreamd from packaging/pcstreamd.service, unchanged. Run by
# pcstream-check.service (After=pcstreamd.service); prints `CHECK <name>
# ok|FAIL` lines on the serial console and powers the guest off.
export PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
check() {
  name=$1; shift
  if "$@" >/tmp/out 2>&1; then echo "CHECK $name ok"; else echo "CHECK $name FAIL"; head -c 2000 /tmp/out | sed 's/^/  | /'; fi
}
info() { echo "INFO $*"; }
num() { tr -d ' \n"' <"$1" | sed -n "s/.*[,{]$2:\([0-9]*\).*/\1/p"; }
info "systemd: $(systemctl --version | head -1); PID 1 is $(cat /proc/1/comm)"
check systemd-is-pid-1 test "$(cat /proc/1/comm)" = systemd
# The unit systemd loaded is the packaged file, with no drop-in.
info "FragmentPath=$(systemctl show -p FragmentPath --value pcstreamd) DropInPaths=$(systemctl show -p DropInPaths --value pcstreamd)"
check unit-is-packaged-one sh -c "cmp /etc/systemd/system/pcstreamd.service /usr/share/pcstream/pcstreamd.service.packaged && test \"\$(systemctl show -p FragmentPath --value pcstreamd)\" = /etc/systemd/system/pcstreamd.service && test -z \"\$(systemctl show -p DropInPaths --value pcstreamd)\""
check pcstreamd-active systemctl is-active pcstreamd
systemctl status pcstreamd --no-pager -l 2>&1 | head -20 | sed 's/^/  | /'
# Anything systemd refused or ignored in the unit.
journalctl -b --no-pager -o cat 2>/dev/null | grep -i 'pcstreamd.service' | grep -iE 'unknown|ignor|fail|not supported|refus' | sed 's/^/  | journal: /'
check unit-loaded-without-warnings sh -c "! journalctl -b --no-pager -o cat | grep -i 'pcstreamd.service:' | grep -iE 'unknown|ignoring|not supported'"
MAIN=$(systemctl show -p MainPID --value pcstreamd)
info "pcstreamd MainPID $MAIN, $(grep -E '^(Uid|NoNewPrivs|Seccomp|CapEff)' /proc/$MAIN/status 2>/dev/null | tr -s '\t\n' '  ')"
check pcstreamd-notify-type test "$(systemctl show -p Type --value pcstreamd)" = notify
check pcstreamd-dynamic-user sh -c "test \"\$(awk '/^Uid:/ {print \$2}' /proc/$MAIN/status)\" -ge 61184"
check pcstreamd-seccomp-no-caps sh -c "grep -q '^Seccomp:[[:space:]]*2' /proc/$MAIN/status && grep -q '^CapEff:[[:space:]]*0000000000000000' /proc/$MAIN/status && grep -q '^NoNewPrivs:[[:space:]]*1' /proc/$MAIN/status"
# The hardening is in force: a read-only / in its own mount namespace
# (ProtectSystem=strict), its own network namespace (PrivateNetwork=).
check pcstreamd-root-read-only sh -c "awk '\$5 == \"/\" {print \$6}' /proc/$MAIN/mountinfo | grep -q '^ro'"
check pcstreamd-private-network test "$(readlink /proc/$MAIN/ns/net)" != "$(readlink /proc/1/ns/net)"
info "systemd-analyze security: $(systemd-analyze security pcstreamd --no-pager 2>&1 | tail -1)"
# Every local user must reach the sockets: /run/pcstream is a real 0755
# directory (with RuntimeDirectoryPreserve= and DynamicUser=, systemd makes it
# a symlink into the root-only /run/private).
ls -ld /run/pcstream /run/private 2>&1 | sed 's/^/  | /'
check runtime-dir-reachable sh -c "test ! -L /run/pcstream && test \"\$(stat -c %a /run/pcstream)\" = 755"
check events-sock test -S /run/pcstream/events.sock
check ctl-sock test -S /run/pcstream/ctl.sock
check ctl-status pcstreamctl status --json
sed 's/^/  | /' /tmp/out
# A program under the shim: its write events reach the daemon.
check shim-dd env LD_PRELOAD=/usr/lib/pcstream/libpcstream.so PCSTREAM_FLUSH_MS=50 \
  dd if=/dev/zero of=/var/tmp/shim.out bs=64k count=256
# The daemon takes the shim's datagrams asynchronously: under TCG a fixed
# 2 s was sometimes too short (3,056 of 4,096 pages once), so wait until
# all of dd's 16 MiB is counted, or 30 s.
for _ in $(seq 30); do
  sleep 1
  pcstreamctl status --json >/tmp/st1.json 2>&1
  [ "$(num /tmp/st1.json clock_pages)" -ge 4096 ] 2>/dev/null && break
done
sed 's/^/  | /' /tmp/st1.json
E1=$(num /tmp/st1.json events); S1=$(num /tmp/st1.json signatures); C1=$(num /tmp/st1.json clock_pages)
info "after dd under the shim: events=$E1 signatures=$S1 clock_pages=$C1"
check shim-events-counted test "${E1:-0}" -gt 0
check shim-dd-pages-counted test "${C1:-0}" -ge 4096
# contexts: dd's write path, 16 MiB written by program dd.
ctx_dd() { pcstreamctl contexts --json | tr -d ' \n' | grep -q '"bytes_written":16777216,[^}]*"programs":\["dd"\]'; }
check contexts-name-dd ctx_dd
# Another local user (nobody) reaches the dynamic user's events.sock and is
# learnt separately (a second learner).
check shim-dd-as-nobody setpriv --reuid=65534 --regid=65534 --clear-groups env \
  LD_PRELOAD=/usr/lib/pcstream/libpcstream.so PCSTREAM_FLUSH_MS=50 dd if=/dev/zero of=/tmp/nobody.out bs=64k count=64
sleep 2
pcstreamctl status --json >/tmp/st1.json 2>&1
E1=$(num /tmp/st1.json events); S1=$(num /tmp/st1.json signatures); C1=$(num /tmp/st1.json clock_pages)
info "after dd as nobody: events=$E1 signatures=$S1 clock_pages=$C1 learners=$(num /tmp/st1.json learners)"
check nobody-has-own-learner test "$(num /tmp/st1.json learners)" = 2
check status-as-nobody setpriv --reuid=65534 --regid=65534 --clear-groups pcstreamctl status
# (Tables, mapping.<uid>, appear once a learner maps a signature: dd's one
# file never dies, so none here; tests/tests/daemon_*.rs check them.)
# ExecReload (SIGHUP: RELOADING=1, READY=1) keeps it running.
check systemctl-reload systemctl reload pcstreamd
check pcstreamd-active-after-reload systemctl is-active pcstreamd
# Stop: the state is saved in the StateDirectory (DynamicUser: under
# /var/lib/private, /var/lib/pcstream is a symlink to it).
check systemctl-stop systemctl stop pcstreamd
check pcstreamd-inactive sh -c "! systemctl is-active pcstreamd"
ls -la /var/lib/ /var/lib/private/ 2>&1 | grep -E 'pcstream|private' | sed 's/^/  | /'
check state-saved test -s /var/lib/private/pcstream/state.json
check state-via-symlink test -s /var/lib/pcstream/state.json
check state-has-dd-signatures grep -q '"signatures"' /var/lib/private/pcstream/state.json
check sockets-removed-at-stop sh -c "! test -e /run/pcstream/ctl.sock"
# Restart: the learnt state is reloaded (same signatures, same clock).
check systemctl-start systemctl start pcstreamd
check pcstreamd-active-again systemctl is-active pcstreamd
pcstreamctl status --json >/tmp/st2.json 2>&1
S2=$(num /tmp/st2.json signatures); C2=$(num /tmp/st2.json clock_pages)
info "after restart: signatures=$S2 clock_pages=$C2 (before stop: $S1, $C1)"
check state-reloaded-signatures test "${S2:-x}" = "${S1:-y}" -a "${S2:-0}" -gt 0
check state-reloaded-clock test "${C2:-x}" = "${C1:-y}"
check contexts-after-restart ctx_dd
check no-daemon-errors sh -c "! journalctl -u pcstreamd -b --no-pager -o cat | grep -E ' (ERROR|WARN) '"
journalctl -u pcstreamd -b --no-pager -o cat 2>&1 | tail -12 | sed 's/^/  | journal: /'
echo ALL-DONE
systemctl poweroff --no-block
