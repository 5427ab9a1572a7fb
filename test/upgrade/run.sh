#!/usr/bin/env bash
# The upgrade suite, run by make test: is every way of reaching the current
# version the same, and does an upgrade keep the data and the hardening?
#  * every upgrade script in sql/ ends with SELECT sandbox_persist._harden(),
#    so whatever it adds is closed like the rest (see its header);
#  * for each earlier release (every version reached by an upgrade script in
#    sql/ that is not the default one), catalog.sh and data.sh with
#    UPGRADE_FROM set to it; the pgTAP suite runs after the longest path
#    (from 0.1.0) only;
#  * data.sh: an earlier release populated, ALTER EXTENSION ... UPDATE, every record reads
#    back the same and like a fresh install's, the full pgTAP suite passes on
#    the upgraded database (it replaces the extension in the default database
#    and puts a fresh one back: see its header);
#  * catalog.sh: a fresh install and an updated populated release have the same
#    catalogs (pg_dump --schema-only, plain and --binary-upgrade, and the
#    owners, privileges, proconfig and initial privileges of every object).
#  * the releases whose schema the current library refuses (0.1.0, 0.2.0:
#    release_lib.sh) are written by their own libraries, which never go into
#    the install PG_CONFIG names (others load that sandbox_persist.so): those
#    releases run against a private copy of the install, with a throwaway
#    cluster of its own started from it, into which the old library and then
#    the current build are installed (release_lib_private_start); the others
#    run against the cluster of PGHOST/PGPORT as before. The copy and its
#    cluster are removed on exit.
# Each part prints its own "summary: upgrade ..." line; exits non-zero when
# any part fails.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
status=0

# Every upgrade script's last statement is the hardening call.
scripts=0
missing=()
for f in "$ROOT"/sql/sandbox_persist--*--*.sql; do
    [ -e "$f" ] || continue
    scripts=$((scripts + 1))
    last=$(grep -Ev '^[[:space:]]*(--.*)?$' "$f" | tail -n 1)
    [ "$last" = "SELECT sandbox_persist._harden();" ] || missing+=("$(basename "$f")")
done
if [ "${#missing[@]}" -gt 0 ] || [ "$scripts" -eq 0 ]; then
    echo "upgrade scripts: these do not end with SELECT sandbox_persist._harden(); ${missing[*]:-(no upgrade script found)}" >&2
    status=1
fi
echo "summary: upgrade scripts: $((scripts - ${#missing[@]})) of $scripts end with sandbox_persist._harden()"

current=$(sed -nE "s/^default_version *= *'([^']+)'.*/\1/p" "$ROOT/sandbox_persist.control")
mapfile -t releases < <(for f in "$ROOT"/sql/sandbox_persist--*--*.sql; do
        v=$(basename "$f" .sql); v=${v#sandbox_persist--}; echo "${v%%--*}"
    done | grep -vxF "$current" | sort -uV)
[ "${#releases[@]}" -gt 0 ] || { echo "upgrade: no earlier release to upgrade from" >&2; exit 1; }
# shellcheck disable=SC1091
. "$HERE/release_lib.sh"
private=()
for from in "${releases[@]}"; do
    if release_lib_needed "$from"; then private+=("$from"); fi
done
trap release_lib_private_stop EXIT
# run_release V: catalog.sh and data.sh from V (pgTAP after the longest path only).
run_release() {
    local from=$1 pgtap=0
    [ "$from" = "${releases[0]}" ] && pgtap=1
    UPGRADE_FROM=$from bash "$HERE/catalog.sh" || status=1
    UPGRADE_FROM=$from UPGRADE_PGTAP=$pgtap bash "$HERE/data.sh" || status=1
}
for from in "${releases[@]}"; do
    release_lib_needed "$from" || run_release "$from"
done
if [ "${#private[@]}" -gt 0 ]; then
    if release_lib_private_start; then
        for from in "${private[@]}"; do run_release "$from"; done
    else
        echo "upgrade: no private copy of the install for ${private[*]}" >&2
        echo "summary: upgrade from ${private[*]}: error: no private copy of the install"
        status=1
    fi
fi
exit $status
