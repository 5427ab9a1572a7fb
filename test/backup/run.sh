#!/usr/bin/env bash
# Dump and restore: does a pg_dump of a populated database restore into one
# that behaves exactly like the original?
#
# Against the cluster named by PGHOST/PGPORT/PGUSER (a superuser), it creates
# a source database with the extension, fills every store (populate.sql), dumps
# it with pg_dump -Fc and restores it with pg_restore into a new database. Then,
# in both databases, it reads every store (reads.sql), performs the same
# further writes to every store (writes.sql) and reads again, and compares
# every write result and every read, as text, between the two. The writes and
# reads run as an application role given the store functions by
# grant_app_role; clocks are injected (now_ms), so the two databases see the
# same times. The databases and the role are dropped at the end.
#
# Prints one closing line
#   summary: dump and restore: <N> stores written after restore, <M> reads compared, <K> differences
# and exits non-zero on any difference or error.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck disable=SC1091
. "$HERE/../lib/stores.sh"
SRC=sandbox_persist_backup_src
DST=sandbox_persist_backup_dst
APP=sandbox_persist_backup_app
WORK=$(mktemp -d)
start=$(date +%s%N)
# The injected clock, the same in both databases.
T0=$(( $(date +%s) * 1000 ))

cleanup() {
    psql_su -c "DROP DATABASE IF EXISTS $SRC" -c "DROP DATABASE IF EXISTS $DST" \
        -c "DROP ROLE IF EXISTS $APP" >/dev/null 2>&1 || true
    if [ -n "${SANDBOX_PERSIST_KEEP_BACKUP:-}" ]; then echo "outputs kept in $WORK" >&2; else rm -rf "$WORK"; fi
}
fail() {
    echo "dump and restore: $*" >&2
    echo "summary: dump and restore: 0 stores written after restore, 0 reads compared, error: $*"
    exit 1
}
trap cleanup EXIT
cleanup
mkdir -p "$WORK"

create_db "$SRC" || fail "could not create the source database"
psql_su -c "CREATE ROLE $APP NOLOGIN" || fail "could not create the application role"
psql_su -d "$SRC" -c "CREATE EXTENSION sandbox_persist" || fail "CREATE EXTENSION failed"
psql -X -q -d "$SRC" -v t0="$T0" -v app="$APP" -f "$HERE/populate.sql" >"$WORK/populate.out" 2>&1 \
    || { cat "$WORK/populate.out"; fail "populating the source database failed"; }

pg_dump -Fc -d "$SRC" -f "$WORK/source.dump" || fail "pg_dump failed"
create_db "$DST" || fail "could not create the restore database"
pg_restore --exit-on-error -d "$DST" "$WORK/source.dump" 2>"$WORK/restore.err" \
    || { cat "$WORK/restore.err"; fail "pg_restore failed"; }
if [ -s "$WORK/restore.err" ]; then
    cat "$WORK/restore.err"
    fail "pg_restore reported problems"
fi

# step NAME SCRIPT: run one script in both databases, keep outputs and errors.
step() {
    local db
    for db in "$SRC" "$DST"; do
        psql -X -d "$db" -v t0="$T0" -v app="$APP" -f "$HERE/$2" \
            >"$WORK/$1.$db.out" 2>"$WORK/$1.$db.err" || true
    done
}
step restored reads.sql
step writes writes.sql
step after reads.sql

errors=0
for f in "$WORK"/*.err; do
    if grep -q . "$f"; then
        echo "-- messages from $(basename "$f" .err):"
        cat "$f"
        errors=$((errors + $(grep -Eci 'error|fatal' "$f" || true)))
    fi
done

read -r m1 d1 < <(compare restored "$WORK/restored.$SRC.out" "$WORK/restored.$DST.out")
read -r w2 d2 < <(compare writes "$WORK/writes.$SRC.out" "$WORK/writes.$DST.out")
read -r m3 d3 < <(compare after "$WORK/after.$SRC.out" "$WORK/after.$DST.out")
reads=$((m1 + m3))
# An empty output on both sides compares equal: a run that read nothing failed.
if [ "$m1" -eq 0 ] || [ "$m3" -eq 0 ] || [ "$w2" -eq 0 ]; then
    echo "dump and restore: a step produced no output" >&2
    errors=$((errors + 1))
fi
differences=$((d1 + d2 + d3))
stores=$(awk -F '\t' '$1 == "W" { s[$2] = 1 } END { print length(s) }' "$WORK/writes.$DST.out")

elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
echo "dump and restore: $w2 write results compared, $errors errors, ${elapsed} ms"
echo "summary: dump and restore: $stores stores written after restore, $reads reads compared, $differences differences"
[ "$differences" -eq 0 ] && [ "$errors" -eq 0 ]
