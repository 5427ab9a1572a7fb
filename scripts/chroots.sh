#!/usr/bin/env bash
# The Debian chroots of make test-matrix and make test-packaging: one place
# that builds them (debootstrap --variant=minbase from Debian's mirror, cached
# in ${SANDBOX_PERSIST_CHROOTS:-/var/cache/sandbox_persist/chroots}/<name>)
# and configures them for apt (no recommends, no services, no default cluster).
#
# Sourced by scripts/matrix.sh, scripts/deb.sh's chroot mode and
# test/packaging/run.sh; run directly it prepares chroots without running
# anything in them:
#   bash scripts/chroots.sh ensure SUITE [NAME]   chroot of SUITE in CHROOTS/NAME (NAME defaults to SUITE)
#   bash scripts/chroots.sh clean SUITE            CHROOTS/SUITE-clean: a minbase SUITE never
#                                                  changed after debootstrap (clean-install tests copy it)
# Runs as root. The caller owns the mounts array and undoes them (umount_chroots).
CHROOTS=${SANDBOX_PERSIST_CHROOTS:-/var/cache/sandbox_persist/chroots}
MIRROR=${SANDBOX_PERSIST_MIRROR:-http://deb.debian.org/debian}
mounts=(${mounts[@]+"${mounts[@]}"})

# ensure_debootstrap: install debootstrap on the host when it is missing.
ensure_debootstrap() {
    command -v debootstrap >/dev/null 2>&1 && return 0
    echo "chroots: installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get update -q &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap
}

# debootstrap_once SUITE DIR: a complete minbase SUITE in DIR (kept when it is already there).
debootstrap_once() {
    local suite=$1 dir=$2 log
    # debootstrap removes DIR/debootstrap when it finishes; a leftover one is a broken run.
    if [ ! -x "$dir/usr/bin/apt-get" ] || [ -d "$dir/debootstrap" ]; then
        ensure_debootstrap || return 1
        rm -rf --one-file-system "$dir"
        mkdir -p "$(dirname "$dir")"
        log=$(mktemp /tmp/sandbox_persist.debootstrap.XXXXXX)
        echo "chroots: debootstrap $suite into $dir"
        if ! debootstrap --variant=minbase "$suite" "$dir" "$MIRROR" >"$log" 2>&1; then
            tail -20 "$log"
            rm -f "$log"
            return 1
        fi
        rm -f "$log"
    fi
}

# configure_chroot DIR: apt without recommends or Valid-Until, no services, no default cluster.
configure_chroot() {
    local dir=$1
    # sid's Release file may be past its Valid-Until; no recommends keeps it small.
    cat >"$dir/etc/apt/apt.conf.d/99sandbox_persist" <<'APT'
Acquire::Check-Valid-Until "false";
APT::Install-Recommends "false";
APT
    # No service may start inside the chroot, and no default cluster is made.
    printf '#!/bin/sh\nexit 101\n' >"$dir/usr/sbin/policy-rc.d"
    chmod 755 "$dir/usr/sbin/policy-rc.d"
    mkdir -p "$dir/etc/postgresql-common"
    echo "create_main_cluster = false" >"$dir/etc/postgresql-common/createcluster.conf"
    cp -L /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
}

# ensure_chroot SUITE DIR: a complete minbase chroot of SUITE in DIR, configured for apt.
ensure_chroot() {
    debootstrap_once "$1" "$2" && configure_chroot "$2"
}

# ensure_clean_chroot SUITE: CHROOTS/SUITE-clean, debootstrapped once and never changed afterwards.
ensure_clean_chroot() {
    debootstrap_once "$1" "$CHROOTS/$1-clean"
}

# mount_chroot DIR: /proc, a private /dev/shm (PostgreSQL's dynamic shared memory) and /dev/pts.
mount_chroot() {
    local dir=$1
    mount -t proc proc "$dir/proc" && mounts+=("$dir/proc") || return 1
    mount -t tmpfs -o mode=1777 shm "$dir/dev/shm" && mounts+=("$dir/dev/shm") || return 1
    mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$dir/dev/pts" && mounts+=("$dir/dev/pts") || return 1
}

# umount_chroots: undo every mount made by mount_chroot, newest first (lazily if busy).
umount_chroots() {
    local i
    for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
        umount "${mounts[i]}" 2>/dev/null || umount -l "${mounts[i]}" || true
    done
    mounts=()
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -uo pipefail
    [ "$(id -u)" = 0 ] || { echo "chroots: run as root (debootstrap needs it)" >&2; exit 2; }
    case "${1:-}" in
        ensure) [ -n "${2:-}" ] || { echo "usage: $0 ensure SUITE [NAME]" >&2; exit 2; }
                ensure_chroot "$2" "$CHROOTS/${3:-$2}" ;;
        clean)  [ -n "${2:-}" ] || { echo "usage: $0 clean SUITE" >&2; exit 2; }
                ensure_clean_chroot "$2" ;;
        *) echo "usage: $0 ensure SUITE [NAME] | clean SUITE" >&2; exit 2 ;;
    esac
fi
