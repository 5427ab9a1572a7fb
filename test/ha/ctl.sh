#!/usr/bin/env bash
# The failover command of the HA suite, for torture.mjs --failover
# (SP_TORTURE_FAILOVER_CMD) and adapter.mjs (SP_HA_CTL): acts on the cluster
# that test/ha/run.sh started in SP_HA_DIR.
#   ctl.sh kill         kill -9 of the leader's postmaster (and its children); with
#                       SP_HA_SYNC=0 and SP_HA_PARTITION_MS, after a replication partition
#   ctl.sh switchover   patronictl switchover to a healthy standby
#   ctl.sh settle       wait until a leader takes writes through HAProxy and
#                       every standby streams again (bounded polls)
# kill and switchover print the old leader's PostgreSQL port.
set -euo pipefail
# shellcheck disable=SC1091
. "$(dirname "$0")/cluster.sh"
HA_DIR=${SP_HA_DIR:?SP_HA_DIR names the cluster directory}
case "${1:-}" in
    kill)
        # Asynchronous mode: first a partition of SP_HA_PARTITION_MS, so that the
        # primary acknowledges commits no standby has, then the crash; the standbys
        # reconnect afterwards and one of them is promoted without those commits.
        if [ "${SP_HA_SYNC:-1}" = 0 ] && [ "${SP_HA_PARTITION_MS:-0}" -gt 0 ]; then
            trap 'ha_partition_standbys CONT' EXIT
            ha_partition_standbys STOP
            sleep "$(awk -v ms="$SP_HA_PARTITION_MS" 'BEGIN { printf "%.3f", ms / 1000 }')"
        fi
        old=$(ha_kill_leader) && ha_pg_port "$old"
        ;;
    switchover) old=$(ha_switchover) && ha_pg_port "$old" ;;
    settle) ha_wait_writable 300 && ha_wait_replicas 300 ;;
    *) echo "usage: $0 kill|switchover|settle" >&2; exit 2 ;;
esac
