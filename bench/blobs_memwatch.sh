#!/usr/bin/env bash
# bench/blobs_memwatch.sh PIDFILE OUTFILE [INTERVAL_S]
#
# Helper of bench/blobs.sh: waits for a backend pid to appear in PIDFILE, then
# samples /proc/<pid>/status every INTERVAL_S seconds (default 0.001, plus the
# ~1 ms a sample takes) until the process exits, and writes one line to
# OUTFILE:
#
#   samples max_RssAnon_kB max_VmRSS_kB last_VmHWM_kB max_RssShmem_kB
#
# RssAnon is the backend's private memory (palloc'd memory lives in
# malloc'd, hence anonymous, pages); VmRSS/VmHWM also count the pages of
# shared_buffers the backend has touched (RssShmem), which grow with how much
# of the fixed-size buffer pool one statement walks through, not with what it
# allocates. Uses bash builtins only, so sampling forks nothing. Needs read
# access to /proc/<pid>/status (root, or the server's own user).
set -u
pidfile=$1
out=$2
interval=${3:-0.001}

exec {sleep_fd}<> <(:)          # read -t on this fd is a fork-free sleep
nap() { read -r -t "$1" -u "$sleep_fd" _ || true; }

for ((w = 0; w < 30000; w++)); do   # wait up to ~60 s for the pid
    [[ -s $pidfile ]] && break
    nap 0.002
done
pid=
[[ -s $pidfile ]] && read -r pid <"$pidfile"
if [[ ! $pid =~ ^[0-9]+$ ]]; then
    echo "0 0 0 0 0" >"$out"
    exit 1
fi

samples=0 max_anon=0 max_rss=0 hwm=0 max_shmem=0
while [[ -r /proc/$pid/status ]]; do
    anon= rss= h= shmem=
    {
        while read -r k v _; do
            case $k in
                RssAnon:) anon=$v ;;
                VmRSS:) rss=$v ;;
                VmHWM:) h=$v ;;
                RssShmem:) shmem=$v ;;
            esac
        done </proc/"$pid"/status
    } 2>/dev/null || break
    [[ -n $anon ]] || break        # exited (zombie or gone)
    samples=$((samples + 1))
    ((anon > max_anon)) && max_anon=$anon
    ((rss > max_rss)) && max_rss=$rss
    ((shmem > max_shmem)) && max_shmem=$shmem
    hwm=$h
    nap "$interval"
done
echo "$samples $max_anon $max_rss $hwm $max_shmem" >"$out"
