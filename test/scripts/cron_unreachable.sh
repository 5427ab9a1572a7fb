#!/usr/bin/env bash
# Issue 20 item 2, end to end (docs/contract/maintenance.md §7, case M29):
# maintenance that pg_cron cannot run is reported.
#
# It starts its own throwaway cluster the way the issue met it: pg_cron
# preloaded with cron.use_background_workers = off and cron.host =
# '127.0.0.1', so pg_cron runs each job over a TCP connection, and a
# pg_hba.conf that asks a password (scram-sha-256) on 127.0.0.1, which
# pg_cron's connection does not have. Every run of the job then fails in
# cron.job_run_details with "connection failed" and maintain() never runs.
#
#   M29.1-M29.4  schedule_maintenance() succeeds, pg_cron records a failed run
#                (waited for as an event: cron.job_run_details is polled once a
#                second, at most 150 s, since pg_cron has minute granularity)
#   M29.5-M29.9  maintenance_health() is failing with pg_cron's message,
#                attention_list() holds maintenance_failing, the overview says
#                maintenance_failing with the message, maintain() never ran
#   M29.10-M29.12 pg_hba.conf fixed (trust on 127.0.0.1) and reloaded: the next
#                run succeeds and the report clears by itself
#   M29.13       a database without pg_cron says so (cronNote)
#
# Before issue 20 the extension had no maintenance_health(), and
# attention_list() stayed empty through all of it (M29.6 fails).
#
# Uses the extension installed for PG_CONFIG and one port:
# SANDBOX_PERSIST_CRON_PORT, default SANDBOX_PERSIST_PORT + 5. Listens on
# 127.0.0.1 only. The cluster is stopped and removed however the script ends.
# Prints "ok"/"not ok" lines and one closing "summary: cron unreachable: ..." line.
set -uo pipefail
PGBIN=$("${PG_CONFIG:-pg_config}" --bindir)
PORT=${SANDBOX_PERSIST_CRON_PORT:-$(( ${SANDBOX_PERSIST_PORT:-54329} + 5 ))}
DIR=$(mktemp -d /tmp/sp_cron_unreachable.XXXXXX)
passed=0
failed=0
start=$(date +%s)

as_postgres() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
cleanup() {
    # A wait_run still polling in a command substitution (the run was stopped early).
    pkill -TERM -P $$ 2>/dev/null || true
    as_postgres "$PGBIN/pg_ctl" -D "$DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$DIR"
}
trap cleanup EXIT
# Over the unix socket (trust): the test's own connections.
q() { "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$DIR" -p "$PORT" -U postgres "$@"; }
check() {   # check ID DESCRIPTION EXPECTED ACTUAL
    if [ "$3" = "$4" ]; then
        echo "ok - $1 $2"
        passed=$((passed + 1))
    else
        echo "not ok - $1 $2"
        echo "#   expected: $3"
        echo "#   got:      $4"
        failed=$((failed + 1))
    fi
}
finish() {
    echo "summary: cron unreachable: $passed passed, $failed failed, $(( $(date +%s) - start )) s"
    [ "$failed" -eq 0 ]
    exit
}
# wait_run STATUS AFTER: the message of the first run in STATUS whose runid
# is above AFTER, polled once a second for at most 150 s (a run that cannot
# connect has no start_time, so runs are told apart by runid).
wait_run() {
    local i out
    for i in $(seq 1 150); do
        out=$(q -c "SELECT coalesce(return_message, '') || '.' FROM cron.job_run_details
                     WHERE status = '$1' AND runid > $2 ORDER BY runid LIMIT 1")
        if [ -n "$out" ]; then
            echo "${out%.}"
            return 0
        fi
        sleep 1
    done
    echo "no $1 run within 150 s"
    return 1
}
last_runid() { q -c "SELECT coalesce(max(runid), 0) FROM cron.job_run_details"; }

chmod 755 "$DIR"
if [ "$(id -u)" = 0 ]; then chown postgres: "$DIR"; fi
as_postgres "$PGBIN/initdb" -D "$DIR/data" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
    -E UTF8 --locale=C.UTF-8 -N --no-instructions >"$DIR/initdb.log" 2>&1 \
    || { cat "$DIR/initdb.log"; echo "summary: cron unreachable: initdb failed"; exit 1; }
cat >>"$DIR/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
unix_socket_directories = '$DIR'
port = $PORT
shared_preload_libraries = 'pg_cron'
cron.database_name = 'postgres'
cron.use_background_workers = off
cron.host = '127.0.0.1'
fsync = off
CONF
# What initdb wrote: trust on the socket, scram-sha-256 on 127.0.0.1 and ::1.
as_postgres "$PGBIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w start >/dev/null \
    || { cat "$DIR/server.log"; echo "summary: cron unreachable: the server did not start"; exit 1; }

q -c "CREATE EXTENSION pg_cron" -c "CREATE EXTENSION sandbox_persist" \
    || { echo "summary: cron unreachable: CREATE EXTENSION failed"; exit 1; }
t0=$(last_runid)
job=$(q -c "SELECT sandbox_persist.schedule_maintenance()")
check M29.1 "schedule_maintenance() returns the job id" 1 "$([ -n "$job" ] && echo 1)"
check M29.2 "the job is pg_cron's, every minute" "* * * * *" "$(q -c "SELECT schedule FROM cron.job WHERE jobid = $job")"
message=$(wait_run failed "$t0")
check M29.3 "pg_cron records a failed run of the job" 1 "$(q -c "SELECT count(*) > 0 FROM cron.job_run_details WHERE jobid = $job AND status = 'failed'" | sed 's/t/1/')"
check M29.4 "its message says the connection failed" "connection failed" "$message"

check M29.5 "maintenance_health() is failing, with pg_cron's message" "true|connection failed" \
    "$(q -c "SELECT (h->>'failing') || '|' || (h->>'lastFailureMessage')
              FROM (SELECT sandbox_persist.maintenance_health() AS h) x")"
check M29.6 "attention_list() holds maintenance_failing with the message" "connection failed" \
    "$(q -c "SELECT i->'detail'->>'lastFailureMessage' FROM json_array_elements(sandbox_persist.attention_list()) i
              WHERE i->>'kind' = 'maintenance_failing'")"
check M29.7 "the overview: scheduled, failing, the message, one attention item" 't|t|connection failed|1' \
    "$(q -c "SELECT concat_ws('|', maintenance_scheduled, maintenance_failing, maintenance_last_failure, attention_items)
              FROM sandbox_persist.overview")"
check M29.8 "maintain() never ran (maintenance_last_run is NULL)" "" \
    "$(q -c "SELECT maintenance_last_run FROM sandbox_persist.overview")"
check M29.9 "the problem points at the pg_cron requirements" 1 \
    "$(q -c "SELECT (sandbox_persist.maintenance_health()->>'problem') ~ 'cron\.host.*pg_hba'" | sed 's/t/1/')"

# Fix what the README says to fix: let pg_cron's connection in.
sed -i -E 's/^(host[[:space:]]+all[[:space:]]+all[[:space:]]+(127\.0\.0\.1\/32|::1\/128)[[:space:]]+)scram-sha-256/\1trust/' \
    "$DIR/data/pg_hba.conf"
q -c "SELECT pg_reload_conf()" >/dev/null
t1=$(last_runid)
wait_run succeeded "$t1" >/dev/null
check M29.10 "after pg_hba.conf is fixed, pg_cron's next run succeeds" 1 \
    "$(q -c "SELECT count(*) > 0 FROM cron.job_run_details WHERE jobid = $job AND status = 'succeeded'" | sed 's/t/1/')"
check M29.11 "maintenance_health() is ok again, by itself" "true" "$(q -c "SELECT sandbox_persist.maintenance_health()->>'ok'")"
check M29.12 "attention_list() no longer holds a maintenance item" 0 \
    "$(q -c "SELECT count(*) FROM json_array_elements(sandbox_persist.attention_list()) i WHERE i->>'kind' LIKE 'maintenance_%'")"

q -c "CREATE DATABASE sp_nocron" && q -d sp_nocron -c "CREATE EXTENSION sandbox_persist"
check M29.13 "a database without pg_cron says so" "pg_cron is not installed in this database" \
    "$(q -d sp_nocron -c "SELECT sandbox_persist.maintenance_health()->>'cronNote'")"
finish
