#!/usr/bin/env bash
# The pitr suite: point-in-time recovery with pgBackRest, and a standby rebuilt
# with pg_basebackup, for a database the torture workloads filled.
#
#   1. A PostgreSQL cluster as the postgres user on a private socket, pg_cron
#      preloaded, WAL archived by `pgbackrest archive-push` into a repository in
#      a temp dir (fsync and synchronous_commit on: the durability of archived
#      commits is what is asserted); stanza-create, check.
#   2. The torture load (test/torture/torture.mjs --pitr, its workloads and
#      invariant checker) runs on it; the full backup is taken once its
#      database exists; halfway through the load it records a restore target
#      from the server's clock between two known commits.
#   3. `pgbackrest restore --type=time --target-action=promote` into a new data
#      directory; torture.mjs then checks the restored cluster: the invariant
#      checker over the call log cut at the target, what was committed before
#      the target present and after it absent, leases and locks from before the
#      target kept, expired or taken over, more load (every store writes).
#   4. pg_cron's maintenance job runs on the restored cluster (bounded poll of
#      cron.job_run_details for a run started after the restore).
#   5. A standby rebuilt from the restored primary with pg_basebackup -R
#      streams, replays a new row, and answers the extension's reads exactly as
#      the primary does.
# Prints one "summary: pitr: ..." line; exits non-zero on any failure. Every
# server is stopped and the temp dir removed on exit (PITR_KEEP=1 keeps them).
#
# Run it with `make test-pitr` (or in `make test`), which builds and installs the
# extension into PG_CONFIG's tree first; run alone, it expects that install done.
# Environment: PG_CONFIG (the PostgreSQL to run), SANDBOX_PERSIST_PITR_PORT
# (default 56500: the primary; +1 the restored cluster, +2 the standby; the
# servers listen on unix sockets in the temp dir only), PITR_LOAD_MS (12000).
# Internal use: `run.sh hook backup|restore TARGET`, called by torture.mjs.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PGBIN=$("${PG_CONFIG:-pg_config}" --bindir)
PATH="$PGBIN:$PATH"
export PATH
STANZA=sp_pitr
DB=sp_pitr

as_postgres() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
# br ARGS...: pgBackRest with the suite's own configuration, as postgres.
br() { as_postgres pgbackrest --config="$PITR_DIR/pgbackrest.conf" --stanza="$STANZA" "$@"; }
# q DIR PORT SQL: one psql call against the cluster whose socket is in DIR.
q() { psql -X -q -At -v ON_ERROR_STOP=1 -h "$1" -p "$2" -U postgres -d "$DB" -c "$3"; }
# wait_for DIR PORT SQL SECONDS: poll SQL until it returns t, at most SECONDS.
wait_for() {
    local deadline=$((SECONDS + $4))
    while [ $SECONDS -lt "$deadline" ]; do
        [ "$(q "$1" "$2" "$3" 2>/dev/null)" = t ] && return 0
        sleep 0.2
    done
    return 1
}

# hook backup | hook restore TARGET: the steps torture.mjs asks for mid-run.
if [ "${1:-}" = hook ]; then
    : "${PITR_DIR:?the hook runs under run.sh only}"
    case "${2:-}" in
        backup)
            br --type=full backup >&2 || exit 1
            ;;
        restore)
            target=$3
            # check switches to a new WAL segment and waits until it is archived:
            # every commit up to now, those past the target included, is in the repository.
            br check >&2 || exit 1
            R=$PITR_DIR/restored
            install -d -o postgres -g postgres -m 755 "$R"
            install -d -o postgres -g postgres -m 700 "$R/data"
            br --pg1-path="$R/data" --type=time "--target=$target" --target-action=promote restore >&2 || exit 1
            cat >>"$R/data/postgresql.auto.conf" <<CONF
port = $RESTORED_PORT
unix_socket_directories = '$R'
archive_command = 'pgbackrest --config=$PITR_DIR/pgbackrest.conf --stanza=$STANZA --pg1-path=$R/data archive-push %p'
CONF
            as_postgres pg_ctl -D "$R/data" -l "$R/server.log" -w -t 120 start >&2 || { cat "$R/server.log" >&2; exit 1; }
            if ! wait_for "$R" "$RESTORED_PORT" "SELECT NOT pg_is_in_recovery()" 120; then
                echo "the restored cluster did not promote" >&2
                cat "$R/server.log" >&2
                exit 1
            fi
            # pgBackRest wrote the recovery target into postgresql.auto.conf. It must
            # go: a standby cloned from this cluster would copy it, stop replaying at
            # that (past) time and promote itself.
            q "$R" "$RESTORED_PORT" "ALTER SYSTEM RESET recovery_target_time" >&2 || exit 1
            q "$R" "$RESTORED_PORT" "ALTER SYSTEM RESET recovery_target_action" >&2 || exit 1
            # The old primary is done with: its timeline is the one abandoned.
            as_postgres pg_ctl -D "$PITR_DIR/primary/data" -m fast -w stop >&2
            grep -E 'recovery stopping|selected new timeline|archive recovery complete' "$R/server.log" >&2
            printf '{"host":"%s","port":%s}\n' "$R" "$RESTORED_PORT"
            ;;
        *) echo "usage: $0 hook backup|restore TARGET" >&2; exit 2 ;;
    esac
    exit 0
fi

started=$SECONDS
failures=()
fail() { failures+=("$1"); echo "FAILED: $1" >&2; }
finish() {
    local status=pass
    [ ${#failures[@]} -eq 0 ] || status="FAIL (${failures[*]})"
    echo "summary: pitr: $status; ${torture_line:-torture: no summary}; cron run after restore: ${cron_line:-no}; standby: ${standby_line:-not built}; $((SECONDS - started))s"
    [ ${#failures[@]} -eq 0 ]
    exit $?
}

# Packages: pgBackRest (the server packages come with scripts/deps.sh).
if ! command -v pgbackrest >/dev/null 2>&1; then
    SUDO=
    [ "$(id -u)" = 0 ] || SUDO=sudo
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends pgbackrest >/dev/null \
        || { fail "apt-get install pgbackrest"; finish; }
fi
(cd "$ROOT/test/torture" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error >/dev/null) \
    || { fail "npm ci in test/torture"; finish; }

BASE_PORT=${SANDBOX_PERSIST_PITR_PORT:-56500}
PRIMARY_PORT=$BASE_PORT
RESTORED_PORT=$((BASE_PORT + 1))
STANDBY_PORT=$((BASE_PORT + 2))
PITR_DIR=$(mktemp -d /tmp/sandbox_persist_pitr.XXXXXX)
chmod 755 "$PITR_DIR"
[ "$(id -u)" != 0 ] || chown postgres: "$PITR_DIR"
export PITR_DIR RESTORED_PORT PG_CONFIG

cleanup() {
    local d
    for d in standby restored primary; do
        [ -f "$PITR_DIR/$d/data/postmaster.pid" ] \
            && as_postgres pg_ctl -D "$PITR_DIR/$d/data" -m immediate -w stop >/dev/null 2>&1
    done
    if [ -z "${PITR_KEEP:-}" ]; then rm -rf "$PITR_DIR"; else echo "kept $PITR_DIR" >&2; fi
}
trap cleanup EXIT

# 1. The primary.
P=$PITR_DIR/primary
as_postgres mkdir -p "$P" "$PITR_DIR/repo" "$PITR_DIR/log" "$PITR_DIR/lock" "$PITR_DIR/spool"
as_postgres initdb -D "$P/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 --no-instructions \
    >"$PITR_DIR/initdb.log" 2>&1 || { cat "$PITR_DIR/initdb.log"; fail "initdb"; finish; }
cat >"$PITR_DIR/pgbackrest.conf" <<CONF
[global]
repo1-path=$PITR_DIR/repo
repo1-retention-full=2
log-path=$PITR_DIR/log
lock-path=$PITR_DIR/lock
spool-path=$PITR_DIR/spool
log-level-console=warn
log-level-file=detail
compress-type=lz4
start-fast=y
process-max=2
archive-timeout=60

[$STANZA]
pg1-path=$P/data
pg1-socket-path=$P
pg1-port=$PRIMARY_PORT
pg1-user=postgres
CONF
chown postgres: "$PITR_DIR/pgbackrest.conf"
cat >>"$P/data/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$P'
port = $PRIMARY_PORT
shared_preload_libraries = 'pg_cron'
cron.database_name = 'postgres'
cron.use_background_workers = on
max_worker_processes = 16
max_wal_senders = 5
wal_level = replica
archive_mode = on
archive_command = 'pgbackrest --config=$PITR_DIR/pgbackrest.conf --stanza=$STANZA archive-push %p'
fsync = on
synchronous_commit = on
CONF
as_postgres pg_ctl -D "$P/data" -l "$P/server.log" -w start >/dev/null || { cat "$P/server.log"; fail "start the primary"; finish; }
psql -X -q -v ON_ERROR_STOP=1 -h "$P" -p "$PRIMARY_PORT" -U postgres -d postgres \
    -c "CREATE EXTENSION pg_cron" -c "SET client_min_messages = warning" \
    || { fail "pg_cron in the primary"; finish; }
br stanza-create || { fail "pgbackrest stanza-create"; finish; }
br check || { fail "pgbackrest check"; finish; }
echo "primary: socket $P, port $PRIMARY_PORT; pgBackRest stanza $STANZA in $PITR_DIR/repo"

# 2 and 3. Load, target, backup, restore and the checks on the restored cluster.
torture_out=$PITR_DIR/torture.out
PGHOST=$P PGPORT=$PRIMARY_PORT PGUSER=postgres PGDATABASE=postgres SP_TORTURE_DB=$DB \
    SP_PITR_HOOK="$ROOT/test/pitr/run.sh" \
    node "$ROOT/test/torture/torture.mjs" --pitr --load-ms "${PITR_LOAD_MS:-12000}" 2>&1 | tee "$torture_out"
[ "${PIPESTATUS[0]}" = 0 ] || fail "torture --pitr"
torture_line=$(grep -E '^(torture \(pitr\) result|summary): ' "$torture_out" | tail -n 1 | sed -E 's/^(summary|torture \(pitr\) result): //')
R=$PITR_DIR/restored
[ -f "$R/data/postmaster.pid" ] || { fail "no restored cluster"; finish; }
echo "recovery, from the restored server's log:"
grep -E 'starting point-in-time recovery|recovery stopping|selected new timeline' "$R/server.log" | sed 's/^/  /'

# 5. The standby, rebuilt from the restored primary (it is on a new timeline,
# so a standby of the old primary could not follow it).
S=$PITR_DIR/standby
as_postgres mkdir -p "$S"
standby_ok=0
standby_checks=0
if as_postgres pg_basebackup -h "$R" -p "$RESTORED_PORT" -U postgres -D "$S/data" -R -X stream -c fast; then
    cat >>"$S/data/postgresql.auto.conf" <<CONF
port = $STANDBY_PORT
unix_socket_directories = '$S'
CONF
    if as_postgres pg_ctl -D "$S/data" -l "$S/server.log" -w -t 120 start >/dev/null; then
        standby_checks=$((standby_checks + 1))
        if wait_for "$R" "$RESTORED_PORT" "SELECT count(*) = 1 FROM pg_stat_replication WHERE state = 'streaming'" 60; then
            standby_ok=$((standby_ok + 1)); echo "  ok: PT18 the standby streams from the restored primary (pg_stat_replication)"
        else
            fail "PT18 standby: not streaming within 60 s"
        fi
        # A row written on the primary after the standby started, replayed there.
        probe=probe-$RANDOM-$$
        q "$R" "$RESTORED_PORT" "SELECT sandbox_persist.metadata_set('pitr', 'standby-probe', '\"$probe\"')" >/dev/null
        lsn=$(q "$R" "$RESTORED_PORT" "SELECT pg_current_wal_lsn()")
        standby_checks=$((standby_checks + 1))
        if wait_for "$S" "$STANDBY_PORT" "SELECT pg_is_in_recovery() AND pg_last_wal_replay_lsn() >= '$lsn'" 60 \
            && [ "$(q "$S" "$STANDBY_PORT" "SELECT sandbox_persist.metadata_get('pitr', 'standby-probe')")" = "\"$probe\"" ]; then
            standby_ok=$((standby_ok + 1)); echo "  ok: PT19 a row written on the primary is replayed on the standby"
        else
            fail "PT19 standby: the probe row was not replayed within 60 s"
        fi
        # The extension's reads on the standby answer what they answer on the primary.
        reads=$(cat "$ROOT/test/pitr/standby_reads.sql")
        standby_checks=$((standby_checks + 1))
        if ! on_primary=$(psql -X -q -At -v ON_ERROR_STOP=1 -h "$R" -p "$RESTORED_PORT" -U postgres -d "$DB" -c "$reads" 2>&1); then
            fail "PT20 standby: the reads failed on the primary: $on_primary"
        elif ! on_standby=$(psql -X -q -At -v ON_ERROR_STOP=1 -h "$S" -p "$STANDBY_PORT" -U postgres -d "$DB" -c "$reads" 2>&1); then
            fail "PT20 standby: the reads failed on the standby: $on_standby"
        elif [ "$on_primary" != "$on_standby" ]; then
            fail "PT20 standby: the reads differ from the primary's"
            diff <(echo "$on_primary") <(echo "$on_standby") | head -20
        else
            standby_ok=$((standby_ok + 1))
            echo "  ok: PT20 the standby answers $(echo "$on_standby" | wc -l) extension reads exactly as the primary"
        fi
        # A write on the standby is refused (read-only), and changes nothing.
        standby_checks=$((standby_checks + 1))
        if err=$(q "$S" "$STANDBY_PORT" "SELECT sandbox_persist.metadata_set('pitr', 'on-standby', '1')" 2>&1); then
            fail "PT21 standby: a write was accepted"
        elif [[ "$err" == *"read-only transaction"* ]]; then
            standby_ok=$((standby_ok + 1)); echo "  ok: PT21 a write on the standby is refused (read-only transaction)"
        else
            fail "PT21 standby: a write failed for another reason: $err"
        fi
        # blob_head of a content address marks the object relied on (a write, for
        # the GC grace), so it needs the primary; of a plain key it is a read.
        standby_checks=$((standby_checks + 1))
        ca_head=$(q "$S" "$STANDBY_PORT" "SELECT sandbox_persist.blob_head(min(blob_key)) FROM sandbox_persist.blobs WHERE blob_key LIKE 'sandbox-files/sha256/%'" 2>&1)
        plain_head=$(q "$S" "$STANDBY_PORT" "SELECT sandbox_persist.blob_head(min(blob_key)) IS NOT NULL FROM sandbox_persist.blobs WHERE blob_key LIKE 'app/%'" 2>&1)
        if [[ "$ca_head" == *"read-only transaction"* ]] && [ "$plain_head" = t ]; then
            standby_ok=$((standby_ok + 1)); echo "  ok: PT23 on the standby blob_head of a content address is refused (read-only), of a plain key it answers"
        else
            fail "PT23 standby: blob_head answered '$ca_head' for a content address and '$plain_head' for a plain key"
        fi
    else
        cat "$S/server.log"
        fail "standby: pg_ctl start"
    fi
else
    fail "standby: pg_basebackup"
fi
standby_line="$standby_ok of $standby_checks checks"

# 4. pg_cron on the restored cluster: the job scheduled before the backup is
# there and runs (pg_cron has minute granularity: up to ~60 s, waited for
# last so the other steps overlap it).
jobid=$(psql -X -q -At -h "$R" -p "$RESTORED_PORT" -U postgres -d postgres \
    -c "SELECT jobid FROM cron.job WHERE jobname = 'sandbox_persist_maintenance' AND database = '$DB'")
if [ -z "$jobid" ]; then
    fail "PT22 cron: the maintenance job is missing on the restored cluster"
else
    deadline=$((SECONDS + 90))
    cron_line=
    while [ $SECONDS -lt $deadline ]; do
        cron_line=$(psql -X -q -At -h "$R" -p "$RESTORED_PORT" -U postgres -d postgres -c "
            SELECT format('job %s %s at %s (%s after the restored server started)', jobid, status,
                          to_char(start_time, 'HH24:MI:SS'), date_trunc('second', start_time - pg_postmaster_start_time()))
              FROM cron.job_run_details
             WHERE jobid = $jobid AND start_time > pg_postmaster_start_time() AND status = 'succeeded'
             ORDER BY start_time LIMIT 1" 2>/dev/null)
        [ -n "$cron_line" ] && break
        sleep 1
    done
    if [ -n "$cron_line" ]; then
        echo "  ok: PT22 pg_cron runs the maintenance job on the restored cluster: $cron_line"
        echo "cron: the job's command: $(psql -X -q -At -h "$R" -p "$RESTORED_PORT" -U postgres -d postgres \
            -c "SELECT format('%s in database %s, schedule %s', command, database, schedule) FROM cron.job WHERE jobid = $jobid")"
    else
        psql -X -q -h "$R" -p "$RESTORED_PORT" -U postgres -d postgres -c "SELECT * FROM cron.job_run_details ORDER BY start_time DESC LIMIT 5"
        fail "PT22 cron: no succeeded maintenance run within 90 s of the restore"
    fi
fi
finish
