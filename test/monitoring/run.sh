#!/usr/bin/env bash
# The monitoring suite, run by make test (docs/monitoring.md):
#  * monitoring/postgres_exporter.yml is what monitoring/postgres_exporter.sql
#    generates from sandbox_persist.metrics() (no family missing or stale);
#  * on a populated database (runs of every status, detached runs past the
#    reaper TTL, leases and locks held and taken over, open and producer-lost
#    logs, blobs, a GC backlog, a maintenance round), Debian's
#    prometheus-postgres-exporter runs on 127.0.0.1 with that file, connected
#    through the cluster's unix socket as a login role that has only
#    pg_monitor and grant_monitor_role; /metrics is scraped with curl and
#    every sandbox_persist sample is compared with overview (an independent
#    column-to-metric mapping written here) and with metrics();
#  * promtool check rules monitoring/alerts.yml and promtool test rules
#    monitoring/alerts_test.yml;
#  * in a database at 0.3.0, the same library takes a lease and a lock over
#    without the 0.4.0 counter and refuses maintain() (it needs 0.5.0's
#    tables) with 55000; after ALTER EXTENSION UPDATE each takeover counts once.
# Uses the running test cluster (PGHOST/PGPORT/PGUSER/PGDATABASE, as set by
# scripts/test.sh); installs curl, prometheus and prometheus-postgres-exporter
# when missing. The exporter listens on 127.0.0.1:$SANDBOX_PERSIST_EXPORTER_PORT
# (default SANDBOX_PERSIST_PORT + 40) and is stopped on exit.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PORT=${SANDBOX_PERSIST_EXPORTER_PORT:-$(( ${SANDBOX_PERSIST_PORT:-54329} + 40 ))}
ROLE=sp_monitor_suite
OLD_DB=sp_monitoring_old
WORK=$(mktemp -d /tmp/sp_monitoring.XXXXXX)
exporter_pid=
fail=0

note_fail() { echo "monitoring: FAIL: $*" >&2; fail=$((fail + 1)); }
q() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$@"; }

cleanup() {
    if [ -n "$exporter_pid" ]; then
        kill "$exporter_pid" 2>/dev/null
        wait "$exporter_pid" 2>/dev/null
    fi
    q -c "SELECT sandbox_persist.revoke_app_role('$ROLE') FROM pg_roles WHERE rolname = '$ROLE'" \
      -c "DROP ROLE IF EXISTS $ROLE" -c "DROP DATABASE IF EXISTS $OLD_DB" >/dev/null 2>&1
    rm -rf "$WORK"
}
trap cleanup EXIT

# --- packages -----------------------------------------------------------------
missing=()
command -v curl >/dev/null 2>&1 || missing+=(curl)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
command -v prometheus-postgres-exporter >/dev/null 2>&1 || missing+=(prometheus-postgres-exporter)
if [ ${#missing[@]} -gt 0 ]; then
    SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
    echo "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -q && $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" \
        || { echo "monitoring: could not install ${missing[*]}" >&2; exit 1; }
fi

# --- the exporter file is generated from metrics() ------------------------------
q -f "$ROOT/monitoring/postgres_exporter.sql" >"$WORK/generated.yml" || exit 1
if ! diff -u "$ROOT/monitoring/postgres_exporter.yml" "$WORK/generated.yml"; then
    note_fail "monitoring/postgres_exporter.yml differs from what monitoring/postgres_exporter.sql generates (regenerate it)"
fi
dups=$(grep -E '^[a-z_]+:$' "$ROOT/monitoring/postgres_exporter.yml" | sort | uniq -d)
[ -z "$dups" ] || note_fail "query keys repeated in postgres_exporter.yml: $dups"

# --- the fixture ------------------------------------------------------------------
q <<'SQL' >/dev/null || { echo "monitoring: the fixture failed" >&2; exit 1; }
SELECT sandbox_persist._reset_for_tests();
SET sandbox_persist.allow_client_clock = on;
CREATE FUNCTION pg_temp.now_ms() RETURNS bigint LANGUAGE sql AS $$
    SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;
CREATE FUNCTION pg_temp.run(id text, status text) RETURNS void LANGUAGE sql AS $$
    SELECT sandbox_persist.run_create_or_resume(json_build_object(
        'runId', id, 'threadId', 'thread-' || id, 'startedAt', 1, 'status', status))::text::void $$;
SELECT pg_temp.run('run-' || i, 'running') FROM generate_series(1, 4) i;
SELECT pg_temp.run('int-1', 'interrupted');
SELECT pg_temp.run('done-' || i, 'completed') FROM generate_series(1, 3) i;
SELECT pg_temp.run('fail-' || i, 'failed') FROM generate_series(1, 2) i;
SELECT pg_temp.run('abort-1', 'aborted');
SELECT sandbox_persist.run_update('run-1', json_build_object('detachedSince', pg_temp.now_ms() - 600000));
SELECT sandbox_persist.run_update('run-2', json_build_object('detachedSince', pg_temp.now_ms() - 300000));
SELECT sandbox_persist.run_update('run-3', json_build_object('detachedSince', pg_temp.now_ms() - 1000));
-- leases: two held, one taken over; locks: three held, two taken over
SELECT sandbox_persist.checkpoint_acquire_writer('mon-t1', 600000);
SELECT sandbox_persist.checkpoint_acquire_writer('mon-t2', 1000, pg_temp.now_ms() - 10000);
SELECT sandbox_persist.checkpoint_acquire_writer('mon-t2', 600000);
SELECT sandbox_persist.lock_acquire('mon-k' || i, 1000, pg_temp.now_ms() - 10000) FROM generate_series(1, 3) i;
SELECT sandbox_persist.lock_acquire('mon-k' || i, 600000) FROM generate_series(1, 2) i;
SELECT sandbox_persist.lock_acquire('mon-k9', 600000);
-- two logs whose producer goes away (A10 ends them), then two open ones
SELECT sandbox_persist.event_log_append('lost-' || i, '[{"type":"TEXT_MESSAGE_CONTENT","delta":"x"}]')
  FROM generate_series(1, 2) i;
SELECT sandbox_persist.maintain(1000, pg_temp.now_ms() + 3600 * 1000);
SELECT sandbox_persist.event_log_append('open-' || i, '[{"type":"TEXT_MESSAGE_CONTENT","delta":"y"}]')
  FROM generate_series(1, 2) i;
SELECT sandbox_persist.maintain();
-- blobs: plain and content-addressed, two past their GC grace; an idle upload
SELECT sandbox_persist.blob_put('plain/mon-' || i, convert_to(repeat('sandbox ', 5000 * i), 'UTF8'))
  FROM generate_series(1, 3) i;
SELECT sandbox_persist.blob_put('sandbox-files/sha256/' || encode(sha256(convert_to('gc-' || i, 'UTF8')), 'hex'),
                                convert_to('gc-' || i, 'UTF8'), NULL, pg_temp.now_ms() - 48 * 3600 * 1000)
  FROM generate_series(1, 2) i;
SELECT sandbox_persist.blob_upload_begin('plain/mon-upload', NULL, pg_temp.now_ms() - 48 * 3600 * 1000);
SQL

# --- the monitoring role the exporter logs in as ------------------------------------
q -c "SET client_min_messages = warning" -c "DROP ROLE IF EXISTS $ROLE" -c "CREATE ROLE $ROLE LOGIN IN ROLE pg_monitor" \
  -c "ALTER ROLE $ROLE SET sandbox_persist.reaper_ttl = '120s'" \
  -c "SELECT sandbox_persist.grant_monitor_role('$ROLE')" >/dev/null || exit 1

# --- the exporter, and one scrape ---------------------------------------------------
DATA_SOURCE_NAME="host=$PGHOST port=$PGPORT user=$ROLE dbname=$PGDATABASE sslmode=disable" \
    prometheus-postgres-exporter --web.listen-address="127.0.0.1:$PORT" \
    --extend.query-path="$ROOT/monitoring/postgres_exporter.yml" \
    --disable-default-metrics --disable-settings-metrics --log.level=warn \
    >"$WORK/exporter.log" 2>&1 &
exporter_pid=$!
# Poll until it answers (bounded: 200 tries, each a refused connection or an answer).
up=0
for _ in $(seq 200); do
    if ! kill -0 "$exporter_pid" 2>/dev/null; then break; fi
    if curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$PORT/"; then up=1; break; fi
    sleep 0.05
done
if [ $up -ne 1 ]; then
    cat "$WORK/exporter.log" >&2
    echo "monitoring: the exporter did not come up on 127.0.0.1:$PORT" >&2
    exit 1
fi
curl -sf --max-time 30 "http://127.0.0.1:$PORT/metrics" >"$WORK/scrape.txt" \
    || { echo "monitoring: scrape failed" >&2; exit 1; }
if grep -qi 'level=error' "$WORK/exporter.log"; then
    cat "$WORK/exporter.log" >&2
    note_fail "the exporter logged errors"
fi

# name{labels, sorted, without the exporter's server label} value
grep -E '^sandbox_persist_' "$WORK/scrape.txt" \
    | sed -E 's/server="[^"]*",?//; s/,\}/}/; s/\{\}//' \
    | awk '{ n = $1; if (n !~ /\{/) n = n "{}"; print n, $2 }' | LC_ALL=C sort >"$WORK/scraped"

# What overview says, column by column (the mapping written out independently of metrics()).
q <<'SQL' | LC_ALL=C sort >"$WORK/overview"
SET sandbox_persist.reaper_ttl = '120s';
SELECT k || ' ' || v FROM sandbox_persist.overview o, LATERAL (VALUES
    ('sandbox_persist_runs{status="running"}', o.runs_running::text),
    ('sandbox_persist_runs{status="interrupted"}', o.runs_interrupted::text),
    ('sandbox_persist_runs{status="completed"}', o.runs_completed::text),
    ('sandbox_persist_runs{status="failed"}', o.runs_failed::text),
    ('sandbox_persist_runs{status="aborted"}', o.runs_aborted::text),
    ('sandbox_persist_runs_detached{}', o.runs_detached::text),
    ('sandbox_persist_runs_detached_past_ttl{}', o.runs_detached_past_ttl::text),
    ('sandbox_persist_checkpoint_leases_held{}', o.checkpoint_leases_held::text),
    ('sandbox_persist_locks_held{}', o.locks_held::text),
    ('sandbox_persist_lease_takeovers_total{kind="checkpoint_writer"}', o.checkpoint_writer_takeovers::text),
    ('sandbox_persist_lease_takeovers_total{kind="lock"}', o.lock_takeovers::text),
    ('sandbox_persist_event_logs_open{}', o.event_logs_open::text),
    ('sandbox_persist_event_logs_producer_lost{}', o.event_logs_producer_lost::text),
    ('sandbox_persist_blobs{}', o.blobs::text),
    ('sandbox_persist_blob_raw_bytes{}', o.blob_raw_bytes::text),
    ('sandbox_persist_blob_stored_bytes{}', o.blob_stored_bytes::text),
    ('sandbox_persist_blobs_awaiting_gc{}', o.blobs_awaiting_gc::text),
    ('sandbox_persist_uploads_open{}', o.uploads_open::text),
    ('sandbox_persist_attention_items{}', o.attention_items::text),
    ('sandbox_persist_maintenance_last_run_age_seconds{}',
        extract(epoch FROM clock_timestamp() - o.maintenance_last_run)::text),
    ('sandbox_persist_maintenance_last_duration_seconds{}', (o.maintenance_last_duration_ms / 1000.0)::text)
  ) x(k, v)
UNION ALL
SELECT format('sandbox_persist_gc_backlog_rows{action="%s"} %s', b.key, b.value)
  FROM sandbox_persist.overview o, json_each_text(o.gc_backlog) b;
SQL
# What metrics() says, every sample.
q <<'SQL' | LC_ALL=C sort >"$WORK/metrics"
SET sandbox_persist.reaper_ttl = '120s';
SELECT name || '{' || coalesce((SELECT string_agg(format('%s="%s"', key, value), ',' ORDER BY key)
                                  FROM json_each_text(labels)), '') || '} ' || value
  FROM sandbox_persist.metrics();
SQL

# compare EXPECTED SCRAPED: every expected sample present with an equal value
# (the age of the last maintenance run within 30 s, it moves between the reads).
compare() {
    awk -v what="$3" '
        function num(s) { return (s == "+Inf" || s == "Infinity") ? "inf" : (s == "NaN" ? "nan" : s + 0) }
        NR == FNR { got[$1] = $2; next }
        {
            total++
            if (!($1 in got)) { print "monitoring: FAIL: " $1 " (" what ") is not in the scrape"; bad++; next }
            a = num($2); b = num(got[$1])
            if ($1 ~ /last_run_age_seconds/) ok = (a - b < 30 && b - a < 30)
            else if (a == "inf" || a == "nan" || b == "inf" || b == "nan") ok = (a == b)
            else ok = (a == b) || (a != 0 && (a - b) / a < 1e-12 && (b - a) / a < 1e-12)
            if (!ok) { print "monitoring: FAIL: " $1 ": " what " " $2 ", scraped " got[$1]; bad++ }
        }
        END { printf "%d %d\n", total, bad }' "$2" "$1"
}
read -r n_overview bad_overview < <(compare "$WORK/overview" "$WORK/scraped" overview | tee "$WORK/cmp1" | tail -n 1)
grep FAIL "$WORK/cmp1" >&2
read -r n_metrics bad_metrics < <(compare "$WORK/metrics" "$WORK/scraped" "metrics()" | tee "$WORK/cmp2" | tail -n 1)
grep FAIL "$WORK/cmp2" >&2
fail=$((fail + bad_overview + bad_metrics))
n_scraped=$(wc -l <"$WORK/scraped")
[ "$n_scraped" -eq "$n_metrics" ] || note_fail "$n_scraped samples scraped, metrics() has $n_metrics"

# The fixture's own figures, so a value wrong in overview and metrics() alike fails too.
expect() {
    local got
    got=$(awk -v k="$1" '$1 == k { print $2 }' "$WORK/scraped")
    [ "$got" = "$2" ] || note_fail "$1 scraped '$got', the fixture made $2"
}
expect 'sandbox_persist_runs{status="running"}' 4
expect 'sandbox_persist_runs{status="interrupted"}' 1
expect 'sandbox_persist_runs{status="completed"}' 3
expect 'sandbox_persist_runs{status="failed"}' 2
expect 'sandbox_persist_runs{status="aborted"}' 1
expect 'sandbox_persist_runs_detached{}' 3
expect 'sandbox_persist_runs_detached_past_ttl{}' 2
expect 'sandbox_persist_checkpoint_leases_held{}' 2
expect 'sandbox_persist_locks_held{}' 3
expect 'sandbox_persist_lease_takeovers_total{kind="checkpoint_writer"}' 1
expect 'sandbox_persist_lease_takeovers_total{kind="lock"}' 2
expect 'sandbox_persist_event_logs_open{}' 2
expect 'sandbox_persist_event_logs_producer_lost{}' 2
expect 'sandbox_persist_blobs{}' 5
expect 'sandbox_persist_blob_raw_bytes{}' $((8 * 5000 * 6 + 4 + 4))
expect 'sandbox_persist_uploads_open{}' 1
expect 'sandbox_persist_gc_backlog_rows{action="blobs"}' 2
expect 'sandbox_persist_gc_backlog_rows{action="uploads"}' 1
grep -q '^sandbox_persist_table_size_bytes{table="runs"} ' "$WORK/scraped" || note_fail "no size of table runs"

echo "scraped from the exporter, compared with overview:"
join <(awk '{print $1, $2}' "$WORK/overview") "$WORK/scraped" | awk '{ printf "  %-70s overview %-22s scraped %s\n", $1, $2, $3 }'

# --- alerting rules -----------------------------------------------------------------
if ! check=$(promtool check rules "$ROOT/monitoring/alerts.yml" 2>&1); then
    echo "$check" >&2; note_fail "promtool check rules"
fi
echo "$check"
rules=$(sed -n 's/.*SUCCESS: \([0-9]*\) rules found.*/\1/p' <<<"$check")
if ! test_out=$(cd "$ROOT/monitoring" && promtool test rules alerts_test.yml 2>&1); then
    echo "$test_out" >&2; note_fail "promtool test rules"
fi
echo "$test_out"
cases=$(grep -c 'alertname:' "$ROOT/monitoring/alerts_test.yml")

# --- an older schema: the same library takes leases over without the 0.4.0
# objects, counting nothing, and refuses maintain() until the update; after
# the update it counts.
q -c "DROP DATABASE IF EXISTS $OLD_DB" -c "CREATE DATABASE $OLD_DB" >/dev/null || exit 1
old_out=$(q -d "$OLD_DB" 2>&1 <<'SQL'
CREATE EXTENSION sandbox_persist VERSION '0.3.0';
SET sandbox_persist.allow_client_clock = on;
CREATE FUNCTION pg_temp.now_ms() RETURNS bigint LANGUAGE sql AS $$
    SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;
-- an expired lease and an expired lock named after tag, then both taken over
CREATE FUNCTION pg_temp.take_over(tag text) RETURNS boolean LANGUAGE sql AS $$
    SELECT sandbox_persist.checkpoint_acquire_writer('old-t-' || tag, 1000, pg_temp.now_ms() - 10000);
    SELECT sandbox_persist.lock_acquire('old-k-' || tag, 1000, pg_temp.now_ms() - 10000);
    SELECT sandbox_persist.checkpoint_acquire_writer('old-t-' || tag, 60000) IS NOT NULL
       AND sandbox_persist.lock_acquire('old-k-' || tag, 60000) IS NOT NULL;
$$;
CREATE FUNCTION pg_temp.try_maintain() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM sandbox_persist.maintain();
    RETURN 'served';
EXCEPTION WHEN object_not_in_prerequisite_state THEN
    RETURN 'refused ' || SQLSTATE;
END
$$;
SELECT 'old acquires ' || pg_temp.take_over('before');
SELECT 'old maintain ' || pg_temp.try_maintain();
SELECT 'old counter ' || coalesce(to_regclass('sandbox_persist.lease_takeovers')::text, 'absent');
ALTER EXTENSION sandbox_persist UPDATE;
SELECT 'updated acquires ' || pg_temp.take_over('after');
SELECT 'updated takeovers ' || string_agg(format('%s=%s', labels->>'kind', value), ',' ORDER BY labels->>'kind')
  FROM sandbox_persist.metrics('{sandbox_persist_lease_takeovers_total}');
SQL
)
grep -qx 'old acquires true' <<<"$old_out" || note_fail "takeovers on a 0.3.0 schema: $old_out"
grep -qx 'old maintain refused 55000' <<<"$old_out" || note_fail "maintain() on a 0.3.0 schema: $old_out"
grep -qx 'old counter absent' <<<"$old_out" || note_fail "a 0.3.0 schema has no counter: $old_out"
grep -qx 'updated acquires true' <<<"$old_out" && grep -qx 'updated takeovers checkpoint_writer=1,lock=1' <<<"$old_out" \
    || note_fail "after the update each takeover counts once: $old_out"
q -c "DROP DATABASE IF EXISTS $OLD_DB" >/dev/null

q -c "SELECT sandbox_persist._reset_for_tests()" >/dev/null
echo "summary: monitoring: $n_scraped samples scraped from prometheus-postgres-exporter, $n_overview compared with overview ($bad_overview differ), $n_metrics with metrics() ($bad_metrics differ); promtool check rules: ${rules:-0} rules; promtool test rules: $cases cases, $(grep -q SUCCESS <<<"$test_out" && echo SUCCESS || echo FAILED); takeovers on a 0.3.0 schema, then updated: $(grep -c '^old .* \(true\|absent\|refused 55000\)$' <<<"$old_out") of 3 checks and $(grep -c '^updated takeovers checkpoint_writer=1,lock=1$' <<<"$old_out") of 1; $fail failures"
[ "$fail" -eq 0 ]
