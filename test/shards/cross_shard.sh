#!/usr/bin/env bash
# Cross-shard fork and thread moves, end to end through a PL/Proxy router
# (docs/architecture.md "Cross-shard fork and thread moves"):
#   XS1  a cross-shard fork reads exactly like a local fork (F1), blobs copied
#   XS2  a second fork copies no blob again; reference counts exact per shard
#   XS3  every contract error of a local fork, across shards, changing nothing
#   XS4  a thread move: reads through the router identical before and after,
#        writes refused (SP014) during the window, the lease still works after
#   XS5  the destination shard killed (-9) mid fork import: nothing
#        half-imported is visible after restart, the retry succeeds
#   XS6  the destination shard killed mid move import: the move is kept, writes
#        stay refused, CALL thread_move again resumes and finishes it
#   XS7  a fork racing an append on its source across shards, both orders
#        forced with advisory locks: the fork never waits for the append and
#        the result equals the serial one
#
# It starts scripts/shards.sh with two shards on its own state directory and
# ports SP_XS_PORT_BASE (54355) .. +2, or uses a running set-up whose env file
# SP_SHARDS_ENV names (scripts/shards.sh's; XS5/XS6 restart shard 1 from the
# data directory its state records). Needs PG_CONFIG (the install with
# sandbox_persist and plproxy). Prints TAP; exits non-zero on a failure.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PGBIN=$("${PG_CONFIG:-pg_config}" --bindir)
export PATH="$PGBIN:$PATH"
BASE=${SP_XS_PORT_BASE:-54355}

as_postgres() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# The set-up: scripts/shards.sh (a router with router/ installed, two shard
# clusters), on its own state directory and ports unless SP_SHARDS_ENV names
# the env file of one already running.
OWN_STATE=""
if [ -z "${SP_SHARDS_ENV:-}" ]; then
    OWN_STATE=$(mktemp -d /tmp/sp_cross_shard.XXXXXX)
    chmod 755 "$OWN_STATE"
    export SANDBOX_PERSIST_SHARDS_STATE=$OWN_STATE SANDBOX_PERSIST_SHARDS_PORT=$BASE
    bash "$ROOT/scripts/shards.sh" start 2 >/dev/null
    SP_SHARDS_ENV=$OWN_STATE/env
fi
STATE_DIR=$(dirname "$SP_SHARDS_ENV")
cleanup() {
    for p in "${PIDS[@]:-}"; do
        [ -n "$p" ] && kill "$p" 2>/dev/null || true
    done
    if [ -n "$OWN_STATE" ]; then
        bash "$ROOT/scripts/shards.sh" stop >/dev/null 2>&1 || true
        rm -rf "$OWN_STATE"
    fi
}
PIDS=()
trap cleanup EXIT
# shellcheck disable=SC1090
. "$SP_SHARDS_ENV"
if [ "${SHARD_COUNT:-0}" != 2 ]; then
    echo "cross_shard.sh: needs exactly two shards (SHARD_COUNT=${SHARD_COUNT:-unset})" >&2
    exit 2
fi
ROUTER_HOST=$PGHOST ROUTER_PORT=$PGPORT
SHARD0_HOST=$SHARD_0_HOST SHARD0_PORT=$SHARD_0_PORT
SHARD1_HOST=$SHARD_1_HOST SHARD1_PORT=$SHARD_1_PORT
SHARD1_DATA=$(. "$STATE_DIR/shard1/env" && echo "$SP_CLUSTER_DIR/data")

psql_at() {     # host port sql...: one statement's unaligned result
    local host=$1 port=$2
    shift 2
    psql -X -q -At -v ON_ERROR_STOP=1 -h "$host" -p "$port" -U postgres -d postgres "$@"
}
R()  { psql_at "$ROUTER_HOST" "$ROUTER_PORT" -c "$1"; }
S0() { psql_at "$SHARD0_HOST" "$SHARD0_PORT" -c "$1"; }
S1() { psql_at "$SHARD1_HOST" "$SHARD1_PORT" -c "$1"; }
# The SQLSTATE and code name a router statement fails with ('no error' if none).
RERR() {
    local out
    if out=$(psql -X -q -At -h "$ROUTER_HOST" -p "$ROUTER_PORT" -U postgres -d postgres \
             -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -c "$1" 2>&1); then
        echo "no error"
    else
        local st name hint
        st=$(echo "$out" | sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\):.*/\1/p' | head -1)
        # The SQLSTATE is the key: the code name is the one the router's
        # error_codes() gives it. The detail must be a sentence (no code name
        # in front), and an error the table has a hint for must carry a HINT
        # through the router.
        case $st in
        SP*)
            name=$(R "SELECT c->>'codeName' FROM json_array_elements(sandbox_persist.error_codes()) c WHERE c->>'sqlstate' = '$st'")
            hint=$(R "SELECT coalesce(c->>'hint', '') FROM json_array_elements(sandbox_persist.error_codes()) c WHERE c->>'sqlstate' = '$st'")
            if echo "$out" | grep -qE '^DETAIL:  (Remote detail: )?[A-Z][A-Z0-9_]+: '; then
                name="<detail starts with a code name>"
            elif [ -n "$hint" ] && ! echo "$out" | grep -q '^HINT:  '; then
                name="$name <no hint>"
            fi
            ;;
        esac
        echo "$st${name:+ $name}"
    fi
}

FAILED=0
COUNT=0
check() {   # name expected actual
    COUNT=$((COUNT + 1))
    if [ "$2" == "$3" ]; then
        echo "ok $COUNT - $1"
    else
        echo "not ok $COUNT - $1"
        echo "#   expected: $2"
        echo "#   actual:   $3"
        FAILED=$((FAILED + 1))
    fi
}

# A thread id with the given prefix that lands on shard $2.
thread_on() {
    R "SELECT p || i FROM (SELECT '$1'::text AS p) x, generate_series(0, 200) i
        WHERE sandbox_persist._shard_number(sandbox_persist._shard_of_thread(p || i)) = $2
        ORDER BY i LIMIT 1"
}
fk() { echo "sandbox-files/sha256/$(printf '%s' "$1" | sha256sum | cut -c1-64)"; }
ak() { echo "sandbox-artifacts/sha256/$(printf '%s' "$1" | sha256sum | cut -c1-64)"; }
KA=$(fk alpha) KB=$(fk beta) KC=$(ak art)

# The shards must be 0 and 1 of a two-partition cluster.
check "router sees two partitions" "2" "$(R "SELECT sandbox_persist._partition_count()")"

SRC=$(thread_on src 0) LOC=$(thread_on loc 0) DST=$(thread_on dst 1) DST2=$(thread_on dsttwo 1)
# Blobs of the source live on its shard (content addressing: where referenced).
for b in alpha beta; do S0 "SELECT sandbox_persist.blob_put('$(fk $b)', convert_to('$b', 'UTF8'))" >/dev/null; done
S0 "SELECT sandbox_persist.blob_put('$KC', convert_to('art', 'UTF8'))" >/dev/null
# A blob larger than one copy piece (8 MiB), copied through a streamed upload.
BIG=$(S0 "SELECT 'sandbox-files/sha256/' || encode(sha256(b), 'hex') FROM (SELECT decode(string_agg(md5(g::text), ''), 'hex') AS b FROM generate_series(1, 600000) g) x")
S0 "SELECT sandbox_persist.blob_put('$BIG', b) FROM (SELECT decode(string_agg(md5(g::text), ''), 'hex') AS b FROM generate_series(1, 600000) g) x" >/dev/null

R "CREATE TABLE IF NOT EXISTS writers (name text PRIMARY KEY, writer json)" >/dev/null
acquire() {     # name thread
    R "INSERT INTO writers VALUES ('$1', sandbox_persist.checkpoint_acquire_writer('$2', 3600000))
        ON CONFLICT (name) DO UPDATE SET writer = excluded.writer" >/dev/null
}
W() { R "SELECT writer FROM writers WHERE name = '$1'"; }
append() {      # writer thread id parent created files conversation
    local parent=null
    [ "$4" != "" ] && parent="'$4'"
    R "SELECT sandbox_persist.checkpoint_append(json_build_object(
         'checkpoint', json_build_object('id', '$3', 'threadId', '$2', 'parentCheckpointId', $parent,
             'createdAt', $5, 'reason', 'named', 'label', 'l-$3', 'files', '$6'::json, 'artifacts', '[]'::json),
         'expectedHeadId', $parent, 'writer', (SELECT writer FROM writers WHERE name = '$1')), '$7')"
}
fork_sql() {    # writer src src_id dst dst_id [extra jsonb]
    echo "SELECT sandbox_persist.checkpoint_fork_from_checkpoint((jsonb_build_object(
        'sourceThreadId', '$2', 'sourceCheckpointId', '$3', 'destinationThreadId', '$4',
        'destinationCheckpointId', '$5', 'createdAt', 40,
        'writer', (SELECT writer FROM writers WHERE name = '$1')) || '${6:-{\}}'::jsonb)::json)"
}
refs_recount() {    # shard function: reference counts recomputed from the rows, as listBlobReferences reports them
    $1 "SELECT coalesce(json_agg(json_build_object('key', k, 'references', n) ORDER BY k), '[]')::text FROM (
          SELECT r.blob_key AS k, count(*) AS n FROM sandbox_persist.checkpoint_blob_refs r GROUP BY 1) x"
}
refs() { $1 "SELECT sandbox_persist.checkpoint_list_blob_references()::text" | tr -d ' '; }
refs_norm() { refs_recount "$1" | tr -d ' '; }

FILES="[{\"path\":\"a.txt\",\"kind\":\"file\",\"blobKey\":\"$KA\",\"size\":5},{\"path\":\"b.txt\",\"kind\":\"file\",\"blobKey\":\"$KB\",\"size\":4},{\"path\":\"big\",\"kind\":\"file\",\"blobKey\":\"$BIG\",\"size\":9600000},{\"path\":\"d\",\"kind\":\"dir\"}]"
acquire src "$SRC"
append src "$SRC" c-root "" 1 "[{\"path\":\"a.txt\",\"kind\":\"file\",\"blobKey\":\"$KA\",\"size\":5}]" \
    '[{"role":"user","content":"one \u0000 two"}]' >/dev/null
append src "$SRC" c-child c-root 2 "$FILES" \
    '[{"role":"user","content":"one \u0000 two"},  {"role":"assistant","content":"thr\u00e9e"}]' >/dev/null

echo "# XS1 cross-shard fork reads like a local fork"
acquire loc "$LOC"
acquire dst "$DST"
LOCRES=$(R "$(fork_sql loc "$SRC" c-child "$LOC" fork-loc)")
S0_REFS_BEFORE=$(refs S0)
XS1=$(R "$(fork_sql dst "$SRC" c-child "$DST" fork-dst)")
swap() { sed "s/\"fork-loc\"/\"fork-dst\"/g; s/\"$LOC\"/\"$DST\"/g"; }
check "XS1 the fork returns the root a local fork returns" "$(echo "$LOCRES" | swap)" "$XS1"
check "XS1 destination list byte for byte as the local fork's" \
    "$(R "SELECT sandbox_persist.checkpoint_list('$LOC')::text" | swap)" \
    "$(R "SELECT sandbox_persist.checkpoint_list('$DST')::text")"
check "XS1 destination transcript = the checkpoint's conversation, exact bytes" \
    "$(R "SELECT sandbox_persist.message_load_thread('$LOC')::text")" \
    "$(R "SELECT sandbox_persist.message_load_thread('$DST')::text")"
check "XS1 destination head" "fork-dst" "$(R "SELECT sandbox_persist.checkpoint_get_head('$DST')")"
blob_sums() { $1 "SELECT string_agg(encode(sha256(g.body), 'hex'), ',' ORDER BY k)
                  FROM unnest(ARRAY['$KA','$KB','$BIG']) k, sandbox_persist.blob_get(k) g"; }
check "XS1 the destination shard holds the blobs, same bytes (the large one copied in pieces)" \
    "$(blob_sums S0)" "$(blob_sums S1)"
check "XS1 source shard references unchanged by the cross-shard fork" "$S0_REFS_BEFORE" "$(refs S0)"
check "XS1 destination shard: one reference per distinct key" \
    "$(printf '%s\n' "$BIG" "$KA" "$KB" | sort | sed 's/.*/&:1/' | paste -sd,)" \
    "$(S1 "SELECT string_agg((e->>'key') || ':' || (e->>'references'), ',' ORDER BY e->>'key')
             FROM json_array_elements(sandbox_persist.checkpoint_list_blob_references()) e")"
check "XS1 destination counts equal a recount" "$(refs_norm S1)" "$(refs S1)"

echo "# XS2 blob copies are idempotent, counts exact per shard"
V1=$(S1 "SELECT string_agg(blob_key || '@' || version, ',' ORDER BY blob_key) FROM sandbox_persist.blobs")
acquire dst2 "$DST2"
R "$(fork_sql dst2 "$SRC" c-child "$DST2" fork-dst2)" >/dev/null
check "XS2 a second fork writes no blob again (versions unchanged)" "$V1" \
    "$(S1 "SELECT string_agg(blob_key || '@' || version, ',' ORDER BY blob_key) FROM sandbox_persist.blobs")"
check "XS2 destination shard counts two per key" \
    "$(printf '%s\n' "$BIG" "$KA" "$KB" | sort | sed 's/.*/&:2/' | paste -sd,)" \
    "$(S1 "SELECT string_agg((e->>'key') || ':' || (e->>'references'), ',' ORDER BY e->>'key')
             FROM json_array_elements(sandbox_persist.checkpoint_list_blob_references()) e")"
check "XS2 source shard counts equal a recount" "$(refs_norm S0)" "$(refs S0)"
check "XS2 source shard unchanged" "$S0_REFS_BEFORE" "$(refs S0)"

echo "# XS3 every contract error of a local fork, across shards"
E=$(thread_on empty 1) E0=$(thread_on emptyzero 0) OTHER=$(thread_on other 0) OTHER1=$(thread_on otherone 1)
T1=$(thread_on transcript 1)
acquire e "$E"
acquire e0 "$E0"
acquire other "$OTHER"
acquire t1 "$T1"
append other "$OTHER" o-root "" 1 '[]' '[]' >/dev/null
R "SELECT sandbox_persist.message_save_thread('$T1', '[]')" >/dev/null
snapshot() {
    echo "$(R "SELECT json_build_object('e', sandbox_persist.checkpoint_list('$E'), 'et', sandbox_persist.message_load_thread('$E'),
               'e0', sandbox_persist.checkpoint_list('$E0'), 'e0t', sandbox_persist.message_load_thread('$E0'),
               's', sandbox_persist.checkpoint_list('$SRC'), 'st', sandbox_persist.message_load_thread('$SRC'))::text")|$(refs S0)|$(refs S1)|$(S1 "SELECT count(*) FROM sandbox_persist.thread_owned_state WHERE thread_id = '$E'")"
}
BEFORE=$(snapshot)
check "XS3 SP007 an empty writer thread" "SP007 SANDBOX_SNAPSHOT_INVALID_ID" \
    "$(RERR "$(fork_sql e "$SRC" c-child "$E" f-e '{"writer":{"threadId":""}}')")"
check "XS3 SP007 a numeric destination checkpoint id" "SP007 SANDBOX_SNAPSHOT_INVALID_ID" \
    "$(RERR "$(fork_sql e "$SRC" c-child "$E" f-e '{"destinationCheckpointId":7}')")"
check "XS3 SP007 before SP009 (missing source and bad writer)" "SP007 SANDBOX_SNAPSHOT_INVALID_ID" \
    "$(RERR "$(fork_sql e "$SRC" nope "$E" f-e '{"writer":{"threadId":""}}')")"
check "XS3 SP008 createdAt null (NaN)" "SP008 SANDBOX_SNAPSHOT_INVALID_ENTRY" \
    "$(RERR "$(fork_sql e "$SRC" c-child "$E" f-e '{"createdAt":null}')")"
check "XS3 F3 a missing source is SP009" "SP009 SANDBOX_SNAPSHOT_FORK_SOURCE_NOT_FOUND" \
    "$(RERR "$(fork_sql e "$SRC" nope "$E" f-e)")"
check "XS3 F4 a source thread (other shard) not owning the checkpoint is SP010" \
    "SP010 SANDBOX_SNAPSHOT_FORK_SOURCE_THREAD_MISMATCH" \
    "$(RERR "$(fork_sql e0 "$OTHER1" c-child "$E0" f-e)")"
check "XS3 F4 a source thread (same shard) not owning the checkpoint is SP010" \
    "SP010 SANDBOX_SNAPSHOT_FORK_SOURCE_THREAD_MISMATCH" \
    "$(RERR "$(fork_sql e "$OTHER" c-child "$E" f-e)")"
check "XS3 F6 a fabricated writer is SP006" "SP006 SANDBOX_SNAPSHOT_WRITER_LOST" \
    "$(RERR "$(fork_sql e "$SRC" c-child "$E" f-e "{\"writer\":{\"threadId\":\"$E\",\"ownerToken\":\"00000000-0000-0000-0000-000000000000\",\"fence\":1}}")")"
check "XS3 F7 another thread's lease is SP006" "SP006 SANDBOX_SNAPSHOT_WRITER_LOST" \
    "$(RERR "$(fork_sql other "$SRC" c-child "$E" f-e)")"
check "XS3 F9 a destination with a saved transcript is SP011" "SP011 SANDBOX_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY" \
    "$(RERR "$(fork_sql t1 "$SRC" c-child "$T1" f-t1)")"
check "XS3 F10 a destination id used on the other shard is SP011" "SP011 SANDBOX_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY" \
    "$(RERR "$(fork_sql e "$SRC" c-child "$E" o-root)")"
check "XS3 R26 the destination id equal to the source id is SP011" "SP011 SANDBOX_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY" \
    "$(RERR "$(fork_sql e "$SRC" c-child "$E" c-child)")"
check "XS3 F5 destination = source is SP010" "SP010 SANDBOX_SNAPSHOT_FORK_SOURCE_THREAD_MISMATCH" \
    "$(RERR "$(fork_sql src "$SRC" c-child "$SRC" f-s)")"
# S3: the source's reference rows damaged on its shard
S0 "DELETE FROM sandbox_persist.checkpoint_blob_refs WHERE checkpoint_id = 'c-child' AND blob_key = '$KB'" >/dev/null
check "XS3 S3 incomplete source references are SP008" "SP008 SANDBOX_SNAPSHOT_INVALID_ENTRY" \
    "$(RERR "$(fork_sql e "$SRC" c-child "$E" f-e)")"
S0 "INSERT INTO sandbox_persist.checkpoint_blob_refs VALUES ('c-child', '$KB')" >/dev/null
check "XS3 every failure changed nothing on either shard" "$BEFORE" "$(snapshot)"
check "XS3 after the failures the fork succeeds" "fork-e" \
    "$(R "$(fork_sql e "$SRC" c-child "$E" fork-e)" >/dev/null; R "SELECT sandbox_persist.checkpoint_get_head('$E')")"
check "XS3 F9 a second fork into it is SP011" "SP011 SANDBOX_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY" \
    "$(RERR "$(fork_sql e "$SRC" c-child "$E" fork-e2)")"

# Background sessions and a hold point: a statement-level trigger on a
# shard's checkpoint_blob_refs waits for advisory lock 4242 while a holder
# session keeps it, so an import (or an append) stops with its rows written
# but not committed.
TMPD=$(mktemp -d /tmp/sp_cross_shard_io.XXXXXX)
chmod 777 "$TMPD"
trap 'cleanup; rm -rf "$TMPD"' EXIT
hook_sql="CREATE OR REPLACE FUNCTION public.test_hold() RETURNS trigger LANGUAGE plpgsql AS \$\$
          BEGIN PERFORM pg_advisory_lock(4242); PERFORM pg_advisory_unlock(4242); RETURN NULL; END \$\$;
          CREATE TRIGGER test_hold AFTER INSERT ON sandbox_persist.checkpoint_blob_refs
              FOR EACH STATEMENT EXECUTE FUNCTION public.test_hold()"
S0 "$hook_sql" >/dev/null
S1 "$hook_sql" >/dev/null
hostport() { case $1 in R) echo "$ROUTER_HOST $ROUTER_PORT" ;; S0) echo "$SHARD0_HOST $SHARD0_PORT" ;; S1) echo "$SHARD1_HOST $SHARD1_PORT" ;; esac; }
bg() {      # name target sql: run in the background; $TMPD/name.out, .rc
    local hp
    read -r -a hp <<<"$(hostport "$2")"
    ( rc=0
      psql -X -q -At -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -h "${hp[0]}" -p "${hp[1]}" -U postgres \
          -d postgres -c "$3" >"$TMPD/$1.out" 2>&1 || rc=$?
      echo "$rc" >"$TMPD/$1.rc" ) &
    PIDS+=($!)
}
done_bg() { [ -f "$TMPD/$1.rc" ]; }
wait_bg() {     # name: wait for it to end (a 120 s ceiling fails a hang); prints its exit code
    for _ in $(seq 1200); do done_bg "$1" && break; sleep 0.1; done
    cat "$TMPD/$1.rc" 2>/dev/null || echo timeout
}
until_true() {  # target sql: poll until the query returns t (a 120 s ceiling fails a hang)
    for _ in $(seq 1200); do
        [ "$($1 "$2" 2>/dev/null)" = t ] && return 0
        sleep 0.1
    done
    echo "# timed out waiting for: $2" >&2
    return 1
}
hold() {        # target: a holder session keeps advisory lock 4242
    bg "holder-$1" "$1" "SELECT pg_advisory_lock(4242); SELECT pg_sleep(600)"
    until_true "$1" "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND granted)"
}
blocked() {     # target: someone waits at the hold point
    until_true "$1" "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory')"
}
release() {     # target: end the holder session
    $1 "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND granted" >/dev/null
    wait_bg "holder-$1" >/dev/null
}
router_reads() {    # thread: everything a reader sees through the router
    R "SELECT json_build_object(
         'transcript', sandbox_persist.message_load_thread('$1'),
         'head', sandbox_persist.checkpoint_get_head('$1'),
         'checkpoints', sandbox_persist.checkpoint_list('$1'),
         'runs', sandbox_persist.run_list_by_thread('$1'),
         'interrupts', sandbox_persist.interrupt_list('$1'),
         'generation', sandbox_persist.generation_run_find_latest_for_thread('$1'),
         'artifacts', sandbox_persist.artifact_list_for_thread('$1'))::text"
}
owned() { $1 "SELECT count(*) FROM sandbox_persist.thread_owned_state WHERE thread_id = '$2'"; }

echo "# XS4 thread move end to end, writes refused during the window"
M4=$(thread_on move 0)
K4=$(fk "only-on-shard-0")
S0 "SELECT sandbox_persist.blob_put('$K4', convert_to('only-on-shard-0', 'UTF8'))" >/dev/null
acquire m4 "$M4"
append m4 "$M4" m4-root "" 1 "[{\"path\":\"a\",\"kind\":\"file\",\"blobKey\":\"$KA\",\"size\":5}]" \
    '[{"role":"user","content":"m \u0000 4"}]' >/dev/null
append m4 "$M4" m4-child m4-root 2 "[{\"path\":\"a\",\"kind\":\"file\",\"blobKey\":\"$KA\",\"size\":5},{\"path\":\"k\",\"kind\":\"file\",\"blobKey\":\"$K4\",\"size\":15}]" \
    '[{"role":"user","content":"m \u0000 4"},{"role":"assistant","content":"ok"}]' >/dev/null
R "SELECT sandbox_persist.message_save_thread('$M4', '[{\"role\":\"user\",\"content\":\"saved \\u0000 transcript\"}]')" >/dev/null
R "SELECT sandbox_persist.run_create_or_resume('{\"runId\":\"m4-run\",\"threadId\":\"$M4\",\"startedAt\":100}')" >/dev/null
R "SELECT sandbox_persist.interrupt_create('{\"interruptId\":\"m4-int\",\"runId\":\"m4-run\",\"threadId\":\"$M4\",\"requestedAt\":100,\"payload\":{\"tool\":\"rm\"}}')" >/dev/null
R "SELECT sandbox_persist.generation_run_create_or_resume('{\"runId\":\"m4-gen\",\"threadId\":\"$M4\",\"activity\":\"image\",\"provider\":\"p\",\"model\":\"m\",\"startedAt\":100}')" >/dev/null
R "SELECT sandbox_persist.artifact_save('{\"artifactId\":\"m4-art\",\"runId\":\"m4-gen\",\"threadId\":\"$M4\",\"name\":\"x.png\",\"mimeType\":\"image/png\",\"size\":3,\"blobKey\":\"$KC\",\"createdAt\":150}')" >/dev/null
R "SELECT sandbox_persist.event_log_append('m4-run', '[{\"type\":\"a\"},{\"type\":\"b \\u0000\"}]')" >/dev/null
# a log's logId is a per-shard row number, renumbered by an import
log_reads() { R "SELECT regexp_replace(sandbox_persist.event_log_read('$1', 0)::text, '\"logId\":[0-9]+', '\"logId\":N')"; }
M4_BEFORE=$(router_reads "$M4")
EL4_BEFORE=$(log_reads m4-run)
hold S1
bg move4 R "CALL sandbox_persist.thread_move('$M4', 1)"
blocked S1
check "XS4 during the window reads through the router are unchanged" "$M4_BEFORE" "$(router_reads "$M4")"
check "XS4 during the window a transcript save is SP014" "SP014 SANDBOX_THREAD_MOVING" \
    "$(RERR "SELECT sandbox_persist.message_save_thread('$M4', '[]')")"
check "XS4 during the window an append under the lease is SP014" "SP014 SANDBOX_THREAD_MOVING" \
    "$(RERR "$(declare -f append >/dev/null; echo "SELECT sandbox_persist.checkpoint_append(json_build_object(
        'checkpoint', json_build_object('id', 'm4-x', 'threadId', '$M4', 'parentCheckpointId', 'm4-child',
            'createdAt', 3, 'reason', 'named', 'files', '[]'::json, 'artifacts', '[]'::json),
        'expectedHeadId', 'm4-child', 'writer', (SELECT writer FROM writers WHERE name = 'm4')), '[]')")")"
check "XS4 during the window a new run is SP014" "SP014 SANDBOX_THREAD_MOVING" \
    "$(RERR "SELECT sandbox_persist.run_create_or_resume('{\"runId\":\"m4-run2\",\"threadId\":\"$M4\",\"startedAt\":100}')")"
check "XS4 during the window an event log append of its run is SP014" "SP014 SANDBOX_THREAD_MOVING" \
    "$(RERR "SELECT sandbox_persist.event_log_append('m4-run', '[{\"type\":\"c\"}]')")"
check "XS4 the move is still waiting (the writes did not finish it)" "no" "$(done_bg move4 && echo yes || echo no)"
release S1
check "XS4 the move finishes" "0" "$(wait_bg move4)"
check "XS4 after the move reads through the router are identical" "$M4_BEFORE" "$(router_reads "$M4")"
check "XS4 after the move the run's event log reads the same" "$EL4_BEFORE" "$(log_reads m4-run)"
check "XS4 ... and it lives on shard 1 now" "0 1" \
    "$(S0 "SELECT count(*) FROM sandbox_persist.event_logs WHERE run_id = 'm4-run'") $(S1 "SELECT count(*) FROM sandbox_persist.event_logs WHERE run_id = 'm4-run'")"
check "XS4 the placement points at shard 1" "1" "$(R "SELECT shard FROM sandbox_persist.thread_placement WHERE thread_id = '$M4'")"
check "XS4 the source copy is gone" "0" "$(owned S0 "$M4")"
check "XS4 no conversation blocks left on the source" "0" \
    "$(S0 "SELECT count(*) FROM sandbox_persist.conversation_blocks WHERE thread_id = '$M4'")"
check "XS4 the source keeps a tombstone" "moved" "$(S0 "SELECT state FROM sandbox_persist.thread_moves WHERE thread_id = '$M4'")"
check "XS4 the move journal is empty" "0" "$(R "SELECT count(*) FROM sandbox_persist.thread_move_journal")"
check "XS4 the blob only shard 0 held was copied" "15" "$(S1 "SELECT sandbox_persist.blob_head('$K4')->>'size'")"
check "XS4 shard 0 counts equal a recount" "$(refs_norm S0)" "$(refs S0)"
check "XS4 shard 1 counts equal a recount" "$(refs_norm S1)" "$(refs S1)"
check "XS4 a stale write on the old shard is SP014" "SP014 SANDBOX_THREAD_MOVING" \
    "$(S0 "SELECT 1" >/dev/null; psql -X -q -At -v VERBOSITY=verbose -h "$SHARD0_HOST" -p "$SHARD0_PORT" -U postgres -d postgres \
        -c "SELECT sandbox_persist.message_save_thread('$M4', '[]')" 2>&1 | sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\):.*/\1 SANDBOX_THREAD_MOVING/p')"
check "XS4 the moved lease appends on the new shard" "{\"headId\":\"m4-next\"}" \
    "$(append m4 "$M4" m4-next m4-child 3 '[]' '[]')"
M4_AFTER=$(router_reads "$M4")
R "CALL sandbox_persist.thread_move('$M4', 0)" >/dev/null
check "XS4 moved back: reads identical" "$M4_AFTER" "$(router_reads "$M4")"
check "XS4 moved back: shard 1 holds nothing of it" "0" "$(owned S1 "$M4")"
check "XS4 moved back: placement 0" "0" "$(R "SELECT shard FROM sandbox_persist.thread_placement WHERE thread_id = '$M4'")"
check "XS4 moved back: the lease and its fence travelled with the thread" \
    "$(R "SELECT (writer->>'fence') || ' ' || (writer->>'ownerToken') FROM writers WHERE name = 'm4'")" \
    "$(S0 "SELECT fence || ' ' || owner_token FROM sandbox_persist.checkpoint_threads WHERE thread_id = '$M4'")"
check "XS4 moved back: a second acquire is still SP005 (the lease is current)" "SP005 SANDBOX_SNAPSHOT_WRITER_CONFLICT" \
    "$(RERR "SELECT sandbox_persist.checkpoint_acquire_writer('$M4')")"

# kill -9 shard 1's postmaster and every process it started, then restart it
# (crash recovery). Only the processes of that data directory are touched.
crash_shard1() {
    local pm kids
    pm=$(head -1 "$SHARD1_DATA/postmaster.pid")
    # Stopped first, the postmaster forks no backend between the listing of its
    # children and the kill (an orphan forked there would keep the shared memory
    # and fail the restart).
    kill -STOP "$pm" 2>/dev/null || true
    kids=$(pgrep -P "$pm" || true)
    # shellcheck disable=SC2086
    kill -9 "$pm" $kids 2>/dev/null || true
    # Wait for every killed process to be gone (a survivor keeps the shared
    # memory and fails the restart); the 120 s ceiling only bounds a hang.
    local p st
    for p in $pm $kids; do
        for _ in $(seq 1200); do
            st=$(ps -o stat= -p "$p" 2>/dev/null) || break
            [[ $st == Z* ]] && break    # exited, not yet reaped
            sleep 0.1
        done
    done
}
restart_shard1() {   # crash recovery may be slow on a busy machine: a 300 s ceiling, a few tries
    local _
    for _ in 1 2 3 4 5; do
        as_postgres "$PGBIN/pg_ctl" -D "$SHARD1_DATA" -l "$SHARD1_DATA/../restart.log" -w -t 300 start >/dev/null 2>&1 && return 0
        sleep 1
    done
    echo "# shard 1 did not restart; its log:" >&2
    sed 's/^/#   /' "$SHARD1_DATA/../restart.log" >&2
    return 1
}

echo "# XS5 the destination shard crashes in the middle of a fork import"
# What survives a kill -9 depends on synchronous_commit: with it off, a commit
# already answered (the lease acquired just below) may be lost, and the retry
# would rightly fail. These checks rely on answered commits surviving, so the
# shard must commit synchronously (scripts/shards.sh starts shards so).
check "XS5 shard 1 commits synchronously (what the crash checks rely on)" "on" \
    "$(S1 "SELECT current_setting('synchronous_commit')")"
X5=$(thread_on crash 1)
acquire x5 "$X5"
hold S1
bg fork5 R "$(fork_sql x5 "$SRC" c-child "$X5" fork-x5)"
blocked S1
check "XS5 while the import is open nothing of it is visible" "0|0" \
    "$(owned S1 "$X5")|$(S1 "SELECT count(*) FROM sandbox_persist.checkpoints WHERE checkpoint_id = 'fork-x5'")"
check "XS5 ... though the import has written its rows (held at the references)" "t" \
    "$(S1 "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE query LIKE '%_checkpoint_import_fork%' AND wait_event = 'advisory')")"
crash_shard1
check "XS5 the fork fails when its destination dies" "1" "$(wait_bg fork5)"
rm -f "$TMPD/holder-S1.rc"
restart_shard1
check "XS5 after recovery nothing half-imported: no state, no checkpoint, no references, no messages" "0|0|0|0" \
    "$(owned S1 "$X5")|$(S1 "SELECT count(*) FROM sandbox_persist.checkpoints WHERE checkpoint_id = 'fork-x5'")|$(S1 "SELECT count(*) FROM sandbox_persist.checkpoint_blob_refs WHERE checkpoint_id = 'fork-x5'")|$(S1 "SELECT count(*) FROM sandbox_persist.conversation_blocks WHERE thread_id = '$X5'")"
check "XS5 shard 1 counts equal a recount" "$(refs_norm S1)" "$(refs S1)"
check "XS5 the retry succeeds and returns the fork root" "$(echo "$LOCRES" | sed "s/\"fork-loc\"/\"fork-x5\"/g; s/\"$LOC\"/\"$X5\"/g")" \
    "$(R "$(fork_sql x5 "$SRC" c-child "$X5" fork-x5)")"
check "XS5 the destination reads like the local fork" \
    "$(R "SELECT sandbox_persist.message_load_thread('$LOC')::text")" "$(R "SELECT sandbox_persist.message_load_thread('$X5')::text")"

echo "# XS6 the destination shard crashes in the middle of a move import"
M6=$(thread_on movecrash 0)
acquire m6 "$M6"
append m6 "$M6" m6-root "" 1 "[{\"path\":\"a\",\"kind\":\"file\",\"blobKey\":\"$KB\",\"size\":4}]" '[{"role":"user","content":"six"}]' >/dev/null
R "SELECT sandbox_persist.run_create_or_resume('{\"runId\":\"m6-run\",\"threadId\":\"$M6\",\"startedAt\":100}')" >/dev/null
M6_BEFORE=$(router_reads "$M6")
hold S1
bg move6 R "CALL sandbox_persist.thread_move('$M6', 1)"
blocked S1
crash_shard1
check "XS6 the move call fails when its destination dies" "1" "$(wait_bg move6)"
check "XS6 ... and says how to resume" "1" "$(grep -c 'again to resume' "$TMPD/move6.out")"
rm -f "$TMPD/holder-S1.rc"
restart_shard1
check "XS6 after recovery the destination holds nothing of the thread" "0|0" \
    "$(owned S1 "$M6")|$(S1 "SELECT count(*) FROM sandbox_persist.thread_moves WHERE thread_id = '$M6'")"
check "XS6 the move is kept: writes are still refused" "SP014 SANDBOX_THREAD_MOVING" \
    "$(RERR "SELECT sandbox_persist.run_create_or_resume('{\"runId\":\"m6-run2\",\"threadId\":\"$M6\",\"startedAt\":100}')")"
check "XS6 ... reads still served by the source" "$M6_BEFORE" "$(router_reads "$M6")"
check "XS6 the journal remembers the move" "0 1 begun" \
    "$(R "SELECT from_shard || ' ' || to_shard || ' ' || step FROM sandbox_persist.thread_move_journal WHERE thread_id = '$M6'")"
check "XS6 a move elsewhere is refused until it is resumed" "55000" \
    "$(RERR "CALL sandbox_persist.thread_move('$M6', 0)" | cut -c1-5)"
R "CALL sandbox_persist.thread_move('$M6', 1)" >/dev/null
check "XS6 resumed: reads identical" "$M6_BEFORE" "$(router_reads "$M6")"
check "XS6 resumed: on shard 1, gone from shard 0, journal empty" "1|0|0" \
    "$(R "SELECT shard FROM sandbox_persist.thread_placement WHERE thread_id = '$M6'")|$(owned S0 "$M6")|$(R "SELECT count(*) FROM sandbox_persist.thread_move_journal")"
check "XS6 resumed: writes go through again" "no error" \
    "$(RERR "SELECT sandbox_persist.run_create_or_resume('{\"runId\":\"m6-run2\",\"threadId\":\"$M6\",\"startedAt\":100}')")"
check "XS6 shard counts equal a recount" "$(refs_norm S0)|$(refs_norm S1)" "$(refs S0)|$(refs S1)"

echo "# XS7 a fork racing an append on its source across shards"
# (a) the fork's import is held open on the destination; the append on the
#     source goes through meanwhile; then the fork completes
R7=$(thread_on racea 1)
acquire r7 "$R7"
hold S1
bg fork7 R "$(fork_sql r7 "$SRC" c-child "$R7" fork-r7)"
blocked S1
check "XS7a the append on the source commits while the fork is open" "{\"headId\":\"c-r7\"}" \
    "$(append src "$SRC" c-r7 c-child 7 "[{\"path\":\"a\",\"kind\":\"file\",\"blobKey\":\"$KA\",\"size\":5}]" '[{"role":"user","content":"seven"}]')"
check "XS7a the fork was still open then" "no" "$(done_bg fork7 && echo yes || echo no)"
release S1
check "XS7a the fork completes" "0" "$(wait_bg fork7)"
check "XS7a its root is the fork of the immutable checkpoint (= either serial order)" \
    "$(echo "$LOCRES" | sed "s/\"fork-loc\"/\"fork-r7\"/g; s/\"$LOC\"/\"$R7\"/g")" "$(cat "$TMPD/fork7.out")"
check "XS7a the source went on: head c-r7" "c-r7" "$(R "SELECT sandbox_persist.checkpoint_get_head('$SRC')")"
# (b) the append is held open on the source (its thread row locked, its rows
#     uncommitted); a fork of the current head runs to the end meanwhile
R8=$(thread_on raceb 1)
R8S=$(thread_on racebserial 1)
acquire r8 "$R8"
acquire r8s "$R8S"
hold S0
bg append8 R "$(declare -f append >/dev/null; echo "SELECT sandbox_persist.checkpoint_append(json_build_object(
    'checkpoint', json_build_object('id', 'c-r8', 'threadId', '$SRC', 'parentCheckpointId', 'c-r7',
        'createdAt', 8, 'reason', 'named', 'files', '[{\"path\":\"b\",\"kind\":\"file\",\"blobKey\":\"$KB\",\"size\":4}]'::json,
        'artifacts', '[]'::json),
    'expectedHeadId', 'c-r7', 'writer', (SELECT writer FROM writers WHERE name = 'src')), '[]')")"
blocked S0
check "XS7b a fork of the head completes while the append is open" "0" \
    "$(R "$(fork_sql r8 "$SRC" c-r7 "$R8" fork-r8)" >"$TMPD/fork8.out" 2>&1; echo $?)"
check "XS7b the append was still open then" "no" "$(done_bg append8 && echo yes || echo no)"
release S0
check "XS7b the append completes" "0" "$(wait_bg append8)"
R "$(fork_sql r8s "$SRC" c-r7 "$R8S" fork-r8s)" >"$TMPD/fork8s.out"
check "XS7b the racing fork equals the same fork run after the append" \
    "$(sed "s/\"$R8S\"/\"$R8\"/g; s/\"fork-r8s\"/\"fork-r8\"/g" "$TMPD/fork8s.out")" "$(cat "$TMPD/fork8.out")"
check "XS7b the source list holds both appends" "c-root,c-child,c-r7,c-r8" \
    "$(R "SELECT string_agg(m[1], ',') FROM regexp_matches(sandbox_persist.checkpoint_list('$SRC')::text,
                                                           '\"id\":\"([^\"]*)\",\"threadId\"', 'g') m")"
check "XS7 counts equal a recount on both shards" "$(refs_norm S0)|$(refs_norm S1)" "$(refs S0)|$(refs S1)"

S0 "DROP TRIGGER test_hold ON sandbox_persist.checkpoint_blob_refs; DROP FUNCTION public.test_hold()" >/dev/null
S1 "DROP TRIGGER test_hold ON sandbox_persist.checkpoint_blob_refs; DROP FUNCTION public.test_hold()" >/dev/null
echo "1..$COUNT"
echo "summary: cross-shard fork and thread moves: $((COUNT - FAILED)) of $COUNT checks passed"
if [ "$FAILED" != 0 ]; then
    echo "# $FAILED of $COUNT failed"
    exit 1
fi
