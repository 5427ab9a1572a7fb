# Sourced by the dump-and-restore and upgrade suites: the shared helpers.
# shellcheck shell=bash
# shellcheck disable=SC2034  # the variables are used by the scripts that source this
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# The store scripts of the dump-and-restore suite fill and read every store.
STORES=$ROOT/test/backup
# The server's own client programs when PG_CONFIG names them (pg_dump must be
# at least as new as the server), else those on PATH.
PGBIN=$("${PG_CONFIG:-pg_config}" --bindir 2>/dev/null || true)
if [ -n "$PGBIN" ] && [ -x "$PGBIN/pg_dump" ]; then PG_DUMP=$PGBIN/pg_dump; else PG_DUMP=pg_dump; fi
# DUMP_OPTS: options for every pg_dump. pg_dump since 15.14 writes \restrict
# lines with a random key unless given one.
# (The help text is read whole first: grep -q would stop early, and pipefail
# would report pg_dump's broken pipe.)
dump_help=$("$PG_DUMP" --help 2>/dev/null || true)
DUMP_OPTS=()
if [[ $dump_help == *--restrict-key* ]]; then DUMP_OPTS+=(--restrict-key=sandboxpersistupgrade); fi
# pg_dump 18 can write planner statistics; they are data, not catalog.
if [[ $dump_help == *--no-statistics* ]]; then DUMP_OPTS+=(--no-statistics); fi

# psql_su ARGS...: psql as the superuser in the administration database.
psql_su() { psql -X -q -v ON_ERROR_STOP=1 -d "${PGDATABASE:-postgres}" "$@"; }

# create_db NAME: a UTF8 database whose sessions may inject the clock.
create_db() {
    psql_su -c "CREATE DATABASE $1 TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C.UTF-8'" \
        -c "ALTER DATABASE $1 SET sandbox_persist.allow_client_clock = on"
}

# ext_version DB: the installed version of the extension in DB.
ext_version() {
    psql -X -A -t -d "$1" -c "SELECT extversion FROM pg_extension WHERE extname = 'sandbox_persist'"
}

# default_version: the version CREATE EXTENSION installs (the control file's).
default_version() {
    psql_su -A -t -c "SELECT default_version FROM pg_available_extensions WHERE name = 'sandbox_persist'"
}

# compare NAME A B: A and B hold lines "<kind>\t<store>\t<label>\t<result>";
# compare the results by (kind, store, label), print each difference to
# stderr, output "<compared> <differences>".
compare() {
    awk -F '\t' -v name="$1" '
        FNR == 1 { side++ }
        {
            key = $1 FS $2 FS $3
            val = substr($0, length(key) + 2)
            if (!(key in seen)) { seen[key] = 1; order[++n] = key }
            if (side == 1) a[key] = val; else b[key] = val
        }
        END {
            d = 0
            for (i = 1; i <= n; i++) {
                k = order[i]
                if (!(k in a) || !(k in b) || a[k] != b[k]) {
                    d++
                    shown = k
                    gsub(FS, " | ", shown)
                    printf "DIFFERENCE (%s) %s\n  first:  %s\n  second: %s\n", name, shown,
                        (k in a) ? a[k] : "(missing)", (k in b) ? b[k] : "(missing)" > "/dev/stderr"
                }
            }
            print n, d
        }' "$2" "$3"
}
