-- pgTAP: event_log_read_pieces, a resume token's read as rows (the adapter's
-- late reader; docs/contract/event-log.md §2.2, item 4). Cases RP1-RP3 (ours):
-- its rows hold exactly what event_log_read_verified returns, the entries in
-- order in pieces of about 16 kB, with the same checks and errors.
-- Run with: pg_prove -d <db> test/pgtap/event_log_pieces.sql (needs allow_test_reset).
BEGIN;
SELECT plan(22);
SELECT sandbox_persist._reset_for_tests();

-- The pieces' read put back together as event_log_read_verified's one value (jsonb).
CREATE FUNCTION pg_temp.joined(run text, after bigint, digest text, max_rows integer) RETURNS jsonb
LANGUAGE sql AS $$
    WITH p AS (SELECT r::jsonb AS r, row_number() OVER () AS n
                 FROM sandbox_persist.event_log_read_pieces(run, after, digest, max_rows) r)
    SELECT (SELECT r FROM p WHERE n = 1)
           || jsonb_build_object('entries', coalesce((SELECT jsonb_agg(e ORDER BY p.n, i)
                                                        FROM p, jsonb_array_elements(p.r) WITH ORDINALITY AS x(e, i)
                                                       WHERE p.n > 1), '[]'::jsonb))
$$;

CREATE FUNCTION pg_temp.verified(run text, after bigint, digest text, max_rows integer) RETURNS jsonb
LANGUAGE sql AS $$
    SELECT sandbox_persist.event_log_read_verified(run, after, digest, max_rows)::jsonb
$$;

-- 300 chunks of about 100 bytes, with one of 40 kB every 50th.
SELECT is(jsonb_array_length(sandbox_persist.event_log_append('rp/a',
           (SELECT json_agg(json_build_object('n', i, 'text',
                                              CASE WHEN i % 50 = 0 THEN repeat('y', 40000) ELSE repeat('x', 80) END))
              FROM generate_series(1, 300) i))::jsonb), 300, 'RP1 300 chunks appended');
CREATE TEMP TABLE rp_token AS
    SELECT (sandbox_persist.event_log_read_verified('rp/a', 0, NULL, 120)->'entries'->119->>'digest') AS digest;

-- RP1: the same read.
SELECT is(pg_temp.joined('rp/a', 0, NULL, 1000), pg_temp.verified('rp/a', 0, NULL, 1000),
          'RP1 the whole log: the same fields and entries');
SELECT is(pg_temp.joined('rp/a', 7, NULL, 100), pg_temp.verified('rp/a', 7, NULL, 100),
          'RP1 a range: the same');
SELECT is(pg_temp.joined('rp/a', 120, (SELECT digest FROM rp_token), 1000),
          pg_temp.verified('rp/a', 120, (SELECT digest FROM rp_token), 1000),
          'RP1 after a resume token: the same');
SELECT is(pg_temp.joined('rp/a', 0, NULL, 0), pg_temp.verified('rp/a', 0, NULL, 0),
          'RP1 max_rows 0: the fields only');
SELECT is((SELECT count(*) FROM sandbox_persist.event_log_read_pieces('rp/a', 0, NULL, 0)), 1::bigint,
          'RP1 max_rows 0: one row');
SELECT is(pg_temp.joined('rp/a', 300, NULL, 1000), pg_temp.verified('rp/a', 300, NULL, 1000),
          'RP1 at the tail: the same, no entry');
SELECT is(pg_temp.joined('rp/none', 0, NULL, 1000), pg_temp.verified('rp/none', 0, NULL, 1000),
          'RP1 no log: exists false, as the one-value read');
SELECT sandbox_persist.event_log_close('rp/a');
SELECT is(pg_temp.joined('rp/a', 290, NULL, 1000), pg_temp.verified('rp/a', 290, NULL, 1000),
          'RP1 a closed log: the same');
SELECT is((SELECT count(*) FROM sandbox_persist.event_logs WHERE run_id = 'rp/none'), 0::bigint,
          'RP1 a read creates nothing');

-- RP2: the pieces.
SELECT is((SELECT r::jsonb ? 'entries' FROM sandbox_persist.event_log_read_pieces('rp/a', 0, NULL) r LIMIT 1), false,
          'RP2 the first row holds the log''s fields, no entries');
SELECT is((SELECT bool_and(json_typeof(r) = 'array' AND json_array_length(r) > 0)
             FROM (SELECT r, row_number() OVER () AS n FROM sandbox_persist.event_log_read_pieces('rp/a', 0, NULL) r) p
            WHERE n > 1), true, 'RP2 every other row is a non-empty array of entries');
SELECT is((SELECT array_agg((e->>'seq')::int ORDER BY p.n, i) = array_agg(g ORDER BY g)
             FROM (SELECT r::jsonb AS r, row_number() OVER () AS n
                     FROM sandbox_persist.event_log_read_pieces('rp/a', 0, NULL) r) p,
                  jsonb_array_elements(p.r) WITH ORDINALITY AS x(e, i),
                  LATERAL (SELECT (e->>'seq')::int AS g) s
            WHERE p.n > 1), true, 'RP2 the entries come oldest first, each once');
-- a piece ends with the first entry that takes it to 16 kB: without its last entry it is smaller
SELECT is((SELECT count(*)
             FROM (SELECT r, row_number() OVER () AS n, count(*) OVER () AS rows
                     FROM sandbox_persist.event_log_read_pieces('rp/a', 0, NULL) r) p
            WHERE n > 1 AND (length(r::text) - length((r->(json_array_length(r) - 1))::text) > 16384
                             OR (n < rows AND length(r::text) < 16384))), 0::bigint,
          'RP2 every piece but the last reaches 16 kB with its last entry and not before');
SELECT results_eq($$SELECT (r->(json_array_length(r) - 1)->>'seq')::int
                      FROM (SELECT r, row_number() OVER () AS n FROM sandbox_persist.event_log_read_pieces('rp/a', 0, NULL) r) p
                     WHERE n > 1 ORDER BY n$$,
                  $$VALUES (50), (100), (150), (200), (250), (300)$$,
                  'RP2 49 small chunks and one of 40 kB make a piece: each 40 kB chunk ends one');
SELECT is((SELECT count(*) FROM sandbox_persist.event_log_read_pieces('rp/a', 0, NULL, 10)), 2::bigint,
          'RP2 a small read is one piece');

-- RP3: the same checks and errors.
SELECT throws_ok($$SELECT * FROM sandbox_persist.event_log_read_pieces('rp/none', 5, NULL)$$, 'SP401',
                 NULL, 'RP3 a missing log read after 0: SP401, as the one-value read');
SELECT throws_ok($$SELECT * FROM sandbox_persist.event_log_read_pieces('rp/a', 301, NULL)$$, 'SP402',
                 NULL, 'RP3 beyond the tail without a digest: SP402');
SELECT throws_ok($$SELECT * FROM sandbox_persist.event_log_read_pieces('rp/a', 5, '0123456789abcdef')$$, 'SP405',
                 NULL, 'RP3 a token naming other content: SP405');
SELECT throws_ok($$SELECT * FROM sandbox_persist.event_log_read_pieces('rp/a', -1, NULL)$$, '22023',
                 'after_seq must not be negative', 'RP3 a negative offset: 22023');
SELECT throws_ok($$SELECT * FROM sandbox_persist.event_log_read_pieces('rp/a', 0, NULL, -2)$$, '22023',
                 NULL, 'RP3 a negative max_rows: 22023');
SELECT throws_ok($$SELECT * FROM sandbox_persist.event_log_read_pieces(NULL, 0, NULL)$$, '22004',
                 NULL, 'RP3 no run id: 22004, as the one-value read');

SELECT * FROM finish();
ROLLBACK;
