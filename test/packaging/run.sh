#!/usr/bin/env bash
# make test-packaging (suite `packaging`): the Debian package installed the way
# a DBA installs it, into a Debian 12 system with no build tools.
#
#   1. make deb's packages: this tree's (0.4.0) and the previous release's,
#      built from git: the parent of the commit "0.4.0 opens" (0.3.0), with
#      today's debian/ laid over it (scripts/deb.sh REF)
#   2. a clean chroot: debootstrap --variant=minbase bookworm once, cached in
#      SANDBOX_PERSIST_PKG_CHROOT (default
#      /var/cache/sandbox_persist/chroots/bookworm-clean) and never changed
#      afterwards; each run works in a fresh copy of it, removed at the end
#   3. PK1 `apt-get install ./postgresql-15-sandbox-persist_0.3.0-1_amd64.deb`
#      pulls in the server (and pg_cron, recommended) and no compiler, make or
#      server headers; a cluster starts; CREATE EXTENSION gives 0.3.0
#   4. PK2 data written at 0.3.0; `apt-get install` of the 0.4.0 .deb upgrades
#      the package, the server restarts, `ALTER EXTENSION sandbox_persist
#      UPDATE` reaches 0.4.0 and every record reads back as before
#   5. PK3 scripts/conformance.sh (superuser) passes against the upgraded
#      database (pg_cron created there), and PK4 against a fresh CREATE
#      EXTENSION of the package (no pg_cron: maintenance.sql skipped, saying so)
# The chroot's cluster listens on a unix socket only (inside the chroot's
# /tmp), reached from the host, where pg_prove runs. Runs as root (debootstrap,
# chroot, mount). Prints "summary: packaging: ..."; non-zero on any failure.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BASE=${SANDBOX_PERSIST_PKG_CHROOT:-/var/cache/sandbox_persist/chroots/bookworm-clean}
MIRROR=${SANDBOX_PERSIST_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${SANDBOX_PERSIST_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
PORT=${SANDBOX_PERSIST_PKG_PORT:-${SANDBOX_PERSIST_PORT:-54329}}
PGBIN=/usr/lib/postgresql/15/bin
started=$(date +%s)
[ "$(id -u)" = 0 ] || { echo "packaging: run as root (debootstrap, chroot and mount need it)" >&2; exit 1; }
if bindir=$("${PG_CONFIG:-pg_config}" --bindir 2>/dev/null); then PATH="$bindir:$PATH"; export PATH; fi

failures=()
fail() { failures+=("$1"); echo "FAILED: $1" >&2; }
out=$(mktemp -d /tmp/sandbox_persist.pkg.XXXXXX)
work=
mounts=()
cleanup() {
    if [ -n "$work" ] && [ -d "$work/tmp/spdata" ]; then
        chroot "$work" runuser -u postgres -- $PGBIN/pg_ctl -D /tmp/spdata -m fast -w stop >/dev/null 2>&1 || true
    fi
    for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
        umount "${mounts[i]}" 2>/dev/null || umount -l "${mounts[i]}" || true
    done
    [ -n "$work" ] && rm -rf --one-file-system "$work"
    rm -rf "$out"
}
trap cleanup EXIT

# 1. The packages.
v040=$(git log --format=%H --grep='^0.4.0 opens' -n 1)
[ -n "$v040" ] || { echo "packaging: no commit '0.4.0 opens' in the history" >&2; exit 1; }
SANDBOX_PERSIST_DEB_OUT=$out/deb bash scripts/deb.sh "$v040^" >"$out/deb-0.3.0.log" 2>&1 \
    || { cat "$out/deb-0.3.0.log"; echo "summary: packaging: FAIL (building 0.3.0's package)"; exit 1; }
SANDBOX_PERSIST_DEB_OUT=$out/deb bash scripts/deb.sh >"$out/deb-0.4.0.log" 2>&1 \
    || { cat "$out/deb-0.4.0.log"; echo "summary: packaging: FAIL (building this tree's package)"; exit 1; }
grep -hE '^  [a-z0-9.+_-]+\.deb [0-9]+ bytes' "$out"/deb-*.log
old_deb=$(ls "$out"/deb/postgresql-15-sandbox-persist_0.3.0-*_*.deb)
new_deb=$(ls "$out"/deb/postgresql-15-sandbox-persist_0.4.0-*_*.deb)

# 2. The clean chroot (debootstrap removes DIR/debootstrap when it succeeds).
if [ ! -x "$BASE/usr/bin/apt-get" ] || [ -d "$BASE/debootstrap" ]; then
    command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null
    rm -rf --one-file-system "$BASE"
    mkdir -p "$(dirname "$BASE")"
    echo "packaging: debootstrap bookworm into $BASE"
    debootstrap --variant=minbase bookworm "$BASE" "$MIRROR" >"$out/debootstrap.log" 2>&1 \
        || { tail -n 20 "$out/debootstrap.log"; echo "summary: packaging: FAIL (debootstrap)"; exit 1; }
fi
work=$(mktemp -d "$(dirname "$BASE")/bookworm-clean.run.XXXXXX")
cp -a "$BASE/." "$work/"
# Debian 12 as installed: the point-release and security suites too (the
# package depends on the server minor it was built against).
cat >"$work/etc/apt/sources.list" <<SRC
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb $SECURITY_MIRROR bookworm-security main
SRC
printf '#!/bin/sh\nexit 101\n' >"$work/usr/sbin/policy-rc.d"
chmod 755 "$work/usr/sbin/policy-rc.d"
mkdir -p "$work/etc/postgresql-common"
echo "create_main_cluster = false" >"$work/etc/postgresql-common/createcluster.conf"
cp -L /etc/resolv.conf "$work/etc/resolv.conf" 2>/dev/null || true
mount -t proc proc "$work/proc" && mounts+=("$work/proc")
mount -t tmpfs -o mode=1777 shm "$work/dev/shm" && mounts+=("$work/dev/shm")
in_chroot() { chroot "$work" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 "$@"; }
cp "$old_deb" "$new_deb" "$work/tmp/"

# 3. PK1: install 0.3.0's package.
in_chroot apt-get update -q >"$out/apt.log" 2>&1 || { tail "$out/apt.log"; fail "apt-get update in the chroot"; }
if in_chroot apt-get install -y -q "./tmp/$(basename "$old_deb")" >>"$out/apt.log" 2>&1; then
    echo "ok - PK1.1 apt-get install ./$(basename "$old_deb") into a clean bookworm"
else
    tail -n 20 "$out/apt.log"; fail "PK1.1 apt-get install of the 0.3.0 package"
fi
# pgTAP for the conformance run (a test tool, on the server side only).
in_chroot apt-get install -y -q postgresql-15-pgtap >>"$out/apt.log" 2>&1 || fail "installing postgresql-15-pgtap in the chroot"
tools=$(in_chroot sh -c 'for t in gcc cc make; do command -v $t; done; dpkg-query -W -f="\${db:Status-Abbrev}|\${Package}\n" "postgresql-server-dev-*" "libpq-dev" 2>/dev/null | sed -n "s/^ii *|//p"' || true)
if [ -z "$tools" ]; then echo "ok - PK1.2 no compiler, make or server headers in the chroot"; else fail "PK1.2 build tools present: $tools"; fi
in_chroot dpkg-query -W -f='${Status}\n' postgresql-15-cron 2>/dev/null | grep -q 'install ok installed' \
    && echo "ok - PK1.3 pg_cron came with it (Recommends)" || fail "PK1.3 postgresql-15-cron installed as recommended"

in_chroot mkdir -p /tmp/spsock
in_chroot chown postgres: /tmp/spsock
in_chroot runuser -u postgres -- $PGBIN/initdb -D /tmp/spdata -U postgres -A trust -E UTF8 --locale=C.UTF-8 -N >"$out/initdb.log" 2>&1 \
    || { cat "$out/initdb.log"; fail "initdb in the chroot"; }
cat >>"$work/tmp/spdata/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '/tmp/spsock'
port = $PORT
shared_preload_libraries = 'pg_cron'
CONF
pgctl() { in_chroot runuser -u postgres -- $PGBIN/pg_ctl -D /tmp/spdata -l /tmp/spdata/server.log -w "$@" >/dev/null; }
pgctl start || { cat "$work/tmp/spdata/server.log"; fail "PK1.4 the cluster starts"; }
export PGHOST=$work/tmp/spsock PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
sql() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
v=$(sql -c "CREATE EXTENSION sandbox_persist" -c "SELECT extversion FROM pg_extension WHERE extname = 'sandbox_persist'" 2>&1)
[ "$v" = 0.3.0 ] && echo "ok - PK1.4 the cluster starts and CREATE EXTENSION sandbox_persist gives 0.3.0" \
    || fail "PK1.4 CREATE EXTENSION from the 0.3.0 package ($v)"

# 4. PK2: data at 0.3.0, the package upgraded, ALTER EXTENSION ... UPDATE.
sql >/dev/null <<'SQL' || fail "PK2 writing data at 0.3.0"
SELECT sandbox_persist.instance_upsert('{"key":"pk-1","provider":"fake","providerSandboxId":"sb-1","latestSnapshotId":"s1","threadId":"pk-t","latestRunId":"r1","updatedAt":7}');
SELECT sandbox_persist.message_save_thread('pk-t', '[{"id":"m1","role":"user","parts":[{"type":"text","content":"kept across the upgrade"}]}]');
SELECT sandbox_persist.metadata_set('pk', 'k', '{"v":[1,2,3]}');
SELECT sandbox_persist.event_log_append('pk-run', '[{"i":1},{"i":2}]');
SQL
reads="SELECT concat_ws(E'\n', sandbox_persist.instance_get('pk-1')::jsonb::text,
                 sandbox_persist.message_load_thread('pk-t')::jsonb::text,
                 sandbox_persist.metadata_get('pk', 'k')::jsonb::text,
                 sandbox_persist.event_log_read('pk-run', 0)::jsonb::text)"
before=$(sql -c "$reads" 2>&1)
if in_chroot apt-get install -y -q "./tmp/$(basename "$new_deb")" >>"$out/apt.log" 2>&1; then
    echo "ok - PK2.1 apt-get install ./$(basename "$new_deb") upgrades the package"
else
    tail -n 20 "$out/apt.log"; fail "PK2.1 upgrading the package"
fi
pgctl restart || fail "PK2.2 the cluster restarts on the new package"
v=$(sql -c "ALTER EXTENSION sandbox_persist UPDATE" -c "SELECT extversion FROM pg_extension WHERE extname = 'sandbox_persist'" 2>&1)
[ "$v" = 0.4.0 ] && echo "ok - PK2.2 ALTER EXTENSION sandbox_persist UPDATE reaches 0.4.0" || fail "PK2.2 ALTER EXTENSION UPDATE ($v)"
after=$(sql -c "$reads" 2>&1)
if [ -n "$before" ] && [ "$before" = "$after" ] && [[ "$before" == *"kept across the upgrade"* ]]; then
    echo "ok - PK2.3 every record reads back as before the upgrade"
else
    printf 'before:\n%s\nafter:\n%s\n' "$before" "$after"; fail "PK2.3 data kept across the upgrade"
fi

# 5. PK3, PK4: the conformance suite against the upgraded and a fresh database.
conf_line() { grep '^summary: conformance:' "$1" | sed 's/^summary: conformance: //'; }
# The upgraded database has pg_cron, as a DBA's would (cron.database_name is
# postgres); the fresh one has not, and its run skips the scheduling suite.
sql -c "CREATE EXTENSION IF NOT EXISTS pg_cron" || fail "PK3 CREATE EXTENSION pg_cron"
if bash scripts/conformance.sh >"$out/conf-upgraded" 2>&1; then
    echo "ok - PK3 conformance against the upgraded database: $(conf_line "$out/conf-upgraded")"
else
    grep -E '^(not ok|Bail|#   )|Failed|ERROR|psql:|syntax' "$out/conf-upgraded" | head -n 40; fail "PK3 conformance against the upgraded database"
fi
sql -c "CREATE DATABASE fresh" && sql -d fresh -c "CREATE EXTENSION sandbox_persist" || fail "PK4 CREATE EXTENSION in a fresh database"
if bash scripts/conformance.sh dbname=fresh >"$out/conf-fresh" 2>&1; then
    echo "ok - PK4 conformance against a fresh CREATE EXTENSION: $(conf_line "$out/conf-fresh")"
    grep -Eq '^maintenance\.sql \.+ skipped: needs pg_cron installed in this database' "$out/conf-fresh" \
        || fail "PK4 maintenance.sql is skipped, with the reason, where pg_cron is not installed"
else
    grep -E '^(not ok|Bail|#   )|Failed|ERROR|psql:|syntax' "$out/conf-fresh" | head -n 40; fail "PK4 conformance against a fresh database"
fi

sizes=$(for f in "$old_deb" "$new_deb"; do printf '%s %s bytes; ' "$(basename "$f")" "$(stat -c %s "$f")"; done)
status=pass
[ ${#failures[@]} -eq 0 ] || status="FAIL (${failures[*]})"
echo "summary: packaging: $status; ${sizes}upgraded: $(conf_line "$out/conf-upgraded" 2>/dev/null); fresh: $(conf_line "$out/conf-fresh" 2>/dev/null); $(($(date +%s) - started))s"
[ ${#failures[@]} -eq 0 ]
