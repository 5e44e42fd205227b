#!/bin/sh
# layer_check.sh SOURCE_DIR OBJECT_DIR
#
# core/ is six floors, one folder each (docs/architecture.md, issue #33):
# a file may call and include only its own floor or a lower one.  The floors,
# lowest first, are WEIR_FLOORS of SOURCE_DIR/core/CMakeLists.txt (base format
# log runtime engine api when that line is missing); a file's floor is the
# folder it is in, never a list of files.  OBJECT_DIR holds the objects of
# weir_core as <floor>/<name>.c.o (the build's core/CMakeFiles/weir_core.dir).
# Violations, one line each:
#  - calls: an object on floor k has an undefined symbol ("U" of nm) that an
#    object on a higher floor defines, and none on floor k or lower does;
#  - includes: a .c/.h under core/<floor>/ includes "x.h" (quoted) that
#    resolves, the way the compiler does (own folder first, then the floors'
#    folders lowest first), to a header of a higher floor.  "weir/..." is
#    include/weir/, public, always allowed;
#  - cli/: a .c/.h may include only system headers, weir/... and cli/'s own
#    headers: a core/ header or any other quoted header is a violation;
#  - struct weir_agent (the type, outside comments) appears only in core/api/;
#  - a .c/.h in core/ but not in a floor folder.
# Includes and struct weir_agent inside /* */ and // comments are ignored.
# Objects with no source under SOURCE_DIR/core/<floor>/ (left behind in the
# build tree by a moved file) are skipped.
# Exit 0 with a one-line summary when clean; 1 listing every violation;
# 2 on a usage error (a missing directory, no object found).
set -u
if [ $# -ne 2 ]; then
    echo "usage: $0 SOURCE_DIR OBJECT_DIR" >&2
    exit 2
fi
src=$1
obj=$2
if [ ! -d "$src/core" ]; then
    echo "layer_check: $src/core: no such directory" >&2
    exit 2
fi
if [ ! -d "$obj" ]; then
    echo "layer_check: $obj: no such directory (build weir_core first)" >&2
    exit 2
fi

floors=$(sed -n 's/^[[:space:]]*set([[:space:]]*WEIR_FLOORS[[:space:]]\{1,\}\([^)]*\)).*/\1/p' \
    "$src/core/CMakeLists.txt" 2>/dev/null | head -n 1)
[ -n "$floors" ] || floors="base format log runtime engine api"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/layer_check.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
trap 'exit 2' HUP INT TERM

# Symbols: "floor-number floor source type symbol" per line, from nm -P -g
# (external symbols only), run in each floor's folder so a path is a name.
n=0
nobj=0
: >"$tmp/syms"
for floor in $floors; do
    n=$((n + 1))
    [ -d "$obj/$floor" ] || continue
    set -- "$obj/$floor"/*.o
    [ -e "$1" ] || continue
    (cd "$obj/$floor" && nm -A -P -g -- *.o) >"$tmp/nm" 2>"$tmp/nm.err" || {
        echo "layer_check: nm failed in $obj/$floor:" >&2
        cat "$tmp/nm.err" >&2
        exit 2
    }
    for o in "$obj/$floor"/*.o; do
        s=${o##*/}
        s=${s%.o}
        case $s in *.c) ;; *) s=$s.c ;; esac
        if [ -f "$src/core/$floor/$s" ]; then
            nobj=$((nobj + 1))
        else
            echo "layer_check: skipping $o: no core/$floor/$s" >&2
        fi
    done
    awk -v n="$n" -v floor="$floor" -v src="$src" '
        {
            o = $1; sub(/:$/, "", o)
            s = o; sub(/\.o$/, "", s); if (s !~ /\.c$/) s = s ".c"
            if (!(s in have)) { p = src "/core/" floor "/" s; have[s] = ((getline line < p) >= 0); close(p) }
            if (have[s]) print n, floor, "core/" floor "/" s, $3, $2
        }' "$tmp/nm" >>"$tmp/syms"
done
if [ "$nobj" -eq 0 ]; then
    echo "layer_check: no object of core/<floor>/*.c under $obj/<floor>/ (floors: $floors)" >&2
    exit 2
fi

# Sources: every .c/.h under core/ and cli/, relative to SOURCE_DIR.
(cd "$src" && find core cli -type f \( -name '*.c' -o -name '*.h' \) 2>/dev/null) |
    LC_ALL=C sort >"$tmp/files"

# One awk reads the symbols, then each source (comments stripped), and
# prints "category<TAB>line" per violation plus a summary.
(cd "$src" && awk -v floors="$floors" -v tmp="$tmp" '
function floor_of(path,    a) {
    if (split(path, a, "/") == 3 && a[1] == "core" && (a[2] in fnum)) return a[2]
    return ""
}
function label(f) { return fnum[f] " " f }
# "a/b/../c.h" -> "a/c.h"
function normalize(p,    a, k, i, out, m) {
    k = split(p, a, "/"); m = 0
    for (i = 1; i <= k; i++) {
        if (a[i] == "." || a[i] == "") continue
        if (a[i] == ".." && m > 0) { m--; continue }
        st[++m] = a[i]
    }
    out = ""
    for (i = 1; i <= m; i++) out = out (i > 1 ? "/" : "") st[i]
    return out
}
# The header a quoted include of `name` from `file` resolves to, or "".
function resolve(file, name,    dir, p, i) {
    dir = file; sub(/\/[^\/]*$/, "", dir)
    p = normalize(dir "/" name)
    if (p in isfile) return p
    if (index(name, "/") == 0)
        for (i = 1; i <= nf; i++)
            if (("core/" fl[i] "/" name) in isfile) return "core/" fl[i] "/" name
    return ""
}
# The line without comments (state: incomment, across lines); `code` is
# the same with the contents of string and character literals removed.
function strip(line,    out, c, p, q) {
    out = ""; code = ""
    while (line != "") {
        if (incomment) {
            q = index(line, "*/")
            if (q == 0) break
            line = substr(line, q + 2); incomment = 0; out = out " "; code = code " "
            continue
        }
        p = match(line, /["\047\/]/)
        if (p == 0) { out = out line; code = code line; break }
        c = substr(line, p, 1)
        out = out substr(line, 1, p - 1); code = code substr(line, 1, p - 1)
        line = substr(line, p)
        if (c == "/") {
            if (substr(line, 2, 1) == "*") {
                incomment = 1; line = substr(line, 3); out = out " "; code = code " "
                continue
            }
            if (substr(line, 2, 1) == "/") break
            out = out "/"; code = code "/"; line = substr(line, 2)
            continue
        }
        # a string or character literal (escapes skipped)
        q = 2
        while (q <= length(line)) {
            if (substr(line, q, 1) == "\\") { q += 2; continue }
            if (substr(line, q, 1) == c) break
            q++
        }
        out = out substr(line, 1, q); code = code c c; line = substr(line, q + 1)
    }
    return out
}
function bad(cat, msg) { print cat "\t" msg; nbad++ }
BEGIN {
    nf = split(floors, fl, " ")
    for (i = 1; i <= nf; i++) fnum[fl[i]] = i
    while ((getline l < (tmp "/files")) > 0) { isfile[l] = 1; files[++nfiles] = l }
    # symbols
    while ((getline l < (tmp "/syms")) > 0) {
        split(l, a, " ")        # number floor source type symbol
        if (!(a[3] in seenobj)) { seenobj[a[3]] = 1; nobjects++ }
        if (a[4] == "U" || a[4] == "w") { nu++; un[nu] = l; continue }
        # defined: keep the lowest floor, and the lowest above each caller is
        # found below by scanning all definitions of the symbol
        nd[a[5]]++; d[a[5], nd[a[5]]] = l
    }
    for (i = 1; i <= nu; i++) {
        split(un[i], a, " ")
        sym = a[5]; k = a[1] + 0
        if (!(sym in nd)) continue
        ncalls++
        low = ""; lowk = 0; ok = 0
        for (j = 1; j <= nd[sym]; j++) {
            split(d[sym, j], b, " ")
            if (b[1] + 0 <= k) { ok = 1; break }
            if (lowk == 0 || b[1] + 0 < lowk) { lowk = b[1] + 0; low = b[3]; lowf = b[2] }
        }
        if (!ok && lowk > 0 && !((a[3], sym) in said)) {
            said[a[3], sym] = 1
            bad("1calls " sprintf("%02d", k) " " a[3] " " sym,
                "layer: " a[3] " (" label(a[2]) ") calls " sym ", defined in " low " (" label(lowf) ")")
        }
    }
    # sources
    for (i = 1; i <= nfiles; i++) {
        file = files[i]
        top = file; sub(/\/.*/, "", top)
        f = floor_of(file)
        if (top == "core" && f == "") {
            bad("0floor " file, "layer: " file " is not in a floor folder (core/<floor>/: " floors ")")
        }
        incomment = 0; lineno = 0
        while ((getline raw < file) > 0) {
            lineno++
            l = strip(raw)
            if (l ~ /^[ \t]*#[ \t]*include[ \t]*["<]/) {
                ninc++
                q = l; sub(/^[ \t]*#[ \t]*include[ \t]*/, "", q)
                quoted = (substr(q, 1, 1) == "\"")
                name = substr(q, 2); sub(/[">].*/, "", name)
                if (name ~ /^weir\//) continue
                if (top == "cli") {
                    r = resolve(file, name)
                    if (!quoted && r == "") {
                        # <x.h>: a system header unless it names a core/ header
                        for (j = 1; j <= nf; j++)
                            if (("core/" fl[j] "/" name) in isfile) { r = "core/" fl[j] "/" name; break }
                        if (r == "") continue
                    }
                    if (r ~ /^cli\//) continue
                    if (r ~ /^core\//) {
                        rf = floor_of(r)
                        bad("2cli " file " " name, "layer: " file ":" lineno " (cli) includes " name \
                            " (core/" rf ", " label(rf) "): cli/ may include weir/... and its own headers only")
                    } else {
                        bad("2cli " file " " name, "layer: " file ":" lineno " (cli) includes \"" name \
                            "\": cli/ may include weir/... and its own headers only")
                    }
                } else if (f != "" && quoted) {
                    r = resolve(file, name)
                    rf = floor_of(r)
                    if (rf != "" && fnum[rf] > fnum[f])
                        bad("3inc " sprintf("%02d", fnum[f]) " " file " " name,
                            "layer: " file " (" label(f) ") includes " name " (core/" rf ", " label(rf) ")")
                }
            }
            if (code ~ /struct[ \t]+weir_agent([^A-Za-z0-9_]|$)/ && f != "api")
                bad("4struct " file " " lineno, "layer: " file ":" lineno \
                    (f != "" ? " (" label(f) ")" : "") " names struct weir_agent (core/api/ only)")
        }
        close(file)
        nsrc++
    }
    printf "summary\t%d floors, %d objects, %d undefined symbols (%d of them calls into core), %d includes in %d files\n",
        nf, nobjects, nu, ncalls, ninc, nsrc
}') >"$tmp/out" || exit 2

summary=$(sed -n 's/^summary	//p' "$tmp/out")
grep -v '^summary	' "$tmp/out" | LC_ALL=C sort | cut -f 2- >"$tmp/bad"
if [ -s "$tmp/bad" ]; then
    cat "$tmp/bad"
    echo "layer_check: FAIL: $(wc -l <"$tmp/bad" | tr -d ' ') violations ($summary)"
    exit 1
fi
echo "layer_check: ok: $summary"
exit 0
