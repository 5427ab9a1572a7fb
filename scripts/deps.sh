#!/usr/bin/env bash
# Install the Debian packages sandbox_persist needs to build and test against
# one PostgreSQL major, only when one is missing, so a second run is quick.
# Runs as root (CI, the dev machines, the test-matrix chroots) or through sudo.
#
#   bash scripts/deps.sh [MAJOR]     or     PG_MAJOR=17 bash scripts/deps.sh
#
# Without a major it takes the one the distribution ships (the version the
# "postgresql" package depends on: 15 on Debian 12, 17 on 13, 18 on sid).
# SANDBOX_PERSIST_NO_NODE=1 leaves Node.js out (the matrix chroots run the
# Node suites from the host).
set -euo pipefail

# distribution_major: the PostgreSQL major the distribution's "postgresql" package installs.
distribution_major() {
    local major
    major=$(apt-cache depends postgresql 2>/dev/null | sed -n 's/.*Depends: postgresql-\([0-9][0-9]*\)$/\1/p' | head -1)
    if [ -z "$major" ]; then
        # No package lists yet (a fresh container): go by the release's code name.
        # shellcheck disable=SC1091
        case "$(. /etc/os-release && echo "${VERSION_CODENAME:-}")" in
            bookworm) major=15 ;;
            trixie) major=17 ;;
            forky | sid) major=18 ;;
            *) echo "deps.sh: cannot tell which PostgreSQL major this system ships; give one (PG_MAJOR=17 or an argument)" >&2
               exit 2 ;;
        esac
    fi
    echo "$major"
}

MAJOR=${1:-${PG_MAJOR:-$(distribution_major)}}
case "$MAJOR" in
    '' | *[!0-9]*) echo "deps.sh: not a PostgreSQL major: '$MAJOR'" >&2; exit 2 ;;
esac

PACKAGES=(
    "postgresql-$MAJOR" "postgresql-server-dev-$MAJOR" "postgresql-$MAJOR-cron" "postgresql-$MAJOR-pgtap"
    libtap-parser-sourcehandler-pgtap-perl liblz4-dev libzstd-dev make gcc
    # patch(1): the upgrade suite patches the old releases it builds (test/upgrade/release_lib.sh)
    patch
)

missing=()
for p in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done

# The Node adapter needs Node.js 20 and npm; install Debian's only when none is present.
if [ -z "${SANDBOX_PERSIST_NO_NODE:-}" ] && { ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; }; then
    missing+=(nodejs npm)
fi
# Its PgBouncer test (clients/node/test/pgbouncer.test.ts) runs Debian's pgbouncer
# (the test also installs it itself when it is missing).
if [ -z "${SANDBOX_PERSIST_NO_NODE:-}" ] &&
    ! dpkg-query -W -f='${Status}' pgbouncer 2>/dev/null | grep -q "install ok installed"; then
    missing+=(pgbouncer)
fi

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi

SUDO=
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
