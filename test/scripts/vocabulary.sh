#!/usr/bin/env bash
# Issue 12 item 2, one vocabulary: the run and interrupt statuses, the
# content-address key rule, the NOTIFY channels and payload bound, the lock
# key prefixes and the SP error table have one home in C (src/contract.h,
# src/errors.h). What can be generated from them is: scripts/gen_error_codes.sh
# writes the Node adapter's error codes, code unions and upstream-named error
# classes and the error tables of README.md and docs/contract/README.md, and
# this test requires those to be exactly what it makes of errors.h. The rest
# cannot be generated (SQL the released upgrade scripts fix, hand-written code
# that spells a status), so this test compiles test/scripts/vocabulary_dump.c
# against the headers and checks every place that names them:
#   the installed catalog   CHECK constraints, partial-index predicates, the
#                           views and SQL functions (status literals, lock key
#                           prefixes, the content-key regular expression, the
#                           overview's runs_<status> columns)
#   the C sources           no file but the two headers spells a status, a
#                           channel, a prefix, an SP code or a code name
#   the router              router/custom.sql's notice bounds are the payload bound
#   the generated files     scripts/gen_error_codes.sh --check: error_codes.ts,
#                           the marked region of errors.ts, the marked error
#                           tables of README.md and docs/contract/README.md
#   the Node adapter        errors.ts keeps no SQLSTATE table of its own,
#                           InterruptStatus, the terminal set, the channels,
#                           and RunStatus/TerminalRunStatus of @tanstack/ai
#                           when clients/node has its packages installed
#   the documents           the run status list of docs/contract/runs.md
# Then it proves it can fail: it changes one word in a copy of a header, of the
# adapter, of a generated file, of a C file, and in the catalog inside a
# transaction that is rolled back, and requires each change to be caught.
#
# Runs against the cluster named by PGHOST/PGPORT/PGUSER/PGDATABASE (the
# extension installed), from any directory. Prints "ok"/"not ok" lines and one
# closing "summary: vocabulary: ..." line; exits non-zero on any mismatch or
# on a change that went unnoticed.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
CC=${CC:-cc}
PSQL=(psql -X -q -At -v ON_ERROR_STOP=1)

# ---------------------------------------------------------------- extraction

# dump_c SRCDIR OUT: the C vocabulary of the headers in SRCDIR.
dump_c() {
    "$CC" -Wall -Werror -I"$1" -o "$work/dump" "$ROOT/test/scripts/vocabulary_dump.c" &&
        "$work/dump" >"$2"
}

# c_list CDUMP KIND: the values of one kind, one a line, sorted.
c_list() { awk -F'\t' -v k="$2" '$1 == k { print $2 }' "$1" | LC_ALL=C sort -u; }

# dump_catalog CDUMP OUT [SQL]: what the installed catalog says, one fact a
# line, read inside a transaction that first runs SQL and is rolled back.
dump_catalog() {
    local cdump=$1 out=$2 pre=${3:-}
    local fp ap len digits cre
    fp=$(awk -F'\t' '$1 == "content_prefix" { print $2; exit }' "$cdump")
    ap=$(awk -F'\t' '$1 == "content_prefix" { n++; if (n == 2) { print $2; exit } }' "$cdump")
    len=$(awk -F'\t' '$1 == "content_hex_len" { print $2 }' "$cdump")
    digits=$(awk -F'\t' '$1 == "content_hex_digits" { print $2 }' "$cdump")
    cre=$(awk -F'\t' '$1 == "content_sql_regex" { print $2 }' "$cdump")
    cre=${cre#\'}
    cre=${cre%\'}
    "${PSQL[@]}" -F $'\t' -v fp="$fp" -v ap="$ap" -v len="$len" -v digits="$digits" -v cre="$cre" \
        >"$out" <<SQL
BEGIN;
$pre
-- Every SQL text of the extension: view definitions and the bodies of its
-- SQL and PL/pgSQL functions, whitespace folded.
CREATE TEMP VIEW vocab_texts AS
    SELECT 'view ' || c.oid::regclass::text AS object,
           regexp_replace(pg_get_viewdef(c.oid), '\s+', ' ', 'g') AS body
      FROM pg_class c
     WHERE c.relnamespace = 'sandbox_persist'::regnamespace AND c.relkind IN ('v', 'm')
    UNION ALL
    SELECT 'function ' || p.oid::regprocedure::text, regexp_replace(p.prosrc, '\s+', ' ', 'g')
      FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
     WHERE p.pronamespace = 'sandbox_persist'::regnamespace AND l.lanname IN ('sql', 'plpgsql');
-- Tables that have a status column.
SELECT 'status_table', c.relname
  FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
 WHERE c.relnamespace = 'sandbox_persist'::regnamespace AND c.relkind = 'r'
   AND a.attname = 'status' AND NOT a.attisdropped;
-- Literals of CHECK constraints that name status.
SELECT 'check', c.conrelid::regclass::text, m[1]
  FROM pg_constraint c, regexp_matches(pg_get_constraintdef(c.oid), '''([^'']*)''', 'g') m
 WHERE c.contype = 'c' AND c.connamespace = 'sandbox_persist'::regnamespace
   AND pg_get_constraintdef(c.oid) ~ '\mstatus\M';
-- Literals of partial-index predicates that name status.
SELECT 'index', x.indexrelid::regclass::text, x.indrelid::regclass::text, m[1]
  FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid,
       regexp_matches(pg_get_expr(x.indpred, x.indrelid), '''([^'']*)''', 'g') m
 WHERE c.relnamespace = 'sandbox_persist'::regnamespace AND x.indpred IS NOT NULL
   AND pg_get_expr(x.indpred, x.indrelid) ~ '\mstatus\M';
-- status = 'x', status <> 'x', status IN ('x', ...), status = ANY (ARRAY['x'::text, ...]).
SELECT 'text_status', t.object, w[1]
  FROM vocab_texts t,
       regexp_matches(t.body, '\mstatus\M\s*(?:=|<>|!=)\s*(''[^'']*'')', 'g') m,
       regexp_matches(m[1], '''([^'']*)''', 'g') w
UNION ALL
SELECT 'text_status', t.object, w[1]
  FROM vocab_texts t,
       regexp_matches(t.body, '\mstatus\M\s*(?:IN\s*\(|=\s*ANY\s*\(\s*ARRAY\[)([^])]*)', 'gi') m,
       regexp_matches(m[1], '''([^'']*)''', 'g') w;
-- A detail (or any literal) that starts with an SP code name and a colon: the
-- SQLSTATE is the key, a detail is a sentence (docs/contract/README.md §4.1).
SELECT 'text_code_prefix', t.object, m[1]
  FROM vocab_texts t, regexp_matches(t.body, '''([A-Z][A-Z0-9_]+): ', 'g') m;
-- The overview's per-status run counts.
SELECT 'overview_status', substr(a.attname, 6)
  FROM pg_attribute a
 WHERE a.attrelid = 'sandbox_persist.overview'::regclass AND a.attnum > 0
   AND a.attname LIKE 'runs\_%' AND a.attname NOT LIKE 'runs\_detached%';
-- Lock keys a SQL text builds: lock_key = 'prefix' || ...
SELECT 'text_lock_prefix', t.object, m[1]
  FROM vocab_texts t, regexp_matches(t.body, 'lock_key\s*=\s*''([^'']*)''', 'g') m;
-- Content-key regular expressions (in SQL texts, and the one contract.h
-- builds for maintenance) against keys made from the C rule: every prefix
-- with every digit of the alphabet matches; a digit short or over, any other
-- character of [0-9A-Za-z], another prefix do not.
WITH rx AS (
    SELECT t.object, m[1] AS re
      FROM vocab_texts t, regexp_matches(t.body, '~\s*''([^'']*)''', 'g') m
     WHERE m[1] LIKE '%sha256%' OR m[1] LIKE '%sandbox-%'
    UNION ALL
    SELECT 'contract.h SP_SQL_CONTENT_KEY_REGEX', :'cre'
), body AS (
    SELECT left(repeat(:'digits', :len), :len) AS b
), chars AS (
    SELECT chr(c) AS ch FROM generate_series(48, 57) c
    UNION ALL SELECT chr(c) FROM generate_series(65, 90) c
    UNION ALL SELECT chr(c) FROM generate_series(97, 122) c
), samples AS (
    SELECT p || b AS key, true AS want FROM body, unnest(ARRAY[:'fp', :'ap']) p
    UNION ALL
    SELECT p || repeat(ch, :len), strpos(:'digits', ch) > 0
      FROM chars, unnest(ARRAY[:'fp', :'ap']) p
    UNION ALL
    SELECT p || left(b, :len - 1), false FROM body, unnest(ARRAY[:'fp', :'ap']) p
    UNION ALL
    SELECT p || b || left(:'digits', 1), false FROM body, unnest(ARRAY[:'fp', :'ap']) p
    UNION ALL
    SELECT 'sandbox-other/sha256/' || b, false FROM body
)
SELECT 'regex', rx.object, count(*) FILTER (WHERE (s.key ~ rx.re) <> s.want),
       min(s.key) FILTER (WHERE (s.key ~ rx.re) <> s.want)
  FROM rx, samples s GROUP BY rx.object, rx.re;
ROLLBACK;
SQL
}

# ---------------------------------------------------------------- checks

failures=0
checks=0

# report NAME EXPECTED_FILE ACTUAL_FILE: compare two sorted lists.
report() {
    checks=$((checks + 1))
    if cmp -s "$2" "$3"; then
        [ -n "${QUIET:-}" ] || echo "ok - $1"
    else
        failures=$((failures + 1))
        echo "not ok - $1"
        diff "$2" "$3" | sed -n 's/^</    C (contract.h, errors.h):/p; s/^>/    found:/p' | head -20
    fi
}

# report_empty NAME FILE: the file (a list of offending lines) must be empty.
report_empty() {
    checks=$((checks + 1))
    if [ ! -s "$2" ]; then
        [ -n "${QUIET:-}" ] || echo "ok - $1"
    else
        failures=$((failures + 1))
        echo "not ok - $1"
        sed 's/^/    /' "$2" | head -20
    fi
}

# sorted: stdin to a sorted, de-duplicated list.
sorted() { LC_ALL=C sort -u; }

# check_all TREE CDUMP CATALOG: run every check of one tree (sources,
# adapter and documents) and one C dump against one catalog dump.
check_all() {
    local tree=$1 cdump=$2 cat=$3 t="$work/t"
    mkdir -p "$t"
    c_list "$cdump" run_status >"$t/run"
    c_list "$cdump" run_terminal >"$t/terminal"
    c_list "$cdump" run_unfinished >"$t/unfinished"
    c_list "$cdump" interrupt_status >"$t/interrupt"
    c_list "$cdump" channel >"$t/channels"
    c_list "$cdump" lock_prefix >"$t/lock_prefixes"
    awk -F'\t' '$1 == "error" { print $2 " " $3 }' "$cdump" | sorted >"$t/errors"
    sort -u "$t/run" "$t/interrupt" >"$t/all_status"

    # C, on its own: the sets are consistent and the table has no duplicates.
    comm -3 <(sort -u "$t/terminal" "$t/unfinished") "$t/run" >"$t/x"
    report_empty "C: terminal and unfinished statuses partition the run statuses" "$t/x"
    comm -12 "$t/terminal" "$t/unfinished" >"$t/x"
    report_empty "C: no status is both terminal and unfinished" "$t/x"
    { awk '{ print $1 }' "$t/errors" | uniq -d
      awk '{ print $2 }' "$t/errors" | LC_ALL=C sort | uniq -d
      grep -Ev '^SP[0-9]{3} [A-Z][A-Z0-9_]*$' "$t/errors"; } >"$t/x"
    report_empty "C: every error has its own SP SQLSTATE and name" "$t/x"
    awk -F'\t' '$1 == "run_statuses_text" { print $2 }' "$cdump" | tr -d ' ' | tr , '\n' | sorted >"$t/x"
    report "C: the run status prose lists the run statuses" "$t/run" "$t/x"

    # The C sources repeat nothing the two headers own (comment lines aside).
    local words pat
    words=$(cat "$t/all_status" "$t/channels" "$t/lock_prefixes" | sed 's/[.[\*^$/]/\\&/g' | paste -sd'|')
    words="$words|$(c_list "$cdump" content_prefix | sed 's/[.[\*^$/]/\\&/g' | paste -sd'|')"
    words="$words|$(awk '{ print $1 "|" $2 }' "$t/errors" | paste -sd'|')"
    pat="[\"']($words)[\"']"
    (cd "$tree/src" && grep -nE "$pat" -- *.c *.h | grep -vE '^(contract|errors)\.h:' |
        grep -vE '^[^:]+:[0-9]+:[[:space:]]*(/\*|\*)') >"$t/x"
    report_empty "C: only contract.h and errors.h spell the vocabulary" "$t/x"

    # The catalog.
    awk -F'\t' '$1 == "status_table" { print $2 }' "$cat" | sorted >"$t/x"
    printf '%s\n' generation_runs interrupts runs | sorted >"$t/y"
    report "SQL: the tables with a status column are runs, generation_runs, interrupts" "$t/y" "$t/x"
    for tbl in runs generation_runs; do
        awk -F'\t' -v r="sandbox_persist.$tbl" '$1 == "check" && $2 == r { print $3 }' "$cat" | sorted >"$t/x"
        report "SQL: the status CHECK of $tbl lists the run statuses" "$t/run" "$t/x"
    done
    awk -F'\t' '$1 == "check" && $2 == "sandbox_persist.interrupts" { print $3 }' "$cat" | sorted >"$t/x"
    report "SQL: the status CHECKs of interrupts list the interrupt statuses" "$t/interrupt" "$t/x"
    awk -F'\t' '$1 == "index" && $2 == "sandbox_persist.runs_terminal" { print $4 }' "$cat" | sorted >"$t/x"
    report "SQL: the predicate of index runs_terminal is the terminal set" "$t/terminal" "$t/x"
    awk -F'\t' '$1 == "index" && $2 == "sandbox_persist.runs_running" { print $4 }' "$cat" | sorted >"$t/x"
    report "SQL: the predicate of index runs_running is the running status" \
        <(awk -F'\t' '$1 == "sql_run_running" { print $2 }' "$cdump" | tr -d "'") "$t/x"
    awk -F'\t' '$1 == "index" { print $3 "\t" $4 }' "$cat" |
        awk -F'\t' -v r="$t/run" -v i="$t/interrupt" '
            BEGIN { while ((getline w < r) > 0) run[w] = 1; while ((getline w < i) > 0) itr[w] = 1 }
            ($1 == "sandbox_persist.interrupts" && !($2 in itr)) ||
            ($1 != "sandbox_persist.interrupts" && !($2 in run)) { print "index on " $1 ": \x27" $2 "\x27" }' >"$t/x"
    report_empty "SQL: every status in an index predicate is a status of its table" "$t/x"
    awk -F'\t' '$1 == "text_status" { print $3 "\t" $2 }' "$cat" |
        awk -F'\t' -v s="$t/all_status" 'BEGIN { while ((getline w < s) > 0) ok[w] = 1 }
            !($1 in ok) { print $2 ": \x27" $1 "\x27" }' | sorted >"$t/x"
    report_empty "SQL: every status a view or SQL function compares with is a contract status" "$t/x"
    awk -F'\t' '$1 == "text_status" { print $3 }' "$cat" | grep -c . >"$t/n" || true
    checks=$((checks + 1))
    if [ "$(cat "$t/n")" -gt 0 ]; then
        [ -n "${QUIET:-}" ] || echo "ok - SQL: the status comparisons were found ($(cat "$t/n") literals)"
    else
        failures=$((failures + 1)); echo "not ok - SQL: no status comparison found in views and SQL functions (the extraction broke)"
    fi
    awk -F'\t' '$1 == "overview_status" { print $2 }' "$cat" | sorted >"$t/x"
    report "SQL: the overview view counts runs of each run status" "$t/run" "$t/x"
    awk -F'\t' '$1 == "text_lock_prefix" { print $3 }' "$cat" | sorted | comm -23 - "$t/lock_prefixes" >"$t/x"
    report_empty "SQL: every lock key prefix a SQL text builds is a contract prefix" "$t/x"
    awk -F'\t' '$1 == "regex" && $3 != 0 { print $2 ": " $3 " keys judged wrongly, e.g. " $4 }' "$cat" >"$t/x"
    awk -F'\t' '$1 == "regex" && $2 != "contract.h SP_SQL_CONTENT_KEY_REGEX"' "$cat" | grep -q . ||
        echo "no content-key regular expression found in the SQL texts (the extraction broke)" >>"$t/x"
    report_empty "SQL: every content-key regular expression accepts exactly the contract.h rule" "$t/x"

    awk -F'\t' '$1 == "text_code_prefix" { print $3 "\t" $2 }' "$cat" |
        awk -F'\t' -v e="$t/errors" 'BEGIN { while ((getline w < e) > 0) { split(w, f, " "); code[f[2]] = 1 } }
            ($1 in code) { print $2 ": a text starts with \x27" $1 ": " }' >"$t/x"
    grep -nE "'($(awk '{ print $2 }' "$t/errors" | paste -sd'|')): " "$tree/router/"*.sql 2>/dev/null |
        sed 's/^/router: /' >>"$t/x" || true
    report_empty "SQL: no detail starts with a code name (the SQLSTATE carries the code)" "$t/x"

    # The notification payload bound: contract.h's, in the router's notice and
    # in no C file as a bare number.
    local bound
    bound=$(awk -F'\t' '$1 == "notify_payload_max" { print $2 }' "$cdump")
    grep -noE "octet_length\([^)]*\) *(<|>=) *[0-9]+" "$tree/router/custom.sql" |
        awk -v b="$bound" '{ n = $NF; sub(/.*[<=] */, "", n); if (n != b) print "router/custom.sql:" $0 " (not " b ")" }' >"$t/x"
    grep -qE "octet_length\([^)]*\) *< *[0-9]+" "$tree/router/custom.sql" ||
        echo "no payload bound found in router/custom.sql (the extraction broke)" >>"$t/x"
    grep -nwE "$bound" "$tree/src/"*.c | sed 's/^/C: /' >>"$t/x" || true
    report_empty "the NOTIFY payload bound SP_NOTIFY_PAYLOAD_MAX: the router's notice uses it, no C file spells it" "$t/x"

    # What scripts/gen_error_codes.sh writes from errors.h, in this tree.
    bash "$ROOT/scripts/gen_error_codes.sh" --check "$tree" >"$t/x" 2>&1 || [ -s "$t/x" ] ||
        echo "scripts/gen_error_codes.sh --check failed without saying why" >"$t/x"
    report_empty "generated: what scripts/gen_error_codes.sh writes from errors.h is in the tree unchanged" "$t/x"

    # The Node adapter, by hand: it must translate by the generated table only.
    local ts="$tree/clients/node/src"
    grep -nE "SP_CODES|\^\(\[A-Z\]\[A-Z0-9_\]\*\): " "$ts/errors.ts" >"$t/x" || true
    report_empty "Node: errors.ts keeps no SQLSTATE table of its own and parses no code out of a detail" "$t/x"
    grep -oE "^export type InterruptStatus = .*" "$ts/types.ts" | grep -oE "'[a-z_]+'" | tr -d "'" | sorted >"$t/x"
    report "Node: the type InterruptStatus" "$t/interrupt" "$t/x"
    grep -E "^const TERMINAL = new Set\(" "$ts/durability.ts" | grep -oE "'[a-z_]+'" | tr -d "'" | sorted >"$t/x"
    report "Node: the terminal set of durability.ts" "$t/terminal" "$t/x"
    sed -nE "s/^export const [A-Z_]+_CHANNEL = '([^']*)'.*/\1/p" "$ts/listener.ts" | sorted >"$t/x"
    report "Node: the NOTIFY channels of listener.ts" "$t/channels" "$t/x"
    # The upstream types, once clients/node has its packages installed (npm ci):
    # RunStatus is 'running' | 'interrupted' | TerminalRunStatus.
    local dts
    dts=$(grep -rlE --include='*.d.ts' "type RunStatus =" "$tree/clients/node/node_modules/@tanstack/ai/dist" \
        2>/dev/null | head -1 || true)
    if [ -n "$dts" ]; then
        union_words() { grep -hoE "type $1 = [^;]*" "$dts" | head -1 | sed 's/^[^=]*=//'; }
        union_words TerminalRunStatus | grep -oE "'[a-z_]+'|\"[a-z_]+\"" | tr -d "'\"" | sorted >"$t/x"
        report "Node: TerminalRunStatus of @tanstack/ai is the terminal set" "$t/terminal" "$t/x"
        { union_words RunStatus | grep -oE "'[a-z_]+'|\"[a-z_]+\"" | tr -d "'\""
          if union_words RunStatus | grep -qw TerminalRunStatus; then cat "$t/x"; fi; } | sorted >"$t/x2"
        report "Node: RunStatus of @tanstack/ai is the run statuses" "$t/run" "$t/x2"
    elif [ -z "${QUIET:-}" ]; then
        echo "# skipped: RunStatus of @tanstack/ai (clients/node has no node_modules; npm ci installs them)"
    fi

    # The documents (their error tables are generated, above).
    tr '\n' ' ' <"$tree/docs/contract/runs.md" | sed -nE 's/.*`status` is one of (.*) a CHECK constraint enforces the set.*/\1/p' |
        grep -oE '`[a-z_]+`' | tr -d '`' | sorted >"$t/x"
    report "docs/contract/runs.md: the run statuses" "$t/run" "$t/x"
}

# ---------------------------------------------------------------- the real tree

dump_c "$ROOT/src" "$work/c.tsv" || { echo "summary: vocabulary: the C vocabulary does not compile"; exit 1; }
dump_catalog "$work/c.tsv" "$work/cat.tsv" || { echo "summary: vocabulary: cannot read the catalog"; exit 1; }
check_all "$ROOT" "$work/c.tsv" "$work/cat.tsv"
real_checks=$checks
real_failures=$failures

# ---------------------------------------------------------------- self-test

# A copy of what the checks read, to change one word in.
copy_tree() {
    rm -rf "$work/copy"
    mkdir -p "$work/copy/clients/node" "$work/copy/docs"
    cp -r "$ROOT/src" "$work/copy/src"
    cp -r "$ROOT/clients/node/src" "$work/copy/clients/node/src"
    cp -r "$ROOT/docs/contract" "$work/copy/docs/contract"
    cp -r "$ROOT/router" "$work/copy/router"
    cp "$ROOT/README.md" "$work/copy/README.md"
}

caught=0
missed=0
# mutation NAME FILE SED [CATALOG_SQL]: change FILE (relative to the copy) with
# SED, or the catalog with CATALOG_SQL; the checks must then fail.
mutation() {
    local name=$1 file=$2 expr=$3 sql=${4:-} before
    copy_tree
    if [ -n "$file" ]; then
        before=$(md5sum <"$work/copy/$file")
        sed -i -E "$expr" "$work/copy/$file"
        if [ "$before" = "$(md5sum <"$work/copy/$file")" ]; then
            missed=$((missed + 1)); echo "not ok - self-test: \"$name\" changed nothing in $file"; return
        fi
    fi
    if ! dump_c "$work/copy/src" "$work/mc.tsv"; then
        missed=$((missed + 1)); echo "not ok - self-test: \"$name\" does not compile"; return
    fi
    if ! dump_catalog "$work/mc.tsv" "$work/mcat.tsv" "$sql"; then
        missed=$((missed + 1)); echo "not ok - self-test: \"$name\" broke the catalog query"; return
    fi
    failures=0
    QUIET=1 check_all "$work/copy" "$work/mc.tsv" "$work/mcat.tsv" >"$work/mout" 2>&1
    if [ $failures -gt 0 ]; then
        caught=$((caught + 1))
        echo "ok - self-test: $name is caught by: $(grep '^not ok' "$work/mout" | head -1 | sed 's/^not ok - //')"
    else
        missed=$((missed + 1)); echo "not ok - self-test: $name went unnoticed"
    fi
}

mutation "the NOTIFY payload bound changed in contract.h only" src/contract.h \
    's/(define SP_NOTIFY_PAYLOAD_MAX) 7900/\1 7800/'
mutation "the NOTIFY payload bound spelt as a number in a C file" src/maintenance.c \
    's/SP_NOTIFY_PAYLOAD_MAX/7900/'
mutation "a run status renamed in contract.h only" src/contract.h \
    's/^#define SP_RUN_ABORTED "aborted"/#define SP_RUN_ABORTED "cancelled"/'
mutation "an interrupt status renamed in contract.h only" src/contract.h \
    's/^#define SP_INTERRUPT_PENDING "pending"/#define SP_INTERRUPT_PENDING "waiting"/'
mutation "a status moved out of the terminal set in contract.h only" src/contract.h \
    's/^#define SP_RUN_TERMINAL_STATUSES SP_RUN_COMPLETED, SP_RUN_FAILED, SP_RUN_ABORTED/#define SP_RUN_TERMINAL_STATUSES SP_RUN_COMPLETED, SP_RUN_FAILED/'
mutation "the content-key hash length changed in contract.h only" src/contract.h \
    's/^#define SP_CONTENT_HASH_HEX_LEN 64/#define SP_CONTENT_HASH_HEX_LEN 40/'
mutation "a channel renamed in contract.h only" src/contract.h \
    's/"sandbox_persist_event_log"/"sandbox_persist_events"/'
mutation "an SQLSTATE changed in errors.h only" src/errors.h \
    's/"SP404", "EVENT_LOG_FENCE_STALE"/"SP405", "EVENT_LOG_FENCE_STALE"/'
mutation "a code name changed in errors.h only" src/errors.h \
    's/"SP302", "BLOB_UPLOAD_NOT_FOUND"/"SP302", "BLOB_UPLOAD_MISSING"/'
mutation "a status literal repeated in a C file" src/claims.c \
    's/^PG_FUNCTION_INFO_V1\(run_claim\);/PG_FUNCTION_INFO_V1(run_claim);\nstatic const char *const claimable = "interrupted";/'
mutation "an SQLSTATE changed in error_codes.ts only" clients/node/src/error_codes.ts \
    "s/^  SP403: \\{ code: 'EVENT_LOG_PRODUCER_SEQ_CONFLICT'/  SP405: { code: 'EVENT_LOG_PRODUCER_SEQ_CONFLICT'/"
mutation "a hint changed in errors.h only" src/errors.h \
    's/"Resume the upload at the offset it has received so far."/"Resume the upload."/'
mutation "a code name parsed out of a detail again in errors.ts" clients/node/src/errors.ts \
    's|^export function translateError\(|const reparse = /^([A-Z][A-Z0-9_]*): ([\\s\\S]*)$/\nexport function translateError(|'
mutation "a detail that starts with a code name in the router" router/base.sql \
    "s/DETAIL = 'The client clock/DETAIL = 'CLIENT_CLOCK_NOT_ALLOWED: The client clock/"
mutation "a detail that starts with a code name in a SQL function" "" "" \
    "CREATE OR REPLACE FUNCTION sandbox_persist._vocab_probe() RETURNS void LANGUAGE plpgsql
         AS \$\$ BEGIN RAISE EXCEPTION 'x' USING ERRCODE = 'SP015', DETAIL = 'SANDBOX_SNAPSHOT_FORK_BLOB_MISSING: x.'; END \$\$;"
mutation "a code dropped from the checkpoint union of error_codes.ts" clients/node/src/error_codes.ts \
    "/^  \| 'SANDBOX_SNAPSHOT_NOT_HEAD'$/d"
mutation "a generated class given another code by hand in errors.ts" clients/node/src/errors.ts \
    "s/checkpointErrorClass\('SANDBOX_SNAPSHOT_NOT_HEAD'/checkpointErrorClass('SANDBOX_SNAPSHOT_STALE_HEAD'/"
mutation "the generated error table's end marker deleted from README.md" README.md \
    '/^<!-- generated by scripts\/gen_error_codes.sh: end -->$/d'
mutation "a status dropped from the terminal set of durability.ts" clients/node/src/durability.ts \
    "s/^const TERMINAL = new Set\(\['completed', 'failed', 'aborted'\]\)/const TERMINAL = new Set(['completed', 'failed'])/"
mutation "an interrupt status renamed in types.ts" clients/node/src/types.ts \
    "s/^export type InterruptStatus = 'pending'/export type InterruptStatus = 'waiting'/"
mutation "a channel renamed in listener.ts" clients/node/src/listener.ts \
    "s/^export const LOCK_CHANNEL = 'sandbox_persist_lock'/export const LOCK_CHANNEL = 'sandbox_persist_locks'/"
mutation "a code name changed in the README Errors table" README.md \
    's/^\| SP201 \| `RUN_EPOCH_NOT_INCREASING`/| SP201 | `RUN_EPOCH_NOT_RISING`/'
mutation "a code dropped from the docs/contract error table" docs/contract/README.md \
    '/^\| SP103 \|/d'
mutation "a status renamed in docs/contract/runs.md" docs/contract/runs.md \
    's/^`interrupted` \(a human-in-the-loop pause/`paused` (a human-in-the-loop pause/'
# The catalog, changed inside the transaction the checks read it in.
mutation "a status dropped from the CHECK of generation_runs" "" "" \
    "ALTER TABLE sandbox_persist.generation_runs DROP CONSTRAINT generation_runs_status_check;
     ALTER TABLE sandbox_persist.generation_runs ADD CONSTRAINT generation_runs_status_check
         CHECK (status IN ('running', 'interrupted', 'completed', 'failed')) NOT VALID;"
mutation "a status misspelt in a SQL function" "" "" \
    "CREATE OR REPLACE FUNCTION sandbox_persist._vocab_probe() RETURNS bigint LANGUAGE sql
         AS \$\$ SELECT count(*) FROM sandbox_persist.runs WHERE status = 'runing' \$\$;"
mutation "a content-key pattern that accepts uppercase hex in a view" "" "" \
    "CREATE VIEW sandbox_persist._vocab_probe AS SELECT blob_key FROM sandbox_persist.blobs
         WHERE blob_key ~ '^sandbox-(files|artifacts)/sha256/[0-9a-fA-F]{64}\$';"
mutation "a lock key prefix misspelt in a SQL function" "" "" \
    "CREATE OR REPLACE FUNCTION sandbox_persist._vocab_probe() RETURNS bigint LANGUAGE sql
         AS \$\$ SELECT count(*) FROM sandbox_persist.locks l WHERE l.lock_key = 'run_driver:' || 'x' \$\$;"

echo "summary: vocabulary: $real_checks checks, $real_failures mismatches;" \
    "self-test: $((caught + missed)) one-place changes, $caught caught, $missed missed"
[ "$real_failures" -eq 0 ] && [ "$missed" -eq 0 ]
