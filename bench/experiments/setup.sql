-- bench/experiments/setup.sql: run once in the scratch database (sp_bench) by checkpoints.sh.
-- Creates the extension and the deterministic data generators the two
-- benchmarks use. Everything the benchmarks create outside the extension's
-- own tables lives in schema "bench" and disappears with the database.

CREATE EXTENSION sandbox_persist;
CREATE SCHEMA bench;

-- Deterministic pseudo-prose of exactly nbytes ASCII bytes (words are hex
-- fragments of md5, so the text does not compress much, like real chat text).
CREATE FUNCTION bench.filler(seed text, nbytes int) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT left(string_agg(substr(md5(seed || ':' || j), 1, 3 + j % 7), ' ' ORDER BY j), nbytes)
    FROM generate_series(1, nbytes / 4 + 8) AS j
$$;

-- Transcript message k (1-based) as the exact JSON text a client would send
-- (JSON.stringify style: no whitespace). A four-message cycle of user prompt,
-- assistant tool call (content null), tool result and assistant answer, each
-- about 1 KB, with \n and \u00e9 escapes so byte-exact storage is exercised.
CREATE FUNCTION bench.message(k int) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE k % 4
        WHEN 1 THEN
            '{"role":"user","content":'
            || replace(to_json(format(E'Turn %s: please check src/pkg_%s/module_%s/file_%s.ts and explain the caf@E@ bug.\n',
                                       k, k % 17, k % 5, k % 43)
                               || bench.filler('u' || k, 880))::text, '@E@', '\u00e9')
            || '}'
        WHEN 2 THEN
            '{"role":"assistant","content":null,"toolCalls":[{"id":"call_' || k
            || '","type":"function","function":{"name":"read_file","arguments":'
            || to_json(format('{"path":"src/pkg_%s/module_%s/file_%s.ts","reason":"%s"}',
                              k % 17, k % 5, k % 43, bench.filler('a' || k, 820)))::text
            || '}}]}'
        WHEN 3 THEN
            '{"role":"tool","toolCallId":"call_' || (k - 1) || '","content":'
            || to_json(E'export function f' || k || E'() {\n  return "'
                       || bench.filler('t' || k, 880) || E'";\n}\n')::text
            || '}'
        ELSE
            '{"role":"assistant","content":'
            || replace(to_json(E'The caf@E@ bug comes from this:\n' || bench.filler('r' || k, 900))::text,
                       '@E@', '\u00e9')
            || '}'
    END
$$;

-- A file list of exactly n entries, as JSON text in capture order (sorted by
-- path bytes): nested paths src/pkg_P/module_M/file_F.ts (10 files per
-- module, 10 modules per package), plus max(2, n/50) empty "dir" entries.
-- Keys look like sha256 hex; every 10th file reuses one of 8 shared keys (a
-- LICENSE or index.ts that is identical across packages), the rest are
-- distinct per (seed, file).
CREATE FUNCTION bench.files_json(n int, seed text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    WITH counts AS (
        SELECT greatest(2, n / 50) AS ndirs, n - greatest(2, n / 50) AS nfiles
    ), entries AS (
        SELECT format('src/pkg_%s/module_%s/file_%s.%s', i / 100, (i / 10) % 10, i % 10,
                      CASE WHEN i % 7 = 0 THEN 'tsx' ELSE 'ts' END) AS path,
               format('{"path":"%s","kind":"file","blobKey":"sandbox-files/sha256/%s","size":%s}',
                      format('src/pkg_%s/module_%s/file_%s.%s', i / 100, (i / 10) % 10, i % 10,
                             CASE WHEN i % 7 = 0 THEN 'tsx' ELSE 'ts' END),
                      encode(sha256(convert_to(CASE WHEN i % 10 = 0
                                                    THEN 'shared-' || (i / 10) % 8
                                                    ELSE seed || '-' || i END, 'UTF8')), 'hex'),
                      (i * 7919) % 65536) AS entry
        FROM counts, generate_series(0, nfiles - 1) AS i
        UNION ALL
        SELECT format('assets/empty_%s/cache', j),
               format('{"path":"assets/empty_%s/cache","kind":"dir"}', j)
        FROM counts, generate_series(0, ndirs - 1) AS j
    )
    SELECT '[' || string_agg(entry, ',' ORDER BY path COLLATE "C") || ']' FROM entries
$$;

-- Minor page faults of this backend so far (Linux /proc/self/stat, field 10),
-- or NULL where that file cannot be read. Diagnostic only: it shows how much
-- fresh memory an append touches, the cause of the non-linearity measured in
-- benchmark (b) (see README).
CREATE FUNCTION bench.minflt() RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    stat text;
BEGIN
    stat := pg_read_file('/proc/self/stat');
    -- fields after "pid (comm) ": state ppid pgrp session tty_nr tpgid flags minflt
    RETURN split_part(substr(stat, length(stat) - strpos(reverse(stat), ')') + 3), ' ', 8)::bigint;
EXCEPTION WHEN OTHERS THEN
    RETURN NULL;
END
$$;

-- This backend's scheduler statistics so far (Linux /proc/self/schedstat):
-- {nanoseconds on a CPU, nanoseconds waiting in the run queue}, or NULL.
-- Diagnostic only: on a busy shared machine, run-queue waiting inflates
-- wall-clock times, while on-CPU time (which still includes page faults)
-- stays close to the quiet-machine value.
CREATE FUNCTION bench.schedstat() RETURNS bigint[]
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    f text[];
BEGIN
    f := regexp_split_to_array(btrim(pg_read_file('/proc/self/schedstat')), '\s+');
    RETURN ARRAY[f[1]::bigint, f[2]::bigint];
EXCEPTION WHEN OTHERS THEN
    RETURN NULL;
END
$$;
