#!/usr/bin/env bash
# The high-availability suite: three PostgreSQL 15 nodes under Patroni with a
# one-node etcd and HAProxy in front (cluster.sh), the extension and pg_cron on
# every node, and failovers under load:
#   - the torture workloads and their invariant checker (test/torture,
#     --failover) through HAProxy: kill -9 of the leader's postmaster, or a
#     patronictl switchover, then the checks ("every acknowledged call is
#     present" among them) after each;
#   - the Node adapter (adapter.mjs) through HAProxy: typed CONNECTION_LOST
#     errors, its own retries, a writer lease and a lock held across the
#     failover, the LISTEN connection coming back, readers never hanging.
#
#   bash test/ha/run.sh --short   synchronous mode: 1 kill -9 under the torture
#                                 load, 1 under the adapter (make test, about 2 min)
#   bash test/ha/run.sh --long    synchronous then asynchronous mode, each: 5 kill -9
#                                 and 1 switchover under the torture load, 2 kill -9
#                                 and 1 switchover under the adapter (make torture, make test-ha);
#                                 in asynchronous mode each kill -9 follows a 2 s partition
#                                 of the standbys, so acknowledged commits are lost
#
# Needs the extension and pg_cron installed in PG_CONFIG's tree (make install;
# make test does it) and installs the Debian packages it lacks (patroni,
# etcd-server, etcd-client, haproxy, python3-psycopg2, python3-etcd, curl).
# Ports: SP_HA_PORT_BASE (default 56400) to base+23, on 127.0.0.1 (cluster.sh).
# SP_HA_MODES="sync" or "async" runs one mode of --long; SP_HA_PARTITION_MS (default
# 2000) is the replication partition before each kill -9 in asynchronous mode.
# Every process is stopped and the data directories removed on exit. Ends with
# one summary line; exits non-zero when a promise of the mode did not hold.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
MODE=${1:---short}
case "$MODE" in --short | --long) ;; *) echo "usage: $0 --short|--long" >&2; exit 2 ;; esac
started=$SECONDS

# --- packages (CI starts from a fresh Debian 12) ----------------------------------
missing=()
for p in patroni etcd-server etcd-client haproxy python3-psycopg2 python3-etcd curl; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    SUDO=
    [ "$(id -u)" = 0 ] || SUDO=sudo
    echo "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -q && $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" \
        || { echo "summary: ha: FAILED (could not install ${missing[*]})"; exit 1; }
fi

PG_CONFIG=${PG_CONFIG:-pg_config}
PGBIN=$("$PG_CONFIG" --bindir)
for f in "$("$PG_CONFIG" --pkglibdir)/sandbox_persist.so" "$("$PG_CONFIG" --pkglibdir)/pg_cron.so" \
         "$("$PG_CONFIG" --sharedir)/extension/sandbox_persist.control"; do
    [ -f "$f" ] || { echo "summary: ha: FAILED ($f is missing: run make install with this PG_CONFIG)"; exit 1; }
done
export PATH="$PGBIN:$PATH" PG_CONFIG

# --- Node: the torture load and the built adapter ----------------------------------
(cd "$ROOT/test/torture" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error >/dev/null) \
    || { echo "summary: ha: FAILED (npm ci in test/torture)"; exit 1; }
(cd "$ROOT/clients/node" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error >/dev/null && npm run --silent build) \
    || { echo "summary: ha: FAILED (building clients/node)"; exit 1; }

# shellcheck disable=SC1091
. "$HERE/cluster.sh"
trap 'ha_stop' EXIT
trap 'exit 130' INT TERM

summaries=()
failed=0

# run_mode sync|async TORTURE_KILLS TORTURE_SWITCHOVERS ADAPTER_KILLS ADAPTER_SWITCHOVERS
run_mode() {
    local mode=$1 tk=$2 ts=$3 ak=$4 as=$5 sync=1 n out status
    [ "$mode" = async ] && sync=0
    export SP_HA_SYNC=$sync
    # Asynchronous mode: each kill -9 follows a replication partition of this
    # length (ctl.sh), so that the primary has acknowledged commits no standby
    # has; without one, on loopback, the standbys are always caught up.
    export SP_HA_PARTITION_MS=${SP_HA_PARTITION_MS:-2000}
    echo "== ha: $mode replication"
    local t0=$SECONDS
    if ! ha_start "$(mktemp -d /tmp/sp_ha.XXXXXX)" "$sync"; then
        for n in "${HA_NODES[@]}"; do echo "--- $n.log"; tail -20 "$HA_DIR/$n.log"; done
        summaries+=("summary: ha ($mode): FAILED (the cluster did not start)")
        failed=1
        ha_stop
        return
    fi
    echo "cluster up in $((SECONDS - t0)) s: leader $(ha_leader), HAProxy 127.0.0.1:$HA_PROXY_PORT"
    export PGHOST=127.0.0.1 PGPORT=$HA_PROXY_PORT PGUSER=postgres PGDATABASE=postgres SP_HA_DIR=$HA_DIR
    psql -X -q -v ON_ERROR_STOP=1 -c 'CREATE EXTENSION IF NOT EXISTS pg_cron' \
        -c 'CREATE EXTENSION IF NOT EXISTS sandbox_persist' -c 'SELECT sandbox_persist.schedule_maintenance()' >/dev/null \
        || { summaries+=("summary: ha ($mode): FAILED (CREATE EXTENSION on the leader)"); failed=1; ha_stop; return; }
    # Every node has pg_cron loaded, replays the extension and loads its library (a C call).
    ha_wait_replicas 60 >/dev/null
    local nodes_ok=0
    for n in "${HA_NODES[@]}"; do
        if out=$(psql -X -At -h 127.0.0.1 -p "$(ha_pg_port "$n")" -d postgres \
            -c "SELECT current_setting('shared_preload_libraries') || ' ' || (SELECT extversion FROM pg_extension WHERE extname = 'sandbox_persist') || ' ' || (sandbox_persist.metadata_get('ha', 'none') IS NULL)"); then
            echo "  $n: $out"
            [[ "$out" == *pg_cron*" "*" true" ]] && nodes_ok=$((nodes_ok + 1))
        fi
    done
    if [ "$nodes_ok" -ne 3 ]; then
        summaries+=("summary: ha ($mode): FAILED (the extension or pg_cron is missing on $((3 - nodes_ok)) nodes)")
        failed=1
    fi

    out=$(mktemp)
    status=0
    SP_TORTURE_FAILOVER_CMD="$HERE/ctl.sh" SP_TORTURE_DB=sp_ha_torture \
        node "$ROOT/test/torture/torture.mjs" --failover --replication "$mode" --cycles "$tk" --switchovers "$ts" \
        --clients 4 --load-ms 4000 2>&1 | tee "$out"
    status=${PIPESTATUS[0]}
    summaries+=("$(grep '^summary: ' "$out" | tail -1)")
    [ "$status" -eq 0 ] || { failed=1; [ -n "$(grep '^summary: ' "$out")" ] || summaries+=("summary: torture ($mode failover): FAILED"); }

    SP_HA_CTL="$HERE/ctl.sh" node "$HERE/adapter.mjs" --kills "$ak" --switchovers "$as" --replication "$mode" 2>&1 | tee "$out"
    status=${PIPESTATUS[0]}
    summaries+=("$(grep '^summary: ' "$out" | tail -1)")
    [ "$status" -eq 0 ] || { failed=1; [ -n "$(grep '^summary: ' "$out")" ] || summaries+=("summary: adapter ($mode failover): FAILED"); }
    rm -f "$out"
    ha_stop
}

if [ "$MODE" = --short ]; then
    run_mode sync 1 0 1 0
else
    for m in ${SP_HA_MODES:-sync async}; do run_mode "$m" 5 1 2 1; done
fi

for s in "${summaries[@]}"; do echo "  $s"; done
echo "summary: ha (${MODE#--}): $(printf '%s\n' "${summaries[@]}" | grep -c .) parts, $([ $failed -eq 0 ] && echo passed || echo FAILED), $((SECONDS - started)) s"
exit $failed
