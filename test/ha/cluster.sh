#!/usr/bin/env bash
# A three-node PostgreSQL cluster on loopback, as production runs one: Patroni
# on each node (PostgreSQL 15 from PG_CONFIG's tree, run as the postgres
# user), a one-node etcd as the DCS, and HAProxy in front that sends clients
# to whichever node Patroni's REST API calls the primary (GET /primary).
# Sourced by test/ha/run.sh, which starts it, drives failovers and removes it.
#
# Ports (loopback only), from SP_HA_PORT_BASE (default 56400):
#   base+0  HAProxy: the primary         base+1/+2  etcd client/peer
#   base+11..13  PostgreSQL n1..n3       base+21..23  Patroni REST n1..n3
# SP_HA_SYNC=1 runs Patroni's synchronous_mode (synchronous_commit = on and one
# synchronous standby: an acknowledged commit is on two nodes); SP_HA_SYNC=0
# replicates asynchronously (an acknowledged commit may be lost in a failover).
#
# Functions: ha_start DIR SYNC, ha_stop, ha_leader (name), ha_rest_port NAME,
# ha_kill_leader (kill -9 of the leader's postmaster and its children),
# ha_switchover, ha_wait_leader OLD (a leader other than OLD, healthy through
# HAProxy), ha_wait_replicas (every node streaming again).

HA_BASE=${SP_HA_PORT_BASE:-56400}
HA_PROXY_PORT=$HA_BASE
HA_ETCD_PORT=$((HA_BASE + 1))
HA_ETCD_PEER=$((HA_BASE + 2))
HA_NODES=(n1 n2 n3)
HA_PGBIN=$("${PG_CONFIG:-pg_config}" --bindir)
HA_DIR=
HA_PIDS=()

ha_as_postgres() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
ha_index() { case "$1" in n1) echo 1 ;; n2) echo 2 ;; n3) echo 3 ;; esac; }
ha_pg_port() { echo $((HA_BASE + 10 + $(ha_index "$1"))); }
ha_rest_port() { echo $((HA_BASE + 20 + $(ha_index "$1"))); }

# ha_poll SECONDS CMD...: run CMD every 0.2 s until it succeeds; fail after SECONDS.
ha_poll() {
    local limit=$1
    shift
    local deadline=$((SECONDS + limit))
    until "$@" >/dev/null 2>&1; do
        [ $SECONDS -lt $deadline ] || return 1
        sleep 0.2
    done
}

# ha_spawn NAME LOG CMD...: run CMD in the background as postgres; its own pid
# (not runuser's) goes to $HA_DIR/NAME.pid, for ha_stop.
# It runs in $HA_DIR: the checkout may be a directory the postgres user cannot
# enter (a clone in a mode-700 temp dir), and Patroni's initdb in a working
# directory it cannot read never finished its bootstrap.
ha_spawn() {
    local name=$1 log=$2
    shift 2
    if [ "$(id -u)" = 0 ]; then
        (cd "$HA_DIR" && runuser -u postgres -- sh -c 'echo $$ >"$0"; exec "$@"' "$HA_DIR/$name.pid" "$@") >"$log" 2>&1 &
    else
        (cd "$HA_DIR" && sh -c 'echo $$ >"$0"; exec "$@"' "$HA_DIR/$name.pid" "$@") >"$log" 2>&1 &
    fi
    HA_PIDS+=("$name")
    ha_poll 10 test -s "$HA_DIR/$name.pid"
}

ha_rest() { curl -fsS --max-time 2 "http://127.0.0.1:$(ha_rest_port "$1")$2"; }

# The name of the node whose REST API answers /primary with 200, or nothing.
ha_leader() {
    local n
    for n in "${HA_NODES[@]}"; do
        if curl -fs -o /dev/null --max-time 1 "http://127.0.0.1:$(ha_rest_port "$n")/primary"; then
            echo "$n"
            return 0
        fi
    done
    return 1
}

ha_node_yaml() {
    local n=$1 sync=$2
    local pgport rest
    pgport=$(ha_pg_port "$n")
    rest=$(ha_rest_port "$n")
    cat <<YAML
scope: sp_ha
name: $n
log:
  level: INFO
restapi:
  listen: 127.0.0.1:$rest
  connect_address: 127.0.0.1:$rest
etcd3:
  hosts: 127.0.0.1:$HA_ETCD_PORT
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 4
    # a crashed primary is not restarted in place when a standby can take over
    primary_start_timeout: 0
    maximum_lag_on_failover: 1073741824
    synchronous_mode: $([ "$sync" = 1 ] && echo true || echo false)
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        wal_level: replica
        hot_standby: "on"
        wal_log_hints: "on"
        max_wal_senders: 10
        max_replication_slots: 10
        max_connections: 60
        max_worker_processes: 16
        max_prepared_transactions: 10
        shared_preload_libraries: pg_cron
        cron.database_name: postgres
        cron.use_background_workers: "on"
        synchronous_commit: "on"
        # a process crash keeps written WAL in the kernel; this is a kill -9 test, not a power cut
        fsync: "off"
  initdb:
    - encoding: UTF8
    - locale: C.UTF-8
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:$pgport
  connect_address: 127.0.0.1:$pgport
  data_dir: $HA_DIR/$n/data
  bin_dir: $HA_PGBIN
  pgpass: $HA_DIR/$n/pgpass
  authentication:
    superuser:
      username: postgres
    replication:
      username: postgres
    rewind:
      username: postgres
  parameters:
    unix_socket_directories: $HA_DIR/$n
tags:
  nofailover: false
  noloadbalance: false
  clonefrom: false
  nosync: false
YAML
}

ha_haproxy_cfg() {
    cat <<CFG
global
    maxconn 200
    log stdout format raw local0 warning
defaults
    mode tcp
    log global
    timeout connect 2s
    timeout client 30m
    timeout server 30m
    timeout check 1s
listen primary
    bind 127.0.0.1:$HA_PROXY_PORT
    option httpchk GET /primary
    http-check expect status 200
    default-server inter 300ms fastinter 200ms fall 2 rise 1 on-marked-down shutdown-sessions
CFG
    local n
    for n in "${HA_NODES[@]}"; do
        echo "    server $n 127.0.0.1:$(ha_pg_port "$n") maxconn 100 check port $(ha_rest_port "$n")"
    done
}

# ha_start DIR SYNC: start etcd, the three Patroni nodes and HAProxy; wait for
# a leader reachable through HAProxy and for both standbys streaming.
ha_start() {
    HA_DIR=$1
    local sync=$2 n port
    # A port already taken (another run, a packaged service) would be mistaken for ours.
    for port in "$HA_PROXY_PORT" "$HA_ETCD_PORT" "$HA_ETCD_PEER" $(for n in "${HA_NODES[@]}"; do ha_pg_port "$n"; ha_rest_port "$n"; done); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "port $port on 127.0.0.1 is in use: stop what listens there or set SP_HA_PORT_BASE"
            return 1
        fi
    done
    mkdir -p "$HA_DIR"
    chmod 755 "$HA_DIR"
    mkdir -p "$HA_DIR/etcd"
    for n in "${HA_NODES[@]}"; do mkdir -p "$HA_DIR/$n"; done
    [ "$(id -u)" = 0 ] && chown -R postgres: "$HA_DIR"
    ha_spawn etcd "$HA_DIR/etcd.log" etcd --name sp_ha --data-dir "$HA_DIR/etcd/data" \
        --listen-client-urls "http://127.0.0.1:$HA_ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$HA_ETCD_PORT" \
        --listen-peer-urls "http://127.0.0.1:$HA_ETCD_PEER" --initial-advertise-peer-urls "http://127.0.0.1:$HA_ETCD_PEER" \
        --initial-cluster "sp_ha=http://127.0.0.1:$HA_ETCD_PEER"
    ha_poll 120 env ETCDCTL_API=3 etcdctl --endpoints="http://127.0.0.1:$HA_ETCD_PORT" endpoint health \
        || { echo "etcd did not become healthy:"; tail -20 "$HA_DIR/etcd.log"; return 1; }
    for n in "${HA_NODES[@]}"; do
        ha_node_yaml "$n" "$sync" >"$HA_DIR/$n.yml"
        chown postgres: "$HA_DIR/$n.yml" 2>/dev/null || true
        ha_spawn "patroni-$n" "$HA_DIR/$n.log" patroni "$HA_DIR/$n.yml"
        # the first node bootstraps; the others clone from it
        if [ "$n" = n1 ]; then
            ha_poll 300 ha_rest n1 /primary || { echo "n1 did not bootstrap:"; tail -30 "$HA_DIR/n1.log"; return 1; }
        fi
    done
    ha_haproxy_cfg >"$HA_DIR/haproxy.cfg"
    chown postgres: "$HA_DIR/haproxy.cfg" 2>/dev/null || true
    ha_spawn haproxy "$HA_DIR/haproxy.log" haproxy -f "$HA_DIR/haproxy.cfg" -db
    ha_wait_writable 60 || { echo "no writable primary through HAProxy"; return 1; }
    ha_wait_replicas 300 || { echo "the standbys did not start streaming:"; tail -20 "$HA_DIR/n2.log" "$HA_DIR/n3.log"; return 1; }
}

# A write through HAProxy succeeds (a primary that accepts commits; in
# synchronous mode, one that has its synchronous standby).
ha_writable() {
    "$HA_PGBIN/psql" -X -q -h 127.0.0.1 -p "$HA_PROXY_PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 \
        -c "SET statement_timeout = '2s'" -c "CREATE TABLE IF NOT EXISTS ha_probe (x int); INSERT INTO ha_probe VALUES (1)"
}
ha_wait_writable() { ha_poll "$1" ha_writable; }

# Every node is the leader or streaming from it (Patroni's cluster view).
ha_all_streaming() {
    local l
    l=$(ha_leader) || return 1
    local s
    s=$(curl -fsS --max-time 2 "http://127.0.0.1:$(ha_rest_port "$l")/cluster") || return 1
    python3 -c '
import json, sys
c = json.loads(sys.argv[1])
m = c.get("members", [])
leaders = [x for x in m if x["role"] == "leader"]
ok = len(m) == 3 and len(leaders) == 1 and all(x["state"] in ("running", "streaming") for x in m) \
    and all(x.get("timeline") == leaders[0].get("timeline") for x in m)
want_sync = sys.argv[2] == "1"
if want_sync:
    ok = ok and any(x["role"] == "sync_standby" for x in m)
sys.exit(0 if ok else 1)' "$s" "${SP_HA_SYNC:-1}"
}
ha_wait_replicas() { ha_poll "$1" ha_all_streaming; }

# kill -9 of the leader's postmaster and then of its children (a crashed
# server, not a shutdown): prints the node name.
ha_kill_leader() {
    local l pid kids
    l=$(ha_leader) || return 1
    pid=$(head -1 "$HA_DIR/$l/data/postmaster.pid")
    kids=$(ps -o pid= --ppid "$pid" | tr '\n' ' ')
    kill -9 "$pid"
    # shellcheck disable=SC2086
    [ -n "$kids" ] && kill -9 $kids 2>/dev/null
    echo "$l"
}

# ha_partition_standbys STOP|CONT: pause or resume the leader's WAL senders
# (SIGSTOP/SIGCONT): as far as replication goes, a network partition between
# the primary and its standbys. The primary keeps acknowledging commits (in
# asynchronous mode) that no standby has; stopping the receivers instead would
# not do, since the WAL already in their sockets' buffers still arrives.
ha_partition_standbys() {
    local sig=$1 l pid w
    l=$(ha_leader) || return 0
    [ -f "$HA_DIR/$l/data/postmaster.pid" ] || return 0
    pid=$(head -1 "$HA_DIR/$l/data/postmaster.pid")
    for w in $(ps -o pid=,args= --ppid "$pid" | awk '/walsender/ { print $1 }'); do
        kill -"$sig" "$w" 2>/dev/null || true
    done
}

# patronictl switchover to a healthy standby (the synchronous one in synchronous mode).
ha_switchover() {
    local l target
    l=$(ha_leader) || return 1
    target=$(curl -fsS --max-time 2 "http://127.0.0.1:$(ha_rest_port "$l")/cluster" | python3 -c '
import json, sys
m = [x for x in json.load(sys.stdin)["members"] if x["role"] != "leader" and x["state"] in ("running", "streaming")]
m.sort(key=lambda x: x["role"] != "sync_standby")
print(m[0]["name"])')
    ha_as_postgres patronictl -c "$HA_DIR/$l.yml" switchover --leader "$l" --candidate "$target" --force >"$HA_DIR/switchover.log" 2>&1 \
        || { cat "$HA_DIR/switchover.log" >&2; return 1; }
    echo "$l"
}

# ha_wait_leader OLD SECONDS: a leader other than OLD answers /primary.
ha_other_leader() {
    local l
    l=$(ha_leader) || return 1
    [ "$l" != "$1" ]
}
ha_wait_leader() { ha_poll "$2" ha_other_leader "$1"; }

# ha_stop_group NAME...: SIGTERM those processes, wait up to 15 s each, then SIGKILL.
ha_stop_group() {
    local name p
    for name in "$@"; do
        p=$(cat "$HA_DIR/$name.pid" 2>/dev/null) && [ -n "$p" ] && kill -TERM "$p" 2>/dev/null
    done
    for name in "$@"; do
        p=$(cat "$HA_DIR/$name.pid" 2>/dev/null) && [ -n "$p" ] || continue
        for _ in $(seq 1 150); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null || true
    done
}

# Stop everything: HAProxy and Patroni (which stops its PostgreSQL), then
# etcd; a postmaster that survives is killed; the directory is removed.
ha_stop() {
    local p n
    [ -n "$HA_DIR" ] || return 0
    ha_stop_group haproxy patroni-n1 patroni-n2 patroni-n3
    ha_stop_group etcd
    for n in "${HA_NODES[@]}"; do
        [ -f "$HA_DIR/$n/data/postmaster.pid" ] || continue
        p=$(head -1 "$HA_DIR/$n/data/postmaster.pid")
        # only a postgres process of ours: its command line names this data dir
        if tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q "$HA_DIR/$n/data"; then
            kill -KILL "$p" 2>/dev/null || true
        fi
    done
    rm -rf "$HA_DIR"
    HA_DIR=
    HA_PIDS=()
}
