#!/usr/bin/env bash
# make test-packaging (suite `packaging`): the Debian package installed the way
# a DBA installs it, into a Debian system with no build tools, for each
# PostgreSQL major in PG_MAJORS (default 15; make test-packaging
# PG_MAJORS="15 17 18"), each on the Debian release that ships it (15 on
# bookworm, 17 on trixie, 18 on sid; SANDBOX_PERSIST_PKG_SUITES).
#
#   1. make deb's packages for that major (PG_MAJORS=NN scripts/deb.sh: 17 and
#      18 are built in the matrix's trixie and sid chroots): this tree's (its
#      default_version, NEW below) and the previous release's (OLD), built from
#      git: the parent of the commit "NEW opens", with today's debian/ laid over
#      it (scripts/deb.sh REF)
#   2. a clean chroot: debootstrap --variant=minbase <release> once, cached in
#      /var/cache/sandbox_persist/chroots/<release>-clean (scripts/chroots.sh;
#      SANDBOX_PERSIST_PKG_CHROOT overrides bookworm's) and never changed
#      afterwards; each run works in a fresh copy of it, removed at the end
#   3. PK1 `apt-get install ./postgresql-NN-sandbox-persist_OLD-1_amd64.deb`
#      pulls in the server (and pg_cron, recommended) and no compiler, make or
#      server headers; a cluster starts; CREATE EXTENSION gives OLD
#   4. PK2 data written at OLD; `apt-get install` of NEW's .deb upgrades the
#      package, the server restarts, `ALTER EXTENSION sandbox_persist UPDATE`
#      reaches NEW and every record reads back as before
#   5. PK3 scripts/conformance.sh (superuser) passes against the upgraded
#      database (pg_cron created there), and PK4 against a fresh CREATE
#      EXTENSION of the package (no pg_cron: maintenance.sql skipped, saying so)
# The chroot's cluster listens on a unix socket only (inside the chroot's
# /tmp), reached from the host, where pg_prove runs. Runs as root (debootstrap,
# chroot, mount). Prints "summary: packaging: ..." (one line over all majors,
# after one "packaging: PostgreSQL NN: ..." line each); non-zero on any failure.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/chroots.sh
. "$ROOT/scripts/chroots.sh"   # CHROOTS, MIRROR, debootstrap_once, mount_chroot, umount_chroots
SECURITY_MIRROR=${SANDBOX_PERSIST_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
PORT=${SANDBOX_PERSIST_PKG_PORT:-${SANDBOX_PERSIST_PORT:-54329}}
MAJORS=${PG_MAJORS:-15}
SUITES=${SANDBOX_PERSIST_PKG_SUITES:-15:bookworm 17:trixie 18:sid}
started=$(date +%s)
[ "$(id -u)" = 0 ] || { echo "packaging: run as root (debootstrap, chroot and mount need it)" >&2; exit 1; }
if bindir=$("${PG_CONFIG:-pg_config}" --bindir 2>/dev/null); then PATH="$bindir:$PATH"; export PATH; fi

failures=()
fail() { failures+=("$1"); echo "FAILED: $1" >&2; }
out=$(mktemp -d /tmp/sandbox_persist.pkg.XXXXXX)
work=
PGBIN=
# stop_work: stop the work chroot's cluster, undo its mounts, remove it.
stop_work() {
    if [ -n "$work" ] && [ -d "$work/tmp/spdata" ]; then
        chroot "$work" runuser -u postgres -- "$PGBIN/pg_ctl" -D /tmp/spdata -m fast -w stop >/dev/null 2>&1 || true
    fi
    umount_chroots
    [ -n "$work" ] && rm -rf --one-file-system "$work"
    work=
}
cleanup() {
    stop_work
    rm -rf "$out"
}
trap cleanup EXIT

# NEW: this tree's version; OLD: the one the commit "NEW opens" started from.
control_version() { sed -n "s/^default_version = '\(.*\)'$/\1/p"; }
NEW=$(control_version <sandbox_persist.control)
opened=$(git log --format=%H --grep="^$NEW opens" -n 1)
[ -n "$opened" ] || { echo "packaging: no commit '$NEW opens' in the history" >&2; exit 1; }
OLD=$(git show "$opened^:sandbox_persist.control" | control_version)
[ -n "$NEW" ] && [ -n "$OLD" ] || { echo "packaging: no default_version in sandbox_persist.control" >&2; exit 1; }
conf_line() { grep '^summary: conformance:' "$1" | sed 's/^summary: conformance: //'; }
in_chroot() { chroot "$work" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 "$@"; }
sql() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
pgctl() { in_chroot runuser -u postgres -- "$PGBIN/pg_ctl" -D /tmp/spdata -l /tmp/spdata/server.log -w "$@" >/dev/null; }

# sources_list RELEASE: the release as installed (point-release and security
# suites too: a package depends on the server minor it was built against).
sources_list() {
    case "$1" in
        sid) echo "deb $MIRROR sid main" ;;
        *) printf 'deb %s %s main\ndeb %s %s-updates main\ndeb %s %s-security main\n' \
               "$MIRROR" "$1" "$MIRROR" "$1" "$SECURITY_MIRROR" "$1" ;;
    esac
}

# test_major MAJOR RELEASE: steps 1-5 for one major; "packaging: PostgreSQL MAJOR: ..." at the end.
test_major() {
    local M=$1 rel=$2 base old_deb new_deb v before after tools t0 n_fail=${#failures[@]} tag sizes
    t0=$(date +%s)
    tag="[$M]"
    PGBIN=/usr/lib/postgresql/$M/bin
    echo "== packaging: PostgreSQL $M on $rel"

    # 1. The packages.
    if ! PG_MAJORS=$M SANDBOX_PERSIST_DEB_OUT=$out/deb bash scripts/deb.sh "$opened^" >"$out/deb-$M-$OLD.log" 2>&1; then
        cat "$out/deb-$M-$OLD.log"; fail "$tag building $OLD's package"; return
    fi
    if ! PG_MAJORS=$M SANDBOX_PERSIST_DEB_OUT=$out/deb bash scripts/deb.sh >"$out/deb-$M-$NEW.log" 2>&1; then
        cat "$out/deb-$M-$NEW.log"; fail "$tag building this tree's package"; return
    fi
    old_deb=$(ls "$out"/deb/postgresql-"$M"-sandbox-persist_"$OLD"-*_*.deb)
    new_deb=$(ls "$out"/deb/postgresql-"$M"-sandbox-persist_"$NEW"-*_*.deb)
    for f in "$old_deb" "$new_deb"; do printf '  %s %s bytes\n' "$(basename "$f")" "$(stat -c %s "$f")"; done
    # lintian's report on this tree's package, as make deb printed it.
    sed -n '/^deb: lintian/,$p' "$out/deb-$M-$NEW.log" | grep -v '^deb: ' | sed 's/^ */  lintian: /'

    # 2. The clean chroot, copied.
    base=$CHROOTS/$rel-clean
    [ "$rel" = bookworm ] && base=${SANDBOX_PERSIST_PKG_CHROOT:-$base}
    debootstrap_once "$rel" "$base" || { fail "$tag debootstrap $rel"; return; }
    work=$(mktemp -d "$(dirname "$base")/$rel-clean.run.XXXXXX")
    cp -a "$base/." "$work/"
    sources_list "$rel" >"$work/etc/apt/sources.list"
    echo 'Acquire::Check-Valid-Until "false";' >"$work/etc/apt/apt.conf.d/99sandbox_persist"
    printf '#!/bin/sh\nexit 101\n' >"$work/usr/sbin/policy-rc.d"
    chmod 755 "$work/usr/sbin/policy-rc.d"
    mkdir -p "$work/etc/postgresql-common"
    echo "create_main_cluster = false" >"$work/etc/postgresql-common/createcluster.conf"
    cp -L /etc/resolv.conf "$work/etc/resolv.conf" 2>/dev/null || true
    mount_chroot "$work" || { fail "$tag mounting /proc, /dev/shm, /dev/pts in the chroot"; stop_work; return; }
    cp "$old_deb" "$new_deb" "$work/tmp/"

    # 3. PK1: install OLD's package.
    in_chroot apt-get update -q >"$out/apt-$M.log" 2>&1 || { tail "$out/apt-$M.log"; fail "$tag apt-get update in the chroot"; }
    if in_chroot apt-get install -y -q "./tmp/$(basename "$old_deb")" >>"$out/apt-$M.log" 2>&1; then
        echo "ok - PK1.1 $tag apt-get install ./$(basename "$old_deb") into a clean $rel"
    else
        tail -n 20 "$out/apt-$M.log"; fail "PK1.1 $tag apt-get install of the $OLD package"
    fi
    # pgTAP for the conformance run (a test tool, on the server side only).
    in_chroot apt-get install -y -q --no-install-recommends "postgresql-$M-pgtap" >>"$out/apt-$M.log" 2>&1 \
        || fail "$tag installing postgresql-$M-pgtap in the chroot"
    tools=$(in_chroot sh -c 'for t in gcc cc make; do command -v $t; done; dpkg-query -W -f="\${db:Status-Abbrev}|\${Package}\n" "postgresql-server-dev-*" "libpq-dev" 2>/dev/null | sed -n "s/^ii *|//p"' || true)
    if [ -z "$tools" ]; then echo "ok - PK1.2 $tag no compiler, make or server headers in the chroot"; else fail "PK1.2 $tag build tools present: $tools"; fi
    in_chroot dpkg-query -W -f='${Status}\n' "postgresql-$M-cron" 2>/dev/null | grep -q 'install ok installed' \
        && echo "ok - PK1.3 $tag pg_cron came with it (Recommends)" || fail "PK1.3 $tag postgresql-$M-cron installed as recommended"

    in_chroot mkdir -p /tmp/spsock
    in_chroot chown postgres: /tmp/spsock
    in_chroot runuser -u postgres -- "$PGBIN/initdb" -D /tmp/spdata -U postgres -A trust -E UTF8 --locale=C.UTF-8 -N >"$out/initdb-$M.log" 2>&1 \
        || { cat "$out/initdb-$M.log"; fail "$tag initdb in the chroot"; }
    cat >>"$work/tmp/spdata/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '/tmp/spsock'
port = $PORT
shared_preload_libraries = 'pg_cron'
CONF
    pgctl start || { cat "$work/tmp/spdata/server.log"; fail "PK1.4 $tag the cluster starts"; }
    export PGHOST=$work/tmp/spsock PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
    v=$(sql -c "CREATE EXTENSION sandbox_persist" -c "SELECT extversion FROM pg_extension WHERE extname = 'sandbox_persist'" 2>&1)
    [ "$v" = "$OLD" ] && echo "ok - PK1.4 $tag the cluster starts and CREATE EXTENSION sandbox_persist gives $OLD" \
        || fail "PK1.4 $tag CREATE EXTENSION from the $OLD package ($v)"

    # 4. PK2: data at OLD, the package upgraded, ALTER EXTENSION ... UPDATE.
    sql >/dev/null <<'SQL' || fail "PK2 $tag writing data at $OLD"
SELECT sandbox_persist.instance_upsert('{"key":"pk-1","provider":"fake","providerSandboxId":"sb-1","latestSnapshotId":"s1","threadId":"pk-t","latestRunId":"r1","updatedAt":7}');
SELECT sandbox_persist.message_save_thread('pk-t', '[{"id":"m1","role":"user","parts":[{"type":"text","content":"kept across the upgrade"}]}]');
SELECT sandbox_persist.metadata_set('pk', 'k', '{"v":[1,2,3]}');
SELECT sandbox_persist.event_log_append('pk-run', '[{"i":1},{"i":2}]');
SQL
    local reads="SELECT concat_ws(E'\n', sandbox_persist.instance_get('pk-1')::jsonb::text,
                 sandbox_persist.message_load_thread('pk-t')::jsonb::text,
                 sandbox_persist.metadata_get('pk', 'k')::jsonb::text,
                 sandbox_persist.event_log_read('pk-run', 0)::jsonb::text)"
    before=$(sql -c "$reads" 2>&1)
    if in_chroot apt-get install -y -q "./tmp/$(basename "$new_deb")" >>"$out/apt-$M.log" 2>&1; then
        echo "ok - PK2.1 $tag apt-get install ./$(basename "$new_deb") upgrades the package"
    else
        tail -n 20 "$out/apt-$M.log"; fail "PK2.1 $tag upgrading the package"
    fi
    pgctl restart || fail "PK2.2 $tag the cluster restarts on the new package"
    v=$(sql -c "ALTER EXTENSION sandbox_persist UPDATE" -c "SELECT extversion FROM pg_extension WHERE extname = 'sandbox_persist'" 2>&1)
    [ "$v" = "$NEW" ] && echo "ok - PK2.2 $tag ALTER EXTENSION sandbox_persist UPDATE reaches $NEW" || fail "PK2.2 $tag ALTER EXTENSION UPDATE ($v)"
    after=$(sql -c "$reads" 2>&1)
    if [ -n "$before" ] && [ "$before" = "$after" ] && [[ "$before" == *"kept across the upgrade"* ]]; then
        echo "ok - PK2.3 $tag every record reads back as before the upgrade"
    else
        printf 'before:\n%s\nafter:\n%s\n' "$before" "$after"; fail "PK2.3 $tag data kept across the upgrade"
    fi

    # 5. PK3, PK4: the conformance suite against the upgraded and a fresh database.
    # The upgraded database has pg_cron, as a DBA's would (cron.database_name is
    # postgres); the fresh one has not, and its run skips the scheduling suite.
    sql -c "CREATE EXTENSION IF NOT EXISTS pg_cron" || fail "PK3 $tag CREATE EXTENSION pg_cron"
    if bash scripts/conformance.sh >"$out/conf-upgraded-$M" 2>&1; then
        echo "ok - PK3 $tag conformance against the upgraded database: $(conf_line "$out/conf-upgraded-$M")"
    else
        grep -E '^(not ok|Bail|#   )|Failed|ERROR|psql:|syntax' "$out/conf-upgraded-$M" | head -n 40; fail "PK3 $tag conformance against the upgraded database"
    fi
    sql -c "CREATE DATABASE fresh" && sql -d fresh -c "CREATE EXTENSION sandbox_persist" || fail "PK4 $tag CREATE EXTENSION in a fresh database"
    if bash scripts/conformance.sh dbname=fresh >"$out/conf-fresh-$M" 2>&1; then
        echo "ok - PK4 $tag conformance against a fresh CREATE EXTENSION: $(conf_line "$out/conf-fresh-$M")"
        grep -Eq '^maintenance\.sql \.+ skipped: needs pg_cron installed in this database' "$out/conf-fresh-$M" \
            || fail "PK4 $tag maintenance.sql is skipped, with the reason, where pg_cron is not installed"
    else
        grep -E '^(not ok|Bail|#   )|Failed|ERROR|psql:|syntax' "$out/conf-fresh-$M" | head -n 40; fail "PK4 $tag conformance against a fresh database"
    fi
    # What each run left out, and why (scripts/conformance.sh says it per file).
    grep -h ' skipped: ' "$out/conf-upgraded-$M" "$out/conf-fresh-$M" 2>/dev/null | sort | uniq -c | sed 's/^/  /'
    stop_work

    sizes=$(for f in "$old_deb" "$new_deb"; do printf '%s %s bytes; ' "$(basename "$f")" "$(stat -c %s "$f")"; done)
    local status=pass
    [ ${#failures[@]} -eq "$n_fail" ] || status=FAIL
    echo "packaging: PostgreSQL $M on $rel: $status; ${sizes}upgraded: $(conf_line "$out/conf-upgraded-$M" 2>/dev/null); fresh: $(conf_line "$out/conf-fresh-$M" 2>/dev/null); $(($(date +%s) - t0))s"
    summaries+=("PostgreSQL $M: $status")
}

summaries=()
for M in $MAJORS; do
    rel=
    for e in $SUITES; do [ "${e%%:*}" = "$M" ] && rel=${e#*:}; done
    if [ -z "$rel" ]; then fail "no Debian release is known for PostgreSQL $M (SANDBOX_PERSIST_PKG_SUITES: $SUITES)"; continue; fi
    test_major "$M" "$rel"
done

status=pass
[ ${#failures[@]} -eq 0 ] || status="FAIL (${failures[*]})"
echo "summary: packaging: $status; ${summaries[*]}; $(($(date +%s) - started))s"
[ ${#failures[@]} -eq 0 ]
