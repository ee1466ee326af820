#!/usr/bin/env bash
# bench/java/build.sh OUT
#
# Compiles the Java workload drivers of bench/workloads.sh with javac against
# Debian's jars (nothing is downloaded) into OUT, and writes OUT/classpath,
# the class path workloads.sh runs them with:
#   LuceneChurn.java  lucene, lucene-native  liblucene4.10-java
#   H2Churn.java      h2, h2-native          libh2-java
# A driver whose jars are not installed is skipped (named on stderr; the
# workloads that need it then fail naming the missing class); none at all is
# an error. bench/run.sh and the tests call it when they prepare $BENCH_DATA
# (OUT = $BENCH_DATA/java), outside the recording.
set -euo pipefail
out=${1:-}
[ -n "$out" ] || { echo "bench/java/build.sh: usage: build.sh OUT (the directory to compile into)" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
command -v javac >/dev/null || { echo "bench/java/build.sh: javac missing: apt-get install default-jdk-headless" >&2; exit 1; }
# driver|package|jars (space-separated)
drivers=(
  "LuceneChurn|liblucene4.10-java|/usr/share/java/lucene-core-4.10.4.jar /usr/share/java/lucene-analyzers-common-4.10.4.jar"
  "H2Churn|libh2-java|/usr/share/java/h2.jar"
)
mkdir -p "$out"
out=$(cd "$out" && pwd)
cp=() built=()
for d in "${drivers[@]}"; do
  IFS='|' read -r name pkg jars <<<"$d"
  missing=
  for j in $jars; do [ -f "$j" ] || missing=$j; done
  if [ -n "$missing" ]; then
    echo "bench/java/build.sh: skipping $name: $missing missing (apt-get install $pkg)" >&2
    continue
  fi
  jcp=$(echo $jars | tr ' ' :)
  # -path: h2.jar's manifest names jars of optional features (lucene-core-8.7.0.jar, …)
  javac -Xlint:all,-path -Werror -d "$out" -cp "$jcp" "$here/$name.java"
  # shellcheck disable=SC2206
  cp+=($jars) built+=("$name")
done
[ ${#built[@]} -gt 0 ] ||
  { echo "bench/java/build.sh: no Java driver built: apt-get install liblucene4.10-java and/or libh2-java" >&2; exit 1; }
echo "$out:$(IFS=:; echo "${cp[*]}")" >"$out/classpath"
