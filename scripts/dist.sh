#!/usr/bin/env bash
# make dist: the release files, into SANDBOX_PERSIST_DIST_OUT (default dist/):
#   sandbox_persist-V.tar.gz   the PGXN distribution: `git archive` of HEAD with
#                           the prefix sandbox_persist-V/ (META.json at its top),
#                           V the control file's default_version
#   sandbox-persist-tanstack-ai-A.tgz   the Node adapter (`npm pack` of clients/node)
#   SHA256SUMS              sha256sum of both (check with `sha256sum -c SHA256SUMS`)
# The PGXN archive holds committed files only: a dirty tree is reported.
# SANDBOX_PERSIST_DIST_NO_NODE=1 leaves the adapter out.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${SANDBOX_PERSIST_DIST_OUT:-$ROOT/dist}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
version=$(sed -n "s/^default_version = '\(.*\)'/\1/p" sandbox_persist.control)
meta=$(sed -n 's/^   "version": "\(.*\)",$/\1/p' META.json | head -n 1)
[ "$meta" = "$version" ] || { echo "dist: META.json's version $meta is not the control file's $version" >&2; exit 1; }
[ -z "$(git status --porcelain --untracked-files=no)" ] || echo "dist: note: uncommitted changes are not in the archive (git archive HEAD)" >&2
zip=$OUT/sandbox_persist-$version.tar.gz
git archive --format=tar.gz --prefix="sandbox_persist-$version/" -o "$zip" HEAD
files=("$(basename "$zip")")
if [ -z "${SANDBOX_PERSIST_DIST_NO_NODE:-}" ]; then
    (
        cd clients/node
        [ -d node_modules ] || npm ci --no-audit --no-fund --prefer-offline --loglevel=error >/dev/null
        npm pack --silent --pack-destination "$OUT" >"$OUT/.npm-pack"
    )
    files+=("$(tail -n 1 "$OUT/.npm-pack")")
    rm -f "$OUT/.npm-pack"
fi
(cd "$OUT" && sha256sum "${files[@]}" >SHA256SUMS)
echo "dist: in $OUT:"
(cd "$OUT" && for f in "${files[@]}" SHA256SUMS; do printf '  %s %s bytes\n' "$f" "$(stat -c %s "$f")"; done)
