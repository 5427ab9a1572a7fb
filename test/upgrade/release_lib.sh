#!/usr/bin/env bash
# Sourced by the upgrade suite (catalog.sh, data.sh): the shared library of an
# earlier release, for writing and reading a database at that release's
# schema (docs/architecture.md, "Stable C symbols"). The current library
# refuses a schema older than the newest layout its C code needs (the
# largest *_LAYOUT_SINCE in src/*.h, SpRequireSchema), so a 0.1.0 or 0.2.0
# database is populated by the library it was released with, as it was in
# production, and updated by the current one.
#
#   release_lib_needed V   true when the current library refuses schema V
#   release_lib_use V      build V's library once (git archive of the commit
#                          that released it, into $RELEASE_LIB_CACHE) and
#                          install it in place of the current one; the current
#                          one is saved and put back by release_lib_restore,
#                          which the caller's EXIT trap must also call
#   release_lib_restore    put the saved current library back
#   release_lib_export DIR write the sources of every release the current
#                          library refuses into DIR/.release-src/V/ (for a
#                          copy of the tree without git history: make test-matrix)
# The commit that released V is the parent of the first commit that added an
# upgrade script from V (sql/sandbox_persist--V--*.sql); without git history,
# .release-src/V/ (release_lib_export) is the source.
RELEASE_LIB_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RELEASE_LIB_CACHE=${RELEASE_LIB_CACHE:-$RELEASE_LIB_ROOT/.release-libs}
RELEASE_LIB_PKGLIB=$("${PG_CONFIG:-pg_config}" --pkglibdir)
RELEASE_LIB_SAVED=

# version_lt A B: true when dotted version A sorts before B.
version_lt() { [ "$1" != "$2" ] && [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1)" = "$1" ]; }

release_lib_floor() {
    sed -nE 's/^#define [A-Z_]+_LAYOUT_SINCE[[:space:]]+"([0-9.]+)".*/\1/p' "$RELEASE_LIB_ROOT"/src/*.h | sort -V | tail -n 1
}

release_lib_needed() {
    local floor
    floor=$(release_lib_floor)
    [ -n "$floor" ] && version_lt "$1" "$floor"
}

release_lib_commit() {
    local added
    added=$(git -C "$RELEASE_LIB_ROOT" log --format=%H --diff-filter=A -- "sql/sandbox_persist--$1--*.sql" | tail -n 1)
    [ -n "$added" ] && git -C "$RELEASE_LIB_ROOT" rev-parse "$added^"
}

release_lib_use() {
    local v=$1 commit dir src=$RELEASE_LIB_ROOT/.release-src/$1
    if [ -d "$src" ]; then
        commit=$(cat "$src/.commit" 2>/dev/null || echo exported)
    else
        commit=$(release_lib_commit "$v") || { echo "release_lib: no commit released $v" >&2; return 1; }
    fi
    dir=$RELEASE_LIB_CACHE/$v-${commit:0:12}-$("${PG_CONFIG:-pg_config}" --version | tr -cd '0-9.')
    if [ ! -f "$dir/sandbox_persist.so" ]; then
        rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
        if [ -d "$src" ]; then
            cp -a "$src/." "$dir.tmp/" || return 1
        else
            git -C "$RELEASE_LIB_ROOT" archive "$commit" | tar -x -C "$dir.tmp" || return 1
        fi
        make -s -C "$dir.tmp" -j2 >"$dir.tmp/build.log" 2>&1 \
            || { tail -n 30 "$dir.tmp/build.log" >&2; echo "release_lib: building $v ($commit) failed" >&2; return 1; }
        rm -rf "$dir" && mv "$dir.tmp" "$dir"
    fi
    if [ -z "$RELEASE_LIB_SAVED" ]; then
        RELEASE_LIB_SAVED=$(mktemp)
        cp "$RELEASE_LIB_PKGLIB/sandbox_persist.so" "$RELEASE_LIB_SAVED"
    fi
    install -m 755 "$dir/sandbox_persist.so" "$RELEASE_LIB_PKGLIB/sandbox_persist.so"
    echo "release_lib: the library of $v (${commit:0:12}) is installed for writing its schema"
}

release_lib_restore() {
    [ -n "$RELEASE_LIB_SAVED" ] || return 0
    install -m 755 "$RELEASE_LIB_SAVED" "$RELEASE_LIB_PKGLIB/sandbox_persist.so"
    rm -f "$RELEASE_LIB_SAVED"
    RELEASE_LIB_SAVED=
}

release_lib_export() {
    local dest=$1 v commit
    for v in $(for f in "$RELEASE_LIB_ROOT"/sql/sandbox_persist--*--*.sql; do
                   f=$(basename "$f" .sql); f=${f#sandbox_persist--}; echo "${f%%--*}"
               done | sort -uV); do
        release_lib_needed "$v" || continue
        commit=$(release_lib_commit "$v") || return 1
        rm -rf "$dest/.release-src/$v" && mkdir -p "$dest/.release-src/$v"
        git -C "$RELEASE_LIB_ROOT" archive "$commit" | tar -x -C "$dest/.release-src/$v" || return 1
        echo "$commit" >"$dest/.release-src/$v/.commit"
    done
}
