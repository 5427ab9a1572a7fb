#!/usr/bin/env bash
# The upgrade suite, run by make test: is every way of reaching the current
# version the same, and does an upgrade keep the data and the hardening?
#  * every upgrade script in sql/ ends with SELECT sandbox_persist._harden(),
#    so whatever it adds is closed like the rest (see its header);
#  * data.sh: 0.1.0 populated, ALTER EXTENSION ... UPDATE, every record reads
#    back the same and like a fresh install's, the full pgTAP suite passes on
#    the upgraded database (it replaces the extension in the default database
#    and puts a fresh one back: see its header);
#  * catalog.sh: a fresh install and an updated populated 0.1.0 have the same
#    catalogs (pg_dump --schema-only, plain and --binary-upgrade, and the
#    owners, privileges, proconfig and initial privileges of every object).
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

bash "$HERE/catalog.sh" || status=1
bash "$HERE/data.sh" || status=1
exit $status
