#!/usr/bin/env bash
# T21, T25, T26 (docs/contract/failover.md §4): the lost-commit failover of
# issue 19, reproduced with a real primary and an asynchronous streaming
# standby, and checked against the two promises.
#
#  1. A primary and a standby streaming from it (asynchronous: no
#     synchronous_standby_names), on private unix sockets in a temp directory.
#     Thread t is at writer fence 1, a log has seqs 1-2, run r is claimed at
#     epoch 1; a JSON stream js has entries 1-2, a binary stream bin entries
#     1-3, two of them from producer w (epoch 2, seqs 0-1): replicated.
#  2. The standby is stopped (a partition). On the primary, acknowledged: the
#     writer of t is released and taken again (fence 2), 40 durable locks are
#     granted (more than the 32 values a sequence logs ahead), run r is claimed
#     again (epoch 2, T25), and seqs 3-5 are appended and read by a reader (its
#     resume tokens); js gets entries 3-4, bin entry 4 and producer w's seqs
#     2-3 (entries 5-6), a reader pages through both (its offsets), and a
#     stream win exists only in the window (T26).
#  3. kill -9 of the primary; the standby is started and promoted (timeline 2).
#  4. Checks: the lost grants are absent (the window really was lost); the next
#     acquire of t, 40 new lock grants and the next claim of r repeat no fence
#     or epoch of the lost window and exceed all of them; the producer's retry writes other chunks as 3-5
#     and the reader resuming with its tokens gets SP405, never the new chunks.
#     Streams (T26): the lost entries and win are gone; the next offsets sort
#     above every lost one; every lost offset reads as SP708 with no bytes,
#     the replicated tail reads exactly the new entries; producer w is back at
#     seq 1 and its retries of seqs 2-3 append; win can be created again.
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
sqlstate() {  # sqlstate PORT SQL: the SQLSTATE the call fails with (empty: it succeeded); its output in $DIR/out
    "$BIN/psql" -X -At -h "$DIR" -p "$1" -U postgres -d postgres -v VERBOSITY=verbose -c "$2" >"$DIR/out" 2>"$DIR/err" || true
    sed -nE 's/^ERROR: +([A-Z0-9]{5}):.*/\1/p' "$DIR/err" | head -n 1
}
sa() {      # sa PORT PATH CONTENT-TYPE BODY-SQL [OPTIONS]: one acknowledged stream append, "outcome|nextOffset"
    q "$1" "SELECT r->>'outcome', r->>'nextOffset' FROM sandbox_persist.stream_append('$2', '$3', $4${5:+, '$5'}) r"
}
pages() {   # pages PORT PATH OFFSET: a reader paging one entry at a time from OFFSET to the tail, "nextOffset:hex" each
    local off=$3 out="" row next up hex
    for _ in $(seq 1 20); do
        row=$(q "$1" "SELECT meta->>'nextOffset', meta->>'upToDate', encode(body, 'hex') FROM sandbox_persist.stream_read('$2', '$off', 1) r")
        IFS='|' read -r next up hex <<<"$row"
        out="$out $next:$hex" off=$next
        [ "$up" = true ] && break
    done
    echo "${out# }"
}
hexof() {   # hexof TEXT: its UTF-8 bytes in hex
    printf '%s' "$1" | od -An -tx1 -v | tr -d ' \n'
}
W='{"producerId":"w","producerEpoch":2,"producerSeq":'   # producer w at epoch 2; append the seq and }

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
# T26: a JSON and a binary stream with a producer, replicated (their offsets: epoch 0 on timeline 1)
q "$P1" "SELECT sandbox_persist.stream_create('js', 'application/json')" >/dev/null
q "$P1" "SELECT sandbox_persist.stream_create('bin', 'application/octet-stream')" >/dev/null
rep_js1=$(sa "$P1" js application/json "convert_to('[{\"n\":1}]', 'UTF8')")
rep_js2=$(sa "$P1" js application/json "convert_to('[{\"n\":2},{\"n\":3}]', 'UTF8')")
rep_bin1=$(sa "$P1" bin application/octet-stream "'\\x00ff01'::bytea")
rep_bin2=$(sa "$P1" bin application/octet-stream "'\\x02fe'::bytea" "${W}0}")
rep_bin3=$(sa "$P1" bin application/octet-stream "'\\x0380'::bytea" "${W}1}")
js_tail=${rep_js2#*|} bin_tail=${rep_bin3#*|}
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
# T26: stream appends acknowledged in the window, a reader's offsets, a stream of the window only
lost_js1=$(sa "$P1" js application/json "convert_to('[{\"lost\":1}]', 'UTF8')")
lost_js2=$(sa "$P1" js application/json "convert_to('[{\"lost\":2},{\"lost\":3}]', 'UTF8')")
lost_bin1=$(sa "$P1" bin application/octet-stream "'\\xdead00'::bytea")
lost_bin2=$(sa "$P1" bin application/octet-stream "'\\xbeef'::bytea" "${W}2}")
lost_bin3=$(sa "$P1" bin application/octet-stream "'\\xcafe'::bytea" "${W}3}")
lost_win1=$(q "$P1" "SELECT r->>'created', r->>'nextOffset' FROM sandbox_persist.stream_create('win', 'text/plain', NULL, convert_to('lost-only', 'UTF8')) r")
lost_win2=$(sa "$P1" win text/plain "convert_to(' more', 'UTF8')")
lost_prod=$(q "$P1" "SELECT sandbox_persist.stream_head('bin', 'w')->'producer'->>'lastSeq'")
read_js=$(pages "$P1" js "$js_tail")
read_bin=$(pages "$P1" bin "$bin_tail")
check "T26 on the old primary the 7 stream writes of the window were acknowledged, producer w reached seq $lost_prod" \
    "$([ "${lost_js1%%|*} ${lost_js2%%|*} ${lost_bin1%%|*} ${lost_bin2%%|*} ${lost_bin3%%|*} ${lost_win1%%|*} ${lost_win2%%|*} $lost_prod" \
        = "appended appended appended appended appended true appended 3" ] && echo t || echo f)"
check "T26 and the reader read js's lost entries at the offsets their appends returned ($read_js)" \
    "$([ "$read_js" = "${lost_js1#*|}:$(hexof '[{"lost":1}]') ${lost_js2#*|}:$(hexof '[{"lost":2},{"lost":3}]')" ] && echo t || echo f)"
check "T26 and bin's ($read_bin)" \
    "$([ "$read_bin" = "${lost_bin1#*|}:dead00 ${lost_bin2#*|}:beef ${lost_bin3#*|}:cafe" ] && echo t || echo f)"
# every offset the window handed out, per stream: the appends' and the reader's
lost_js=$(printf '%s\n' "${lost_js1#*|}" "${lost_js2#*|}" $(sed 's/:[0-9a-f]*//g' <<<"$read_js") | sort -u | paste -sd, -)
lost_bin=$(printf '%s\n' "${lost_bin1#*|}" "${lost_bin2#*|}" "${lost_bin3#*|}" $(sed 's/:[0-9a-f]*//g' <<<"$read_bin") | sort -u | paste -sd, -)
lost_win="${lost_win1#*|},${lost_win2#*|}"

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

# T26: durable streams across the lost window (streams.md §3).
rep_js_body='[{"n":1},{"n":2},{"n":3}]'
check "T26.1 the lost stream entries are gone: js ends at $js_tail, bin at $bin_tail (their replicated tails)" \
    "$(q "$P2" "SELECT sandbox_persist.stream_head('js')->>'nextOffset' = '$js_tail'
                   AND sandbox_persist.stream_head('bin')->>'nextOffset' = '$bin_tail'")"
check "T26.1 and they read back only the replicated bytes" \
    "$(q "$P2" "SELECT (SELECT convert_from(body, 'UTF8') FROM sandbox_persist.stream_read('js')) = '$rep_js_body'
                   AND (SELECT encode(body, 'hex') FROM sandbox_persist.stream_read('bin')) = '00ff0102fe0380'")"
# the next appends: as many entries as the window lost, or more, so every lost offset names an entry again
new_js1=$(sa "$P2" js application/json "convert_to('[{\"new\":1}]', 'UTF8')")
new_js2=$(sa "$P2" js application/json "convert_to('[{\"new\":2}]', 'UTF8')")
new_js3=$(sa "$P2" js application/json "convert_to('[{\"new\":3}]', 'UTF8')")
new_bin1=$(sa "$P2" bin application/octet-stream "'\\x0badf00d'::bytea")
check "T26.2 the next append to js is at ${new_js1#*|}, above every offset of the lost window ($lost_js)" \
    "$(q "$P2" "SELECT '${new_js1%%|*}' = 'appended' AND '${new_js1#*|}' COLLATE \"C\" > ALL('{$lost_js}'::text[])")"
check "T26.2 the next append to bin is at ${new_bin1#*|}, above every offset of the lost window ($lost_bin)" \
    "$(q "$P2" "SELECT '${new_bin1%%|*}' = 'appended' AND '${new_bin1#*|}' COLLATE \"C\" > ALL('{$lost_bin}'::text[])")"
check "T26.2 and js's offsets keep increasing (${new_js2#*|} ${new_js3#*|})" \
    "$(q "$P2" "SELECT '${new_js1#*|}' COLLATE \"C\" < '${new_js2#*|}' AND '${new_js2#*|}' COLLATE \"C\" < '${new_js3#*|}'")"
# producer w's retries (its acknowledgements of seqs 2-3 were lost with the window; §4 rule 2 on the surviving state)
after_prod=$(q "$P2" "SELECT sandbox_persist.stream_head('bin', 'w')->>'producer'")
gap=$(sqlstate "$P2" "SELECT sandbox_persist.stream_append('bin', 'application/octet-stream', '\\x0f'::bytea, '${W}4}')")
check "T26.3 producer w is back at its replicated state ($after_prod), so its next seq 4 is a gap: SP707 (got ${gap:-no error}), nothing returned" \
    "$([ "$after_prod" = '{"epoch":2,"lastSeq":1}' ] && [ "$gap" = SP707 ] && [ ! -s "$DIR/out" ] && echo t || echo f)"
retry_bin2=$(sa "$P2" bin application/octet-stream "'\\xbeef'::bytea" "${W}2}")
retry_bin3=$(sa "$P2" bin application/octet-stream "'\\xcafe'::bytea" "${W}3}")
again_bin3=$(sa "$P2" bin application/octet-stream "'\\xcafe'::bytea" "${W}3}")
check "T26.3 its retry of the lost seqs 2 and 3 appends them again (${retry_bin2%%|*} at ${retry_bin2#*|}, ${retry_bin3%%|*} at ${retry_bin3#*|}), above every lost offset" \
    "$(q "$P2" "SELECT '${retry_bin2%%|*} ${retry_bin3%%|*}' = 'appended appended'
                   AND '${retry_bin2#*|}' COLLATE \"C\" > '${new_bin1#*|}' AND '${retry_bin3#*|}' COLLATE \"C\" > '${retry_bin2#*|}'
                   AND '${retry_bin2#*|}' COLLATE \"C\" > ALL('{$lost_bin}'::text[])")"
check "T26.3 and seq 3 once more is a duplicate at the tail (${again_bin3%%|*} at ${again_bin3#*|}), lastSeq 3" \
    "$(q "$P2" "SELECT '$again_bin3' = 'duplicate|${retry_bin3#*|}'
                   AND sandbox_persist.stream_head('bin', 'w')->>'producer' = '{\"epoch\":2,\"lastSeq\":3}'")"
# every offset the window handed out is refused, never answered with the new entries
refused=0 lost_total=0
for pair in $(tr , ' ' <<<"$lost_js" | sed 's/^/js:/; s/ / js:/g') $(tr , ' ' <<<"$lost_bin" | sed 's/^/bin:/; s/ / bin:/g'); do
    path=${pair%%:*} off=${pair#*:}
    state=$(sqlstate "$P2" "SELECT meta, encode(body, 'hex') FROM sandbox_persist.stream_read('$path', '$off')")
    lost_total=$((lost_total + 1))
    check "T26.4 a read of $path from the lost offset $off is SP708 (got ${state:-no error}) and returns nothing$([ -s "$DIR/out" ] && echo ": got $(head -c 200 "$DIR/out")")" \
        "$([ "$state" = SP708 ] && [ ! -s "$DIR/out" ] && echo t || echo f)"
    [ "$state" = SP708 ] && [ ! -s "$DIR/out" ] && refused=$((refused + 1))
done
from_js=$(q "$P2" "SELECT convert_from(body, 'UTF8') FROM sandbox_persist.stream_read('js', '$js_tail')")
from_bin=$(q "$P2" "SELECT encode(body, 'hex') FROM sandbox_persist.stream_read('bin', '$bin_tail')")
check "T26.4 a read of js from its last replicated offset returns exactly the appends after promotion ($from_js)" \
    "$([ "$from_js" = '[{"new":1},{"new":2},{"new":3}]' ] && echo t || echo f)"
check "T26.4 and of bin ($from_bin)" "$([ "$from_bin" = 0badf00dbeefcafe ] && echo t || echo f)"
check "T26.4 a replicated offset before the tail still reads on (js from ${rep_js1#*|}, bin from ${rep_bin1#*|})" \
    "$(q "$P2" "SELECT (SELECT convert_from(body, 'UTF8') FROM sandbox_persist.stream_read('js', '${rep_js1#*|}'))
                       = '[{\"n\":2},{\"n\":3},{\"new\":1},{\"new\":2},{\"new\":3}]'
                   AND (SELECT encode(body, 'hex') FROM sandbox_persist.stream_read('bin', '${rep_bin1#*|}')) = '02fe03800badf00dbeefcafe'")"
# the stream created only in the window
head_win=$(sqlstate "$P2" "SELECT sandbox_persist.stream_head('win')")
check "T26.5 the stream win created in the lost window does not exist: stream_head is SP701 (got ${head_win:-no error})" \
    "$([ "$head_win" = SP701 ] && [ ! -s "$DIR/out" ] && echo t || echo f)"
new_win=$(q "$P2" "SELECT r->>'created', r->>'nextOffset' FROM sandbox_persist.stream_create('win', 'text/plain', NULL, convert_to('fresh', 'UTF8')) r")
check "T26.5 a create at its path works (created ${new_win%%|*}, at ${new_win#*|}, above its lost offsets $lost_win)" \
    "$(q "$P2" "SELECT '${new_win%%|*}' = 'true' AND '${new_win#*|}' COLLATE \"C\" > ALL('{$lost_win}'::text[])
                   AND (SELECT convert_from(body, 'UTF8') FROM sandbox_persist.stream_read('win')) = 'fresh'")"
win_refused=0
for off in $(tr , ' ' <<<"$lost_win"); do
    lost_total=$((lost_total + 1))
    state=$(sqlstate "$P2" "SELECT meta, encode(body, 'hex') FROM sandbox_persist.stream_read('win', '$off')")
    check "T26.5 and a read of the new win from the lost stream's offset $off is SP708 (got ${state:-no error}), nothing returned" \
        "$([ "$state" = SP708 ] && [ ! -s "$DIR/out" ] && echo t || echo f)"
    [ "$state" = SP708 ] && [ ! -s "$DIR/out" ] && win_refused=$((win_refused + 1))
done

echo "summary: timeline loss: timeline 1 -> $timeline, lost: writer fence $lost_writer, claim epoch $lost_claim, 40 lock fences, entries 3-5," \
     "stream offsets up to ${lost_js2#*|}/${lost_bin3#*|} and stream win;" \
     "after promotion: writer fence $new_writer, claim epoch $lost_claim -> $new_claim, lock fence repeats $repeats, lost reader tokens refused $diverged of 3," \
     "next stream offsets ${new_js1#*|}/${new_bin1#*|}, lost stream offsets refused $((refused + win_refused)) of $lost_total, producer retries ${retry_bin2%%|*}/${retry_bin3%%|*}; $failures failed checks"
[ "$failures" -eq 0 ]
