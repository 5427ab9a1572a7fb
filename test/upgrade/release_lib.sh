#!/usr/bin/env bash
# Sourced by the upgrade suite (run.sh, catalog.sh, data.sh): the shared
# library of an earlier release, for writing and reading a database at that
# release's schema (docs/architecture.md, "Stable C symbols"). The current
# library refuses a schema older than the newest layout its C code needs (the
# largest *_LAYOUT_SINCE in src/*.h, SpRequireSchema), so a 0.1.0 or 0.2.0
# database is populated by the library it was released with, as it was in
# production, and updated by the current one.
#
# The PostgreSQL install that PG_CONFIG names is never written: other work on
# the machine loads its sandbox_persist.so (make test's cron_unreachable suite
# runs beside this one, and on a shared machine other checkouts do too). The
# old libraries run from a private copy of that install instead, with a
# throwaway cluster of its own:
#
#   release_lib_needed V   true when the current library refuses schema V
#   release_lib_private_start
#                          copy PG_CONFIG's bindir, pkglibdir and sharedir
#                          (the current build already installed there) under
#                          a temp prefix, keeping their layout, so that the
#                          copy's pg_config and postgres find the copy's
#                          files; start a cluster from it (scripts/cluster.sh
#                          with that PG_CONFIG, a state directory in the
#                          prefix, a private socket) and export PG_CONFIG,
#                          PGHOST, PGPORT, PGUSER, PGDATABASE and
#                          RELEASE_LIB_PREFIX for the scripts run after it
#   release_lib_private_stop
#                          stop that cluster and remove the prefix
#   release_lib_use V      build V's library once (git archive of the commit
#                          that released it, compiled with the original
#                          PG_CONFIG into $RELEASE_LIB_CACHE) and install it
#                          in the private copy; refuses when PG_CONFIG is not
#                          a private copy (RELEASE_LIB_PREFIX)
#   release_lib_current    install the current build in the private copy again
#   release_lib_export DIR write the sources of every release the current
#                          library refuses into DIR/.release-src/V/ (for a
#                          copy of the tree without git history: make test-matrix)
# The commit that released V is the parent of the first commit that added an
# upgrade script from V (sql/sandbox_persist--V--*.sql); without git history,
# .release-src/V/ (release_lib_export) is the source. Those sources were
# written for PostgreSQL 15's headers: test/upgrade/release_patches/V.patch,
# when present, is applied to them before the build (0.1.0 lacks an include
# that 17's headers no longer provide; its header says why); they build with
# their own flags, -Werror included, on 15, 17 and 18.
RELEASE_LIB_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RELEASE_LIB_CACHE=${RELEASE_LIB_CACHE:-$RELEASE_LIB_ROOT/.release-libs}

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

release_lib_private_start() {
    local pgc=${PG_CONFIG:-pg_config} prefix d copy
    pgc=$(command -v "$pgc") || { echo "release_lib: no pg_config" >&2; return 1; }
    prefix=$(mktemp -d /tmp/sandbox_persist_releases.XXXXXX) || return 1
    chmod 755 "$prefix"
    for d in "$("$pgc" --bindir)" "$("$pgc" --pkglibdir)" "$("$pgc" --sharedir)"; do
        mkdir -p "$prefix$(dirname "$d")" && cp -a "$d" "$prefix$d" || { rm -rf "$prefix"; return 1; }
    done
    copy=$prefix$("$pgc" --bindir)/pg_config
    # The copy must find its own files, or installing into it would write the original.
    if [ "$("$copy" --pkglibdir)" != "$prefix$("$pgc" --pkglibdir)" ] \
        || [ "$("$copy" --sharedir)" != "$prefix$("$pgc" --sharedir)" ]; then
        echo "release_lib: the copy of $pgc in $prefix does not find its own files" >&2
        rm -rf "$prefix"
        return 1
    fi
    cp "$prefix$("$pgc" --pkglibdir)/sandbox_persist.so" "$prefix/current.so" || { rm -rf "$prefix"; return 1; }
    RELEASE_LIB_BUILD_PG_CONFIG=$pgc
    export RELEASE_LIB_BUILD_PG_CONFIG RELEASE_LIB_PREFIX=$prefix PG_CONFIG=$copy
    SANDBOX_PERSIST_STATE=$prefix/state bash "$RELEASE_LIB_ROOT/scripts/cluster.sh" start >"$prefix/cluster.log" 2>&1 \
        || { cat "$prefix/cluster.log" >&2; release_lib_private_stop; return 1; }
    # shellcheck disable=SC1091
    . "$prefix/state/env"
    echo "release_lib: a private copy of the PostgreSQL install in $prefix, its own cluster on $PGHOST"
}

release_lib_private_stop() {
    [ -n "${RELEASE_LIB_PREFIX:-}" ] && [ -d "$RELEASE_LIB_PREFIX" ] || return 0
    SANDBOX_PERSIST_STATE=$RELEASE_LIB_PREFIX/state bash "$RELEASE_LIB_ROOT/scripts/cluster.sh" stop >/dev/null 2>&1 || true
    rm -rf "$RELEASE_LIB_PREFIX"
    RELEASE_LIB_PREFIX=
}

# release_lib_private_pkglib: the private copy's pkglibdir; fails unless PG_CONFIG is that copy.
release_lib_private_pkglib() {
    local pkglib
    pkglib=$("${PG_CONFIG:-pg_config}" --pkglibdir)
    if [ -z "${RELEASE_LIB_PREFIX:-}" ] || [ "${pkglib#"$RELEASE_LIB_PREFIX"/}" = "$pkglib" ]; then
        echo "release_lib: $pkglib is not a private copy (run test/upgrade/run.sh, which makes one): not written" >&2
        return 1
    fi
    echo "$pkglib"
}

release_lib_use() {
    local v=$1 commit dir pkglib src=$RELEASE_LIB_ROOT/.release-src/$1 build_pgc
    local patch=$RELEASE_LIB_ROOT/test/upgrade/release_patches/$1.patch patched=none
    pkglib=$(release_lib_private_pkglib) || return 1
    build_pgc=${RELEASE_LIB_BUILD_PG_CONFIG:-${PG_CONFIG:-pg_config}}
    if [ -d "$src" ]; then
        commit=$(cat "$src/.commit" 2>/dev/null || echo exported)
    else
        commit=$(release_lib_commit "$v") || { echo "release_lib: no commit released $v" >&2; return 1; }
    fi
    [ -f "$patch" ] && patched=$(cksum <"$patch" | cut -d' ' -f1)
    dir=$RELEASE_LIB_CACHE/$v-${commit:0:12}-$("$build_pgc" --version | tr -cd '0-9.')-patch-$patched
    if [ ! -f "$dir/sandbox_persist.so" ]; then
        rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
        if [ -d "$src" ]; then
            cp -a "$src/." "$dir.tmp/" || return 1
        else
            git -C "$RELEASE_LIB_ROOT" archive "$commit" | tar -x -C "$dir.tmp" || return 1
        fi
        if [ -f "$patch" ]; then
            patch -s -p1 -d "$dir.tmp" <"$patch" || { echo "release_lib: $patch does not apply to $v" >&2; return 1; }
        fi
        make -s -C "$dir.tmp" -j2 PG_CONFIG="$build_pgc" >"$dir.tmp/build.log" 2>&1 \
            || { tail -n 30 "$dir.tmp/build.log" >&2; echo "release_lib: building $v ($commit) failed" >&2; return 1; }
        rm -rf "$dir" && mv "$dir.tmp" "$dir"
    fi
    install -m 755 "$dir/sandbox_persist.so" "$pkglib/sandbox_persist.so" || return 1
    echo "release_lib: the library of $v (${commit:0:12}) is installed in the private copy for writing its schema"
}

release_lib_current() {
    local pkglib
    pkglib=$(release_lib_private_pkglib) || return 1
    install -m 755 "$RELEASE_LIB_PREFIX/current.so" "$pkglib/sandbox_persist.so" || return 1
    echo "release_lib: the current library is installed in the private copy again"
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
