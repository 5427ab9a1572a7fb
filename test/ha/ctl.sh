#!/usr/bin/env bash
# The failover command of the HA suite, for torture.mjs --failover
# (SP_TORTURE_FAILOVER_CMD) and adapter.mjs (SP_HA_CTL): acts on the cluster
# that test/ha/run.sh started in SP_HA_DIR.
#   ctl.sh kill         kill -9 of the leader's postmaster (and its children)
#   ctl.sh switchover   patronictl switchover to a healthy standby
#   ctl.sh settle       wait until a leader takes writes through HAProxy and
#                       every standby streams again (bounded polls)
# kill and switchover print the old leader's PostgreSQL port.
set -euo pipefail
# shellcheck disable=SC1091
. "$(dirname "$0")/cluster.sh"
HA_DIR=${SP_HA_DIR:?SP_HA_DIR names the cluster directory}
case "${1:-}" in
    kill) old=$(ha_kill_leader) && ha_pg_port "$old" ;;
    switchover) old=$(ha_switchover) && ha_pg_port "$old" ;;
    settle) ha_wait_writable 120 && ha_wait_replicas 180 ;;
    *) echo "usage: $0 kill|switchover|settle" >&2; exit 2 ;;
esac
