#!/usr/bin/env bash
# Defect 11 (issue 9): a compile error must fail `make test`, not run the
# suites against a binary installed earlier. Copies the tracked tree, breaks
# one source file, runs the copy's scripts/test.sh and expects it to stop in
# set-up with a non-zero status, before any suite or install.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
    (cd "$ROOT" && git ls-files -z | tar --null -T - -cf -) | tar -xf - -C "$work"
else
    # A plain copy (make test-matrix's chroots have no git): all of it but state and build output.
    tar -C "$ROOT" --exclude=./.cluster --exclude=node_modules --exclude='*.o' --exclude='*.so' \
        --exclude='*.bc' -cf - . | tar -xf - -C "$work"
fi
# The first object in OBJS, so the build stops within a second or two.
printf '\n#error deliberately broken by test/scripts/broken_build.sh\n' >>"$work/src/sandbox_persist.c"

status=0
# A full run of its own: none of the suite choices of a matrix run carry over.
env -u SANDBOX_PERSIST_SUITES -u SANDBOX_PERSIST_KEEP_CLUSTER -u SANDBOX_PERSIST_USE_CLUSTER \
    SANDBOX_PERSIST_STATE="$work/.cluster" SANDBOX_PERSIST_PORT=54399 \
    bash "$work/scripts/test.sh" >"$work/out.log" 2>&1 || status=$?

if [ $status -eq 0 ]; then
    cat "$work/out.log"
    echo "summary: broken build: make test exited 0 on a tree that does not compile"
    exit 1
fi
if grep -q '^== ' "$work/out.log"; then
    cat "$work/out.log"
    echo "summary: broken build: a suite ran after the build failed"
    exit 1
fi
grep -q 'deliberately broken' "$work/out.log" || { cat "$work/out.log"; echo "summary: broken build: the compile error was not reported"; exit 1; }
echo "summary: broken build: make test exited $status before any suite ran"
