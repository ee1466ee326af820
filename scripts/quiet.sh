#!/usr/bin/env bash
# Keeps a program's chatter out of the terminal (db_bench's progress lines
# flooded the demo's): `run` sends the command's stdout and stderr to LOG and
# exits with its status; `tail` shows LOG's last result lines, indented, with
# \r-separated progress ("... finished N ops") and blank lines dropped.
# Used by scripts/demo.sh; tests/tests/app_demo_output.rs checks it on db_bench.
# Usage: scripts/quiet.sh run LOG CMD [ARGS...]
#        scripts/quiet.sh tail LOG [LINES]      (default 3 lines of at most 120 characters)
set -uo pipefail
case "${1:-}" in
  run)
    [ $# -ge 3 ] || { echo "usage: quiet.sh run LOG CMD [ARGS...]" >&2; exit 2; }
    log=$2; shift 2
    exec "$@" >"$log" 2>&1 ;;
  tail)
    [ $# -ge 2 ] || { echo "usage: quiet.sh tail LOG [LINES]" >&2; exit 2; }
    [ -r "$2" ] || { echo "quiet.sh: $2: no such log" >&2; exit 1; }
    tr '\r' '\n' <"$2" | grep -v -e '^\.\.\. finished' -e '^ *$' | tail -n "${3:-3}" | cut -c1-120 | sed 's/^/   | /'
    exit 0 ;;
  *) echo "usage: quiet.sh run LOG CMD [ARGS...] | quiet.sh tail LOG [LINES]" >&2; exit 2 ;;
esac
