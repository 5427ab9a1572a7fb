#!/usr/bin/env bash
# The memory-error suite: run the extension's C code (parsing, validation,
# blob paths and the other stores) under valgrind memcheck, and fail when
# valgrind reports an error whose stacks pass through sandbox_persist code.
#
# It starts its own throwaway cluster (own temp directory, socket directory
# and data directory; the server runs as the postgres user) with the
# postmaster and every child process under valgrind, runs pgTAP suites
# against it with pg_prove, stops it, and reads every per-process log.
#
# The extension is built with -O0 -g (through PGXS's COPT, so the Makefile's
# warning flags stay) in a scratch copy of the sources and installed into a
# private overlay of the PostgreSQL install inside the temp directory: the
# shared install, the checkout's object files and running clusters are left
# alone.
#
# Limits, worth knowing when reading a clean result:
#   - PostgreSQL's allocator (palloc, memory contexts) carves chunks out of
#     large malloc'd blocks. Unless the server was built with USE_VALGRIND
#     (Debian's is not), valgrind cannot see a read or write past the end of a
#     palloc'd chunk that stays inside its block, nor the use of a pfree'd
#     chunk whose block is still alive. It does see: uses of uninitialised
#     bytes (in branches, and in data handed to a syscall: a socket send to
#     the client, a temp or relation file write), overruns of stack, static
#     and malloc'd memory (zstd's buffers are malloc'd), bad frees, and reads
#     of memory whose whole context was deleted (e.g. after SPI_finish).
#   - The postgres binary is stripped: its frames show exported function
#     names only (static ones appear as ???); file:line appears for our -g
#     build only.
#   - MALLOC_CHECK_ and the like do nothing here: valgrind replaces malloc.
# As cheap extra coverage, work_mem is at its minimum so sorts and the
# tuplestores holding our set-returning functions' rows spill to temp files
# (whose writes valgrind checks for uninitialised bytes), and shared_buffers
# is small so pages are written out and read back.
#
# Usage: test/valgrind/run.sh [--keep] [--all | SUITE ...]
#        test/valgrind/run.sh --logs DIR
#   SUITE       a pgTAP file name under test/pgtap, or "regress" (pg_regress,
#               test/sql) or "isolation" (test/specs); default: every pgTAP
#               file but zz_cron, and regress
#   --all       the default suites and isolation
#   --keep      keep the temp directory (logs, cluster files) even when clean
#   --logs DIR  only read the logs that a kept run left in DIR
# Environment: PG_CONFIG (the install to build against and overlay);
#   SANDBOX_PERSIST_VALGRIND_PORT (default SANDBOX_PERSIST_PORT, else 54329:
#   the socket is in a private directory, so sharing a number is harmless);
#   VG_ERROR_EXITCODE (default 128, 0 to keep the cluster up after errors).
#
# The last line is always, on one line:
#   summary: valgrind: <S> suites run, <P> backend processes checked,
#            <E> errors in sandbox_persist frames, <O> other errors (suppressed: <Q>)
# E and O count distinct errors (kind and stacks), Q counts suppressed
# occurrences. Exit status is non-zero when E > 0, when a suite failed, or
# when the cluster could not be set up.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 1

# Every pgTAP suite but zz_cron.sql, which only waits for the pg_cron
# scheduler to fire and reaches no C path of ours, then "regress" (the
# pg_regress files in test/sql). The C parsing, validation and blob paths are
# in checkpoint_validation, messages, blobs, blob_storage, checkpoints, fork
# and event_log; the others cover the remaining stores. "isolation" (the
# concurrency specs in test/specs, every session a new backend under
# valgrind) is added by --all. Measured on the shared 2-core machine: 5 to 7
# minutes for the default set, 8 to 12 more for the isolation specs (the
# spread is the machine's load).
DEFAULT_SUITES=()
for f in test/pgtap/*.sql; do
    name=$(basename "$f" .sql)
    [ "$name" = zz_cron ] || DEFAULT_SUITES+=("$name")
done
DEFAULT_SUITES+=(regress)

KEEP=0
LOGS_ONLY=
SUITES=()
while [ $# -gt 0 ]; do
    arg=$1
    shift
    case "$arg" in
        --keep) KEEP=1 ;;
        --all) SUITES+=("${DEFAULT_SUITES[@]}" isolation) ;;
        --logs) LOGS_ONLY=${1:?--logs needs a directory}; shift ;;
        -h|--help) sed -n '2,54p' "$0"; exit 0 ;;
        -*) echo "unknown option: $arg" >&2; exit 2 ;;
        *) SUITES+=("${arg%.sql}") ;;
    esac
done
[ ${#SUITES[@]} -eq 0 ] && SUITES=("${DEFAULT_SUITES[@]}")

PORT=${SANDBOX_PERSIST_VALGRIND_PORT:-${SANDBOX_PERSIST_PORT:-54329}}
PG_CONFIG=${PG_CONFIG:-pg_config}
SUPP="$ROOT/test/valgrind/postgres.supp"
DB=postgres
WORK=
SERVER_PID=
FAILED=1
ran=0
suite_failures=0

# summary S P E O Q: the closing line; it says first where the temp directory
# stays when it is kept (cleanup removes it otherwise).
summary() {
    if [ -n "$WORK" ] && [ -d "$WORK" ] && { [ "$KEEP" = 1 ] || [ "$FAILED" != 0 ]; }; then
        echo "valgrind logs and cluster files kept in $WORK"
    fi
    echo "summary: valgrind: $1 suites run, $2 backend processes checked," \
        "$3 errors in sandbox_persist frames, $4 other errors (suppressed: $5)"
}

# fail_setup MESSAGE: report a set-up failure with a summary line and exit.
fail_setup() {
    echo "valgrind suite: $1" >&2
    summary "$ran" 0 0 0 0
    exit 1
}

# as_postgres COMMAND...: run a command as the postgres user (initdb and
# postgres refuse root).
as_postgres() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# cleanup: on exit, stop a server still running and remove the temp
# directory unless it holds something to look at.
# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
    if [ -n "$SERVER_PID" ] && [ -f "$WORK/data/postmaster.pid" ]; then
        as_postgres "$BINDIR/pg_ctl" -D "$WORK/data" -m immediate -w stop >/dev/null 2>&1 || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    if [ -n "$WORK" ] && [ -d "$WORK" ] && [ "$KEEP" != 1 ] && [ "$FAILED" = 0 ]; then
        rm -rf "$WORK"
    fi
}

# install_packages: the project's packages, plus valgrind itself.
install_packages() {
    bash scripts/deps.sh || fail_setup "installing packages failed"
    if ! command -v valgrind >/dev/null 2>&1; then
        local sudo=
        if [ "$(id -u)" != 0 ]; then sudo=sudo; fi
        echo "installing: valgrind"
        export DEBIAN_FRONTEND=noninteractive
        { $sudo apt-get update -q && $sudo apt-get install -y -q --no-install-recommends valgrind; } \
            || fail_setup "installing valgrind failed"
    fi
}

# build_overlay: build the extension with -O0 -g in $WORK/build and install it
# into a private overlay of the PostgreSQL install in $WORK/install.
build_overlay() {
    echo "== building sandbox_persist with -O0 -g"
    mkdir -p "$WORK/build"
    cp -r Makefile sandbox_persist.control src sql "$WORK/build/"
    rm -f "$WORK"/build/src/*.o "$WORK"/build/src/*.bc
    make -s -C "$WORK/build" PG_CONFIG="$PG_CONFIG" COPT='-O0 -g' >"$WORK/build.log" 2>&1 \
        || { cat "$WORK/build.log"; fail_setup "the -O0 -g build failed"; }

    # PostgreSQL finds its library and share directories relative to the real
    # path of the running postgres binary. A copy of the binary placed at the
    # same relative position as in the original install, next to directories
    # of symbolic links to the original files, therefore loads every original
    # module and SQL file except the ones we put there ourselves.
    local prefix=$BINDIR f
    while [ "${LIBDIR#"$prefix"/}" = "$LIBDIR" ] || [ "${SHAREDIR#"$prefix"/}" = "$SHAREDIR" ]; do
        prefix=$(dirname "$prefix")
    done
    OVL_BIN="$WORK/install/${BINDIR#"$prefix"/}"
    OVL_LIB="$WORK/install/${LIBDIR#"$prefix"/}"
    OVL_SHARE="$WORK/install/${SHAREDIR#"$prefix"/}"
    mkdir -p "$OVL_BIN" "$OVL_LIB" "$OVL_SHARE/extension"
    cp "$BINDIR/postgres" "$OVL_BIN/postgres"
    for f in "$LIBDIR"/*; do ln -s "$f" "$OVL_LIB/"; done
    for f in "$SHAREDIR"/*; do [ "$(basename "$f")" = extension ] || ln -s "$f" "$OVL_SHARE/"; done
    for f in "$SHAREDIR"/extension/*; do ln -s "$f" "$OVL_SHARE/extension/"; done
    rm -f "$OVL_LIB"/sandbox_persist.so "$OVL_SHARE"/extension/sandbox_persist[.-]*
    cp "$WORK/build/sandbox_persist.so" "$OVL_LIB/"
    cp "$WORK/build/sandbox_persist.control" "$WORK"/build/sql/sandbox_persist--*.sql "$OVL_SHARE/extension/"
}

# wait_ready: wait (up to 5 minutes) until the server accepts connections;
# after a process exits with valgrind's error code the postmaster restarts.
wait_ready() {
    for _ in $(seq 1 300); do
        "$BINDIR/pg_isready" -q && return 0
        kill -0 "$SERVER_PID" 2>/dev/null || return 1
        sleep 1
    done
    return 1
}

# start_server: initdb, then the postmaster under valgrind; create the
# extensions and turn on the two test-only settings the suites need.
start_server() {
    mkdir -p "$WORK/vg"
    if [ "$(id -u)" = 0 ]; then chown -R postgres: "$WORK"; fi
    as_postgres "$BINDIR/initdb" -D "$WORK/data" -U postgres -A trust -E UTF8 \
        --locale=C.UTF-8 -N --no-instructions >"$WORK/initdb.log" 2>&1 \
        || { cat "$WORK/initdb.log"; fail_setup "initdb failed"; }
    # pg_cron is loaded because maintenance.sql schedules its job; autovacuum
    # is off because every process runs under valgrind and it would only add
    # work that reaches none of our code.
    cat >>"$WORK/data/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$WORK'
port = $PORT
shared_preload_libraries = 'pg_cron'
cron.database_name = '$DB'
cron.use_background_workers = on
max_worker_processes = 16
max_prepared_transactions = 10
max_connections = 20
shared_buffers = 1MB
work_mem = 64kB
huge_pages = off
jit = off
autovacuum = off
fsync = off
synchronous_commit = off
full_page_writes = off
CONF

    # --error-exitcode: a process with errors exits with 128, which the
    # postmaster treats as a crash (logged in server.log, cluster restarted).
    local valgrind=(valgrind --trace-children=yes --leak-check=no
        --error-exitcode="${VG_ERROR_EXITCODE:-128}" --error-limit=no --num-callers=30
        --track-origins=yes --fullpath-after= --gen-suppressions=all
        --log-file="$WORK/vg/vg.%p.log" --suppressions="$SUPP")
    echo "== starting the cluster under valgrind in $WORK"
    as_postgres "${valgrind[@]}" "$OVL_BIN/postgres" -D "$WORK/data" >"$WORK/server.log" 2>&1 &
    SERVER_PID=$!
    export PGHOST=$WORK PGPORT=$PORT PGUSER=postgres PGDATABASE=$DB
    wait_ready || { cat "$WORK/server.log"; fail_setup "the server did not start"; }

    psql -X -q -v ON_ERROR_STOP=1 \
        -c "CREATE EXTENSION pg_cron" \
        -c "CREATE EXTENSION pgtap" \
        -c "CREATE EXTENSION sandbox_persist" \
        -c "ALTER DATABASE $DB SET sandbox_persist.allow_client_clock = on" \
        -c "ALTER DATABASE $DB SET sandbox_persist.allow_test_reset = on" \
        || fail_setup "creating the extensions failed"
    # The server really loads the overlay (else the check would be void).
    local loaded
    loaded=$(psql -X -At -c "SELECT setting FROM pg_config WHERE name = 'PKGLIBDIR'")
    [ "$loaded" = "$OVL_LIB" ] || fail_setup "the server uses $loaded, not the overlay $OVL_LIB"
}

# regress_suite KIND: pg_regress ("regress") or pg_isolation_regress
# ("isolation") on a copy of test/ (test/expected/ included) in $WORK/regress, so the
# checkout's results/ and output_iso/ stay untouched. Prints the diffs when
# a test fails.
# shellcheck disable=SC2317  # invoked through run_suites' command array
regress_suite() {
    local kind=$1 tool out tests=() f
    local pgxs_dir
    pgxs_dir=$(dirname "$("$PG_CONFIG" --pgxs)")/../..
    mkdir -p "$WORK/regress"
    [ -d "$WORK/regress/test" ] || cp -r test "$WORK/regress/"
    if [ "$kind" = regress ]; then
        tool="$pgxs_dir/src/test/regress/pg_regress"
        out="$WORK/regress"
        for f in test/sql/*.sql; do tests+=("$(basename "$f" .sql)"); done
    else
        tool="$pgxs_dir/src/test/isolation/pg_isolation_regress"
        out="$WORK/regress/output_iso"
        for f in test/specs/*.spec; do tests+=("$(basename "$f" .spec)"); done
    fi
    if "$tool" --inputdir="$WORK/regress/test" --outputdir="$out" --bindir="$BINDIR" \
        --load-extension=sandbox_persist --dbname="sp_valgrind_$kind" "${tests[@]}"; then
        return 0
    fi
    cat "$out/regression.diffs" 2>/dev/null
    return 1
}

# run_suites: each suite in turn (pg_prove for the pgTAP files), timed.
run_suites() {
    local s f start status cmd
    for s in "${SUITES[@]}"; do
        f="test/pgtap/$s.sql"
        if [ "$s" = regress ] || [ "$s" = isolation ]; then
            cmd=(regress_suite "$s")
        elif [ -f "$f" ]; then
            cmd=(pg_prove -f -d "$DB" "$f")
        else
            echo "no such suite: $f" >&2
            suite_failures=$((suite_failures + 1))
            continue
        fi
        start=$(date +%s)
        echo "== $s"
        wait_ready || echo "the server is not accepting connections" >&2
        if "${cmd[@]}"; then
            status=ok
        else
            status=FAILED
            suite_failures=$((suite_failures + 1))
        fi
        ran=$((ran + 1))
        echo "   $s: $status in $(($(date +%s) - start))s"
    done
}

# stop_server: a fast shutdown; every process then writes its final log.
stop_server() {
    echo "== stopping the cluster"
    as_postgres "$BINDIR/pg_ctl" -D "$WORK/data" -m fast -w -t 600 stop >/dev/null
    wait "$SERVER_PID"
    SERVER_PID=
}

# parse_logs LOG...: each log holds one process. An error is a block of lines
# between two empty "==PID== " lines whose first line is not a warning and
# which has a stack ("at 0x..." / "by 0x..."). Its kind and stacks identify
# it: the same error seen in several processes counts once. A block is ours
# when any of its stacks (the error's own, or where the memory was allocated,
# freed or left uninitialised) has a frame in our code: with debug info
# valgrind names the source file (in full, through --fullpath-after=, so it
# starts with our build directory; a bare "(maintenance.c:378)" from one of
# our source names also counts), without it the object, sandbox_persist.so.
# Prints "suppressed<TAB>N" and one line per distinct error:
# error<TAB>ours(0|1)<TAB>log file<TAB>block lines joined by \001, with the
# temp directory cut from paths.
parse_logs() {
    local sources="" f
    for f in "$ROOT"/src/*.[ch]; do sources+="${f##*/} "; done
    awk -v build="$WORK/build/" -v work="$WORK/" -v sources="$sources" '
    BEGIN { n = split(sources, src, " "); for (i = 1; i <= n; i++) ours_src["(" src[i] ":"] = 1 }
    function is_ours(s,   k) {
        if (index(s, build) > 0 || index(s, "sandbox_persist.so") > 0) return 1
        for (k in ours_src) if (index(s, k) > 0) return 1
        return 0
    }
    function flush() {
        if (nlines > 0 && has_stack && header !~ /^Warning:/) {
            key = header
            for (i = 1; i <= nlines; i++) if (lines[i] ~ /^ +(at|by) 0x/) {
                frame = lines[i]; sub(/^ +(at|by) 0x[0-9A-Fa-f]+: /, "", frame); key = key "|" frame
            }
            if (!(key in seen)) {
                seen[key] = 1
                printf "error\t%d\t%s\t%s\n", ours, file, text
            }
        }
        nlines = 0; has_stack = 0; ours = 0; text = ""; header = ""
    }
    function cut(s, what,   at) {
        while ((at = index(s, what)) > 0) s = substr(s, 1, at - 1) substr(s, at + length(what))
        return s
    }
    FNR == 1 { flush(); file = cut(FILENAME, work) }
    /^==[0-9]+==( |$)/ {
        line = $0; sub(/^==[0-9]+== ?/, "", line)
        if (line == "") { flush(); next }
        if (line ~ /^ERROR SUMMARY:/) {
            if (match(line, /suppressed: [0-9]+/)) supp += substr(line, RSTART + 12, RLENGTH - 12)
            flush(); next
        }
        if (is_ours(line)) ours = 1
        line = cut(cut(line, build), work)
        sub(/\(in install\/.*\/bin\/postgres\)/, "(in postgres)", line)
        nlines++; lines[nlines] = line
        if (nlines == 1) header = line
        if (line ~ /^ +(at|by) 0x/) has_stack = 1
        text = text line "\001"
    }
    END { flush(); printf "suppressed\t%d\n", supp + 0 }
    ' "$@"
}

# report: read every log, print our errors in full and the others briefly,
# end with the summary line and set FAILED.
report() {
    local logs parsed procs=0 ours=0 other=0 suppressed=0
    shopt -s nullglob
    logs=("$WORK"/vg/vg.*.log)
    shopt -u nullglob
    if [ ${#logs[@]} -gt 0 ]; then
        procs=${#logs[@]}
        parsed=$(parse_logs "${logs[@]}")
        suppressed=$(awk -F'\t' '$1 == "suppressed" {print $2}' <<<"$parsed")
        ours=$(awk -F'\t' '$1 == "error" && $2 == 1 {n++} END {print n + 0}' <<<"$parsed")
        other=$(awk -F'\t' '$1 == "error" && $2 == 0 {n++} END {print n + 0}' <<<"$parsed")
        if [ "$ours" -gt 0 ]; then
            echo "== errors with sandbox_persist frames (full text in the logs named)"
            awk -F'\t' '$1 == "error" && $2 == 1 {
                sub(/\001$/, "", $4); gsub(/\001/, "\n    ", $4); printf "-- %s\n    %s\n", $3, $4 }' <<<"$parsed"
        fi
        if [ "$other" -gt 0 ]; then
            echo "== other errors (PostgreSQL or libraries, not suppressed; top frames)"
            awk -F'\t' '$1 == "error" && $2 == 0 {
                n = split($4, l, "\001"); printf "-- %s\n", $3
                for (i = 1; i <= n && i <= 5; i++) printf "    %s\n", l[i] }' <<<"$parsed"
        fi
    fi
    if grep -q "exited with exit code ${VG_ERROR_EXITCODE:-128}" "$WORK/server.log" 2>/dev/null; then
        echo "note: processes exited with valgrind's error code; see $WORK/server.log"
    fi
    FAILED=0
    [ "$ours" -gt 0 ] && FAILED=1
    [ "$suite_failures" -gt 0 ] && FAILED=1
    [ "$procs" -gt 0 ] || FAILED=1
    summary "$ran" "$procs" "$ours" "$other" "$suppressed"
}

trap cleanup EXIT
if [ -n "$LOGS_ONLY" ]; then
    WORK=$(cd "$LOGS_ONLY" && pwd) || exit 2
    KEEP=1
    report
    exit "$FAILED"
fi

install_packages
BINDIR=$("$PG_CONFIG" --bindir)
LIBDIR=$("$PG_CONFIG" --pkglibdir)
SHAREDIR=$("$PG_CONFIG" --sharedir)
WORK=$(mktemp -d /tmp/sandbox_persist_vg.XXXXXX)
chmod 755 "$WORK"
build_overlay
start_server
run_suites
stop_server
report
exit "$FAILED"
