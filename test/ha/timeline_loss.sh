#!/usr/bin/env bash
# T21, T25 (docs/contract/failover.md §4): the lost-commit failover of issue 19,
# reproduced with a real primary and an asynchronous streaming standby, and
# checked against the two promises.
#
#  1. A primary and a standby streaming from it (asynchronous: no
#     synchronous_standby_names), on private unix sockets in a temp directory.
#     Thread t is at writer fence 1, a log has seqs 1-2, run r is claimed at
#     epoch 1: replicated.
#  2. The standby is stopped (a partition). On the primary, acknowledged: the
#     writer of t is released and taken again (fence 2), 40 durable locks are
#     granted (more than the 32 values a sequence logs ahead), run r is claimed
#     again (epoch 2, T25), and seqs 3-5 are appended and read by a reader (its
#     resume tokens).
#  3. kill -9 of the primary; the standby is started and promoted (timeline 2).
#  4. Checks: the lost grants are absent (the window really was lost); the next
#     acquire of t, 40 new lock grants and the next claim of r repeat no fence
#     or epoch of the lost window and exceed all of them; the producer's retry writes other chunks as 3-5
#     and the reader resuming with its tokens gets SP405, never the new chunks.
#
# Self-contained: it needs only PostgreSQL 15 with the extension installed
# (PG_CONFIG names it); no Patroni. Ports (for the socket names):
# SP_HA_PRIMARY_PORT (default 55241) and SP_HA_STANDBY_PORT (55242). Runs as
# root (servers as the postgres user) or as a user who can run initdb.
# Prints one "summary: timeline loss: ..." line; exits non-zero on a failed check.
set -euo pipefail
PG_CONFIG=${PG_CONFIG:-pg_config}
BIN=$("$PG_CONFIG" --bindir)
P1=${SP_HA_PRIMARY_PORT:-55241}
P2=${SP_HA_STANDBY_PORT:-55242}
DIR=$(mktemp -d /tmp/sp_timeline_loss.XXXXXX)
chmod 755 "$DIR"

as_postgres() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
[ "$(id -u)" = 0 ] && chown postgres: "$DIR"

cleanup() {
    for d in primary standby; do
        [ -f "$DIR/$d/postmaster.pid" ] && as_postgres "$BIN/pg_ctl" -D "$DIR/$d" -m immediate -w stop >/dev/null 2>&1 || true
    done
    rm -rf "$DIR"
}
trap cleanup EXIT

failures=0
check() {   # check DESCRIPTION CONDITION-RESULT(t/f)
    if [ "$2" = t ]; then echo "ok - $1"; else echo "not ok - $1"; failures=$((failures + 1)); fi
}
q() {       # q PORT SQL: one value
    "$BIN/psql" -X -At -v ON_ERROR_STOP=1 -h "$DIR" -p "$1" -U postgres -d postgres -c "$2"
}

# 1. The primary, the extension, a standby streaming from it.
as_postgres "$BIN/initdb" -D "$DIR/primary" -U postgres -A trust -E UTF8 --locale=C.UTF-8 >"$DIR/initdb.log" 2>&1
cat >>"$DIR/primary/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$DIR'
port = $P1
wal_level = replica
max_wal_senders = 4
hot_standby = on
synchronous_commit = on
synchronous_standby_names = ''
CONF
as_postgres "$BIN/pg_ctl" -D "$DIR/primary" -l "$DIR/primary.log" -w start >/dev/null
q "$P1" "CREATE EXTENSION sandbox_persist" >/dev/null
as_postgres "$BIN/pg_basebackup" -h "$DIR" -p "$P1" -U postgres -D "$DIR/standby" -R -X stream >/dev/null
sed -i "s/^port = $P1/port = $P2/" "$DIR/standby/postgresql.conf"
as_postgres "$BIN/pg_ctl" -D "$DIR/standby" -l "$DIR/standby.log" -w start >/dev/null

q "$P1" "SELECT sandbox_persist.checkpoint_release_writer(sandbox_persist.checkpoint_acquire_writer('t'))" >/dev/null
q "$P1" "SELECT sandbox_persist.lock_acquire('k0', 60000)" >/dev/null
q "$P1" "SELECT sandbox_persist.event_log_append('run', '[{\"n\":1},{\"n\":2}]')" >/dev/null
q "$P1" "SELECT sandbox_persist.run_create_or_resume('{\"runId\":\"r\",\"threadId\":\"rt\",\"startedAt\":1}')" >/dev/null
q "$P1" "SELECT sandbox_persist.run_claim('r')" >/dev/null
# the standby has replayed everything so far (an event, not a sleep margin)
lsn=$(q "$P1" "SELECT pg_current_wal_lsn()")
for _ in $(seq 1 600); do
    [ "$(q "$P2" "SELECT pg_last_wal_replay_lsn() >= '$lsn'::pg_lsn")" = t ] && break
    sleep 0.1
done
check "the standby replayed the replicated state" "$(q "$P2" "SELECT pg_last_wal_replay_lsn() >= '$lsn'::pg_lsn")"

# 2. A partition: the standby stops; the primary acknowledges the lost window.
as_postgres "$BIN/pg_ctl" -D "$DIR/standby" -m fast -w stop >/dev/null
lost_writer=$(q "$P1" "SELECT sandbox_persist.checkpoint_acquire_writer('t')->>'fence'")
lost_claim=$(q "$P1" "SELECT sandbox_persist.run_claim('r')->>'epoch'")
lost_locks=$(q "$P1" "SELECT string_agg(sandbox_persist.lock_acquire('k' || k, 60000)->>'fence', ',' ORDER BY k) FROM generate_series(1, 40) k")
q "$P1" "SELECT sandbox_persist.event_log_append('run', '[{\"old\":3},{\"old\":4},{\"old\":5}]', '{\"withDigests\":true}')" >/dev/null
# the reader's tokens: every entry it received, with its digest
tokens=$(q "$P1" "SELECT string_agg((e->>'seq') || ':' || (e->>'digest'), ' ' ORDER BY (e->>'seq')::int) FROM json_array_elements(sandbox_persist.event_log_read_verified('run', 0, NULL)->'entries') e")
check "on the old primary thread t was granted fence 2" "$([ "$lost_writer" = 2 ] && echo t || echo f)"
check "and run r was claimed at epoch 2" "$([ "$lost_claim" = 2 ] && echo t || echo f)"

# 3. The primary dies; the standby is promoted.
kill -9 "$(head -n 1 "$DIR/primary/postmaster.pid")"
as_postgres "$BIN/pg_ctl" -D "$DIR/standby" -l "$DIR/standby.log" -w start >/dev/null
as_postgres "$BIN/pg_ctl" -D "$DIR/standby" -w promote >/dev/null
# the timeline of the WAL the new primary writes (its first 8 hex digits)
timeline=$(q "$P2" "SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int")

# 4. The window was lost; nothing of it is granted or served again.
check "the promoted standby is on timeline 2" "$([ "$timeline" = 2 ] && echo t || echo f)"
check "the lost window is gone: thread t is back at fence 1, run r at epoch 1, no lock k1..k40, the log ends at 2" \
    "$(q "$P2" "SELECT (SELECT fence FROM sandbox_persist.checkpoint_threads WHERE thread_id = 't') = 1
                   AND (SELECT driver_epoch FROM sandbox_persist.runs WHERE run_id = 'r') = 1
                   AND NOT EXISTS (SELECT 1 FROM sandbox_persist.locks WHERE lock_key <> 'k0')
                   AND (SELECT tail_seq FROM sandbox_persist.event_logs WHERE run_id = 'run') = 2")"
new_writer=$(q "$P2" "SELECT sandbox_persist.checkpoint_acquire_writer('t')->>'fence'")
check "the next acquire of t gets fence $new_writer, above the lost fence $lost_writer" \
    "$(q "$P2" "SELECT $new_writer > $lost_writer")"
new_claim=$(q "$P2" "SELECT sandbox_persist.run_claim('r')->>'epoch'")
check "T25 the next claim of r gets epoch $new_claim, above the lost epoch $lost_claim (and is not it)" \
    "$(q "$P2" "SELECT $new_claim > $lost_claim")"
new_locks=$(q "$P2" "SELECT string_agg(sandbox_persist.lock_acquire('k' || k, 60000)->>'fence', ',' ORDER BY k) FROM generate_series(1, 40) k")
repeats=$(q "$P2" "SELECT count(*) FROM unnest('{$new_locks}'::bigint[]) n WHERE n = ANY('{$lost_locks}'::bigint[])")
check "40 lock grants after promotion repeat none of the 40 lost fences ($repeats repeats)" "$([ "$repeats" = 0 ] && echo t || echo f)"
check "and exceed all of them" "$(q "$P2" "SELECT (SELECT min(n) FROM unnest('{$new_locks}'::bigint[]) n) > (SELECT max(n) FROM unnest('{$lost_locks}'::bigint[]) n)")"
q "$P2" "SELECT sandbox_persist.event_log_append('run', '[{\"new\":3},{\"new\":4},{\"new\":5}]')" >/dev/null
diverged=0
for token in $tokens; do
    seq=${token%%:*} digest=${token#*:}
    state=$("$BIN/psql" -X -At -h "$DIR" -p "$P2" -U postgres -d postgres -v VERBOSITY=verbose \
        -c "SELECT sandbox_persist.event_log_read_verified('run', $seq, '$digest')" 2>&1 | sed -nE 's/^ERROR: +([A-Z0-9]{5}):.*/\1/p' | head -n 1 || true)
    if [ "$seq" -le 2 ]; then
        check "the token of replicated entry $seq still resumes" "$([ -z "$state" ] && echo t || echo f)"
    else
        check "the token of lost entry $seq is refused with SP405 (got ${state:-no error})" "$([ "$state" = SP405 ] && echo t || echo f)"
        [ "$state" = SP405 ] && diverged=$((diverged + 1))
    fi
done
plain=$(q "$P2" "SELECT string_agg(e->>'chunk', ' ') FROM json_array_elements(sandbox_persist.event_log_read('run', 3)->'entries') e")
echo "# (the plain 0.3.0 read after seq 3 on the new primary returns: $plain)"

echo "summary: timeline loss: timeline 1 -> $timeline, lost: writer fence $lost_writer, claim epoch $lost_claim, 40 lock fences, entries 3-5;" \
     "after promotion: writer fence $new_writer, claim epoch $lost_claim -> $new_claim, lock fence repeats $repeats, lost reader tokens refused $diverged of 3; $failures failed checks"
[ "$failures" -eq 0 ]
