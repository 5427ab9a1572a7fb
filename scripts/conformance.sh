#!/usr/bin/env bash
# Prove an installation: run the pgTAP conformance suites (test/pgtap/*.sql)
# and the installation checks (test/conformance/installed.sql) against an
# existing database where sandbox_persist is installed, and print their TAP
# (every assertion's description starts with its case ID).
#
#   scripts/conformance.sh [--router] [CONNINFO-OR-URL]
#   make installcheck-conformance [CONFORMANCE_DB=postgresql://...]
#
# The database is named by the usual PG* variables (PGHOST, PGPORT, PGUSER,
# PGDATABASE, PGPASSWORD, PGSERVICE...) or by one argument, a libpq URL or
# conninfo string.
#
# Its data is not harmed: the suites run in place, and every file that runs is
# ONE transaction that ends in ROLLBACK (the script checks each file opens with
# BEGIN and closes with ROLLBACK before running it; a file that errors ends its
# session, which rolls back too). Emptying the stores (_reset_for_tests),
# sequence restarts and roles created by a file are undone with it. What the
# rollback cannot hide: the files take ACCESS EXCLUSIVE locks on the store
# tables while they run, so point it at a database that serves no traffic at
# that moment (a CI database, an upgraded copy, a promoted standby). A file that
# must commit (zz_cron.sql: pg_cron's job must see committed rows) is skipped.
# When pgtap is not installed in the database, it is created inside each file's
# transaction and rolled back with it (pgtap needs no superuser, only CREATE on
# the database).
#
# Superuser: the suites empty the stores and inject a clock through two
# superuser-only settings (sandbox_persist.allow_test_reset,
# sandbox_persist.allow_client_clock), read and write the tables directly,
# create roles and LOAD the library. A superuser session turns the two settings
# on for its own connections (PGOPTIONS) and runs everything; any other role
# runs test/conformance/installed.sql and every other file is skipped, its
# reason naming what it needs. A file that schedules the pg_cron job
# (maintenance.sql) is skipped, saying so, where pg_cron is not installed.
#
# A PL/Proxy router database (functions in schema sandbox_persist written in
# plproxy) is refused unless --router is given: through a router every call
# commits on the shards on its own, so nothing is rolled back. With --router
# the store suites that hold through a router run (the shards must have the two
# settings on, and their data is emptied; the suites read the stores' tables,
# which a router offers only as the test mirrors test/shards/run.sh installs):
# use it on a throwaway sharded set.
#
# Exit status: 0 when every file that ran passed, 1 when one failed, 2 when the
# database cannot be tested (no connection, no extension, a router without
# --router).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if bindir=$("${PG_CONFIG:-pg_config}" --bindir 2>/dev/null); then
    PATH="$bindir:$PATH"
    export PATH
fi

router=
target=()
for arg in "$@"; do
    case "$arg" in
        --router) router=1 ;;
        -h|--help) sed -n '2,42p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "conformance: unknown option $arg" >&2; exit 2 ;;
        *) target=(-d "$arg") ;;
    esac
done
# The suites that hold through a router (test/shards/run.sh gives each other's reason).
ROUTER_SUITES="blobs checkpoints claims generation_runs instances interrupts messages metadata runs"

# q SQL: one value from the target database.
q() { psql -X -q -At -v ON_ERROR_STOP=1 "${target[@]}" -c "$1"; }

if ! probe=$(q "SELECT concat_ws('|',
        coalesce((SELECT extversion FROM pg_extension WHERE extname = 'sandbox_persist'), ''),
        (SELECT rolsuper FROM pg_roles WHERE rolname = current_user),
        EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pgtap'),
        EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_cron'),
        EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pgtap'),
        EXISTS (SELECT 1 FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
                JOIN pg_namespace n ON n.oid = p.pronamespace
                WHERE n.nspname = 'sandbox_persist' AND l.lanname = 'plproxy'),
        current_database(), current_user, current_setting('server_version'))" 2>&1); then
    echo "Bail out! cannot query the database: $probe"
    exit 2
fi
IFS='|' read -r extversion is_super has_pgtap has_cron pgtap_available is_router dbname dbuser server_version <<<"$probe"

echo "# sandbox_persist conformance: database $dbname as $dbuser, PostgreSQL $server_version"
if [ "$is_router" = t ]; then
    echo "# a PL/Proxy router (plproxy functions in schema sandbox_persist)"
    if [ -z "$router" ]; then
        echo "Bail out! this is a router: its calls commit on the shards, so the suites would empty the shards' stores; rerun with --router on a throwaway sharded set"
        exit 2
    fi
    extversion=${extversion:-router}
elif [ -z "$extversion" ]; then
    echo "Bail out! sandbox_persist is not installed in database $dbname (CREATE EXTENSION sandbox_persist)"
    exit 2
fi
echo "# extension version $extversion; superuser: $is_super; pgtap installed: $has_pgtap; pg_cron installed: $has_cron"
if [ "$has_pgtap" != t ] && [ "$pgtap_available" != t ]; then
    echo "Bail out! pgTAP is not available on the server: install it (Debian: apt-get install postgresql-$(echo "$server_version" | cut -d. -f1)-pgtap)"
    exit 2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$ROOT/test/pgtap" "$work/pgtap"
cp "$ROOT/test/conformance/installed.sql" "$work/pgtap/00_installed.sql"

# needs FILE: what a file needs beyond the app role's rights, one phrase each.
needs() {
    local f=$1 out=()
    grep -q '_reset_for_tests' "$f" && out+=("sandbox_persist.allow_test_reset (it empties the stores inside its transaction)")
    grep -Eq 'now_ms|allow_client_clock = on' "$f" && out+=("sandbox_persist.allow_client_clock (it injects a clock)")
    grep -q 'CREATE ROLE' "$f" && out+=("CREATE ROLE")
    grep -q "^LOAD '" "$f" && out+=("LOAD of the library")
    grep -Eq '(FROM|INTO|UPDATE|TABLE) sandbox_persist\.[a-z_]+( |$|;|\))' "$f" && out+=("direct access to the store tables")
    local IFS=';'
    echo "${out[*]}"
}

# wrapped FILE: opens with BEGIN (after comments and psql settings) and ends with ROLLBACK.
wrapped() {
    [ "$(grep -Ev '^\s*(--|\\set|$)' "$1" | head -n 1)" = "BEGIN;" ] &&
        [ "$(grep -Ev '^\s*(--|$)' "$1" | tail -n 1)" = "ROLLBACK;" ]
}

# skip FILE REASON: replace a file by a TAP plan that skips it with the reason.
skip() {
    local why=${2//\'/}
    printf '\\echo %s\n' "'1..0 # SKIP $why'" >"$1"
}

files=()
ran=0
skipped=0
for f in $(ls "$work"/pgtap/*.sql | LC_ALL=C sort); do
    name=$(basename "$f" .sql)
    files+=("$f")
    if ! wrapped "$f"; then
        skip "$f" "not one rolled-back transaction (it commits), so it never runs against an existing database; make test runs it"
        skipped=$((skipped + 1))
        continue
    fi
    if [ -n "$router" ] && [ "$name" = 00_installed ]; then
        skip "$f" "a router has the functions but not the extension; run it on each shard"
        skipped=$((skipped + 1))
        continue
    fi
    if [ -n "$router" ] && [[ " $ROUTER_SUITES " != *" $name "* ]]; then
        skip "$f" "does not hold through a router (test/shards/run.sh gives the reason)"
        skipped=$((skipped + 1))
        continue
    fi
    if [ "$has_cron" != t ] && grep -q 'cron\.job' "$f"; then
        skip "$f" "needs pg_cron installed in this database (it schedules the maintenance job)"
        skipped=$((skipped + 1))
        continue
    fi
    need=$(needs "$f")
    if [ "$name" != 00_installed ] && [ "$is_super" != t ] && [ -n "$need" ]; then
        skip "$f" "needs a superuser session: ${need//;/, }"
        skipped=$((skipped + 1))
        continue
    fi
    if [ "$has_pgtap" != t ]; then
        sed -i '0,/^BEGIN;$/s//BEGIN;\nCREATE EXTENSION pgtap;/' "$f"
    fi
    ran=$((ran + 1))
done

opts=${PGOPTIONS:-}
if [ "$is_super" = t ] && [ -z "$router" ]; then
    opts="$opts -c sandbox_persist.allow_test_reset=on -c sandbox_persist.allow_client_clock=on"
fi
echo "# $ran files run, $skipped skipped"
# pg_prove hands a conninfo or URL to psql badly: a psql that carries the target.
psql_bin=$(command -v psql)
if [ ${#target[@]} -gt 0 ]; then
    printf '#!/bin/sh\nexec %q -d %q "$@"\n' "$psql_bin" "${target[1]}" >"$work/psql"
    chmod +x "$work/psql"
    psql_bin=$work/psql
fi
out="$work/prove.out"
status=0
(cd "$work/pgtap" && PGOPTIONS="$opts" pg_prove -v -f --psql-bin "$psql_bin" "${files[@]##*/}") >"$out" 2>&1 || status=$?
cat "$out"
echo "summary: conformance: $(grep -E '^Files=' "$out" | sed 's/,  *[0-9]* wallclock.*//'), $ran files run, $skipped skipped, result $(grep -E '^Result:' "$out" | awk '{print $2}')"
[ $status -eq 0 ] || exit 1
