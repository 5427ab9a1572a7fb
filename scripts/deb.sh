#!/usr/bin/env bash
# make deb: build the Debian packages postgresql-NN-sandbox-persist, one per
# PostgreSQL major that debian/pgversions allows and whose server headers are
# installed (pg_buildext supported-versions), with dpkg-buildpackage, then run
# lintian on them.
#
#   scripts/deb.sh          the working tree (committed or not, ignored files left out)
#   scripts/deb.sh REF      the tree of git commit REF with today's debian/ laid
#                           over it (test/packaging builds 0.3.0's package this way)
#
# PG_MAJORS="15 17 18" (make deb PG_MAJORS="15 17 18"): one build per major, each
# on the Debian release that ships it: the host's own major here, the others in
# the chroots of make test-matrix (scripts/chroots.sh; 17 in trixie, 18 in sid,
# SANDBOX_PERSIST_DEB_SUITES maps majors to releases), into which the tree is
# copied and which get the build dependencies with apt-get. Each release's
# package is built against that release's server (its ${postgresql:Depends}).
# A chroot build runs as root. Without PG_MAJORS: the host's majors only.
#
# Output in SANDBOX_PERSIST_DEB_OUT (default dist/deb/): the .deb files, the
# .changes and .buildinfo, and lintian-<version>[-<major>].txt. The source is
# built in a copy under that directory: dpkg-buildpackage writes next to its
# tree's parent.
set -euo pipefail
# The tree to package (a chroot build runs this script from outside the staged tree).
ROOT=${SANDBOX_PERSIST_DEB_TREE:-$(cd "$(dirname "$0")/.." && pwd)}
OUT=${SANDBOX_PERSIST_DEB_OUT:-$ROOT/dist/deb}
ref=${1:-}
SUITES=${SANDBOX_PERSIST_DEB_SUITES:-17:trixie 18:sid}
BUILD_IN=/build/sandbox_persist

# stage_tree DEST: the source tree of this build in DEST: REF's (git archive)
# with today's debian/, else the working tree's files (git ls-files; a tree
# without git, such as a chroot's staged copy, is taken as it is).
stage_tree() {
    local dest=$1
    if [ -n "$ref" ]; then
        git -C "$ROOT" archive "$ref" | tar -x -C "$dest"
        rm -rf "$dest/debian"
        cp -r "$ROOT/debian" "$dest/debian"
        # An older Makefile listed its scripts relative to the build directory,
        # which an out-of-tree build (pg_buildext build) does not see: the same
        # one-line fix as today's Makefile.
        sed -i 's|^DATA = \$(wildcard sql/sandbox_persist--\*\.sql)$|DATA = $(patsubst $(srcdir)/%,%,$(wildcard $(srcdir)/sql/sandbox_persist--*.sql))|' "$dest/Makefile"
    elif git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
        (cd "$ROOT" && git ls-files -z -co --exclude-standard | xargs -0 tar -c --no-recursion -f - 2>/dev/null) | tar -x -C "$dest"
    else
        tar -C "$ROOT" --exclude=./dist -cf - . | tar -x -C "$dest"
    fi
}

# suite_of MAJOR: the Debian release whose chroot builds MAJOR ('' for the host).
suite_of() {
    local host_major e
    host_major=$(ls /usr/lib/postgresql 2>/dev/null | sort -n | tail -1)
    [ "$1" = "$host_major" ] && [ -z "${SANDBOX_PERSIST_DEB_IN_CHROOT:-}" ] && return 0
    for e in $SUITES; do
        [ "${e%%:*}" = "$1" ] && { echo "${e#*:}"; return 0; }
    done
    echo "deb: no Debian release is known for PostgreSQL $1 (SANDBOX_PERSIST_DEB_SUITES: $SUITES)" >&2
    return 1
}

# build_in_chroot MAJOR SUITE: this script, inside the SUITE chroot, for MAJOR only.
build_in_chroot() {
    local major=$1 suite=$2 dir rc=0
    [ "$(id -u)" = 0 ] || { echo "deb: building PostgreSQL $major's package in the $suite chroot needs root" >&2; return 1; }
    # shellcheck source=scripts/chroots.sh
    . "$ROOT/scripts/chroots.sh"
    dir=$CHROOTS/$suite
    ensure_chroot "$suite" "$dir" || return 1
    mount_chroot "$dir" || { umount_chroots; return 1; }
    rm -rf "$dir$BUILD_IN" "$dir/build/out"
    mkdir -p "$dir$BUILD_IN" "$dir/build/out"
    # The tree this build is of (REF's, with today's debian/), staged here: the
    # chroot has no git history; inside, deb.sh builds that plain directory.
    stage_tree "$dir$BUILD_IN"
    # This script from today's tree: REF's tree may predate it.
    cp "$ROOT/scripts/deb.sh" "$dir/build/deb.sh"
    echo "deb: PostgreSQL $major in the $suite chroot ($dir)"
    chroot "$dir" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb DEBIAN_FRONTEND=noninteractive \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        SANDBOX_PERSIST_DEB_IN_CHROOT=1 PG_MAJORS="$major" SANDBOX_PERSIST_DEB_OUT=/build/out \
        SANDBOX_PERSIST_DEB_TREE=$BUILD_IN bash /build/deb.sh || rc=$?
    umount_chroots
    [ "$rc" = 0 ] || return "$rc"
    mkdir -p "$OUT"
    cp "$dir"/build/out/*.deb "$OUT/"
    # Every major's build has the same .changes and .buildinfo names: suffixed per major.
    for f in "$dir"/build/out/*.changes "$dir"/build/out/*.buildinfo; do
        cp "$f" "$OUT/$(basename "${f%.*}").pg$major.${f##*.}"
    done
    for f in "$dir"/build/out/lintian-*.txt; do
        cp "$f" "$OUT/$(basename "$f" .txt)-$major.txt"
    done
}

# PG_MAJORS: the host builds its own major; every other one goes to its chroot.
if [ -n "${PG_MAJORS:-}" ] && [ -z "${SANDBOX_PERSIST_DEB_IN_CHROOT:-}" ]; then
    host_majors=()
    for m in $PG_MAJORS; do
        suite=$(suite_of "$m") || exit 1
        if [ -z "$suite" ]; then host_majors+=("$m"); else build_in_chroot "$m" "$suite" || exit 1; fi
    done
    [ ${#host_majors[@]} -gt 0 ] || exit 0
    PG_MAJORS="${host_majors[*]}"
fi

# Build dependencies, as CI installs them on a fresh Debian 12 machine.
need=()
# A chroot also gets the compiler and the named majors' headers (PG_MAJORS).
pkgs=(debhelper postgresql-server-dev-all liblz4-dev libzstd-dev dpkg-dev lintian)
if [ -n "${SANDBOX_PERSIST_DEB_IN_CHROOT:-}" ]; then
    pkgs+=(build-essential)
    for m in ${PG_MAJORS:-}; do pkgs+=("postgresql-server-dev-$m"); done
fi
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    sudo=
    [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get install -y --no-install-recommends "${need[@]}" >/dev/null \
        || { $sudo apt-get update >/dev/null && $sudo apt-get install -y --no-install-recommends "${need[@]}" >/dev/null; }
fi

mkdir -p "$OUT"
build=$(mktemp -d "$OUT/build.XXXXXX")
trap 'rm -rf "$build"' EXIT
tree=$build/tree
mkdir -p "$tree"
stage_tree "$tree"
version=$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$tree/sandbox_persist.control")
# The package's changelog starts at this tree's version (a REF's older entry).
awk -v v="$version" '
    /^sandbox-persist \(/ { keep = index($0, "(" v "-") > 0 || keep }
    keep' "$ROOT/debian/changelog" >"$tree/debian/changelog"
[ -s "$tree/debian/changelog" ] || { echo "deb: debian/changelog has no entry for $version" >&2; exit 1; }
rm -rf "$tree/dist"
mv "$tree" "$build/sandbox-persist-$version"
tree=$build/sandbox-persist-$version
tar -C "$build" --exclude="sandbox-persist-$version/debian" -czf "$build/sandbox-persist_$version.orig.tar.gz" "sandbox-persist-$version"

# PG_MAJORS narrows the build to those majors (postgresql-common's
# PG_SUPPORTED_VERSIONS, which pg_buildext intersects with debian/pgversions).
if [ -n "${PG_MAJORS:-}" ]; then
    export PG_SUPPORTED_VERSIONS="${PG_MAJORS// /,}"
fi
# debian/control names the packages of the majors installed here (Debian
# regenerates it per distribution: trixie's lists 17, sid's 18).
(cd "$tree" && pg_buildext updatecontrol)
echo "deb: building sandbox-persist $version for PostgreSQL $(cd "$tree" && pg_buildext supported-versions | xargs)"
(cd "$tree" && env -u PG_CONFIG dpkg-buildpackage -us -uc -b) >"$build/build.log" 2>&1 \
    || { tail -n 60 "$build/build.log"; echo "deb: dpkg-buildpackage failed" >&2; exit 1; }
changes=$(ls "$build"/*.changes)
# lintian's output is the record; each remaining tag is explained in debian/*.lintian-overrides.
lint_rc=0
lintian --info --display-info --pedantic "$changes" >"$build/lintian.txt" 2>"$build/lintian.err" || lint_rc=$?
# Exit 1 is error tags (in lintian.txt) or a failure to run: an empty report then says nothing.
if [ "$lint_rc" != 0 ] && [ ! -s "$build/lintian.txt" ]; then
    grep -v 'running with root privileges' "$build/lintian.err" >&2 || true
    echo "deb: lintian failed (exit $lint_rc) without a report" >&2
    exit 1
fi
for f in "$build"/*.deb "$build"/*.changes "$build"/*.buildinfo; do
    mv "$f" "$OUT/"
done
mv "$build/lintian.txt" "$OUT/lintian-$version.txt"
echo "deb: packages in $OUT:"
for f in "$OUT"/*_"$version"-*.deb; do
    printf '  %s %s bytes\n' "$(basename "$f")" "$(stat -c %s "$f")"
done
echo "deb: lintian ($OUT/lintian-$version.txt):"
sed 's/^/  /' "$OUT/lintian-$version.txt"
[ -s "$OUT/lintian-$version.txt" ] || echo "  (no tags)"
