#!/usr/bin/env bash
# Install (or refresh) the sandbox_persist router in one database.
#
#   bash router/install.sh ROUTER_DSN SHARD_DSN...
#
# The shard count must be a power of 2 (PL/Proxy picks partition = hash &
# (count - 1)). Steps: router/base.sql; the PL/Proxy cluster
# sandbox_persist_shards with one pN option per shard; the proxies generated
# from the first shard's installed catalog and router/routes.tsv
# (router/generate.sql); the hand-written routes (router/custom.sql); the
# cross-shard fork and move orchestration (router/cross_shard.sql) when present;
# then router/check.sql, which fails when the router's functions differ from
# the shard's (a function without a route, or a changed signature).
set -euo pipefail
DIR=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 2 ]; then
    echo "usage: $0 ROUTER_DSN SHARD_DSN..." >&2
    exit 2
fi
router=$1
shift
n=$#
case "$n" in 1 | 2 | 4 | 8 | 16 | 32 | 64) ;; *) echo "install.sh: $n shards: the count must be a power of 2" >&2; exit 2 ;; esac
psql_r() { psql -X -q -v ON_ERROR_STOP=1 -d "$router" "$@"; }

psql_r -f "$DIR/base.sql"

# The cluster: one pN option per shard, in order (pN is partition N). The
# connection strings are kept as given; a user mapping for PUBLIC lets every
# router role reach the shards as the user named there.
opts="connection_lifetime '1800'"
i=0
for d in "$@"; do
    opts="$opts, p$i '${d//\'/\'\'}'"
    i=$((i + 1))
done
psql_r <<SQL
DROP SERVER IF EXISTS sandbox_persist_shards CASCADE;
CREATE SERVER sandbox_persist_shards FOREIGN DATA WRAPPER plproxy OPTIONS ($opts);
CREATE USER MAPPING FOR PUBLIC SERVER sandbox_persist_shards;
SQL

# Generated proxies: the shard's catalog joined with the routing table.
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
psql -X -q -v ON_ERROR_STOP=1 -d "$1" -At \
    -f "$DIR/generate.sql" >"$tmp" < <(grep -v "^#" "$DIR/routes.tsv")
psql_r -f "$tmp"
psql_r -f "$DIR/custom.sql"
if [ -f "$DIR/cross_shard.sql" ]; then
    psql_r -f "$DIR/cross_shard.sql"
fi
# Like the extension: nothing is callable by PUBLIC; grant_app_role grants a role.
psql_r -c "REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA sandbox_persist FROM PUBLIC"
# The check compares signatures with the shard's catalog.
psql -X -q -v ON_ERROR_STOP=1 -d "$1" -At -c "
    SELECT p.proname || '(' || pg_get_function_arguments(p.oid) || ') -> ' || pg_get_function_result(p.oid)
    FROM pg_proc p WHERE p.pronamespace = 'sandbox_persist'::regnamespace ORDER BY 1" >"$tmp"
internal=$(awk -F'\t' '!/^#/ && $2 == "shard" { print $1 }' "$DIR/routes.tsv" | paste -sd'|')
psql_r -v internal="$internal" -f "$DIR/check.sql" <"$tmp"
echo "router installed: $n shard(s)"
