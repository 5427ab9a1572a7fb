# bench/suites/_common.bash: helpers shared by the stores and scaling suites
# (sourced; the runner only runs bench/suites/*.sh). See bench/README.md,
# "Suite format", for the lines a suite prints.
export LC_ALL=C LC_NUMERIC=C
QUICK=${QUICK:-0}
BENCH_SYNC=${BENCH_SYNC:-off}
case "$BENCH_SYNC" in on | off) ;; *) echo "BENCH_SYNC must be on or off" >&2; exit 2 ;; esac
PGBENCH=${PGBENCH:-$(command -v pgbench || echo "$("${PG_CONFIG:-pg_config}" --bindir)/pgbench")}
# Every session of a suite, pgbench's included, runs with the chosen
# synchronous_commit and a statement timeout (a broken build cannot hang).
export PGOPTIONS="-c synchronous_commit=$BENCH_SYNC -c statement_timeout=300s -c client_min_messages=warning"
ADMIN_DB=${PGDATABASE:-postgres}

say() { echo "$*" >&2; }
# psql against the suite's database ($DB), quiet, stopping at the first error
q() { psql -X -q -v ON_ERROR_STOP=1 -d "$DB" "$@"; }
val() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$DB" -c "$1"; }

# bench_db NAME: create a fresh scratch database with sandbox_persist; dropped on exit.
bench_db() {
    DB=$1
    psql -X -q -d "$ADMIN_DB" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null
    psql -X -q -v ON_ERROR_STOP=1 -d "$ADMIN_DB" -c "CREATE DATABASE $DB" >/dev/null || exit 2
    trap 'psql -X -q -d "$ADMIN_DB" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1' EXIT
    q -c "CREATE EXTENSION sandbox_persist" >/dev/null || exit 2
}

# median of the numbers given as arguments (space-separated lists)
median() {
    tr ' ' '\n' <<<"$*" | grep -v '^$' | sort -g | awk '{ v[NR] = $1 }
        END { if (NR == 0) print "nan"; else if (NR % 2) printf "%.6g\n", v[(NR + 1) / 2];
              else printf "%.6g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# a / b with three significant digits
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0 || a == "nan" || b == "nan") print "nan"; else printf "%.3g\n", a / b }'; }

# next_xid: the next transaction id of the cluster. A transaction draws an id
# when it first writes, and only a writing commit waits for a WAL flush under
# synchronous_commit = on; reading the figure draws none.
next_xid() { val "SELECT pg_snapshot_xmax(pg_current_snapshot())"; }

# pgb SCRIPT CLIENTS ARGS...: run pgbench (prepared statements), QUICK: a fixed
# number of transactions per client, else BENCH_SECONDS seconds. Sets PB_TPS,
# PB_TXNS and PB_COMMITS (writing commits per pgbench transaction: transaction
# ids drawn, cluster-wide, so nothing else may write meanwhile).
pgb() {
    local script=$1 clients=$2 out c0 c1 len
    shift 2
    if [ "$QUICK" = 1 ]; then len=(-t "${BENCH_TXNS:-150}"); else len=(-T "${BENCH_SECONDS:-1}"); fi
    c0=$(next_xid)
    if ! out=$("$PGBENCH" -n -M prepared -c "$clients" -j "$(( clients < 2 ? clients : 2 ))" "${len[@]}" \
                 -f "$script" "$@" "$DB" 2>&1) || grep -q 'aborted' <<<"$out"; then
        say "pgbench $script ($clients clients) failed:"; say "$(tail -n 15 <<<"$out")"
        return 1
    fi
    c1=$(next_xid)
    PB_TPS=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)$/\1/p' <<<"$out")
    PB_TXNS=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
    [ -n "$PB_TPS" ] && [ -n "$PB_TXNS" ] && [ "$PB_TXNS" -gt 0 ] || { say "cannot parse pgbench output: $out"; return 1; }
    PB_COMMITS=$(awk -v a="$c0" -v b="$c1" -v n="$PB_TXNS" 'BEGIN { printf "%.2f", (b - a) / n }')
}
