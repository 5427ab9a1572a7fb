#!/usr/bin/env bash
# Write everything that restates the error table of src/errors.h
# (SP_ERROR_TABLE: SQLSTATE, code name, hint; SP_HTTP_STATUS_TABLE: SQLSTATE,
# HTTP status) from that table, so there is nothing to keep in step by hand:
#
#   clients/node/src/error_codes.ts   the whole file: SP_ERRORS, HTTP_STATUS and
#                                     the code unions SandboxCheckpointErrorCode
#                                     and SandboxPersistServerErrorCode
#   clients/node/src/errors.ts        the region between the marker comments:
#                                     the upstream-named SandboxCheckpoint*Error
#                                     classes and CHECKPOINT_CLASSES
#   README.md, docs/contract/README.md
#                                     the error table between the marker comments
#
# The C compiler expands the table (test/scripts/vocabulary_dump.c), so what is
# written holds exactly what the extension is built with.
#
#   bash scripts/gen_error_codes.sh                 rewrite the files of this tree
#   bash scripts/gen_error_codes.sh --check [TREE]  print how TREE's files (this
#                                                   tree by default) differ from
#                                                   what its src/errors.h makes;
#                                                   exit 1 when they do
#
# make error-codes runs the first form; test/scripts/vocabulary.sh the second.
# A file only changes when its content does, so a second run changes nothing.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mode='write'
if [ "${1:-}" = --check ]; then
    mode='check'
    shift
fi
tree=$(cd "${1:-$ROOT}" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Upstream's (@tanstack/ai-sandbox) class name for each checkpoint code it has
# a class for. This is the one fact the generator adds to errors.h: upstream
# chose the names (SANDBOX_SNAPSHOT_STALE_HEAD is a "Conflict"), and the other
# SANDBOX_SNAPSHOT_* codes have no class there, so they stay plain
# SandboxCheckpointErrors. A code listed here that errors.h lacks is an error.
UPSTREAM_CLASSES='SANDBOX_SNAPSHOT_STALE_HEAD SandboxCheckpointConflictError
SANDBOX_SNAPSHOT_PARENT_MISMATCH SandboxCheckpointParentMismatchError
SANDBOX_SNAPSHOT_DUPLICATE_ID SandboxCheckpointDuplicateIdError
SANDBOX_SNAPSHOT_NOT_HEAD SandboxCheckpointNotHeadError
SANDBOX_SNAPSHOT_WRITER_CONFLICT SandboxCheckpointWriterConflictError
SANDBOX_SNAPSHOT_WRITER_LOST SandboxCheckpointWriterLostError
SANDBOX_SNAPSHOT_INVALID_ID SandboxCheckpointInvalidIdError
SANDBOX_SNAPSHOT_INVALID_ENTRY SandboxCheckpointInvalidEntryError'

"${CC:-cc}" -Wall -Werror -I"$tree/src" -o "$work/dump" "$ROOT/test/scripts/vocabulary_dump.c"
"$work/dump" >"$work/c.tsv"

# One line per error, in table order: SQLSTATE, code name, HTTP status (or
# empty), hint (or empty), upstream class (or empty); tab-separated.
printf '%s\n' "$UPSTREAM_CLASSES" >"$work/upstream.txt"
awk -F'\t' -v up="$work/upstream.txt" '
    BEGIN { while ((getline l < up) > 0) { split(l, f, " "); cls[f[1]] = f[2] } }
    $1 == "error" { order[++n] = $2; name[$2] = $3; known[$3] = 1 }
    $1 == "error_hint" { hint[$2] = $3 }
    $1 == "http_status" { http[$2] = $3 }
    END {
        for (c in cls) if (!(c in known)) { print "UPSTREAM_CLASSES names " c ", which src/errors.h lacks" > "/dev/stderr"; bad = 1 }
        if (bad) exit 1
        for (i = 1; i <= n; i++) {
            s = order[i]
            if (hint[s] ~ /\*\/|\t/) { print s ": a hint may not hold */ or a tab" > "/dev/stderr"; exit 1 }
            printf "%s\t%s\t%s\t%s\t%s\n", s, name[s], http[s], hint[s], cls[name[s]]
        }
    }' "$work/c.tsv" >"$work/errors.tsv"

# error_codes.ts, the whole file.
error_codes_ts() {
    cat <<'HEAD'
/**
 * The SQLSTATE of every class-SP error of the extension, its contract code
 * name and what the caller can do (the server sends the same text as the
 * error's HINT), and the code unions built from them. Generated from
 * SP_ERROR_TABLE in src/errors.h by scripts/gen_error_codes.sh (make
 * error-codes): do not edit by hand; the vocabulary suite fails when this file
 * and the header differ.
 */
export const SP_ERRORS = {
HEAD
    awk -F'\t' '{
        h = $4; gsub(/\\/, "\\\\", h); gsub(/\047/, "\\\047", h)
        printf "  %s: { code: \047%s\047, hint: %s },\n", $1, $2, (h == "" ? "undefined" : "\047" h "\047")
    }' "$work/errors.tsv"
    cat <<'MID'
} as const satisfies Record<string, { code: string; hint: string | undefined }>

/** A class-SP SQLSTATE the extension raises. */
export type SpSqlState = keyof typeof SP_ERRORS

/** The contract code name of a class-SP error. */
export type SpCodeName = (typeof SP_ERRORS)[SpSqlState]['code']

/** Contract codes of the checkpoint store (`@tanstack/ai-sandbox`): the SANDBOX_SNAPSHOT_* codes. */
export type SandboxCheckpointErrorCode =
MID
    union 'index($2, "SANDBOX_SNAPSHOT_") == 1'
    cat <<'MID'

/** Every other class-SP code: the server's part of `SandboxPersistErrorCode` (errors.ts adds the adapter's own). */
export type SandboxPersistServerErrorCode =
MID
    union 'index($2, "SANDBOX_SNAPSHOT_") != 1'
    cat <<'TAIL'

/**
 * The HTTP status the durable streams server answers for a SQLSTATE
 * (SP_HTTP_STATUS_TABLE in src/errors.h, docs/contract/streams.md §5); a
 * SQLSTATE missing here has no status of its own.
 */
export const HTTP_STATUS: Record<string, number> = {
TAIL
    awk -F'\t' '$1 == "http_status" { printf "  \047%s\047: %s,\n", $2, $3 }' "$work/c.tsv"
    echo '}'
}

# union AWK_CONDITION: the members of a union type, each with its SQLSTATE and
# hint as a doc comment, for the errors the condition selects.
union() {
    awk -F'\t' "$1"' { printf "  /** %s%s */\n  | \047%s\047\n", $1, ($4 == "" ? "" : ": " $4), $2 }' "$work/errors.tsv"
}

# The region of errors.ts: one line per upstream-named class (the rest of each
# class is checkpointErrorClass in errors.ts) and the map translateError uses.
errors_ts_region() {
    awk -F'\t' '$5 != "" {
        printf "/** %s `%s`%s */\n", $1, $2, ($4 == "" ? "" : ": " $4)
        printf "export class %s extends checkpointErrorClass(\047%s\047, \047%s\047) {}\n", $5, $2, $5
    }' "$work/errors.tsv"
    echo
    echo '/** The upstream-named class of each checkpoint code that has one. */'
    echo 'const CHECKPOINT_CLASSES: Partial<Record<SandboxCheckpointErrorCode, new (message: string, options?: SandboxPersistErrorFields) => SandboxCheckpointError>> = {'
    awk -F'\t' '$5 != "" { printf "  %s: %s,\n", $2, $5 }' "$work/errors.tsv"
    echo '}'
}

# The markdown error table of README.md and docs/contract/README.md.
markdown_table() {
    echo '| SQLSTATE | code name | HTTP | what the caller can do |'
    echo '| --- | --- | --- | --- |'
    awk -F'\t' '{
        h = $4; gsub(/\|/, "\\|", h)
        printf "| %s | `%s` | %s | %s |\n", $1, $2, ($3 == "" ? "" : $3), (h == "" ? "fix the input" : h)
    }' "$work/errors.tsv"
}

# splice FILE BEGIN END GENERATOR OUT: FILE with the lines between the one
# line that starts with BEGIN and the next that starts with END replaced by
# GENERATOR's output; the marker lines themselves stay.
splice() {
    local file=$1 begin=$2 end=$3 gen=$4 out=$5 n
    n=$(grep -c -- "^$begin" "$file" || true)
    if [ "$n" != 1 ] || ! grep -q -- "^$end" "$file"; then
        echo "gen_error_codes: ${file#"$tree"/} needs exactly one '$begin' ... '$end' marker pair" >&2
        return 1
    fi
    "$gen" >"$work/region"
    awk -v b="$begin" -v e="$end" -v r="$work/region" '
        skip && index($0, e) == 1 { skip = 0 }
        skip { next }
        { print }
        index($0, b) == 1 { while ((getline l < r) > 0) print l; skip = 1 }' "$file" >"$out"
}

TS_BEGIN='// generated by scripts/gen_error_codes.sh from src/errors.h: begin'
TS_END='// generated by scripts/gen_error_codes.sh: end'
MD_BEGIN='<!-- generated by scripts/gen_error_codes.sh from src/errors.h: begin -->'
MD_END='<!-- generated by scripts/gen_error_codes.sh: end -->'

mkdir -p "$work/out"
targets=(clients/node/src/error_codes.ts clients/node/src/errors.ts README.md docs/contract/README.md)
error_codes_ts >"$work/out/1"
splice "$tree/${targets[1]}" "$TS_BEGIN" "$TS_END" errors_ts_region "$work/out/2"
splice "$tree/${targets[2]}" "$MD_BEGIN" "$MD_END" markdown_table "$work/out/3"
splice "$tree/${targets[3]}" "$MD_BEGIN" "$MD_END" markdown_table "$work/out/4"

status=0
for i in "${!targets[@]}"; do
    file=$tree/${targets[$i]} new=$work/out/$((i + 1))
    cmp -s "$new" "$file" && continue
    if [ $mode = check ]; then
        status=1
        echo "${targets[$i]} differs from what scripts/gen_error_codes.sh makes of src/errors.h:"
        diff "$new" "$file" | sed -n 's/^</    generated:/p; s/^>/    in the file:/p' | head -20
    else
        # Written in place (not moved over) so the file keeps its mode and
        # whoever holds it open sees the new text.
        cat "$new" >"$file"
        echo "gen_error_codes: wrote ${targets[$i]}"
    fi
done
exit $status
