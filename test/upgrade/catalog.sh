#!/usr/bin/env bash
# Upgrade catalogs: is a populated $FROM database (UPGRADE_FROM, an earlier
# release, 0.1.0 unless set), after ALTER EXTENSION
# sandbox_persist UPDATE, the same as a fresh installation of the current
# version, object for object, owner for owner, privilege for privilege?
#
# Against the cluster named by PGHOST/PGPORT/PGUSER (a superuser) it creates
# two databases: one with CREATE EXTENSION sandbox_persist (the full script
# make builds from sql/sandbox_persist.sql: checked, see below), one with
# CREATE EXTENSION sandbox_persist VERSION $FROM, every store filled
# (test/backup/populate.sql, as an application role given the store functions
# by grant_app_role) and then ALTER EXTENSION sandbox_persist UPDATE. The
# application role's grants are then withdrawn (revoke_app_role for those
# grant_app_role made as sandbox_persist_owner, DROP OWNED BY for those 0.1.0's
# made as the superuser): they are the user's, not the extension's, and their carrying over is checked by data.sh.
# The two are compared three ways, and every comparison must be empty:
#  1. pg_dump --schema-only, not normalised at all: the schema, the
#     extension, and every privilege that differs from the initial ones
#     (pg_init_privs). The fresh one must also hold no GRANT or REVOKE.
#  2. pg_dump --schema-only --binary-upgrade, which writes out every member of
#     the extension (tables, columns, constraints, indexes, views, functions,
#     comments, owners, initial privileges), normalised only for physical
#     identifiers (OIDs, relfilenodes, frozen transaction ids, column LSNs,
#     dropped columns, stored defaults of added columns) and for the sequence
#     positions it writes too (data: one database is populated).
#  3. catalog.sql: every member's owner, ACL, initial privileges, proconfig,
#     SECURITY DEFINER, definition, columns, constraints, indexes; the
#     schema's; the tables and sequences registered for pg_dump.
#  4. (init_privs.sh, IP1-IP4) the initial privileges of both leave nothing
#     stale after pg_dump/pg_restore, DROP EXTENSION and DROP SCHEMA.
#
# Prints one closing line
#   summary: upgrade catalogs: fresh <v> and <from> updated: <a> dump lines, <b> binary-upgrade dump lines, <c> catalog facts compared, <d> differences
# and exits non-zero on any difference or error.
set -euo pipefail
# shellcheck disable=SC1091
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib/stores.sh"
# shellcheck disable=SC1091
. "$HERE/release_lib.sh"
FROM=${UPGRADE_FROM:-0.1.0}
FRESH=sandbox_persist_catalog_fresh
UPGRADED=sandbox_persist_catalog_upgraded
APP=sandbox_persist_catalog_app
WORK=$(mktemp -d)
start=$(date +%s%N)
T0=$(( $(date +%s) * 1000 ))

drop_all() {
    psql_su -c "DROP DATABASE IF EXISTS $FRESH" -c "DROP DATABASE IF EXISTS $UPGRADED" \
        -c "DROP DATABASE IF EXISTS ${FRESH}_restored" -c "DROP DATABASE IF EXISTS ${UPGRADED}_restored" \
        -c "DROP DATABASE IF EXISTS sandbox_persist_catalog_sv" -c "DROP ROLE IF EXISTS $APP" >/dev/null 2>&1 || true
}
cleanup() {
    drop_all
    if [ -n "${SANDBOX_PERSIST_KEEP_UPGRADE:-}" ]; then echo "outputs kept in $WORK" >&2; else rm -rf "$WORK"; fi
}
fail() {
    echo "upgrade catalogs: $*" >&2
    echo "summary: upgrade catalogs: error: $*"
    exit 1
}
trap cleanup EXIT
drop_all

create_db "$FRESH" || fail "could not create $FRESH"
create_db "$UPGRADED" || fail "could not create $UPGRADED"
psql_su -c "CREATE ROLE $APP NOLOGIN" || fail "could not create the application role"
psql -X -q -v ON_ERROR_STOP=1 -d "$FRESH" -c "CREATE EXTENSION sandbox_persist" \
    || fail "CREATE EXTENSION failed"
# $FROM's own library writes its schema when the current one refuses it
# (release_lib.sh: only into the private copy of the install run.sh makes).
old_lib=0
if release_lib_needed "$FROM"; then
    release_lib_use "$FROM" || fail "the library of $FROM could not be built"
    old_lib=1
fi
psql -X -q -v ON_ERROR_STOP=1 -d "$UPGRADED" -c "CREATE EXTENSION sandbox_persist VERSION '$FROM'" \
    || fail "CREATE EXTENSION ... VERSION '$FROM' failed"
psql -X -q -d "$UPGRADED" -v t0="$T0" -v app="$APP" -f "$STORES/populate.sql" >"$WORK/populate.out" 2>&1 \
    || { cat "$WORK/populate.out"; fail "populating the $FROM database failed"; }
if [ "$old_lib" = 1 ]; then release_lib_current || fail "the current library could not be put back in the private copy"; fi

# SV1/SV2 (docs/architecture.md, "Stable C symbols"): before the update, the
# current library refuses what needs a newer layout than $FROM's with 55000
# and the hint to update (SV1), and serves a schema that has it (SV2).
# sv_probe TAG [CALLS]: SQL that runs CALLS (PL/pgSQL statements; default a
# maintain(0), which needs the newest layout) and prints "TAG: served" or "TAG: <sqlstate> <message> / <hint>".
sv_probe() {
    cat <<SQL
DO \$\$
DECLARE st text; msg text; hint text;
BEGIN
    ${2:-PERFORM sandbox_persist.maintain(0);}
    RAISE NOTICE '$1: served';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, hint = PG_EXCEPTION_HINT;
    RAISE NOTICE '$1: % % / %', st, msg, hint;
END
\$\$;
SQL
}
# sv_blob_probe TAG CODEC: sv_probe of a 5000-byte put with sandbox_persist.blob_codec = CODEC.
sv_blob_probe() {
    sv_probe "$1" "PERFORM set_config('sandbox_persist.blob_codec', '$2', true);
    PERFORM sandbox_persist.blob_put('sv5-probe/$2', convert_to(repeat('lz4 or zstd ', 500), 'UTF8'));"
}
REFUSED="55000 the sandbox_persist schema of this database is older than its library / Run ALTER EXTENSION sandbox_persist UPDATE."
sv=$(sv_probe sv | psql -X -A -t -d "$UPGRADED" 2>&1)
if [ "$old_lib" = 1 ]; then
    grep -qF "sv: $REFUSED" <<<"$sv" \
        || fail "SV1 maintain on a $FROM schema with the current library: $sv"
    echo "ok SV1 the current library refuses maintain on a $FROM schema: 55000, hint ALTER EXTENSION sandbox_persist UPDATE"
    # SV3/SV4: a backend remembers that the schema was new enough
    # (schema_version.c), and forgets it when the schema goes back to $FROM
    # by DROP and CREATE EXTENSION, in another backend (SV3) or its own (SV4);
    # after ALTER EXTENSION UPDATE it is served again at once.
    SV=sandbox_persist_catalog_sv
    psql_su -c "DROP DATABASE IF EXISTS $SV" >/dev/null 2>&1 || true
    create_db "$SV" || fail "could not create $SV"
    recreate="DROP EXTENSION sandbox_persist; DROP SCHEMA IF EXISTS sandbox_persist; CREATE EXTENSION sandbox_persist VERSION '$FROM';"
    sv=$( { psql -X -q -d "$SV" -c "CREATE EXTENSION sandbox_persist" >/dev/null
            sv_probe sv_current
            echo "\\! psql -X -q -d $SV -c \"$recreate\""
            sv_probe sv3
            echo "ALTER EXTENSION sandbox_persist UPDATE;"
            sv_probe sv_updated
            echo "$recreate"
            sv_probe sv4; } | psql -X -A -t -d "$SV" 2>&1)
    psql_su -c "DROP DATABASE IF EXISTS $SV" >/dev/null 2>&1 || true
    grep -qF "sv_current: served" <<<"$sv" && grep -qF "sv3: $REFUSED" <<<"$sv" \
        || fail "SV3 a backend that served the current schema, after another dropped it and created $FROM: $sv"
    echo "ok SV3 a backend that served the current schema refuses once another backend recreated it at $FROM"
    grep -qF "sv_updated: served" <<<"$sv" && grep -qF "sv4: $REFUSED" <<<"$sv" \
        || fail "SV4 a backend that served the updated schema, after it dropped it and created $FROM itself: $sv"
    echo "ok SV4 after ALTER EXTENSION UPDATE the same backend serves at once, and refuses again after its own DROP and CREATE EXTENSION VERSION '$FROM'"
else
    grep -qF "sv: served" <<<"$sv" || fail "SV2 maintain on a $FROM schema with the current library: $sv"
    echo "ok SV2 the current library serves maintain on a $FROM schema (the layout it needs)"
    # SV5: the codec constraints of a schema before 0.4.0 admit no lz4
    # (BLOB_LZ4_SINCE), so the library refuses to write it there, before
    # anything is stored, and writes zstd as before.
    sv=$( { sv_blob_probe sv5_lz4 lz4; sv_blob_probe sv5_zstd zstd; } | psql -X -A -t -d "$UPGRADED" 2>&1)
    grep -qF "sv5_lz4: $REFUSED" <<<"$sv" && grep -qF "sv5_zstd: served" <<<"$sv" \
        || fail "SV5 blob_put with blob_codec lz4 and zstd on a $FROM schema: $sv"
    [ "$(psql -X -A -t -d "$UPGRADED" -c "SELECT count(*) FROM sandbox_persist.blobs WHERE blob_key = 'sv5-probe/lz4'")" = 0 ] \
        || fail "SV5 the refused lz4 put stored its object"
    psql -X -q -d "$UPGRADED" -c "DELETE FROM sandbox_persist.blobs WHERE blob_key = 'sv5-probe/zstd'" >/dev/null \
        || fail "SV5 could not remove its probe object"
    echo "ok SV5 on a $FROM schema the current library refuses blob_put with blob_codec lz4 (55000, hint ALTER EXTENSION sandbox_persist UPDATE) and stores nothing, and writes zstd"
fi
psql -X -q -v ON_ERROR_STOP=1 -d "$UPGRADED" -c "ALTER EXTENSION sandbox_persist UPDATE" \
    -c "SELECT sandbox_persist.revoke_app_role('$APP')" -c "DROP OWNED BY $APP" || fail "ALTER EXTENSION sandbox_persist UPDATE failed"
version=$(ext_version "$FRESH")
# The fresh install ran the full script built from sql/sandbox_persist.sql
# (CREATE EXTENSION prefers a version's own script to any upgrade path): the
# installed script is make's output, and the fresh catalog holds none of the
# upgrade path's traces (0.3.0 dropped two columns of checkpoints).
built=$ROOT/sql/sandbox_persist--$version.sql
installed=$("${PG_CONFIG:-pg_config}" --sharedir)/extension/sandbox_persist--$version.sql
[ -f "$built" ] || fail "$built is missing: run make (it is built from sql/sandbox_persist.sql)"
cmp -s "$built" "$installed" || fail "the installed $installed is not the built $built: run make install"
[ "$(psql -X -A -t -d "$FRESH" -c "SELECT count(*) FROM pg_catalog.pg_attribute
       WHERE attrelid = 'sandbox_persist.checkpoints'::regclass AND attisdropped")" = 0 ] \
    || fail "the fresh install was not made by the built full script (it holds dropped columns)"
[ "$(ext_version "$UPGRADED")" = "$version" ] \
    || fail "the update reached $(ext_version "$UPGRADED"), a fresh install is $version"
[ "$(psql -X -A -t -d "$UPGRADED" -c 'SELECT count(*) > 0 FROM sandbox_persist.runs')" = t ] \
    || fail "the upgraded database holds no runs: populating it did not work"

# normalise: only what is physical, never what is logical (see the header).
# Three physical traces of an upgrade path are dropped too: the placeholders of
# dropped columns (0.3.0 dropped checkpoints.conversation and .seq; pg_dump 15
# recreates each in its own block, 17 and later in one UPDATE of
# pg_attribute followed by the DROP COLUMNs), the stored
# "missing value" of a column added with a default (ALTER TABLE ... ADD COLUMN
# ... DEFAULT keeps it for the rows that existed), and the conditions array of
# the registered tables, whose length counts the sequence of the dropped
# checkpoints.seq (still in extconfig, no longer a relation); catalog.sql
# compares each registered table's condition by name, and the columns' order
# by their position among the live ones.
normalise() {
    sed -E \
        -e "s/(binary_upgrade_set_next_[a-z_]+)\('[^']*'/\1('<id>'/" \
        -e "s/(binary_upgrade_set_next_attribute_versions)\('[^']*'/\1('<lsn>'/" \
        -e "s/^SET relfrozenxid = '[0-9]+', relminmxid = '[0-9]+'$/SET relfrozenxid = '<xid>', relminmxid = '<mxid>'/" \
        -e "s/^WHERE oid = '[0-9]+';$/WHERE oid = '<toast oid>';/" \
        -e "s/^(SELECT pg_catalog.setval\('[^']*', )[0-9]+, (true|false)\);$/\1<position>);/" \
        -e "s/(binary_upgrade_create_empty_extension\('sandbox_persist', '[^']*', (true|false), '[^']*', )'\{[0-9,]*\}', '\{[^}]*\}'/\1'<oids of the registered tables>', '<their conditions>'/" \
        -e '/^-- For binary upgrade, recreate dropped column\.$/,/ DROP COLUMN "\.+pg\.dropped\.[0-9]+\.+";$/d' \
        -e '/^-- For binary upgrade, recreate dropped columns\.$/,/^  AND attname = v\.dname;$/d' \
        -e '/^ALTER TABLE ONLY [a-z_.]+ DROP COLUMN "\.+pg\.dropped\.[0-9]+\.+";$/d' \
        -e '/^    "\.+pg\.dropped\.[0-9]+\.+" INTEGER \/\* dummy \*\/,$/d' \
        -e '/^-- set missing value\.$/,/binary_upgrade_set_missing_value\(/d' |
        cat -s
}
errors=0
for db in "$FRESH" "$UPGRADED"; do
    "$PG_DUMP" "${DUMP_OPTS[@]}" --schema-only -d "$db" -f "$WORK/dump.$db.sql" \
        || { errors=$((errors + 1)); echo "pg_dump of $db failed" >&2; }
    "$PG_DUMP" "${DUMP_OPTS[@]}" --schema-only --binary-upgrade -d "$db" -f "$WORK/binary.$db.raw" \
        || { errors=$((errors + 1)); echo "pg_dump --binary-upgrade of $db failed" >&2; }
    normalise <"$WORK/binary.$db.raw" >"$WORK/binary.$db.sql"
    psql -X -d "$db" -f "$HERE/catalog.sql" >"$WORK/catalog.$db.txt" 2>"$WORK/catalog.$db.err" \
        || { errors=$((errors + 1)); cat "$WORK/catalog.$db.err" >&2; }
done

# differ NAME FILE_A FILE_B: print the diff, output its number of changed lines.
differ() {
    local out
    out=$(diff -u --label "fresh $version: $1" --label "$FROM updated: $1" "$2" "$3" || true)
    if [ -n "$out" ]; then printf '%s\n' "$out" | head -200 >&2; fi
    printf '%s\n' "$out" | grep -c '^[-+][^-+]' || true
}
d1=$(differ "pg_dump --schema-only" "$WORK/dump.$FRESH.sql" "$WORK/dump.$UPGRADED.sql")
d2=$(differ "pg_dump --schema-only --binary-upgrade" "$WORK/binary.$FRESH.sql" "$WORK/binary.$UPGRADED.sql")
d3=$(differ "catalog facts" "$WORK/catalog.$FRESH.txt" "$WORK/catalog.$UPGRADED.txt")
stray=$(grep -Ec '^(GRANT|REVOKE) ' "$WORK/dump.$FRESH.sql" || true)
if [ "$stray" -ne 0 ]; then
    echo "upgrade catalogs: the dump of a fresh install holds $stray GRANT/REVOKE statements:" >&2
    grep -E '^(GRANT|REVOKE) ' "$WORK/dump.$FRESH.sql" >&2
fi
a=$(wc -l <"$WORK/dump.$FRESH.sql")
b=$(wc -l <"$WORK/binary.$FRESH.sql")
c=$(wc -l <"$WORK/catalog.$FRESH.txt")
# Sanity: every comparison saw the extension's objects.
grep -q 'CREATE EXTENSION IF NOT EXISTS sandbox_persist' "$WORK/dump.$FRESH.sql" || { errors=$((errors + 1)); echo "the dump holds no CREATE EXTENSION" >&2; }
grep -q 'CREATE FUNCTION sandbox_persist._harden()' "$WORK/binary.$FRESH.sql" || { errors=$((errors + 1)); echo "the binary-upgrade dump holds no functions" >&2; }
[ "$c" -gt 1000 ] || { errors=$((errors + 1)); echo "catalog.sql gave only $c facts" >&2; }
differences=$((d1 + d2 + d3 + stray))

# IP1-IP4 (init_privs.sh): the initial privileges _harden() writes leave
# nothing stale after a dump and restore or DROP EXTENSION, in both databases.
# shellcheck disable=SC1091
. "$HERE/init_privs.sh"
ip_failures=0
for db in "$FRESH" "$UPGRADED"; do
    init_privs_check "$db" "$APP" || ip_failures=$((ip_failures + $?))
done
errors=$((errors + ip_failures))

elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
echo "upgrade catalogs: $d1 + $d2 + $d3 differing lines, $stray stray GRANT/REVOKE, $errors errors, ${elapsed} ms"
echo "summary: upgrade catalogs: fresh $version and $FROM updated: $a dump lines, $b binary-upgrade dump lines, $c catalog facts compared, $differences differences; initial privileges (IP1-IP4, dump/restore and DROP EXTENSION): $ip_failures failures"
[ "$differences" -eq 0 ] && [ "$errors" -eq 0 ]
