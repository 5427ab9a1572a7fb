#!/usr/bin/env bash
# bench/experiments/blobs_memwatch.sh PIDFILE GOFILE ACKFILE OUTFILE [INTERVAL_S]
#
# Helper of bench/experiments/blobs.sh: measures one backend's memory during one phase of
# its session.
#   1. waits for a backend pid to appear in PIDFILE;
#   2. waits for GOFILE (the session creates it with psql's \! when the phase
#      starts), resets the kernel's peak-RSS counter of the process (writes 5
#      to /proc/<pid>/clear_refs, so VmHWM restarts from the current RSS),
#      then creates ACKFILE (the session waits for it);
#   3. samples /proc/<pid>/status every INTERVAL_S seconds (default 0.001,
#      plus the ~1 ms a sample takes) until the process exits, and writes one
#      line to OUTFILE:
#
#   samples reset max_RssAnon_kB max_VmRSS_kB last_VmHWM_kB max_RssShmem_kB
#
# reset is 1 when VmHWM was reset at GOFILE (it is then the exact peak of the
# phase, kept by the kernel), 0 when that was refused (VmHWM is then the peak
# of the whole process life). RssAnon is the backend's private memory
# (palloc'd memory lives in malloc'd, hence anonymous, pages) and can only be
# sampled; VmRSS/VmHWM also count the pages of shared_buffers the backend has
# touched (RssShmem). Uses bash builtins only, so sampling forks nothing.
# Needs root (or the server's user) for /proc/<pid>/status and clear_refs.
set -u
pidfile=$1
gofile=$2
ackfile=$3
out=$4
interval=${5:-0.001}

exec {sleep_fd}<> <(:)          # read -t on this fd is a fork-free sleep
nap() { read -r -t "$1" -u "$sleep_fd" _ || true; }
fail() { echo "0 0 0 0 0 0" >"$out"; : >"$ackfile"; exit 1; }

for ((w = 0; w < 30000; w++)); do   # wait up to ~60 s for the pid
    [[ -s $pidfile ]] && break
    nap 0.002
done
pid=
[[ -s $pidfile ]] && read -r pid <"$pidfile"
[[ $pid =~ ^[0-9]+$ ]] || fail

for ((w = 0; w < 60000; w++)); do   # wait up to ~120 s for the phase to start
    [[ -e $gofile ]] && break
    [[ -r /proc/$pid/status ]] || fail
    nap 0.002
done
[[ -e $gofile ]] || fail
reset=0
if { echo 5 >"/proc/$pid/clear_refs"; } 2>/dev/null; then reset=1; fi
: >"$ackfile"

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
echo "$samples $reset $max_anon $max_rss $hwm $max_shmem" >"$out"
