#!/usr/bin/env bash
# file_cycles.sh: fail when two or more C files of src/ call into each other in
# a loop (a.c uses b.c and b.c, directly or through others, uses a.c).
#
# The file-level call graph comes from the object files the build leaves in
# src/: `nm` lists what each one defines and what it leaves undefined; an
# undefined symbol that another object defines is an edge from the user to the
# definer (symbols of PostgreSQL and libraries define nowhere in src/ and are
# ignored). Loops are the strongly connected components with more than one
# file, found by a transitive closure (a few dozen files: cheap).
#
# Usage: test/scripts/file_cycles.sh [srcdir]   (builds first with `make -s`;
# set PG_CONFIG as for any build). Exit 0: no loop; 1: loops, each printed as
# "cycle: a.c b.c ..." with the symbols on each edge; 2: nothing to read.
# Without srcdir it first proves it can fail: three tiny files calling round
# in a loop (a -> b -> c -> a) must be reported, and it closes with a
# "summary: file cycles: ..." line.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
srcdir=${1:-$root/src}

if [ -z "${1:-}" ]; then
    make -s -C "$root" >/dev/null
    selftest=$(mktemp -d)
    trap 'rm -rf "$selftest"' EXIT
    printf 'int b(void);\nint a(void) { return b(); }\n' >"$selftest/a.c"
    printf 'int c(void);\nint b(void) { return c(); }\n' >"$selftest/b.c"
    printf 'int a(void);\nint c(void) { return a(); }\n' >"$selftest/c.c"
    printf 'int a(void);\nint d(void) { return a(); }\n' >"$selftest/d.c"
    for f in a b c d; do cc -c -o "$selftest/$f.o" "$selftest/$f.c"; done
    if out=$(bash "$0" "$selftest"); then
        echo "file_cycles: the self-test loop a.c -> b.c -> c.c -> a.c was not found" >&2
        echo "summary: file cycles: self-test FAILED"
        exit 1
    fi
    if ! grep -qx 'cycle: [abc].c [abc].c [abc].c' <<<"$out" || grep -q 'd.c' <<<"$(grep '^cycle' <<<"$out")"; then
        echo "file_cycles: the self-test reported the wrong loop: $out" >&2
        echo "summary: file cycles: self-test FAILED"
        exit 1
    fi
    if bash "$0" "$srcdir"; then
        echo "summary: file cycles: no loop between the C files of src/; self-test loop of 3 files found"
    else
        echo "summary: file cycles: loops between C files (above)"
        exit 1
    fi
    exit 0
fi

shopt -s nullglob
objs=("$srcdir"/*.o)
if [ ${#objs[@]} -eq 0 ]; then
    echo "file_cycles: no object files in $srcdir (build first)" >&2
    exit 2
fi

# "D <file> <symbol>" for each global definition, "U <file> <symbol>" for each use.
for o in "${objs[@]}"; do
    f=$(basename "$o" .o).c
    nm --defined-only --extern-only "$o" | awk -v f="$f" 'NF >= 3 { print "D", f, $3 }'
    nm --undefined-only "$o" | awk -v f="$f" '{ print "U", f, $NF }'
done | awk '
    $1 == "D" { def[$3] = $2; files[$2] = 1; next }
    $1 == "U" { use[++nu] = $2 SUBSEP $3; files[$2] = 1 }
    END {
        n = 0
        for (f in files) name[++n] = f
        for (i = 1; i <= nu; i++) {
            split(use[i], p, SUBSEP)
            if (!(p[2] in def) || def[p[2]] == p[1])
                continue
            edge[p[1], def[p[2]]] = 1
            why[p[1], def[p[2]]] = why[p[1], def[p[2]]] " " p[2]
        }
        for (i = 1; i <= n; i++)
            for (j = 1; j <= n; j++)
                reach[name[i], name[j]] = ((name[i], name[j]) in edge)
        for (k = 1; k <= n; k++)
            for (i = 1; i <= n; i++)
                if (reach[name[i], name[k]])
                    for (j = 1; j <= n; j++)
                        if (reach[name[k], name[j]])
                            reach[name[i], name[j]] = 1
        bad = 0
        for (i = 1; i <= n; i++) {
            a = name[i]
            if (a in done)
                continue
            group = a
            for (j = 1; j <= n; j++) {
                b = name[j]
                if (b != a && reach[a, b] && reach[b, a]) {
                    group = group " " b
                    done[b] = 1
                }
            }
            if (group == a)
                continue
            bad = 1
            print "cycle: " group
            m = split(group, g, " ")
            for (x = 1; x <= m; x++)
                for (y = 1; y <= m; y++)
                    if ((g[x], g[y]) in edge)
                        print "  " g[x] " -> " g[y] ":" why[g[x], g[y]]
        }
        if (!bad)
            print "file_cycles: no loop between the " n " C files"
        exit bad
    }'
