#!/usr/bin/env bash
# Every switch over a Mutation's kind (`switch (m.kind_case())` where m is a
# v1::Mutation) is exhaustive: wrapped in HERD_EXHAUSTIVE_BEGIN/END
# (src/base/exhaustive.h, -Wswitch-enum as an error) and without `default:`,
# so a new mutation kind fails the build at every observer that must decide
# what it means. Prints file:line of each switch that is not.
#
#   cmake/check_switches.sh SOURCE_DIR
set -euo pipefail
src=$1
bad=0
while IFS=: read -r file line _; do
  prev=$(sed -n "$((line - 1))p" "$file")
  if ! grep -q 'HERD_EXHAUSTIVE_BEGIN' <<<"$prev"; then
    echo "$file:$line: switch over Mutation kinds without HERD_EXHAUSTIVE_BEGIN on the line before" >&2
    bad=1
    continue
  fi
  end=$(awk -v s="$line" 'NR > s && /HERD_EXHAUSTIVE_END/ { print NR; exit }' "$file")
  if [ -z "$end" ]; then
    echo "$file:$line: HERD_EXHAUSTIVE_BEGIN without HERD_EXHAUSTIVE_END" >&2
    bad=1
  elif sed -n "${line},${end}p" "$file" | grep -qE '^\s*default\s*:'; then
    echo "$file:$line: exhaustive switch over Mutation kinds has a default: (name each kind)" >&2
    bad=1
  fi
done < <(grep -rnE 'switch \((m|mutation)\.kind_case\(\)\)' "$src/src" --include='*.cc' --include='*.h' || true)
# The switches must be there at all (the pattern above still matches them).
n=$(grep -rcE 'HERD_EXHAUSTIVE_BEGIN' "$src/src" --include='*.cc' | awk -F: '{ s += $2 } END { print s + 0 }')
if [ "$n" -lt 5 ]; then
  echo "expected at least 5 exhaustive switches over mutation kinds, found $n" >&2
  bad=1
fi
[ $bad -eq 0 ] && echo "switches over mutation kinds: all exhaustive ($n)"
exit $bad
