#!/bin/sh
# /init of the QEMU guest (see run.sh): starts pcstreamctl target on the
# guest's loopback, connects the kernel's nvme-tcp host to it and checks it
# with nvme-cli; prints `CHECK <name> ok|FAIL` lines on the serial console.
export PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /tmp /run && mount -t tmpfs tmp /tmp
mount -t configfs none /sys/kernel/config 2>/dev/null
ip link set lo up
modprobe nvme-tcp
modprobe ext4 2>/dev/null
NQN=nqn.2026-11.io.pcstream:ftl-sim
check() {
  name=$1; shift
  if "$@" >/tmp/out 2>&1; then echo "CHECK $name ok"; else echo "CHECK $name FAIL"; head -c 2000 /tmp/out | sed 's/^/  | /'; fi
}
info() { echo "INFO $*"; }
info "kernel $(uname -r), $(nvme version 2>&1 | head -1)"
pcstreamctl target --listen 127.0.0.1:4420 --capacity 1G --ruhs 8 --ru-size 1M --interval 0 --json \
  >/tmp/target.json 2>/tmp/target.log &
TPID=$!
sleep 2
check discover nvme discover -t tcp -a 127.0.0.1 -s 4420
check connect nvme connect -t tcp -a 127.0.0.1 -s 4420 -n $NQN
sleep 2
NS=$(ls /dev/nvme[0-9]*n1 2>/dev/null | head -1)
CTRL=$(ls /dev/nvme[0-9]* 2>/dev/null | grep -E '/dev/nvme[0-9]+$' | head -1)
info "namespace ${NS:-none}, controller ${CTRL:-none}"
if [ -z "$NS" ]; then sed 's/^/  | /' /tmp/target.log | tail -30; fi
check list nvme list
check id-ctrl nvme id-ctrl "$CTRL"
check id-ns nvme id-ns "$NS"
check fdp-configs nvme fdp configs "$CTRL" -e 1 -o json
check fdp-usage nvme fdp usage "$CTRL" -e 1 -o json
check fdp-stats nvme fdp stats "$CTRL" -e 1 -o json
check fdp-events nvme fdp events "$CTRL" -e 1 -o json
for f in /tmp/out; do :; done
nvme fdp configs "$CTRL" -e 1 -o json 2>&1 | head -40 | sed 's/^/  | /'
B=$(basename "$NS")
info "max_write_streams=$(cat /sys/block/$B/queue/max_write_streams 2>/dev/null) write_stream_granularity=$(cat /sys/block/$B/queue/write_stream_granularity 2>/dev/null)"
for d in /sys/block/nvme*; do info "$(basename $d) max_write_streams=$(cat $d/queue/max_write_streams 2>/dev/null)"; done
check max-write-streams test "$(cat /sys/block/$B/queue/max_write_streams 2>/dev/null)" = 8
check mkfs mkfs.ext4 -q -F "$NS"
check fsck fsck.ext4 -f -n "$NS"
# pcstreamctl device (no argument): the namespace's write streams as the
# kernel shows them, and ext4 on it named as a file system hints do not
# reach. devobj FILE KEY VALUE: the JSON object (up to its first nested
# one) whose KEY is "VALUE".
devobj() { tr -d ' \n' <"$1" | grep -o "{[^{}]*\"$2\":\"$3\"[^{}]*" | head -1; }
has() { devobj "$1" "$2" "$3" | grep -q "$4"; }
mkdir -p /mnt/e && mount -t ext4 "$NS" /mnt/e
check device-list pcstreamctl device --json
cp /tmp/out /tmp/devs.json
info "device list: $(devobj /tmp/devs.json name "$(basename "$NS")" | head -c 300)"
info "device list: $(devobj /tmp/devs.json mount_point /mnt/e | head -c 300)"
check device-list-write-streams has /tmp/devs.json name "$(basename "$NS")" '"max_write_streams":8,'
check device-list-ext4-hints-do-not-reach has /tmp/devs.json mount_point /mnt/e '"hints_reach_device":false'
umount /mnt/e
dd if=/dev/urandom of=/tmp/data bs=1M count=8 2>/dev/null
SUM=$(md5sum </tmp/data)
check dd-write dd if=/tmp/data of="$NS" bs=1M seek=600 oflag=direct
check disconnect nvme disconnect -n $NQN
check reconnect nvme connect -t tcp -a 127.0.0.1 -s 4420 -n $NQN
sleep 2
NS=$(ls /dev/nvme[0-9]*n1 2>/dev/null | head -1)
check dd-checksum sh -c "test \"\$(dd if=$NS bs=1M skip=600 count=8 iflag=direct 2>/dev/null | md5sum)\" = \"$SUM\""
# A discard reaches the device: half of that data deallocated (BLKDISCARD:
# Dataset Management), counted as trimmed_bytes at the target's exit.
check blkdiscard blkdiscard -f -o $((600 << 20)) -l $((4 << 20)) "$NS"
check discard-reads-zeros sh -c "test \"\$(dd if=$NS bs=1M skip=600 count=4 iflag=direct 2>/dev/null | tr -d '\\000' | wc -c)\" = 0"
check fdp-stats-after nvme fdp stats "$CTRL" -e 1 -o json
sed 's/^/  | /' /tmp/out
# pcstreamctl device (passthrough ioctls) against nvme-cli's fdp plugin.
num() { tr -d ' \n"' <"$1" | sed "s/.*[,{]$2:\([0-9]*\).*/\1/"; }
nvme fdp stats "$CTRL" -e 1 -o json >/tmp/cli-stats.json 2>&1
nvme fdp configs "$CTRL" -e 1 -o json >/tmp/cli-configs.json 2>&1
check device pcstreamctl device "$NS" --json
cp /tmp/out /tmp/dev.json
sed 's/^/  | /' /tmp/dev.json | head -30
check device-matches-nvme-cli test "$(num /tmp/dev.json host_bytes)/$(num /tmp/dev.json media_bytes)/$(num /tmp/dev.json nruh)/$(num /tmp/dev.json runs)" \
  = "$(num /tmp/cli-stats.json hbmw)/$(num /tmp/cli-stats.json mbmw)/$(num /tmp/cli-configs.json nruh)/$(num /tmp/cli-configs.json runs)"
info "device vs nvme-cli: $(num /tmp/dev.json host_bytes)/$(num /tmp/dev.json media_bytes)/$(num /tmp/dev.json nruh)/$(num /tmp/dev.json runs) vs $(num /tmp/cli-stats.json hbmw)/$(num /tmp/cli-stats.json mbmw)/$(num /tmp/cli-configs.json nruh)/$(num /tmp/cli-configs.json runs)"
# Placement: O_DIRECT writes with the device inode's hint 3 land in RUH 2
# (the kernel's stream 3 = the third placement id).
check hint-write hintwrite seq "$NS" 3 716800 4224
nvme fdp status "$NS" -o json 2>/dev/null | tr -d ' \n' >/tmp/status.json
sed 's/^/  | /' /tmp/status.json; echo
# 4224 KiB = 4 RUs + 32 blocks: RUH 2's current unit has 256 − 32 blocks left.
check fdp-status-ruh-2 grep -q '"pid":2,"ruhid":2,"earutr":0,"ruamw":224' /tmp/status.json
# io_uring writes with sqe->write_stream = 5 and 7 (the 5th and 7th
# placement ids: RUHs 4 and 6, which nothing else writes): 2080 KiB = 2 RUs +
# 8 blocks into RUH 4, 512 KiB = half an RU into RUH 6.
check uring-write-stream-5 uringwrite "$NS" 5 819200 2080
sed 's/^/  | /' /tmp/out
check uring-write-stream-7 uringwrite "$NS" 7 921600 512
nvme fdp status "$NS" -o json 2>/dev/null | tr -d ' \n' >/tmp/status.json
check fdp-status-ruh-4 grep -q '"pid":4,"ruhid":4,"earutr":0,"ruamw":248' /tmp/status.json
check fdp-status-ruh-6 grep -q '"pid":6,"ruhid":6,"earutr":0,"ruamw":128' /tmp/status.json
# RUH usage attributes (0 unused, 1 host specified, 2 controller specified):
# RUHs 2, 4, 6 were named by writes, 5 by none; 0 took the unplaced writes.
RUHA=$(nvme fdp usage "$CTRL" -e 1 -o json 2>/dev/null | tr -d ' \n"' | sed 's/.*ruhus:\[//; s/\].*//; s/[{}]//g; s/ruha://g')
info "nvme fdp usage: ruha per RUH $RUHA"
check fdp-usage-ruha test "$(echo "$RUHA" | cut -d, -f1,3,5,6,7)" = "2,1,1,0,1"
# Keep alive: the kernel's KATO (from its Connect) is enforced by the
# target; its Keep Alives keep an idle controller past KATO + its grace.
info "controller keep alive timeout: $(grep "subsystem=$NQN" /tmp/target.log | grep -o 'kato_ms=[0-9]*' | tail -1)"
sleep 20
check idle-past-kato dd if="$NS" of=/dev/null bs=1M skip=600 count=4 iflag=direct
nvme disconnect -n $NQN >/dev/null 2>&1
kill -TERM $TPID; wait $TPID
info "target: $(tr -d '\n' </tmp/target.json | head -c 600)"
ruh_bytes() { tr -d ' \n' </tmp/target.json | sed 's/.*"ruh_host_bytes":\[\([^]]*\)\].*/\1/' | cut -d, -f$1; }
check hint-lands-in-ruh-2 test "$(ruh_bytes 3)" = $((4224 * 1024))
check uring-stream-5-lands-in-ruh-4 test "$(ruh_bytes 5)" = $((2080 * 1024))
check uring-stream-7-lands-in-ruh-6 test "$(ruh_bytes 7)" = $((512 * 1024))
check ruh-5-untouched test "$(ruh_bytes 6)" = 0
check discard-counted test "$(num /tmp/target.json trimmed_bytes)" = $((4 << 20))

# A backing file: data written with dd reads back identical after a
# disconnect, a target restart and a reconnect.
ns_of() { # the block device of subsystem $1
  for d in /sys/block/nvme*; do
    n=$(basename "$d")
    if [ -b "/dev/$n" ] && [ "$(cat "$d/device/subsysnqn" 2>/dev/null)" = "$1" ]; then echo "/dev/$n"; return; fi
  done
  ls -t /dev/nvme[0-9]*n1 | head -1
}
BNQN=nqn.2026-11.io.pcstream:backed
backed() {
  pcstreamctl target --listen 127.0.0.1:4423 --nqn $BNQN --capacity 64M --ruhs 2 --ru-size 256K \
    --backing /tmp/ns.img --interval 0 >/dev/null 2>>/tmp/backed.log &
  BPID=$!
  sleep 1
  check "$1" nvme connect -t tcp -a 127.0.0.1 -s 4423 -n $BNQN
  sleep 2
}
backed backed-connect
BNS=$(ns_of $BNQN)
info "backed namespace $BNS"
check backed-dd-write dd if=/tmp/data of="$BNS" bs=1M seek=16 oflag=direct
check backed-disconnect nvme disconnect -n $BNQN
kill -TERM $BPID; wait $BPID
check backed-target-stopped sh -c "! kill -0 $BPID 2>/dev/null"
backed backed-reconnect-after-restart
BNS=$(ns_of $BNQN)
check backed-checksum-after-restart sh -c "test \"\$(dd if=$BNS bs=1M skip=16 count=8 iflag=direct 2>/dev/null | md5sum)\" = \"$SUM\""
nvme disconnect -n $BNQN >/dev/null 2>&1
# Header and data digests (CRC32C) when Linux's host asks for them: a
# write and a read back over a connection with both digests on.
check digest-connect nvme connect -t tcp -a 127.0.0.1 -s 4423 -n $BNQN --hdr-digest --data-digest
sleep 2
BNS=$(ns_of $BNQN)
check digest-dd-write dd if=/tmp/data of="$BNS" bs=1M seek=32 oflag=direct
check digest-checksum sh -c "test \"\$(dd if=$BNS bs=1M skip=32 count=8 iflag=direct 2>/dev/null | md5sum)\" = \"$SUM\""
check digest-negotiated grep -q 'header_digest=true data_digest=true' /tmp/backed.log
nvme disconnect -n $BNQN >/dev/null 2>&1
kill -TERM $BPID; wait $BPID

# Two temperatures on a small device: hot and cold on one RUH, then on two.
twotemp() { # port nqn hot-hint cold-hint
  pcstreamctl target --listen 127.0.0.1:$1 --nqn $2 --capacity 32M --ruhs 4 --ru-size 128K \
    --interval 0 >/dev/null 2>/tmp/t$1.log &
  P=$!
  sleep 1
  kill -0 $P 2>/dev/null || sed 's/^/  | /' /tmp/t$1.log >&2
  nvme connect -t tcp -a 127.0.0.1 -s $1 -n $2 >/dev/null 2>&1
  sleep 2
  N=$(ls -t /dev/nvme[0-9]*n1 | head -1)
  C=${N%n1}
  echo "INFO two temperatures on $N (hints $3/$4) from $(date +%s)" >&2
  hintwrite twotemp "$N" $3 $4 30720 1 >&2
  echo "INFO done at $(date +%s)" >&2
  S=$(nvme fdp stats "$C" -e 1 -o json | tr -d ' \n"')
  H=$(echo "$S" | sed 's/.*hbmw:\([0-9]*\).*/\1/'); M=$(echo "$S" | sed 's/.*mbmw:\([0-9]*\).*/\1/')
  nvme disconnect -n $2 >/dev/null 2>&1
  kill -TERM $P; wait $P
  awk "BEGIN { printf \"%.4f\", $M / $H }"
}
W1=$(twotemp 4421 nqn.2026-11.io.pcstream:mixed 1 1)
W2=$(twotemp 4422 nqn.2026-11.io.pcstream:separate 2 1)
info "two temperatures: WAF $W1 on one RUH, $W2 on separate RUHs"
check two-temperature-waf awk "BEGIN { exit !($W2 < $W1) }"
# F2FS: a file's write hint reaches the FDP device as F2FS's data
# temperature (SHORT hot, EXTREME cold, the rest warm), and the kernel
# passes the temperature on as write stream 1/2/3 = placement ids 0/1/2.
modprobe f2fs 2>/dev/null
FNQN=nqn.2026-11.io.pcstream:f2fs
f2fs_up() { # port [backing file]: a 512 MiB target, 8 RUHs of 1 MiB RUs
  pcstreamctl target --listen 127.0.0.1:$1 --nqn $FNQN --capacity 512M --ruhs 8 --ru-size 1M \
    ${2:+--backing $2} --interval 0 --json >/tmp/f$1.json 2>>/tmp/f2fs-target.log &
  FPID=$!
  sleep 1
  nvme connect -t tcp -a 127.0.0.1 -s $1 -n $FNQN >/dev/null 2>&1
  sleep 2
  FNS=$(ns_of $FNQN)
  mkdir -p /mnt/f
}
f2fs_down() { # port: unmount, disconnect, stop the target (its JSON then has per-RUH bytes)
  sync
  umount /mnt/f
  nvme disconnect -n $FNQN >/dev/null 2>&1
  kill -TERM $FPID; wait $FPID
  info "f2fs target $1: $(tr -d ' \n' </tmp/f$1.json | sed 's/.*\("ruh_host_bytes":\[[^]]*\]\).*/\1/')"
}
fruh() { tr -d ' \n' <"$1" | sed 's/.*"ruh_host_bytes":\[\([^]]*\)\].*/\1/' | cut -d, -f$2; }
MiB=1048576
f2fs_up 4430
check f2fs-mkfs mkfs.f2fs -f -q "$FNS"
check f2fs-mount mount -t f2fs "$FNS" /mnt/f
# pcstreamctl device: F2FS on a device with write streams is a path learnt
# hints take, in three classes.
pcstreamctl device --json >/tmp/devs.json 2>&1
info "device list: $(devobj /tmp/devs.json mount_point /mnt/f | head -c 300)"
check device-list-f2fs-hints-reach has /tmp/devs.json mount_point /mnt/f '"hints_reach_device":true'
check device-list-f2fs-three-classes has /tmp/devs.json mount_point /mnt/f '"kind":"f2fs".*"classes":3\|"classes":3.*"kind":"f2fs"'
# ... and names F2FS's own rules that send small syncs to its hot log
# (the kernel's defaults: 16 and 8 pages).
check device-list-f2fs-hot-rules sh -c "tr -d ' \\n' </tmp/devs.json | grep -q '\"min_hot_blocks\":16,\"min_fsync_blocks\":8}'"
# The issue's measurement: 8/12/16/24/32/40 MiB with no hint / 0 / SHORT /
# MEDIUM / LONG / EXTREME.
for fh in none:-:8192 zero:0:12288 short:2:16384 medium:3:24576 long:4:32768 extreme:5:40960; do
  check "f2fs-hint-write-${fh%%:*}" lifewrite hint "/mnt/f/${fh%%:*}" $(echo "$fh" | cut -d: -f2) ${fh##*:}
done
f2fs_down 4430
R0=$(fruh /tmp/f4430.json 1); R1=$(fruh /tmp/f4430.json 2); R2=$(fruh /tmp/f4430.json 3)
REST=$(tr -d ' \n' </tmp/f4430.json | sed 's/.*"ruh_host_bytes":\[\([^]]*\)\].*/\1/' | cut -d, -f4-8)
info "f2fs hints -> RUH host bytes: RUH0 $R0 RUH1 $R1 RUH2 $R2 RUH3-7 $REST"
# SHORT (16 MiB) and F2FS's nodes/metadata in RUH 0; none, 0, MEDIUM, LONG
# (76 MiB) in RUH 1; EXTREME (40 MiB) in RUH 2; nothing elsewhere.
check f2fs-short-is-hot-ruh-0 awk "BEGIN { exit !($R0 >= 16 * $MiB && $R0 < 32 * $MiB) }"
check f2fs-unhinted-medium-long-are-warm-ruh-1 awk "BEGIN { exit !($R1 >= 76 * $MiB && $R1 < 80 * $MiB) }"
check f2fs-extreme-is-cold-ruh-2 awk "BEGIN { exit !($R2 >= 40 * $MiB && $R2 < 42 * $MiB) }"
check f2fs-ruh-3-7-unused test "$REST" = "0,0,0,0,0"

# pcstreamd and the shim on F2FS: a program writes through a short-lived
# and a long-lived call path (lifewrite paths: one round's and eight
# rounds' lifetime); the daemon learns them; after a target restart (the
# namespace kept in a backing file), a second run's fresh files carry the
# learnt hints and land on different RUHs: pcstreamd maps its two F2FS
# classes onto MEDIUM / EXTREME (F2FS's hot log is left to F2FS), so the
# short path's on the warm RUH 1, the long path's on the cold RUH 2.
mkdir -p /tmp/pcs/run /tmp/pcs/state
pcstreamd --runtime-dir /tmp/pcs/run --state-dir /tmp/pcs/state >/tmp/pcs/d.log 2>&1 &
DPID=$!
sleep 1
f2fs_up 4431 /tmp/f2fs.img
check f2fs-learn-mkfs mkfs.f2fs -f -q "$FNS"
check f2fs-learn-mount mount -t f2fs "$FNS" /mnt/f
mkdir -p /mnt/f/learn /mnt/f/run2
check f2fs-learn-under-shim env PCSTREAM_RUNTIME_DIR=/tmp/pcs/run PCSTREAM_FLUSH_MS=50 \
  LD_PRELOAD=/usr/lib/pcstream/libpcstream.so lifewrite paths /mnt/f/learn 24 1024 2048 8
sleep 2
PCSTREAM_RUNTIME_DIR=/tmp/pcs/run pcstreamctl streams 2>&1 | sed 's/^/  | /'
PCSTREAM_RUNTIME_DIR=/tmp/pcs/run pcstreamctl contexts --json >/tmp/ctx.json 2>&1
f2fs_down 4431
f2fs_up 4432 /tmp/f2fs.img
check f2fs-remount mount -t f2fs "$FNS" /mnt/f
# 4 rounds: 16 MiB through each path; the last WINDOW (8) c.* files stay.
check f2fs-run2-under-shim env PCSTREAM_RUNTIME_DIR=/tmp/pcs/run PCSTREAM_FLUSH_MS=50 \
  LD_PRELOAD=/usr/lib/pcstream/libpcstream.so lifewrite paths /mnt/f/run2 4 4096 4096 8
HH=$(lifewrite gethint /mnt/f/run2/h.3); HC=$(lifewrite gethint /mnt/f/run2/c.3)
info "f2fs run 2: hint of the short path's file $HH, of the long path's $HC"
f2fs_down 4432
P0=$(fruh /tmp/f4432.json 1); P1=$(fruh /tmp/f4432.json 2); P2=$(fruh /tmp/f4432.json 3)
info "f2fs run 2 -> RUH host bytes: RUH0 $P0 RUH1 $P1 RUH2 $P2"
check f2fs-short-path-hinted-medium test "$HH" = 3
check f2fs-long-path-hinted-extreme test "$HC" = 5
# 16 MiB through each path: the short path's in RUH 1, the long path's in
# RUH 2, and neither in the other's (F2FS's nodes go to RUH 0).
check f2fs-short-path-on-ruh-1 awk "BEGIN { exit !($P1 >= 16 * $MiB && $P1 < 20 * $MiB) }"
check f2fs-long-path-on-ruh-2 awk "BEGIN { exit !($P2 >= 16 * $MiB && $P2 < 20 * $MiB) }"
kill -TERM $DPID; wait $DPID
# No connection of the kernel's ever missed one of the target's deadlines.
check no-target-timeouts test "$(cat /tmp/target.log /tmp/backed.log /tmp/t44*.log /tmp/f2fs-target.log | grep -c 'timed out')" = 0
echo ALL-DONE
echo o >/proc/sysrq-trigger
sleep 5
