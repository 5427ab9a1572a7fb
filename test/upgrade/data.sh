#!/usr/bin/env bash
# Upgrade on data: does ALTER EXTENSION sandbox_persist UPDATE keep every
# stored record, and does the upgraded database then pass every pgTAP suite?
#
# Against the cluster named by PGHOST/PGPORT/PGUSER (a superuser) it works in
# the database named by cron.database_name (the cluster's default database,
# PGDATABASE): pg_cron can be created only there, and two pgTAP suites
# (maintenance.sql, zz_cron.sql) schedule real pg_cron jobs, so only there can
# the whole pgTAP suite run against an upgraded installation. Its
# sandbox_persist is REPLACED (the pgTAP suites empty its tables anyway) and
# a fresh install is put back at the end.
#
#  1. There: DROP EXTENSION, CREATE EXTENSION sandbox_persist VERSION $FROM
#     (UPGRADE_FROM, an earlier release, 0.1.0 unless set); in a second, new
#     database: CREATE EXTENSION sandbox_persist (the default version).
#  2. Both get the same records in every store (test/backup/populate.sql, as
#     an application role given the store functions by grant_app_role, with
#     an injected clock).
#  3. The $FROM database is read (test/backup/reads.sql: every read of every
#     store, sequence positions, the overview) with what the application role
#     may use (grants.sql), then ALTER EXTENSION sandbox_persist UPDATE, then
#     read again: every line must be the same, but for the owners and the
#     version, which the update changes on purpose (test/upgrade/catalog.sh
#     compares those with a fresh install).
#  4. The upgraded database is compared with the fresh one: the same reads,
#     the same further writes to every store (test/backup/writes.sql) and the
#     reads after them. Owner tokens are random per database and are masked;
#     the schema's ACL is left out (under 0.1.0 the schema owner granted the
#     application role USAGE, under 0.2.0 sandbox_persist_owner does).
#  5. The full pgTAP suite (test/pgtap/*.sql, zz_cron.sql last) runs against
#     the upgraded database (UPGRADE_PGTAP=0 skips it: run.sh runs it after
#     the longest update path only).
#
# Prints one closing line
#   summary: upgrade on data: <N> reads compared before and after the update, <M> reads and <W> writes compared with a fresh install, <K> differences; pgTAP on the upgraded database: Files=.., Tests=.., result PASS
# and exits non-zero on any difference, error or failed pgTAP test.
set -euo pipefail
# shellcheck disable=SC1091
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib/stores.sh"
# shellcheck disable=SC1091
. "$HERE/release_lib.sh"
DB=${PGDATABASE:-postgres}
FROM=${UPGRADE_FROM:-0.1.0}
RUN_PGTAP=${UPGRADE_PGTAP:-1}
FRESH=sandbox_persist_upgrade_fresh
APP=sandbox_persist_upgrade_app
WORK=$(mktemp -d)
start=$(date +%s%N)
T0=$(( $(date +%s) * 1000 ))

cleanup() {
    psql_su -c "DROP DATABASE IF EXISTS $FRESH" >/dev/null 2>&1 || true
    # A fresh installation again in the default database, as set-up left it.
    psql_su -c "SELECT 1 FROM pg_roles WHERE rolname = '$APP'" -At | grep -q 1 \
        && psql_su -c "SELECT sandbox_persist.revoke_app_role('$APP')" -c "DROP OWNED BY $APP" >/dev/null 2>&1
    psql_su -c "DROP EXTENSION IF EXISTS sandbox_persist" -c "DROP SCHEMA IF EXISTS sandbox_persist" \
        -c "CREATE EXTENSION sandbox_persist" >/dev/null 2>&1 \
        || echo "upgrade on data: could not put a fresh installation back in $DB" >&2
    psql_su -c "DROP ROLE IF EXISTS $APP" >/dev/null 2>&1 || true
    if [ -n "${SANDBOX_PERSIST_KEEP_UPGRADE:-}" ]; then echo "outputs kept in $WORK" >&2; else rm -rf "$WORK"; fi
}
fail() {
    echo "upgrade on data: $*" >&2
    echo "summary: upgrade on data: error: $*"
    exit 1
}
trap cleanup EXIT

cron_db=$(psql_su -A -t -c "SHOW cron.database_name" 2>/dev/null || true)
[ "$cron_db" = "$DB" ] || fail "PGDATABASE ($DB) is not cron.database_name (${cron_db:-pg_cron not loaded}): the pgTAP suites need pg_cron in the upgraded database"
psql_su -c "DROP DATABASE IF EXISTS $FRESH" -c "DROP ROLE IF EXISTS $APP" >/dev/null 2>&1 \
    || fail "a role $APP from an earlier run still holds privileges; drop it"
psql_su -c "CREATE ROLE $APP NOLOGIN" || fail "could not create the application role"

# 1. $FROM in the default database, written and read by $FROM's own library
# when the current one refuses its schema (release_lib.sh: only into the
# private copy of the install run.sh makes); the default version in a new one.
if release_lib_needed "$FROM"; then release_lib_use "$FROM" || fail "the library of $FROM could not be built"; fi
PGOPTIONS='-c client_min_messages=warning' psql_su -c "CREATE EXTENSION IF NOT EXISTS pg_cron" -c "CREATE EXTENSION IF NOT EXISTS pgtap" \
    -c "ALTER DATABASE $DB SET sandbox_persist.allow_client_clock = on" \
    -c "ALTER DATABASE $DB SET sandbox_persist.allow_test_reset = on" \
    -c "DROP EXTENSION IF EXISTS sandbox_persist" -c "DROP SCHEMA IF EXISTS sandbox_persist" \
    -c "CREATE EXTENSION sandbox_persist VERSION '$FROM'" || fail "installing $FROM failed"
[ "$(ext_version "$DB")" = "$FROM" ] || fail "CREATE EXTENSION ... VERSION '$FROM' installed $(ext_version "$DB")"

# populate DB: the records of every store.
populate() {
    psql -X -q -d "$1" -v t0="$T0" -v app="$APP" -f "$STORES/populate.sql" >"$WORK/populate.$1.out" 2>&1 \
        || { cat "$WORK/populate.$1.out"; fail "populating $1 failed"; }
}
# read NAME DB: every store read and the application role's grants, errors apart.
read_all() {
    { psql -X -d "$2" -v t0="$T0" -v app="$APP" -f "$STORES/reads.sql"
      psql -X -d "$2" -v app="$APP" -f "$HERE/grants.sql"; } >"$WORK/$1.out" 2>"$WORK/$1.err" || true
}
# 2. The records at $FROM, read before the update.
populate "$DB"
read_all before "$DB"
if release_lib_needed "$FROM"; then release_lib_current || fail "the current library could not be put back in the private copy"; fi

# The same records in a fresh install of the default version.
create_db "$FRESH" || fail "could not create $FRESH"
psql -X -q -v ON_ERROR_STOP=1 -d "$FRESH" -c "CREATE EXTENSION sandbox_persist" || fail "CREATE EXTENSION failed"
target=$(default_version)
[ "$(ext_version "$FRESH")" = "$target" ] || fail "CREATE EXTENSION installed $(ext_version "$FRESH"), not $target"
populate "$FRESH"

# 3. Update, read.
# The fences granted before the update, for the T19 checks after it.
thread_fences=$(psql_su -At -c "SELECT coalesce(json_object_agg(thread_id, fence), '{}') FROM sandbox_persist.checkpoint_threads")
lock_seq=$(psql_su -At -c "SELECT last_value FROM sandbox_persist.lock_fences")
psql_su -c "ALTER EXTENSION sandbox_persist UPDATE" || fail "ALTER EXTENSION sandbox_persist UPDATE failed"
[ "$(ext_version "$DB")" = "$target" ] || fail "ALTER EXTENSION ... UPDATE left version $(ext_version "$DB"), not $target"
read_all after "$DB"
# The documented upgrade step (README "Upgrade"): new store functions are not
# granted by themselves (0.4.0 adds event_log_read_verified and
# maintenance_health), so the DBA runs grant_app_role again; the upgraded
# database must then match a fresh one.
psql_su -c "SELECT sandbox_persist.grant_app_role('$APP')" >/dev/null || fail "grant_app_role after the update failed"
read_all after_grant "$DB"
# The lines the update changes on purpose: owners (and so the grantor of
# every grant), the schema's ACL, the version; 0.3.0 drops checkpoints.seq
# (and its identity sequence) and gives fork roots their own copy of their
# messages, which draws identity values of conversation_messages; 0.5.0 adds
# the durable streams' identity sequence.
on_purpose='^R\tcatalog\t(owners and grants of relations|owners and grants of functions|schema|extension|sequence checkpoints_seq_seq|sequence conversation_messages_message_id_seq|sequence streams_stream_id_seq)\t'
# What 0.4.0 adds, absent before the update: the overview's maintenance_*
# columns and the function maintenance_health() granted to the app role; and
# 0.5.0's max_rows of run_list_reclaimable, whose grant the update carries
# over to the new signature.
new_columns() {
    sed -E -e 's/,"maintenance_(scheduled|overdue|failing)":(true|false)//g' \
           -e 's/,"maintenance_last_failure":(null|"[^"]*")//g' \
           -e 's/ sandbox_persist\.maintenance_health\(\)//g' \
           -e 's/sandbox_persist\.run_list_reclaimable\(bigint,bigint\)/sandbox_persist.run_list_reclaimable(bigint,bigint,integer)/g'
}
# The overview columns 0.4.0 appends (checkpoint_leases_held to maintenance_health)
# are new on purpose too: before and after compare the columns every release
# has (cut from both sides, so a 0.4.0 database compares the same ones);
# upgraded and fresh (below) compare them all.
common_overview() { sed -E '/^R\tcatalog\toverview\t/ s/,"checkpoint_leases_held":.*\}$/}/'; }
grep -Pv "$on_purpose" "$WORK/before.out" | common_overview | new_columns >"$WORK/before.kept" || true
grep -Pv "$on_purpose" "$WORK/after.out" | common_overview | new_columns >"$WORK/after.kept" || true
read -r n1 d1 < <(compare "before and after the update" "$WORK/before.kept" "$WORK/after.kept")

# 4. The upgraded database against the fresh one: reads, writes, reads.
read_all fresh "$FRESH"
for db in "$DB" "$FRESH"; do
    psql -X -d "$db" -v t0="$T0" -v app="$APP" -f "$STORES/writes.sql" >"$WORK/writes.$db.out" 2>"$WORK/writes.$db.err" || true
done
read_all after_writes "$DB"
read_all fresh_after_writes "$FRESH"
# mask FILE: owner tokens are random per database; the schema ACL's grantor
# differs by history (see the header). Before 0.3.0 an append drew an
# identity value of conversation_messages per message passed, since then per
# new message, so that sequence's position differs by history too; and the
# overview shows the last maintain() summary, which lacks A11's two counts,
# A12's and A13's one when it was recorded before the update, and logsProducerLost
# when 0.1.0's own library recorded it (release_lib.sh).
mask() {
    sed -E -e 's/"ownerToken" *: *"[0-9a-f-]{36}"/"ownerToken":"<token>"/g' \
           -e 's/,"logsProducerLost":[0-9]+,/,/g' \
           -e 's/^(R\tcatalog\tsequence conversation_messages_message_id_seq\t).*/\1<position>/' \
           -e 's/,"streamsPurged":[0-9]+\}/}/g' \
           -e 's/,"blobsRecompressed":[0-9]+\}/}/g' \
           -e 's/,"conversationPositionsDeleted":[0-9]+,"conversationMessagesDeleted":[0-9]+\}/}/g' "$1" \
        | grep -Pv '^R\tcatalog\tschema\t' || true
}
mask "$WORK/after_grant.out" >"$WORK/upgraded.cmp"; mask "$WORK/fresh.out" >"$WORK/fresh.cmp"
read -r n2 d2 < <(compare "upgraded and fresh" "$WORK/upgraded.cmp" "$WORK/fresh.cmp")
mask "$WORK/writes.$DB.out" >"$WORK/upgraded_w.cmp"; mask "$WORK/writes.$FRESH.out" >"$WORK/fresh_w.cmp"
read -r w3 d3 < <(compare "writes, upgraded and fresh" "$WORK/upgraded_w.cmp" "$WORK/fresh_w.cmp")
mask "$WORK/after_writes.out" >"$WORK/upgraded_aw.cmp"; mask "$WORK/fresh_after_writes.out" >"$WORK/fresh_aw.cmp"
read -r n4 d4 < <(compare "after the writes, upgraded and fresh" "$WORK/upgraded_aw.cmp" "$WORK/fresh_aw.cmp")

# T19: fences keep growing across the update, the digests it computed are the library's.
failover_checks=0
if [ "$(ext_version "$DB")" = "$target" ]; then
    psql -X -d "$DB" -v thread_fences="$thread_fences" -v lock_seq="$lock_seq" -f "$HERE/failover.sql" \
        >"$WORK/failover.out" 2>"$WORK/failover.err" || true
    cat "$WORK/failover.out"
    failover_checks=$(grep -c '^ok ' "$WORK/failover.out" || true)
    if [ "$failover_checks" -ne 7 ]; then
        echo "upgrade on data: $failover_checks of 7 failover checks (T19) passed" >&2
    fi
fi

errors=0
[ "$failover_checks" -eq 7 ] || errors=$((errors + 1))
for f in "$WORK"/*.err; do
    if grep -q . "$f"; then
        echo "-- messages from $(basename "$f" .err):"
        cat "$f"
        errors=$((errors + $(grep -Eci 'error|fatal' "$f" || true)))
    fi
done
# An empty output on both sides compares equal: a step that read nothing failed.
for n in "$n1" "$n2" "$w3" "$n4"; do
    if [ "$n" -lt 10 ]; then echo "upgrade on data: a step produced (almost) no output" >&2; errors=$((errors + 1)); fi
done
differences=$((d1 + d2 + d3 + d4))

# 5. The full pgTAP suite against the upgraded database (sorted: zz_cron last).
tap=$WORK/pgtap.out
tap_status=0
tap_result=PASS tap_files="skipped (UPGRADE_PGTAP=0)"
if [ "$RUN_PGTAP" = 1 ]; then
mapfile -t tap_files_list < <(cd "$ROOT" && printf '%s\n' test/pgtap/*.sql | LC_ALL=C sort)
(cd "$ROOT" && pg_prove -f -d "$DB" "${tap_files_list[@]}") >"$tap" 2>&1 || tap_status=$?
cat "$tap"
tap_files=$(grep -E '^Files=' "$tap" | sed 's/,  *[0-9]* wallclock.*//' || true)
tap_result=$(grep -E '^Result:' "$tap" | awk '{print $2}' || true)
[ "$(ext_version "$DB")" = "$target" ] || { echo "upgrade on data: the pgTAP run changed the version" >&2; errors=$((errors + 1)); }
fi

elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
echo "upgrade on data: $FROM -> $target, $errors errors, ${elapsed} ms"
echo "summary: upgrade on data from $FROM: $n1 reads compared before and after the update, $((n2 + n4)) reads and $w3 writes compared with a fresh install, $differences differences, $failover_checks of 7 failover checks (T19); pgTAP on the upgraded database: ${tap_files:-no files}, result ${tap_result:-none}"
[ "$differences" -eq 0 ] && [ "$errors" -eq 0 ] && [ "$tap_status" -eq 0 ] && [ "$tap_result" = PASS ]
