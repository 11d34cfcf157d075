#!/usr/bin/env bash
# The lint's own test: a planted wrong-way include fails it, naming the file and line; the same
# tree without it passes. Works in a folder under the build tree, removed at the end.
set -u
lint=$1 work=$2
rm -rf "$work" && mkdir -p "$work/docs" "$work/stats" "$work/suite"
trap 'rm -rf "$work"' EXIT
printf '# A\n\n## Layers\n\n1. `stats/` -- low\n2. `suite/` -- high\n\n## Next\n\n3. `x/` -- not a layer\n' \
  >"$work/docs/architecture.md"
printf '#include "suite/cli.h"\n' >"$work/suite/ok.cpp"          # down: fine
printf '// a comment\n#include "suite/cli.h"\n' >"$work/stats/bad.cpp" # up: wrong
out=$("$lint" "$work"); rc=$?
echo "$out"
[ $rc -eq 1 ] || { echo "FAIL: a wrong-way include passed (exit $rc)"; exit 1; }
grep -q '^stats/bad.cpp:2: stats/ (layer 1) includes suite/ (layer 2)' <<<"$out" ||
  { echo "FAIL: the report does not name stats/bad.cpp:2"; exit 1; }
rm "$work/stats/bad.cpp"
out=$("$lint" "$work"); rc=$?
[ $rc -eq 0 ] || { echo "FAIL: a clean tree failed (exit $rc): $out"; exit 1; }
echo "lint self-test: a planted include is caught, a clean tree passes"
