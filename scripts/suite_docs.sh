#!/usr/bin/env bash
# Rewrites docs/suites.md's generated tables (each between "<!-- kernelgate suite show NAME
# --markdown -->" and "<!-- end -->") with what `kernelgate suite show NAME --markdown` prints now;
# the prose around them is kept. ctest suite_def.docs_carry_the_generated_tables fails until this
# is run after a change to data/suites (python3 scripts/make_suites.py writes them).
#
#   scripts/suite_docs.sh build/suite/kernelgate [docs/suites.md]
set -euo pipefail
kernelgate=$1
doc=${2:-docs/suites.md}
marker='^<!-- kernelgate suite show [a-z0-9_-]+ --markdown -->$'
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Every table first: a suite that does not load stops the script before the doc is touched.
for name in $(grep -E "$marker" "$doc" | awk '{print $5}'); do
  "$kernelgate" suite show "$name" --markdown >"$work/$name.md"
done
awk -v dir="$work" -v marker="$marker" '
  $0 ~ marker {
    print
    table = dir "/" $5 ".md"
    while ((getline line < table) > 0) print line
    close(table)
    skipping = 1
    next
  }
  skipping && $0 == "<!-- end -->" { skipping = 0 }
  !skipping { print }
' "$doc" >"$work/doc"
cp "$work/doc" "$doc"
