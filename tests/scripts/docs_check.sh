#!/bin/sh
# docs_check.sh SOURCE_DIR
#
# The docs stand alone (issue #14 item 14):
#  1. nothing in the tree cites a file outside the repository: no "DESIGN §",
#     "reference §", "c-anchors", "seeds/", "../shared/" (docs, README,
#     headers, code comments, tests, the SDK and the examples);
#  2. every relative Markdown link of README.md and docs/*.md, and every
#     docs/<name>.md a file names, is a file of the tree;
#  3. the docs agree with the code where they once did not:
#     weir__log_derive shares the cached messages (no deep copy);
#  4. every field docs/shapes.md names in the first column of a "| field |"
#     table is a string of the sources ("name" in core/, plugins/ or
#     include/): the page lists no invented field.
set -u
src=${1:?usage: $0 SOURCE_DIR}
cd "$src" || exit 2
fail=0
bad() {
    echo "docs_check: FAIL: $*" >&2
    fail=1
}
dirs="README.md Makefile docs include sdk examples core plugins tests bench"

# 1. citations of files outside the repository
pattern='DESIGN §|reference §|Reference §|c-anchors|seeds/|\.\./shared/|shared/STYLE|shared/DESIGN'
hits=$(grep -rnE "$pattern" $dirs --exclude=docs_check.sh --exclude-dir=node_modules 2>/dev/null)
[ -z "$hits" ] || bad "references to files outside the repository:
$hits"

# 2a. relative Markdown links
for md in README.md docs/*.md examples/*/README.md sdk/template/README.md; do
    [ -f "$md" ] || continue
    base=$(dirname "$md")
    grep -oE '\]\([^)#: ]+(#[^)]*)?\)' "$md" | sed -e 's/^](//' -e 's/)$//' -e 's/#.*//' |
        while read -r target; do
            [ -n "$target" ] || continue
            [ -e "$base/$target" ] || echo "$md: link to $target: no such file"
        done
done >"${TMPDIR:-/tmp}/docs_check.$$" 2>&1
[ ! -s "${TMPDIR:-/tmp}/docs_check.$$" ] || bad "$(cat "${TMPDIR:-/tmp}/docs_check.$$")"
rm -f "${TMPDIR:-/tmp}/docs_check.$$"

# 2b. every docs/<name>.md named anywhere exists
for name in $(grep -rhoE 'docs/[a-z0-9-]+\.md' $dirs --exclude-dir=node_modules 2>/dev/null | sort -u); do
    [ -f "$name" ] || bad "$name is named but does not exist"
done

# 3. derive: shared messages, documented as such
if grep -n "weir__log_derive()\` returns a deep copy" docs/session-log.md; then
    bad "docs/session-log.md says weir__log_derive deep-copies; it shares (docs/reliability.md)"
fi
grep -q "shared and" docs/session-log.md || bad "docs/session-log.md does not say derive shares"

# 4. the fields of docs/shapes.md exist in the code
fields=$(awk '/^\| field \|/ { t = 1; next } t && /^\|---/ { next }
              t && /^\| `/ { split($0, c, "`"); print c[2]; next } { t = 0 }' docs/shapes.md)
[ -n "$fields" ] || bad "docs/shapes.md: no field table found"
for f in $fields; do
    grep -rqF "\"$f\"" core plugins include --include='*.c' --include='*.h' ||
        bad "docs/shapes.md names field '$f', which no source in core/, plugins/ or include/ has"
done

[ $fail -eq 0 ] && echo "docs_check: ok"
exit $fail
