#!/usr/bin/env bash
# Keeps the docs true to the tree. Fails (exit 1), printing FILE:LINE and
# what is wrong, when
#  1. README.md, CONTRIBUTING.md or a docs/*.md names, inside `backticks`, a
#     repository path that does not exist. A path is a word that starts with
#     src/ docs/ bench/ tests/ fuzz/ cmake/ scripts/ proto/ or examples/; a
#     :LINE (or :LINE-LINE) suffix is dropped, {a,b} alternatives are each
#     checked, and a component that is a placeholder (TARGET, NAME, <run id>,
#     *, ...) ends the path there (only what comes before it must exist).
#     Fenced code blocks are not read: only inline `code`.
#  2. A reference to the old design brief's sections ("DESIGN" followed by
#     a section sign) remains in src/, cmake/, docs/, README.md or
#     CONTRIBUTING.md: the design of this code is docs/design.md.
#  3. A reference "design.md §N" (in those places) names a section N that
#     docs/design.md does not have (its sections are "## N. Title").
#  4. CONTRIBUTING.md's worked example of a score plugin is not, line for
#     line, the marked part of src/sched/plugins/score/example_score_test.cc
#     (the test that proves it works).
#
#   cmake/check_doc_paths.sh SOURCE_DIR
set -uo pipefail
src=${1:-$(dirname "$0")/..}
cd "$src" || exit 2
bad=0

# 1. Paths in inline code.
docs=(README.md CONTRIBUTING.md docs/*.md)
while IFS=$'\t' read -r where path; do
  [[ -z $where ]] && continue
  if [[ ! -e $path ]]; then
    echo "$where: no such path: $path"
    bad=1
  fi
done < <(awk '
  # Prints "FILE:LINE<TAB>PATH" for each path-like word in an inline code span.
  function emit(span, line,    n, words, i, w, k, pre, alts, post, na, alt, j) {
    n = split(span, words, /[ \t]+/)
    for (i = 1; i <= n; i++) {
      w = words[i]
      sub(/^[("\047\[<]+/, "", w)
      sub(/[.,;)"\047\]>]+$/, "", w)
      sub(/:[0-9][0-9,-]*$/, "", w)
      sub(/[.,;:)"\047\]>]+$/, "", w)
      if (w !~ /^(src|docs|bench|tests|fuzz|cmake|scripts|proto|examples)\//) continue
      k = index(w, "{")
      if (k > 0 && index(w, "}") > k) {
        pre = substr(w, 1, k - 1)
        post = substr(w, index(w, "}") + 1)
        alts = substr(w, k + 1, index(w, "}") - k - 1)
        na = split(alts, alt, ",")
        for (j = 1; j <= na; j++) check(pre alt[j] post, line)
      } else {
        check(w, line)
      }
    }
  }
  # Cuts the path at its first placeholder component.
  function check(p, line,    n, c, i, out) {
    n = split(p, c, "/")
    out = c[1]
    for (i = 2; i <= n; i++) {
      if (c[i] == "") break
      if (c[i] ~ /^[A-Z][A-Z0-9_]+$/ || c[i] ~ /[<>*$]|\.\.\.|…/) break
      out = out "/" c[i]
    }
    printf "%s:%d\t%s\n", FILENAME, line, out
  }
  FNR == 1 { fenced = 0; open = 0 }
  /^[ \t]*(```|~~~)/ { fenced = !fenced; open = 0; next }
  fenced { next }
  {
    s = $0
    while ((k = index(s, "`")) > 0) {
      if (open) {
        span = span " " substr(s, 1, k - 1)
        emit(span, start)
        open = 0
      } else {
        open = 1
        start = FNR
        span = ""
      }
      s = substr(s, k + 1)
    }
    if (open) span = span " " s
  }
  # A blank line ends a paragraph: an unclosed backtick was not code.
  /^[ \t]*$/ { open = 0 }
' "${docs[@]}")

# 2. References to the brief's sections.
old='DESIGN[ ]§'
while IFS= read -r hit; do
  echo "$hit: refers to the brief's sections; cite docs/design.md §N instead"
  bad=1
done < <(grep -rnE "$old" src cmake docs README.md CONTRIBUTING.md 2>/dev/null)

# 3. Sections of docs/design.md that are cited must exist.
sections=$(grep -oE '^## [0-9]+\.' docs/design.md 2>/dev/null | grep -oE '[0-9]+' | tr '\n' ' ')
while IFS= read -r hit; do
  loc=${hit%%:design.md*}
  n=${hit##*§}
  if [[ " $sections " != *" $n "* ]]; then
    echo "$loc: docs/design.md has no section $n"
    bad=1
  fi
done < <(grep -rnoE 'design\.md(\]\([^)]*\))? §[0-9]+' src cmake docs README.md CONTRIBUTING.md 2>/dev/null)

# 4. The worked example is the tested code.
example=src/sched/plugins/score/example_score_test.cc
in_test=$(sed -n '/^\/\/ \[worked-example\]$/,/^\/\/ \[worked-example-end\]$/p' "$example" | sed '1d;$d')
in_doc=$(awk '/^### Adding a score: a worked example/ { on = 1 } on && /^```cpp$/ { code = 1; next } code && /^```$/ { exit } code { print }' CONTRIBUTING.md)
if [[ -z $in_test ]]; then
  echo "$example: no [worked-example] ... [worked-example-end] part"
  bad=1
elif [[ "$in_test" != "$in_doc" ]]; then
  echo "CONTRIBUTING.md: the worked example of a score differs from $example:"
  diff <(printf '%s\n' "$in_doc") <(printf '%s\n' "$in_test") | head -20
  bad=1
fi

if [ $bad -eq 0 ]; then echo "doc paths: ok"; fi
exit $bad
