#!/usr/bin/env bash
# Install the Debian 12 packages sandbox_persist needs to build and test, only
# when one is missing, so a second run is quick. Runs as root (CI and the dev
# machines) or through sudo when available.
set -euo pipefail

PACKAGES=(
    postgresql-15 postgresql-server-dev-15 postgresql-15-cron postgresql-15-pgtap
    libtap-parser-sourcehandler-pgtap-perl libzstd-dev make gcc
)

missing=()
for p in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done

# The Node adapter needs Node.js 20 and npm; install Debian's only when none is present.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    missing+=(nodejs npm)
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
