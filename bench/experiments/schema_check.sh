#!/usr/bin/env bash
# bench/experiments/schema_check.sh: the per-call cost of SpRequireSchema
# (src/schema_version.c; docs/architecture.md, "Stable C symbols"), in one
# run, with three builds of the same sources:
#   cached   the library as built: the answer is remembered per backend and
#            forgotten on any pg_proc invalidation
#   probe    the check reads pg_extension at every call (get_extension_oid
#            and the version row: the code before the answer was remembered)
#   none     no check at all (SpRequireSchema returns at once): the floor
# The workload is pgbench -M prepared -c 1 -T $SECS of checkpoint_get of an
# id that does not exist (one of the cheapest functions that checks: one
# kept-plan lookup), REPS interleaved rounds; it prints the median
# transactions/s of each build, the ratio to cached, and the cost per call
# over none in microseconds.
#
# Never touches the install PG_CONFIG names: it runs in a private copy of it
# with a throwaway cluster of its own (test/upgrade/release_lib.sh,
# release_lib_private_start), whose library it swaps. Needs the tree built
# and installed (make && make install).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
REPS=${REPS:-5}
SECS=${SECS:-5}
# shellcheck disable=SC1091
. "$ROOT/test/upgrade/release_lib.sh"
WORK=$(mktemp -d /tmp/sp_schema_check.XXXXXX)
cleanup() { release_lib_private_stop; rm -rf "$WORK"; }
trap cleanup EXIT
release_lib_private_start >/dev/null
LIB=$(release_lib_private_pkglib)/sandbox_persist.so
cp "$RELEASE_LIB_PREFIX/current.so" "$WORK/cached.so"

# The other two builds: the same sources, src/schema_version.c changed.
mkdir -p "$WORK/src"
(cd "$ROOT" && git ls-files -z -c -o --exclude-standard | tar --null -T - -cf - 2>/dev/null) | tar -xf - -C "$WORK/src"
f=$WORK/src/src/schema_version.c
sed -i 's/^\tif (schema_ok_since != NULL \&\&$/\tif (false \&\& schema_ok_since != NULL \&\&/' "$f"
grep -q 'if (false && schema_ok_since' "$f" || { echo "schema_check: the remembered answer was not found" >&2; exit 1; }
make -s -C "$WORK/src" -j2 PG_CONFIG="$RELEASE_LIB_BUILD_PG_CONFIG" >/dev/null
cp "$WORK/src/sandbox_persist.so" "$WORK/probe.so"
sed -i '/^SpRequireSchema(const char \*since, const char \*function)$/,/^\tchar\t   \*version;$/ s/^\tchar\t   \*version;$/&\n\n\treturn;/' "$f"
awk '/^SpRequireSchema\(const char/ {s = 1} s && /^\treturn;$/ {found = 1; exit} END {exit !found}' "$f" \
    || { echo "schema_check: could not disable the check" >&2; exit 1; }
make -s -C "$WORK/src" -j2 PG_CONFIG="$RELEASE_LIB_BUILD_PG_CONFIG" >/dev/null
cp "$WORK/src/sandbox_persist.so" "$WORK/none.so"

psql -X -q -v ON_ERROR_STOP=1 -c "CREATE EXTENSION sandbox_persist" >/dev/null
echo "SELECT sandbox_persist.checkpoint_get('schema-check-missing');" >"$WORK/call.pgbench"
median() { sort -g | awk '{a[NR] = $1} END {if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
BUILDS=(cached probe none)
for ((r = 1; r <= REPS; r++)); do
    for b in "${BUILDS[@]}"; do
        install -m 755 "$WORK/$b.so" "$LIB"
        pgbench -n -M prepared -c 1 -T "$SECS" -f "$WORK/call.pgbench" 2>/dev/null \
            | sed -nE 's/^tps = ([0-9.]+) .*/\1/p' | sed "s/^/$b /" >>"$WORK/tps"
    done
done
none_tps=$(awk '$1 == "none" {print $2}' "$WORK/tps" | median)
cached_tps=$(awk '$1 == "cached" {print $2}' "$WORK/tps" | median)
printf 'build\tcalls/s (median of %s x %s s)\tvs cached\tus per call over none\n' "$REPS" "$SECS"
for b in "${BUILDS[@]}"; do
    t=$(awk -v b="$b" '$1 == b {print $2}' "$WORK/tps" | median)
    awk -v b="$b" -v t="$t" -v c="$cached_tps" -v n="$none_tps" \
        'BEGIN {printf "%s\t%.0f\t%.3f\t%.2f\n", b, t, t / c, 1e6 / t - 1e6 / n}'
done
