#!/usr/bin/env bash
# bench/java/build.sh OUT
#
# Compiles the Java workload drivers of bench/workloads.sh (LuceneChurn.java)
# with javac against Debian's jars (liblucene4.10-java: nothing is
# downloaded) into OUT, and writes OUT/classpath, the class path
# workloads.sh runs them with. bench/run.sh and the tests call it when they
# prepare $BENCH_DATA (OUT = $BENCH_DATA/java), outside the recording.
set -euo pipefail
out=${1:-}
[ -n "$out" ] || { echo "bench/java/build.sh: usage: build.sh OUT (the directory to compile into)" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
jars=(/usr/share/java/lucene-core-4.10.4.jar /usr/share/java/lucene-analyzers-common-4.10.4.jar)
for j in "${jars[@]}"; do
  [ -f "$j" ] || { echo "bench/java/build.sh: $j missing: apt-get install liblucene4.10-java" >&2; exit 1; }
done
command -v javac >/dev/null || { echo "bench/java/build.sh: javac missing: apt-get install default-jdk-headless" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
cp=$(IFS=:; echo "${jars[*]}")
javac -Xlint:all -Werror -d "$out" -cp "$cp" "$here/LuceneChurn.java"
echo "$out:$cp" >"$out/classpath"
