#!/usr/bin/env bash
# The dist suite: META.json against the PGXN meta spec and the tree
# (test/dist/meta.js, cases PX1-PX4), then `make dist` into a temporary
# directory and its files checked:
#   DS1 the PGXN tarball holds this commit under sandbox_persist-V/ with
#       META.json, the control file and every upgrade script, and nothing of dist/
#   DS2 the adapter's .tgz is package.json's name and version
#   DS3 SHA256SUMS verifies both
# Prints "summary: dist: ..."; non-zero on any failure.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
failures=()
fail() { failures+=("$1"); echo "FAILED: $1" >&2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

meta_out=$(node test/dist/meta.js) || fail "PX META.json checks"
echo "$meta_out"
version=$(sed -n "s/^default_version = '\(.*\)'/\1/p" sandbox_persist.control)
SANDBOX_PERSIST_DIST_OUT=$out bash scripts/dist.sh || fail "make dist"
tarball=$out/sandbox_persist-$version.tar.gz
listing=$(tar -tzf "$tarball" 2>/dev/null) || fail "DS1 the PGXN tarball is a tar.gz"
for f in META.json sandbox_persist.control Makefile README.md $(git ls-files 'sql/*.sql'); do
    grep -qx "sandbox_persist-$version/$f" <<<"$listing" || fail "DS1 the tarball holds $f"
done
[ "$(grep -cv "^sandbox_persist-$version/" <<<"$listing")" -eq 0 ] || fail "DS1 everything is under sandbox_persist-$version/"
! grep -q "^sandbox_persist-$version/dist/" <<<"$listing" || fail "DS1 nothing of dist/ in the tarball"
[ "$(tar -xzOf "$tarball" "sandbox_persist-$version/META.json" | sed -n 's/^   "version": "\(.*\)",$/\1/p')" = "$version" ] \
    || fail "DS1 the tarball's META.json has version $version"
name=$(node -p 'require("./clients/node/package.json").name.replace(/^@/, "").replace("/", "-")')
adapter=$(node -p 'require("./clients/node/package.json").version')
tgz=$out/$name-$adapter.tgz
if [ -f "$tgz" ]; then
    [ "$(tar -xzOf "$tgz" package/package.json | node -p 'JSON.parse(require("fs").readFileSync(0, "utf8")).version')" = "$adapter" ] \
        || fail "DS2 the adapter's .tgz carries version $adapter"
else
    fail "DS2 the adapter's .tgz $(basename "$tgz") was written"
fi
(cd "$out" && sha256sum -c --quiet SHA256SUMS) || fail "DS3 SHA256SUMS verifies"
[ "$(wc -l <"$out/SHA256SUMS")" -eq 2 ] || fail "DS3 SHA256SUMS lists both files"

status=pass
[ ${#failures[@]} -eq 0 ] || status="FAIL (${failures[*]})"
echo "summary: dist: $status; $(grep '^meta:' <<<"$meta_out" | sed 's/^meta: //'); $(basename "$tarball") $(stat -c %s "$tarball" 2>/dev/null) bytes, $(basename "$tgz") $(stat -c %s "$tgz" 2>/dev/null) bytes"
[ ${#failures[@]} -eq 0 ]
