#!/usr/bin/env bash
# The conformance suite: scripts/conformance.sh against the test cluster's
# database (PGHOST/PGPORT/PGUSER/PGDATABASE, as scripts/test.sh exports them),
# proving what it promises:
#   CF1  as a superuser every transactional file runs and passes; the file that
#        commits (zz_cron) is skipped with its reason; TAP carries the case IDs
#   CF2  as a non-superuser application role (reached by URL) only the
#        installation checks run (INS1-INS3 pass) and every other file is
#        skipped with a reason naming the superuser settings it needs
#   CF3  neither run changes the stores: a checksum of every row of every store
#        table (the extension's pg_dump-registered tables) is unchanged, and no
#        sequence moves back (nextval is never rolled back, so one may move on)
#   CF4  a database without the extension, or a router without --router, is
#        refused (exit 2) before anything runs
# Prints "summary: conformance suite: ..." and exits non-zero on any failure.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
if bindir=$("${PG_CONFIG:-pg_config}" --bindir 2>/dev/null); then PATH="$bindir:$PATH"; export PATH; fi
failures=()
fail() { failures+=("$1"); echo "FAILED: $1" >&2; }
tmp=$(mktemp -d)
APP=sp_conformance_app
cleanup() {
    psql -X -q -c "SELECT sandbox_persist.revoke_app_role('$APP')" -c "DROP ROLE IF EXISTS $APP" \
        -c "DROP DATABASE IF EXISTS sp_conformance_noext" >/dev/null 2>&1
    rm -rf "$tmp"
}
trap cleanup EXIT

# checksum: one md5 over every row of every store table (the extension's
# pg_dump-registered tables).
checksum() {
    local rows
    rows=$(psql -X -q -At -v ON_ERROR_STOP=1 <<'SQL'
SELECT format('SELECT %L, count(*), md5(coalesce(string_agg(t::text, E''\n'' ORDER BY t::text), '''')) FROM %s t',
              c.oid::regclass, c.oid::regclass)
FROM pg_extension e, unnest(e.extconfig) AS x(oid) JOIN pg_class c ON c.oid = x.oid
WHERE e.extname = 'sandbox_persist' AND c.relkind = 'r' ORDER BY c.oid::regclass::text \gexec
SQL
) && [ -n "$rows" ] || { echo "checksum-failed-$RANDOM"; return; }
    printf '%s\n' "$rows" | md5sum | cut -d' ' -f1
}

# sequences: "name position" of each registered sequence (position = last_value,
# or last_value - 1 before its first nextval). PostgreSQL never rolls back
# nextval, so a rolled-back file may move a sequence on; it must never move back.
sequences() {
    psql -X -q -At -F ' ' -v ON_ERROR_STOP=1 <<'SQL'
SELECT format('SELECT %L, CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM %s', c.oid::regclass, c.oid::regclass)
FROM pg_extension e, unnest(e.extconfig) AS x(oid) JOIN pg_class c ON c.oid = x.oid
WHERE e.extname = 'sandbox_persist' AND c.relkind = 'S' ORDER BY c.oid::regclass::text \gexec
SQL
}

# sequences_forward BEFORE AFTER: every sequence at or past its position before.
sequences_forward() {
    local name pos now
    while read -r name pos; do
        now=$(awk -v n="$name" '$1 == n { print $2 }' <<<"$2")
        [ -n "$now" ] && [ "$now" -ge "$pos" ] || return 1
    done <<<"$1"
}

# Data an application wrote and committed, in several stores.
psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<'SQL' || fail "populating the database"
SELECT sandbox_persist.instance_upsert('{"key":"cf-keep-1","provider":"fake","providerSandboxId":"sb-1","threadId":"cf-t1","updatedAt":1}');
SELECT sandbox_persist.message_save_thread('cf-t1', '[{"id":"m1","role":"user","parts":[{"type":"text","content":"kept"}]}]');
SELECT sandbox_persist.metadata_set('cf', 'k', '{"v":1}');
SELECT sandbox_persist.lock_acquire('cf-lock', 600000);
SELECT sandbox_persist.event_log_append('cf-run', '[{"i":1},{"i":2}]');
SQL
before=$(checksum)
seq_before=$(sequences)
rows=$(psql -X -q -At -c "SELECT count(*) FROM sandbox_persist.instances")
echo "# checksum of the stores before: $before ($rows instance rows)"

# CF1: superuser.
status=0
bash scripts/conformance.sh >"$tmp/super" 2>&1 || status=$?
grep -E '^(#|Files=|Result:|summary:)|skipped' "$tmp/super"
[ $status -eq 0 ] || { grep -E '^not ok|Failed' "$tmp/super"; fail "CF1 the superuser run exits $status"; }
grep -q '^ok 1 - I1 get of a missing key is SQL NULL' "$tmp/super" || fail "CF1 TAP lines carry the case IDs (I1)"
grep -q '^ok 1 - INS1 ' "$tmp/super" || fail "CF1 INS1 ran"
grep -Eq '^zz_cron\.sql \.+ skipped: not one rolled-back transaction' "$tmp/super" || fail "CF1 zz_cron is skipped with its reason"
super_line=$(grep '^summary: conformance:' "$tmp/super" | sed 's/^summary: conformance: //')
after1=$(checksum)
[ "$after1" = "$before" ] || fail "CF3 the superuser run changed the stores ($before -> $after1)"
seq_after=$(sequences)
sequences_forward "$seq_before" "$seq_after" || fail "CF3 a sequence moved back during the superuser run"
echo "# sequences moved on by the rolled-back files (nextval is never rolled back): $(diff <(echo "$seq_before") <(echo "$seq_after") | grep -c '^>')"

# CF2: an application role, not a superuser, named by a URL.
psql -X -q -v ON_ERROR_STOP=1 -c "CREATE ROLE $APP LOGIN" -c "SELECT sandbox_persist.grant_app_role('$APP')" >/dev/null \
    || fail "CF2 creating the application role"
url="postgresql:///$PGDATABASE?host=$(printf %s "$PGHOST" | sed 's|/|%2F|g')&port=$PGPORT&user=$APP"
status=0
bash scripts/conformance.sh "$url" >"$tmp/app" 2>&1 || status=$?
grep -E '^(#|Files=|Result:|summary:)' "$tmp/app"
[ $status -eq 0 ] || { cat "$tmp/app"; fail "CF2 the application role's run exits $status"; }
grep -q "as $APP," "$tmp/app" || fail "CF2 the URL's user is the one connected"
for c in 'INS1 ' 'INS2 ' 'INS3.1 ' 'INS3.2 '; do
    grep -Eq "^ok [0-9]+ - $c" "$tmp/app" || fail "CF2 $c passes for the application role"
done
expect=$(ls test/pgtap/*.sql | grep -vc zz_cron)
got=$(grep -Ec '^[a-z_]+\.sql \.+ skipped: needs a superuser session: .*sandbox_persist\.allow_' "$tmp/app")
got_all=$(grep -Ec '^[a-z_]+\.sql \.+ skipped: needs a superuser session: ' "$tmp/app")
echo "# $got_all of $expect suites skipped as needing a superuser, $got of them naming a superuser-only setting"
[ "$got_all" -eq "$expect" ] || fail "CF2 every transactional suite is skipped with a reason ($got_all of $expect)"
grep -Eq '^instances\.sql \.+ skipped: needs a superuser session: sandbox_persist\.allow_test_reset' "$tmp/app" \
    || fail "CF2 instances.sql names allow_test_reset"
grep -Eq '^checkpoints\.sql \.+ skipped: .*allow_client_clock' "$tmp/app" || fail "CF2 checkpoints.sql names allow_client_clock"
app_line=$(grep '^summary: conformance:' "$tmp/app" | sed 's/^summary: conformance: //')
after2=$(checksum)
[ "$after2" = "$before" ] || fail "CF3 the application role's run changed the stores ($before -> $after2)"

# CF4: refused targets.
psql -X -q -c "CREATE DATABASE sp_conformance_noext" >/dev/null || fail "CF4 creating a database"
status=0
bash scripts/conformance.sh "dbname=sp_conformance_noext" >"$tmp/noext" 2>&1 || status=$?
{ [ $status -eq 2 ] && grep -q '^Bail out! sandbox_persist is not installed' "$tmp/noext"; } \
    || { cat "$tmp/noext"; fail "CF4 a database without the extension is refused (exit $status)"; }

elapsed=$SECONDS
result=pass
[ ${#failures[@]} -eq 0 ] || result="FAIL (${failures[*]})"
echo "summary: conformance suite: $result; superuser: ${super_line:-none}; app role: ${app_line:-none}; stores checksum unchanged: $([ "$after1" = "$before" ] && [ "$after2" = "$before" ] && echo yes || echo NO); ${elapsed}s"
[ ${#failures[@]} -eq 0 ]
