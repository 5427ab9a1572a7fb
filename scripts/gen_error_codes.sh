#!/usr/bin/env bash
# Write clients/node/src/error_codes.ts, the Node adapter's SQLSTATE table,
# from the error table of src/errors.h (SP_ERROR_TABLE: SQLSTATE, code name,
# hint) and its HTTP status table (SP_HTTP_STATUS_TABLE: SQLSTATE, status). The C compiler expands the table (test/scripts/vocabulary_dump.c), so
# the file holds exactly what the extension is built with.
#
#   bash scripts/gen_error_codes.sh            rewrite the file in the tree
#   bash scripts/gen_error_codes.sh OUT [SRC]  write OUT instead, from SRC/errors.h
#
# make error-codes runs the first form; test/scripts/vocabulary.sh runs the
# second and fails when the checked-in file differs.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$ROOT/clients/node/src/error_codes.ts}
src=${2:-$ROOT/src}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"${CC:-cc}" -Wall -Werror -I"$src" -o "$work/dump" "$ROOT/test/scripts/vocabulary_dump.c"
"$work/dump" >"$work/c.tsv"
{
    cat <<'HEAD'
/**
 * The SQLSTATE of every class-SP error of the extension, its contract code
 * name and what the caller can do (the server sends the same text as the
 * error's HINT). Generated from SP_ERROR_TABLE in src/errors.h by
 * scripts/gen_error_codes.sh (make error-codes): do not edit by hand; the
 * vocabulary suite fails when this file and the header differ.
 */
export const SP_ERRORS = {
HEAD
    awk -F'\t' '
        $1 == "error" { order[++n] = $2; name[$2] = $3 }
        $1 == "error_hint" { hint[$2] = $3 }
        END {
            for (i = 1; i <= n; i++) {
                s = order[i]; h = hint[s]
                gsub(/\\/, "\\\\", h); gsub(/\047/, "\\\047", h)
                printf "  %s: { code: \047%s\047, hint: %s },\n", s, name[s], (h == "" ? "undefined" : "\047" h "\047")
            }
        }' "$work/c.tsv"
    cat <<'TAIL'
} as const satisfies Record<string, { code: string; hint: string | undefined }>

/** A class-SP SQLSTATE the extension raises. */
export type SpSqlState = keyof typeof SP_ERRORS

/** The contract code name of a class-SP error. */
export type SpCodeName = (typeof SP_ERRORS)[SpSqlState]['code']

/**
 * The HTTP status the durable streams server answers for a SQLSTATE
 * (SP_HTTP_STATUS_TABLE in src/errors.h, docs/contract/streams.md §5); a
 * SQLSTATE missing here has no status of its own.
 */
export const HTTP_STATUS: Record<string, number> = {
TAIL
    awk -F'\t' '$1 == "http_status" { printf "  \047%s\047: %s,\n", $2, $3 }' "$work/c.tsv"
    echo '}'
} >"$work/out.ts"
mv "$work/out.ts" "$out"
