#!/usr/bin/env bash
# Sourced by catalog.sh: initial privileges leave nothing stale (IP1-IP4,
# docs/architecture.md, "Initial privileges"). _harden() writes
# pg_init_privs itself (PostgreSQL 15 keeps no record of an owner change
# there), so for a database DB, with an application role APP granted:
#   IP1 test/upgrade/init_privs.sql finds nothing stale or missing;
#   IP2 pg_dump and pg_restore into a new database: the same initial
#       privileges of every member (catalog.sql's lines), and IP1 there too;
#   IP3 DROP EXTENSION leaves no pg_init_privs or pg_shdepend row of any
#       member; the schema survives it (PostgreSQL drops only members) and
#       DROP SCHEMA then leaves none of the schema's either;
#   IP4 revoke_app_role and DROP ROLE of the application role succeed.
# init_privs_check DB APP: run the four, print "ok IPn ..." lines; return the
# number of failures (0 when all hold). Uses psql, psql_su, create_db,
# $PG_DUMP, $HERE and $WORK of catalog.sh.
init_privs_check() {
    local db=$1 app=$2 restored=${1}_restored failures=0 out
    psql_su -c "DROP DATABASE IF EXISTS $restored" >/dev/null 2>&1
    psql -X -q -v ON_ERROR_STOP=1 -d "$db" -c "SELECT sandbox_persist.grant_app_role('$app')" >/dev/null \
        || { echo "init privileges: grant_app_role in $db failed" >&2; return 1; }
    out=$(psql -X -d "$db" -f "$HERE/init_privs.sql" 2>&1)
    if [ -z "$out" ]; then echo "ok IP1 $db: initial privileges and their shared dependencies agree"
    else echo "not ok IP1 $db: $out" >&2; failures=$((failures + 1)); fi

    "$PG_DUMP" -Fc -d "$db" -f "$WORK/ip.$db.dump" || { echo "init privileges: pg_dump of $db failed" >&2; return 1; }
    create_db "$restored" || return 1
    pg_restore --exit-on-error -d "$restored" "$WORK/ip.$db.dump" 2>"$WORK/ip.$db.restore.err" \
        || { cat "$WORK/ip.$db.restore.err" >&2; echo "init privileges: pg_restore into $restored failed" >&2; return 1; }
    for d in "$db" "$restored"; do
        psql -X -d "$d" -f "$HERE/catalog.sql" | grep -P '\t(initial privileges|acl)\t' >"$WORK/ip.$d.txt"
    done
    out=$(psql -X -d "$restored" -f "$HERE/init_privs.sql" 2>&1)
    if diff -q "$WORK/ip.$db.txt" "$WORK/ip.$restored.txt" >/dev/null && [ -z "$out" ] \
        && [ "$(wc -l <"$WORK/ip.$db.txt")" -gt 100 ]; then
        echo "ok IP2 $db dumped and restored: $(wc -l <"$WORK/ip.$db.txt") privilege facts the same, nothing stale"
    else
        diff -u "$WORK/ip.$db.txt" "$WORK/ip.$restored.txt" | head -40 >&2
        echo "not ok IP2 $db dumped and restored: ${out:-privileges differ}" >&2; failures=$((failures + 1))
    fi

    for d in "$db" "$restored"; do
        out=$(psql -X -q -A -t -v ON_ERROR_STOP=1 -d "$d" 2>&1 <<SQL
SET client_min_messages = warning;
SELECT sandbox_persist.revoke_app_role('$app');
CREATE TEMP TABLE ip_members AS
    SELECT classid, objid FROM pg_catalog.pg_depend
     WHERE refclassid = 'pg_catalog.pg_extension'::regclass AND deptype = 'e'
       AND refobjid = (SELECT oid FROM pg_catalog.pg_extension WHERE extname = 'sandbox_persist');
CREATE TEMP TABLE ip_schema AS
    SELECT 'pg_catalog.pg_namespace'::regclass AS classid, 'sandbox_persist'::regnamespace::oid AS objid;
DROP EXTENSION sandbox_persist;
SELECT 'members left: ' || (SELECT count(*) FROM pg_catalog.pg_init_privs i JOIN ip_members m
                              ON i.classoid = m.classid AND i.objoid = m.objid)
       || ' pg_init_privs, ' || (SELECT count(*) FROM pg_catalog.pg_shdepend s JOIN ip_members m
                              ON s.classid = m.classid AND s.objid = m.objid
                             WHERE s.dbid = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database()))
       || ' pg_shdepend';
DROP SCHEMA sandbox_persist;
SELECT 'schema left: ' || (SELECT count(*) FROM pg_catalog.pg_init_privs i JOIN ip_schema m
                              ON i.classoid = m.classid AND i.objoid = m.objid)
       || ' pg_init_privs, ' || (SELECT count(*) FROM pg_catalog.pg_shdepend s JOIN ip_schema m
                              ON s.classid = m.classid AND s.objid = m.objid
                             WHERE s.dbid = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database()))
       || ' pg_shdepend';
SQL
)
        out=$(printf '%s\n' "$out" | grep -v '^$' | grep -v '^revoke_app_role\|^$' || true)
        out2=$(psql -X -d "$d" -f "$HERE/init_privs.sql" 2>&1)
        if grep -qx 'members left: 0 pg_init_privs, 0 pg_shdepend' <<<"$out" \
            && grep -qx 'schema left: 0 pg_init_privs, 0 pg_shdepend' <<<"$out" && [ -z "$out2" ]; then
            echo "ok IP3 $d: DROP EXTENSION, then DROP SCHEMA, leave no initial privileges or shared dependencies"
        else
            echo "not ok IP3 $d: $out $out2" >&2; failures=$((failures + 1))
        fi
    done
    if psql_su -c "DROP ROLE $app" >/dev/null 2>"$WORK/ip.droprole.err"; then
        echo "ok IP4 DROP ROLE $app after revoke_app_role"
        psql_su -c "CREATE ROLE $app NOLOGIN" >/dev/null
    else
        echo "not ok IP4 DROP ROLE $app: $(cat "$WORK/ip.droprole.err")" >&2; failures=$((failures + 1))
    fi
    psql_su -c "DROP DATABASE IF EXISTS $restored" >/dev/null 2>&1
    return "$failures"
}
