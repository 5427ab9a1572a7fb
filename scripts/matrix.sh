#!/usr/bin/env bash
# make test-matrix: run the suites of make test against other PostgreSQL
# majors, each in a Debian chroot built with debootstrap from Debian's mirror
# and cached between runs (PostgreSQL 17 from trixie, 18 from sid).
#
# For each entry of the matrix:
#   1. the chroot: debootstrap --variant=minbase once, into
#      ${SANDBOX_PERSIST_CHROOTS:-/var/cache/sandbox_persist/chroots}/<suite>;
#      /proc, /dev/shm and /dev/pts are mounted while it is used and always
#      unmounted on exit;
#   2. inside it: the working tree is copied to /build/sandbox_persist,
#      scripts/deps.sh installs that major's packages (apt-get in the chroot),
#      and scripts/test.sh builds and installs the extension, starts the
#      throwaway cluster as the chroot's postgres user and runs the SQL suites
#      (pg_regress + isolation, pgTAP, dump and restore, broken build), leaving
#      the cluster running;
#   3. on the host: scripts/test.sh runs the Node suites (the adapter, and fuzz
#      and torture in short mode when present) against that cluster through its
#      unix socket, which the host sees under the chroot's root (npm does not
#      run inside the chroots); then the cluster is stopped.
# Prints each major's suite summaries, one closing "matrix: N passed, N failed"
# line (suites, over all majors) and the run time; exits non-zero on any failure.
#
# Settings:
#   SANDBOX_PERSIST_MATRIX   entries "<debian suite>:<major>", and "host" for
#                            the host's own make test (default "trixie:17 sid:18")
#   SANDBOX_PERSIST_CHROOTS  where the chroots are kept
#   SANDBOX_PERSIST_MIRROR   the Debian mirror (default http://deb.debian.org/debian)
#   SANDBOX_PERSIST_MATRIX_CHROOT_SUITES
#                            the suites run inside each chroot (default: the
#                            SQL suites below)
#   SANDBOX_PERSIST_MATRIX_HOST_SUITES
#                            the suites run from the host (default: the Node
#                            suites below; empty runs none), e.g. only the
#                            upgrade suite on every major:
#                            SANDBOX_PERSIST_MATRIX_CHROOT_SUITES=upgrade SANDBOX_PERSIST_MATRIX_HOST_SUITES=
# Runs as root (debootstrap, chroot and mount need it); never installs
# anything on the host but debootstrap itself.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

MATRIX=${SANDBOX_PERSIST_MATRIX:-trixie:17 sid:18}
# CHROOTS, MIRROR, ensure_chroot, mount_chroot, umount_chroots.
# shellcheck source=scripts/chroots.sh
. "$ROOT/scripts/chroots.sh"
PORT=${SANDBOX_PERSIST_PORT:-54329}
# The SQL suites run inside the chroot, the Node-based ones from the host.
CHROOT_SUITES=${SANDBOX_PERSIST_MATRIX_CHROOT_SUITES-regress pgtap backup upgrade broken_build vocabulary}
HOST_SUITES=${SANDBOX_PERSIST_MATRIX_HOST_SUITES-node fuzz torture}
if [ -z "${CHROOT_SUITES// /}" ]; then
    echo "matrix: SANDBOX_PERSIST_MATRIX_CHROOT_SUITES is empty (scripts/test.sh would run every suite)" >&2
    exit 2
fi
BUILD=/build/sandbox_persist
started=$(date +%s)

if [ "$(id -u)" != 0 ]; then
    echo "matrix: run as root (debootstrap, chroot and mount need it)" >&2
    exit 2
fi
# The host reaches each cluster at <chroot>/tmp/sandbox_persist.XXXXXX/.s.PGSQL.<port>;
# a unix socket path holds at most 107 bytes.
for entry in $MATRIX; do
    sock="$CHROOTS/${entry%%:*}/tmp/sandbox_persist.XXXXXX/.s.PGSQL.$PORT"
    if [ "$entry" != host ] && [ ${#sock} -gt 107 ]; then
        echo "matrix: $CHROOTS is too long a path: the socket $sock would exceed 107 bytes" >&2
        exit 2
    fi
done

mounts=()       # mount points to undo on exit, in the order they were made (mount_chroot)
cluster_root=   # the chroot whose cluster is running, if any
logs=$(mktemp -d)

# cleanup: stop a running chroot cluster, undo every mount, drop the logs.
cleanup() {
    cleanup_mounts
    rm -rf "$logs"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# in_chroot DIR COMMAND...: run a command in the chroot with a clean environment.
in_chroot() {
    local dir=$1
    shift
    chroot "$dir" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        "${CHROOT_ENV[@]}" "$@"
}

# cleanup_mounts: stop the chroot's cluster and undo every mount (lazily if busy).
cleanup_mounts() {
    if [ -n "$cluster_root" ]; then
        in_chroot "$cluster_root" bash -c "cd $BUILD && bash scripts/cluster.sh stop" || true
        cluster_root=
    fi
    umount_chroots
}

# ensure_host_clients: psql and Node.js on the host, for the suites run from there.
ensure_host_clients() {
    local missing=()
    command -v psql >/dev/null 2>&1 || missing+=(postgresql-client)
    { command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; } || missing+=(nodejs npm)
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "matrix: installing on the host: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -q &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# copy_tree DIR: the working tree (tracked and new files, edits included) to DIR/$BUILD.
copy_tree() {
    local dest=$1$BUILD
    rm -rf "$dest"
    mkdir -p "$dest"
    if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
        git -C "$ROOT" ls-files -z -c -o --exclude-standard |
            tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C "$dest"
        # The chroot has no git history: the sources of the releases whose
        # libraries the upgrade suite needs go along (test/upgrade/release_lib.sh).
        bash -c '. "$1/test/upgrade/release_lib.sh" && release_lib_export "$2"' _ "$ROOT" "$dest" \
            || echo "matrix: could not export the earlier releases' sources" >&2
    else
        # No build output: objects of another major would link into a broken module.
        tar --exclude=./.cluster --exclude=node_modules --exclude='*.o' --exclude='*.so' \
            --exclude='*.bc' --exclude=./results --exclude=./output_iso -cf - . | tar -xf - -C "$dest"
    fi
}

# record NAME LOG: print a run's summaries; add its suite counts to the totals.
record() {
    local name=$1 log=$2 line p f
    echo "-- $name"
    # The closing block of scripts/test.sh repeats every summary after "== summaries".
    awk '/^== summaries$/ { n = 0; delete l; next } /^(summary|vitest): / { l[++n] = $0 }
         END { for (i = 1; i <= n; i++) print "   " l[i] }' "$log"
    line=$(grep -E '^suites: [0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
    if [ -z "$line" ]; then
        echo "   $name stopped before its suites ended (set-up failed?): counted as one failed suite"
        total_failed=$((total_failed + 1))
        return
    fi
    read -r p f < <(echo "$line" | sed -E 's/^suites: ([0-9]+) passed, ([0-9]+) failed.*/\1 \2/')
    echo "   $line"
    total_passed=$((total_passed + p))
    total_failed=$((total_failed + f))
}

# run_host: the host's own make test, as one entry of the matrix.
run_host() {
    local major
    major=$("${PG_CONFIG:-pg_config}" --version | sed -n 's/^PostgreSQL \([0-9][0-9]*\).*/\1/p')
    echo "== matrix: host, PostgreSQL ${major:-?}"
    bash scripts/test.sh 2>&1 | tee "$logs/host.log"
    summaries+=("host/$major:$logs/host.log")
}

# run_chroot SUITE MAJOR: every suite against MAJOR in the SUITE chroot.
run_chroot() {
    local suite=$1 major=$2 dir t0 t1 t2 env_file
    dir=$CHROOTS/$suite
    echo "== matrix: $suite chroot, PostgreSQL $major"
    t0=$(date +%s)
    CHROOT_ENV=(PG_MAJOR="$major" PG_CONFIG="/usr/lib/postgresql/$major/bin/pg_config"
        SANDBOX_PERSIST_NO_NODE=1 SANDBOX_PERSIST_PORT="$PORT" DEBIAN_FRONTEND=noninteractive)
    if ! ensure_chroot "$suite" "$dir" || ! mount_chroot "$dir"; then
        echo "matrix: the $suite chroot could not be prepared" | tee "$logs/$suite.log"
        summaries+=("$suite/$major:$logs/$suite.log")
        cleanup_mounts
        return
    fi
    copy_tree "$dir"
    if ! in_chroot "$dir" bash "$BUILD/scripts/deps.sh" "$major"; then
        echo "matrix: installing PostgreSQL $major in the $suite chroot failed" | tee "$logs/$suite.log"
        summaries+=("$suite/$major:$logs/$suite.log")
        cleanup_mounts
        return
    fi
    t1=$(date +%s)
    echo "matrix: $suite chroot and packages ready in $((t1 - t0)) s"

    # The SQL suites, inside; the cluster keeps running for the host's part.
    cluster_root=$dir
    in_chroot "$dir" env SANDBOX_PERSIST_SUITES="$CHROOT_SUITES" SANDBOX_PERSIST_KEEP_CLUSTER=1 \
        bash -c "cd $BUILD && bash scripts/test.sh" 2>&1 | tee "$logs/$suite.log"
    summaries+=("$suite/$major (chroot):$logs/$suite.log")

    # The Node suites, from the host, through the socket under the chroot's root.
    env_file=$dir$BUILD/.cluster/env
    if [ -z "${HOST_SUITES// /}" ]; then
        echo "matrix: no host suites chosen (SANDBOX_PERSIST_MATRIX_HOST_SUITES)"
    elif [ -f "$env_file" ]; then
        (
            # shellcheck disable=SC1090
            . "$env_file"
            export PGHOST="$dir$PGHOST" SP_CLUSTER_DIR="$dir$SP_CLUSTER_DIR"
            SANDBOX_PERSIST_SUITES="$HOST_SUITES" SANDBOX_PERSIST_USE_CLUSTER=1 bash scripts/test.sh
        ) 2>&1 | tee "$logs/$suite-host.log"
        summaries+=("$suite/$major (host):$logs/$suite-host.log")
    else
        # The chroot's run already counts as failed (it has no closing "suites:" line).
        echo "matrix: no cluster is running in the $suite chroot; the host suites were not run"
    fi
    t2=$(date +%s)
    echo "matrix: $suite suites ran in $((t2 - t1)) s"
    cleanup_mounts
}

summaries=()
CHROOT_ENV=()
case " $MATRIX " in
    *:*) [ -z "${HOST_SUITES// /}" ] || ensure_host_clients || { echo "matrix: psql or Node.js is missing on the host" >&2; exit 1; } ;;
esac
for entry in $MATRIX; do
    case "$entry" in
        host) run_host ;;
        *:*) run_chroot "${entry%%:*}" "${entry#*:}" ;;
        *) echo "matrix: bad entry '$entry' (want <debian suite>:<major> or host)" >&2; exit 2 ;;
    esac
done

total_passed=0
total_failed=0
echo
echo "== matrix summaries"
for s in "${summaries[@]}"; do
    record "${s%%:*}" "${s#*:}"
done
echo "matrix: $total_passed passed, $total_failed failed"
echo "matrix: run time $(( $(date +%s) - started )) s"
[ "$total_failed" -eq 0 ]
