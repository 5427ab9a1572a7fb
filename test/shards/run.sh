#!/usr/bin/env bash
# The shards suite: a PL/Proxy router and two shard clusters on loopback
# (scripts/shards.sh), then through the router
#   1. the routing table against the shard's catalog (a function without a
#      route, or a route without a function, fails the install), and an
#      append's notification on the router against the shard's (E15; a
#      durable stream's append, close and delete),
#   2. the pgTAP store suites that use the SQL interface only (STORE_SUITES),
#   3. the fan-out suite test/shards/fanout.sql (placement, merges, id-only
#      reads, blobs on the shards of their references, errors),
#   4. the Node adapter suite, less the cases that cannot hold through a
#      router (NODE_EXCLUDED, each with its reason).
# Prints "summary: shards: ..." and exits non-zero on any failure. The
# clusters are stopped at the end (SHARDS_KEEP=1 keeps them).
# Environment: PG_CONFIG, SANDBOX_PERSIST_SHARDS_PORT/_STATE (scripts/shards.sh),
# SHARDS_SKIP_NODE=1 leaves the Node suite out.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
PATH="$("${PG_CONFIG:-pg_config}" --bindir):$PATH"
export PATH
started=$(date +%s)

# The pgTAP files that go through the API only and hold through a router.
# The others cannot, for these reasons (docs/sharding.md, "Tests"):
#   artifacts          S21 reads the query plan of the shard's own table
#   blob_storage       reads and corrupts chunk rows, sets the chunk size per session
#   checkpoint_validation, reliability_input
#                      undo accepted calls by rolling back (a shard call commits on its own)
#   event_log          SET event_log_reopen_on_append per session; log ids per shard; volatility
#   fork, fork_registry  write reference rows directly; cross-shard forks are router/cross_shard.sql's
#   hardening, security  the extension's catalog and grants, not the router's
#   locks              L10.5/6: fences come from each shard's own sequence
#   maintenance, producer_lost, reliability_time, zz_cron
#                      set maintenance settings per session, write rows directly, pg_cron per shard
STORE_SUITES=${STORE_SUITES:-"blobs checkpoints claims generation_runs instances interrupts messages metadata runs"}

# Node cases that cannot hold through a router (a regex alternative each):
#   L11, E15   roll back a release or append: the shard call has already committed
#   L16        (two cases) delete or lock lock rows directly
#   M15, B20, producer-lost
#              set a setting per session, which does not reach the shards
#   H6, X26    hold a row lock in an open transaction (to stop a call mid-way, to
#              leave a transaction idle): the router commits each shard call, so
#              nothing waits
#   E22, E23   (issue 20) not yet passing through the router: a live run's log reads as
#              finished there and the shutdown case's producer stream ends early; open
#              work, see CHANGELOG 0.4.0 (direct connections pass)
#   T14, T15, T17, T18
#              simulate a failover: delete rows directly, set test_timeline per session
#   M26, M27   maintenance_health() is per shard (router/routes.tsv): each shard's
#              pg_cron job is judged on that shard
#   CD8        compares the stored conversation columns of two threads by reading
#              sandbox_persist.checkpoints directly (the router has no such table)
#   DSS, Reserved subscription APIs
#              stream subscriptions are not on the router (router/routes.tsv: a
#              pattern spans every shard, docs/sharding.md)
NODE_EXCLUDED='Reserved subscription APIs|DSS[0-9]+ |M26 a failing pg_cron run|M27 maintenance that has not completed|L11 a committed release|E15 a committed append|L16 losing the lease row|L16 reaching the local deadline|M15 maintain|B20 objects above|SIGKILL the producer|H6 a session terminated mid-call|X26 a row held by a transaction left open|E22 L21 shutdown|E23 a POST that repeats|T14 a reader|T15 a reader|T17 a writer fence|T18 withLock|CD8 an extending conversation'

failures=()
fail() { failures+=("$1"); echo "FAILED: $1" >&2; }

bash scripts/shards.sh start 2 || { echo "summary: shards: set-up failed"; exit 1; }
# shellcheck disable=SC1091
. "${SANDBOX_PERSIST_SHARDS_STATE:-$ROOT/.shards}/env"
if [ -z "${SHARDS_KEEP:-}" ]; then
    trap 'bash "$ROOT/scripts/shards.sh" stop >/dev/null 2>&1' EXIT
fi
psql -X -q -c "ALTER DATABASE postgres SET client_min_messages = warning"

# 1. Routes: the real table passes; one without a route, or with a made-up
# one, must fail with 42883.
routes_ok=0
tmp=$(mktemp -d)
grep -v '^#' router/routes.tsv >"$tmp/all"
if psql -X -q -At -v ON_ERROR_STOP=1 -d "$SHARD_0_DSN" -f router/generate.sql <"$tmp/all" >/dev/null; then
    routes_ok=$((routes_ok + 1))
else
    fail "routes: the committed routing table does not cover the catalog"
fi
grep -v '^run_get	' "$tmp/all" >"$tmp/missing"
if psql -X -q -At -v ON_ERROR_STOP=1 -d "$SHARD_0_DSN" -f router/generate.sql <"$tmp/missing" 2>"$tmp/err" >/dev/null; then
    fail "routes: a function without a route was not refused"
elif grep -q 'Functions without a route: run_get' "$tmp/err"; then
    routes_ok=$((routes_ok + 1))
else
    fail "routes: a function without a route failed for another reason"
fi
{ cat "$tmp/all"; printf 'run_teleport\tall\tr\tnone\n'; } >"$tmp/extra"
if psql -X -q -At -v ON_ERROR_STOP=1 -d "$SHARD_0_DSN" -f router/generate.sql <"$tmp/extra" 2>"$tmp/err" >/dev/null; then
    fail "routes: a route without a function was not refused"
elif grep -q 'Routes without a function: run_teleport' "$tmp/err"; then
    routes_ok=$((routes_ok + 1))
else
    fail "routes: a route without a function failed for another reason"
fi
rm -rf "$tmp"
echo "routes: $routes_ok of 3 checks passed"

# 1b. E15 through the router: an append's notification there is the one the
# shard sends (docs/sharding.md). The same appends to a log on the router and
# to another straight on shard 0 (digests depend on seq and chunk text only),
# each session listening where it appends; the payloads must agree after the
# log id. A log's first append is announced as 0 on the router, and a repeated
# producer append (its tokens are not at the tail) with the log id alone.
notices() { # dsn run: the payloads of three appends to a new log (the last repeats the second)
    local producer_append="SELECT 1 FROM sandbox_persist.event_log_append('$2', '[ {\"b\":[ 2 ] }, {\"t\":\"x\"}]',
        '{\"producerId\":\"00000000-0000-4000-8000-000000000001\",\"producerSeq\":1,\"withDigests\":true}')"
    psql -X -q -At -d "$1" -c "LISTEN sandbox_persist_event_log" \
        -c "SELECT 1 FROM sandbox_persist.event_log_append('$2', '[{\"a\" : 1}]', '{\"withDigests\":true}')" \
        -c "$producer_append" -c "$producer_append" 2>&1 | sed -n 's/^Asynchronous notification "sandbox_persist_event_log" with payload "\(.*\)" received from server process.*/\1/p'
}
notify_ok=0
routed=$(notices "$PGDATABASE" e15-routed)
direct=$(notices "$SHARD_0_DSN" e15-direct)
routed_id=$(psql -X -At -c "SELECT sandbox_persist.event_log_read('e15-routed', 0, 0) ->> 'logId'")
direct_id=$(psql -X -At -d "$SHARD_0_DSN" -c "SELECT sandbox_persist.event_log_read('e15-direct', 0, 0) ->> 'logId'")
second() { sed -n 2p <<<"$1" | cut -d' ' -f2-; }
if [ "$(sed -n 2p <<<"$routed" | cut -d' ' -f1)" = "$routed_id" ] && [ -n "$(second "$direct")" ] &&
    [ "$(second "$routed")" = "$(second "$direct")" ]; then
    notify_ok=$((notify_ok + 1))
else
    fail "notify: the router's payload differs from the shard's: routed '$(sed -n 2p <<<"$routed")', direct '$(sed -n 2p <<<"$direct")'"
fi
if [ "$(sed -n 1p <<<"$routed")" = 0 ] && [ "$(sed -n 3p <<<"$routed")" = "$routed_id" ] && [ "$(wc -l <<<"$routed")" = 3 ]; then
    notify_ok=$((notify_ok + 1))
else
    fail "notify: a first or a repeated append through the router: '$(tr '\n' '|' <<<"$routed")' (log $routed_id, direct $direct_id)"
fi
# A durable stream's notifications through the router are the shard's: the
# stream id, for an append that wrote, a close and a delete; none for a
# create (even with a body) or a duplicate append. The same calls on a router
# path and straight on shard 0; each output is the stream id, then the payloads.
stream_notices() { # dsn path
    local append="SELECT 1 FROM sandbox_persist.stream_append('$2', 'text/plain', 'b',
        '{\"producerId\":\"p\",\"producerEpoch\":0,\"producerSeq\":0}')"
    psql -X -q -At -d "$1" -c "LISTEN sandbox_persist_stream" \
        -c "SELECT sandbox_persist.stream_create('$2', 'text/plain', NULL, 'a') ->> 'streamId'" \
        -c "$append" -c "$append" \
        -c "SELECT 1 FROM sandbox_persist.stream_append('$2', NULL, NULL, '{\"close\":true}')" \
        -c "SELECT 1 FROM sandbox_persist.stream_delete('$2')" 2>&1 |
        sed -n -e '1p' -e 's/^Asynchronous notification "sandbox_persist_stream" with payload "\(.*\)" received from server process.*/\1/p'
}
routed=$(stream_notices "$PGDATABASE" ds-notify-routed)
direct=$(stream_notices "$SHARD_0_DSN" ds-notify-direct)
expect() { local id; id=$(sed -n 1p <<<"$1"); printf '%s\n%s\n%s\n%s' "$id" "$id" "$id" "$id"; }
if [ -n "$(sed -n 1p <<<"$routed")" ] && [ "$routed" = "$(expect "$routed")" ] && [ "$direct" = "$(expect "$direct")" ]; then
    notify_ok=$((notify_ok + 1))
else
    fail "notify: a stream's notifications through the router differ from the shard's: routed '$(tr '\n' '|' <<<"$routed")', direct '$(tr '\n' '|' <<<"$direct")'"
fi
echo "notify: $notify_ok of 3 checks passed"

# Test helpers: table mirrors and shard_test on the router, shard_test.exec on each shard.
for ((i = 0; i < SHARD_COUNT; i++)); do
    dsn_var="SHARD_${i}_DSN"
    psql -X -q -v ON_ERROR_STOP=1 -d "${!dsn_var}" -f test/shards/helpers_shard.sql
done
psql -X -q -At -v ON_ERROR_STOP=1 -d "$SHARD_0_DSN" -f test/shards/mirrors.sql | psql -X -q -v ON_ERROR_STOP=1
psql -X -q -v ON_ERROR_STOP=1 -f test/shards/helpers_router.sql

# 2 and 3. pgTAP through the router.
files=()
for s in $STORE_SUITES; do files+=("test/pgtap/$s.sql"); done
files+=(test/shards/fanout.sql)
pgtap_out=$(mktemp)
if pg_prove -f -d "$PGDATABASE" "${files[@]}" 2>&1 | tee "$pgtap_out"; then :; else fail "pgTAP through the router"; fi
pgtap_line="$(grep -E '^Files=' "$pgtap_out" | sed 's/,  *[0-9]* wallclock.*//'), result $(grep -E '^Result:' "$pgtap_out" | awk '{print $2}')"
rm -f "$pgtap_out"

# 4. The Node adapter suite through the router.
node_line="skipped"
if [ -z "${SHARDS_SKIP_NODE:-}" ]; then
    report=$(mktemp)
    (
        cd clients/node || exit 1
        [ -d node_modules ] || npm ci --no-audit --no-fund --prefer-offline --loglevel=error || exit 1
        # dist/: the shutdown cases run the built adapter in a child process and the
        # README check imports it; make test-shards alone on a fresh clone has none.
        npm run --silent build || exit 1
        npx vitest run --no-file-parallelism --reporter=default --reporter=json --outputFile.json="$report" \
            -t "^(?!.*($NODE_EXCLUDED)).*\$"
    ) || fail "Node adapter suite through the router"
    node_line=$(node -e '
      const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
      let line = `${r.numPassedTests} passed, ${r.numFailedTests} failed, ${r.numPendingTests + r.numTodoTests} skipped`;
      // The official Durable Streams suite through the router, with each test not run named.
      const ds = r.testResults.filter((f) => /streams_protocol\.test\.ts$/.test(f.name)).flatMap((f) => f.assertionResults);
      if (ds.length > 0) {
        const passed = ds.filter((a) => a.status === "passed").length;
        const notRun = ds.filter((a) => a.status !== "passed" && a.status !== "failed").map((a) => a.title);
        line += `; Durable Streams conformance 0.3.6 through the router: ${passed} of 338 passed` +
          (notRun.length ? `, not run (subscriptions are not routed, docs/sharding.md): ${notRun.join(" | ")}` : "");
      }
      console.log(line);
    ' "$report" 2>/dev/null || echo "no report")
    rm -f "$report"
fi

# 5. Cross-shard fork and thread moves (router/cross_shard.sql); last, because
#    XS5/XS6 kill and restart shard 1.
xs_line="skipped"
if [ -z "${SHARDS_SKIP_CROSS:-}" ]; then
    xs_out=$(mktemp)
    if SP_SHARDS_ENV="${SANDBOX_PERSIST_SHARDS_STATE:-$ROOT/.shards}/env" bash test/shards/cross_shard.sh 2>&1 | tee "$xs_out"; then :; else fail "cross-shard fork and thread moves"; fi
    xs_line=$(grep -E '^summary: ' "$xs_out" | tail -n 1 | sed 's/^summary: //')
    rm -f "$xs_out"
fi

elapsed=$(($(date +%s) - started))
status=pass
[ ${#failures[@]} -eq 0 ] || status="FAIL (${failures[*]})"
echo "summary: shards: $status; routes $routes_ok/3; notify $notify_ok/3; pgTAP ${pgtap_line}; node ${node_line}; ${xs_line:-cross-shard: no summary}; ${elapsed}s"
[ ${#failures[@]} -eq 0 ]
