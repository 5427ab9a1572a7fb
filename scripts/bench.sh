#!/usr/bin/env bash
# make bench: build and install, start a throwaway cluster of its own (not the
# `make run` one), run every bench/suites/*.sh and write bench/results/:
#   raw.tsv     every line the suites printed, prefixed by suite and sync mode
#   report.md   one table per section (ours, baseline, ratio, commits/op), facts,
#               the plots, failures
#   *.png       one plot per `plot` line (gnuplot, PNG)
# The suites' line format is in bench/README.md ("Suite format").
#
#   QUICK=1 bash scripts/bench.sh        short mode: each suite ~30 s, once (sync off)
#   BENCH_SUITES="stores scaling"        run only these suites (names without .sh):
#                                        their lines in raw.tsv are replaced, the
#                                        other suites' results kept
#   BENCH_REPORT_ONLY=1                  no run: redraw the plots and rewrite
#                                        report.md from bench/results/raw.tsv
#   SANDBOX_PERSIST_BENCH_PORT=N         the cluster's port (default: the
#                                        make-run port + 1000)
#
# Each suite runs with BENCH_SYNC=off, then again with BENCH_SYNC=on unless it
# printed `fact sync_sensitive no` (QUICK=1: off only). The cluster runs with fsync on, so that
# synchronous_commit=on costs what it costs in production. A failing suite is
# reported and makes the run exit 1; the others still run.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
started=$(date +%s)
export LC_ALL=C LC_NUMERIC=C
QUICK=${QUICK:-0}
RESULTS=$ROOT/bench/results

RAW=$RESULTS/raw.tsv
FAILURES=$RESULTS/failures.txt
if [ -n "${BENCH_REPORT_ONLY:-}" ]; then
    [ -s "$RAW" ] || { echo "bench: no $RAW to report on" >&2; exit 2; }
    rm -f "$RESULTS"/*.png
    mkdir -p "$RESULTS/logs"
    touch "$FAILURES"
else
    SUDO=
    if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
    # gnuplot draws the plots; the -nox build has the png terminal and no X11.
    if ! command -v gnuplot >/dev/null 2>&1; then
        echo "installing gnuplot-nox"
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends gnuplot-nox >/dev/null \
            || { echo "bench: cannot install gnuplot-nox" >&2; exit 2; }
    fi

    # A private cluster: its own state directory and port, so `make run`'s
    # cluster (and its data) is left alone.
    export SANDBOX_PERSIST_STATE=$ROOT/.bench-cluster
    base_port=${SANDBOX_PERSIST_PORT:-54329}
    export SANDBOX_PERSIST_PORT=${SANDBOX_PERSIST_BENCH_PORT:-$((base_port + 1000))}
    bash scripts/setup.sh || { echo "bench: set-up failed" >&2; exit 2; }
    trap 'bash "$ROOT/scripts/cluster.sh" stop' EXIT
    # shellcheck disable=SC1091
    . "$SANDBOX_PERSIST_STATE/env"
    export PGHOST PGPORT PGUSER PGDATABASE SP_CLUSTER_DIR
    PATH="$("${PG_CONFIG:-pg_config}" --bindir):$PATH"
    export PATH QUICK
    # pgbench ships with the server package on Debian (postgresql-NN), which
    # setup.sh has installed; look next to psql first.
    PGBENCH=$(command -v pgbench || true)
    [ -x "$PGBENCH" ] || { echo "bench: pgbench not found next to psql (it ships with postgresql-NN)" >&2; exit 2; }
    export PGBENCH

    # The throwaway cluster turns fsync off for the test suites; a benchmark of
    # synchronous_commit=on needs real flushes. A larger max_wal_size keeps
    # checkpoints out of the short measurements.
    psql -X -q -v ON_ERROR_STOP=1 \
        -c "ALTER SYSTEM SET fsync = on" -c "ALTER SYSTEM SET full_page_writes = on" \
        -c "ALTER SYSTEM SET max_wal_size = '4GB'" -c "SELECT pg_reload_conf()" >/dev/null \
        || { echo "bench: cannot configure the cluster" >&2; exit 2; }
    sleep 1

    if [ -n "${BENCH_SUITES:-}" ] && [ -s "$RAW" ]; then
        # A run of some suites replaces their lines and logs only: the other
        # suites' results stay in raw.tsv, and every plot is redrawn from it.
        kept=$(mktemp)
        awk -F'\t' -v chosen=" $BENCH_SUITES " 'index(chosen, " " $1 " ") == 0' "$RAW" >"$kept"
        mv "$kept" "$RAW"
        for s in $BENCH_SUITES; do rm -f "$RESULTS/logs/$s".*; done
        rm -f "$RESULTS"/*.png
    else
        rm -rf "$RESULTS"
        : >"$RAW"
    fi
    mkdir -p "$RESULTS/logs"
    : >"$FAILURES"
    # A suite may not run for ever: QUICK suites get 3 minutes, full ones 20,
    # scale 40 (it builds a database of ~6 GB first, then measures for up to 19).
    if [ "$QUICK" = 1 ]; then LIMIT=180; else LIMIT=1200; fi

    # run_one SUITE SYNC: run one suite in one sync mode, append its lines to raw.tsv.
    run_one() {
        local name=$1 sync=$2 out log t0 rc limit
        out=$RESULTS/logs/$name.$sync.out
        log=$RESULTS/logs/$name.$sync.log
        t0=$(date +%s)
        limit=$LIMIT
        if [ "$name" = scale ] && [ "$QUICK" != 1 ]; then limit=2400; fi
        BENCH_SYNC=$sync timeout --signal=TERM --kill-after=30 "$limit" bash "bench/suites/$name.sh" >"$out" 2>"$log"
        rc=$?
        echo "  $name (sync $sync): exit $rc, $(( $(date +%s) - t0 )) s"
        # only well-formed lines reach the report
        awk -F'\t' -v s="$name" -v y="$sync" '
            ($1 == "row" && NF >= 9) || ($1 == "series" && NF == 5) || ($1 == "plot" && NF == 6) || ($1 == "fact" && NF == 3) {
                print s "\t" y "\t" $0 }' "$out" >>"$RAW"
        if [ $rc -ne 0 ]; then
            echo "$name (sync $sync): exit $rc; last lines of its log: $(tail -n 3 "$log" | tr '\n\t' '  ')" >>"$FAILURES"
        fi
        return $rc
    }

    suites=()
    if [ -n "${BENCH_SUITES:-}" ]; then
        for s in $BENCH_SUITES; do suites+=("$s"); done
    else
        for f in bench/suites/*.sh; do [ -e "$f" ] && suites+=("$(basename "$f" .sh)"); done
    fi
    echo "bench: ${#suites[@]} suites (QUICK=$QUICK), cluster on port $PGPORT, results in bench/results/"
    for s in "${suites[@]}"; do
        if [ ! -f "bench/suites/$s.sh" ]; then
            echo "$s: no such suite" >>"$FAILURES"; continue
        fi
        run_one "$s" off
        if [ "$QUICK" != 1 ] && ! grep -qP '^fact\tsync_sensitive\tno$' "$RESULTS/logs/$s.off.out"; then
            run_one "$s" on
        fi
    done
    # what the report says about the run (kept for BENCH_REPORT_ONLY)
    run="$(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown),"
    run+=" $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')), load average at the end"
    run+=" $(cut -d' ' -f1-3 /proc/loadavg), $(psql -XAtc "SELECT split_part(version(), ' on ', 1)"),"
    run+=" shared_buffers $(psql -XAtc 'SHOW shared_buffers'), fsync on, QUICK=$QUICK; the suites took"
    run+=" $(( $(date +%s) - started )) s."
    if [ -n "${BENCH_SUITES:-}" ] && [ -f "$RESULTS/run.txt" ]; then
        # one line per partial run, after the lines of the runs it did not replace
        names=$(echo $BENCH_SUITES)   # one space between names
        if [ "${names// /}" = "$names" ]; then label="Suite $names:"; else label="Suites ${names// /, }:"; fi
        grep -vF -- "$label" "$RESULTS/run.txt" >"$RESULTS/run.txt.new" || true
        echo "$label $run" >>"$RESULTS/run.txt.new"
        mv "$RESULTS/run.txt.new" "$RESULTS/run.txt"
    else
        echo "$run" >"$RESULTS/run.txt"
    fi
fi

# ---------------------------------------------------------------- plots
# One PNG per plot name and sync mode: series of a run with sync on are drawn
# in their own file (<plot>_sync_on.png).
plots=$(awk -F'\t' '$3 == "plot" { print $4 "\t" $2 }' "$RAW" | sort -u)
while IFS=$'\t' read -r plot sync; do
    [ -n "$plot" ] || continue
    file=$plot; [ "$sync" = on ] && file=${plot}_sync_on
    awk -F'\t' -v p="$plot" -v y="$sync" -v dir="$RESULTS" -v file="$file" '
        $2 == y && $3 == "plot" && $4 == p { title = $5; xl = $6; yl = $7; logx = $8 }
        $2 == y && $3 == "series" && $4 == p {
            if (!($5 in idx)) { idx[$5] = ++n; label[n] = $5 }
            data[idx[$5]] = data[idx[$5]] $6 " " $7 "\n" }
        END {
            if (y == "on") title = title " (synchronous_commit on)"
            gsub(/"/, "\\\"", title)
            print "set terminal png size 1000,560 font \",11\" noenhanced"
            print "set output \"" dir "/" file ".png\""
            print "set title \"" title "\""
            print "set xlabel \"" xl "\""; print "set ylabel \"" yl "\""
            print "set key outside right top"; print "set grid"
            if (logx == 1) { print "set logscale x"; print "set format x \"10^%T\"" }
            print "set autoscale xfix"; print "set offsets graph 0.04, graph 0.04, graph 0.05, 0"
            print "set yrange [0:*]"
            printf "plot "
            for (i = 1; i <= n; i++) {
                l = label[i]; gsub(/"/, "\\\"", l)
                printf "%s\"-\" using 1:2 with linespoints title \"%s\"", (i > 1 ? ", " : ""), l
            }
            print ""
            for (i = 1; i <= n; i++) printf "%se\n", data[i]
        }' "$RAW" >"$RESULTS/logs/$file.gp"
    gnuplot "$RESULTS/logs/$file.gp" 2>>"$RESULTS/logs/gnuplot.log" \
        || echo "plot $file: gnuplot failed (bench/results/logs/gnuplot.log)" >>"$FAILURES"
done <<<"$plots"

# ---------------------------------------------------------------- report
{
    echo "# sandbox_persist benchmarks"
    echo
    cat "$RESULTS/run.txt"
    echo
    echo "Legend: medians. One line per workload, metric and synchronous_commit setting (sync); each" \
        "baseline column gives the baseline's figure and, in parentheses, the ratio ours / baseline, in bold" \
        "when ours is better (lower time, higher throughput: the metric says which). commits/op: writing" \
        "commits per operation, ours / each baseline in column order (measured as transaction ids drawn; with" \
        "synchronous_commit on each one waits for a WAL flush). Every suite's exact lines are in raw.tsv."
    awk -F'\t' '
        function fmt(v) {
            if (v == "" || v == "-") return "-"
            if (v + 0 == v && (v >= 1000 || v <= -1000)) return sprintf("%.0f", v)
            if (v + 0 == v && v != int(v)) return sprintf("%.4g", v)
            return v }
        $3 == "row" {
            sec = $4 " (`" $1 ".sh`)"
            if (!(sec in seen)) { seen[sec] = ++ns; order[ns] = sec }
            # one line per (workload, metric, sync): grouped by workload and
            # metric in order of first appearance, the sync-on line after the off one
            w = sec SUBSEP $5 SUBSEP $6
            if (!(w in wseen)) { wseen[w] = ++nw[sec]; wkey[sec, nw[sec]] = w }
            k = w SUBSEP $2
            if (!(k in kseen)) { kseen[k] = ++nk[w]; key[w, nk[w]] = k
                                 wl[k] = $5; me[k] = $6 ", " $11; sy[k] = $2; ours[k] = fmt($7) }
            if (!((sec, $8) in bseen)) { bseen[sec, $8] = ++nb[sec]; bname[sec, nb[sec]] = $8 }
            better = ($10 + 0 == $10) && (($11 == "lower" && $10 < 1) || ($11 == "higher" && $10 > 1))
            r = fmt($10); if (better) r = "**" r "**"
            cell[k, $8] = fmt($9) " (" r ")"
            if (NF >= 12) { co[k] = fmt($12); cb[k, $8] = (NF >= 13 ? fmt($13) : "-") }
        }
        END {
            for (i = 1; i <= ns; i++) {
                s = order[i]
                print "\n## " s "\n"
                h = "| workload | metric | sync | ours |"; d = "| --- | --- | --- | --- |"
                for (j = 1; j <= nb[s]; j++) { h = h " " bname[s, j] " |"; d = d " --- |" }
                print h " commits/op |"; print d " --- |"
                for (q = 1; q <= nw[s]; q++) for (j = 1; j <= nk[wkey[s, q]]; j++) {
                    k = key[wkey[s, q], j]
                    l = "| " wl[k] " | " me[k] " | " sy[k] " | " ours[k] " |"
                    c = (k in co) ? co[k] " /" : ""
                    for (m = 1; m <= nb[s]; m++) {
                        b = bname[s, m]
                        l = l " " (((k, b) in cell) ? cell[k, b] : "") " |"
                        if (k in co) c = c (m > 1 ? "," : "") " " (((k, b) in cb) ? cb[k, b] : "-")
                    }
                    print l " " (c == "" ? "-" : c) " |"
                }
            }
        }' "$RAW"
    if awk -F'\t' '$3 == "fact" && $4 != "sync_sensitive"' "$RAW" | grep -q .; then
        echo
        echo "## Facts"
        echo
        echo "| suite | sync | fact | value |"
        echo "| --- | --- | --- | --- |"
        awk -F'\t' '$3 == "fact" && $4 != "sync_sensitive" { print "| " $1 " | " $2 " | " $4 " | " $5 " |" }' "$RAW"
    fi
    if ls "$RESULTS"/*.png >/dev/null 2>&1; then
        echo
        echo "## Plots"
        for p in "$RESULTS"/*.png; do
            echo
            echo "![$(basename "$p" .png)]($(basename "$p"))"
        done
    fi
    if [ -s "$FAILURES" ]; then
        echo
        echo "## Failures"
        echo
        sed 's/^/- /' "$FAILURES"
    fi
} >"$RESULTS/report.md"

total=$(( $(date +%s) - started ))
echo "bench: report in bench/results/report.md, $(ls "$RESULTS"/*.png 2>/dev/null | wc -l) plots; total time $((total / 60)) min $((total % 60)) s"
if [ -s "$FAILURES" ]; then
    sed 's/^/bench: FAILED: /' "$FAILURES" >&2
    exit 1
fi
exit 0
