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
# Output in SANDBOX_PERSIST_DEB_OUT (default dist/deb/): the .deb files, the
# .changes and .buildinfo, and lintian.txt. The source is built in a copy under
# that directory: dpkg-buildpackage writes next to its tree's parent.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${SANDBOX_PERSIST_DEB_OUT:-$ROOT/dist/deb}
ref=${1:-}

# Build dependencies, as CI installs them on a fresh Debian 12 machine.
need=()
for p in debhelper postgresql-server-dev-all libzstd-dev dpkg-dev lintian; do
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
if [ -n "$ref" ]; then
    git -C "$ROOT" archive "$ref" | tar -x -C "$tree"
    rm -rf "$tree/debian"
    cp -r "$ROOT/debian" "$tree/debian"
    # An older Makefile listed its scripts relative to the build directory,
    # which an out-of-tree build (pg_buildext build) does not see: the same
    # one-line fix as today's Makefile.
    sed -i 's|^DATA = \$(wildcard sql/sandbox_persist--\*\.sql)$|DATA = $(patsubst $(srcdir)/%,%,$(wildcard $(srcdir)/sql/sandbox_persist--*.sql))|' "$tree/Makefile"
else
    (cd "$ROOT" && git ls-files -z -co --exclude-standard | xargs -0 tar -c --no-recursion -f - 2>/dev/null) | tar -x -C "$tree"
fi
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

# debian/control names the packages of the majors installed here (Debian
# regenerates it per distribution: trixie's lists 17, sid's 18).
(cd "$tree" && pg_buildext updatecontrol)
echo "deb: building sandbox-persist $version for PostgreSQL $(cd "$tree" && pg_buildext supported-versions | xargs)"
(cd "$tree" && env -u PG_CONFIG dpkg-buildpackage -us -uc -b) >"$build/build.log" 2>&1 \
    || { tail -n 60 "$build/build.log"; echo "deb: dpkg-buildpackage failed" >&2; exit 1; }
changes=$(ls "$build"/*.changes)
# lintian's output is the record; each remaining tag is explained in debian/*.lintian-overrides.
lintian --info --display-info --pedantic "$changes" >"$build/lintian.txt" 2>"$build/lintian.err" || true
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
