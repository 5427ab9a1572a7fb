-- pgTAP: reliability regressions for time arithmetic, lock batches and size
-- limits (issue 9, defects 4, 5, 6 and 10; defect 8 is the isolation spec
-- x21_lease_judged_after_row_lock).
--
-- Defect 4: a streamed-upload piece is refused above a documented maximum
--   (so tail + piece can never exceed one allocation); nothing is staged.
-- Defect 5: a far-past or far-future now_ms never wraps a cutoff: maintain(),
--   blob_head() and instance_gc_candidates() treat such clocks saturated.
-- Defect 6: lock_renew_many matches each entry on key AND token.
-- Defect 10: blob_max_read is capped so a whole read can always be sent.
--
-- Run with: pg_prove -d <db> test/pgtap/reliability_time.sql
-- (needs sandbox_persist.allow_test_reset and allow_client_clock on).
-- One case builds a single 256 MiB value (defect 4).
BEGIN;
SELECT plan(40);
SELECT sandbox_persist._reset_for_tests();
SET LOCAL sandbox_persist.allow_client_clock = on;

------------------------------------------------------------------------------
-- Helpers (temporary, gone at ROLLBACK).
------------------------------------------------------------------------------

-- The wall clock in epoch milliseconds (what the server stamps).
CREATE FUNCTION pg_temp.now_ms() RETURNS bigint LANGUAGE sql AS $$
    SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint
$$;

-- Every row of every data table of the extension except maintenance's own
-- bookkeeping (maintenance_state, attention), in a fixed order: equal values
-- mean nothing changed. Chunk data is summarised by its md5.
CREATE FUNCTION pg_temp.state() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    t regclass;
    part text;
    acc text := '';
BEGIN
    FOR t IN
        SELECT c.oid::regclass FROM pg_extension e, unnest(e.extconfig) AS x(oid)
        JOIN pg_class c ON c.oid = x.oid
        WHERE e.extname = 'sandbox_persist' AND c.relkind = 'r'
          AND c.relname NOT IN ('maintenance_state', 'attention', 'blob_chunks')
        ORDER BY c.relname
    LOOP
        EXECUTE format($q$SELECT %L || ':' || count(*) || E'\n' ||
                              coalesce(string_agg(x::text, E'\n' ORDER BY x::text), '')
                         FROM %s x$q$, t::text, t) INTO part;
        acc := acc || part || E'\n';
    END LOOP;
    RETURN acc || 'blob_chunks:' ||
        (SELECT count(*) || E'\n' || coalesce(string_agg(format('%s/%s/%s', c.version, c.chunk_offset,
                                                                md5(c.data)), E'\n'
                                                         ORDER BY c.version, c.chunk_offset), '')
           FROM sandbox_persist.blob_chunks c);
END
$$;

\ir lib/durable_helpers.psql

-- {sqlstate, message, detail, hint} of the error a statement raises (NULLs
-- when it succeeds). The attempt is always undone.
CREATE FUNCTION pg_temp.err(stmt text) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    st text; msg text; det text; hnt text;
BEGIN
    BEGIN
        EXECUTE stmt;
        RAISE EXCEPTION USING ERRCODE = 'ZZ999', MESSAGE = 'no error';
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
    END;
    IF st = 'ZZ999' THEN
        RETURN ARRAY[NULL, NULL, NULL, NULL]::text[];
    END IF;
    RETURN ARRAY[st, msg, det, hnt];
END
$$;

-- Values kept between statements, by name.
CREATE TEMP TABLE kept (name text PRIMARY KEY, v text);
CREATE FUNCTION pg_temp.keep(n text, v text) RETURNS text LANGUAGE sql AS $$
    INSERT INTO pg_temp.kept VALUES (n, v) ON CONFLICT (name) DO UPDATE SET v = EXCLUDED.v
    RETURNING v
$$;
CREATE FUNCTION pg_temp.got(n text) RETURNS text LANGUAGE sql AS $$
    SELECT v FROM pg_temp.kept WHERE name = n
$$;

------------------------------------------------------------------------------
-- Defect 4: an upload piece above the maximum piece size.
------------------------------------------------------------------------------
SELECT pg_temp.keep('d4.id', sandbox_persist.blob_upload_begin('d4/big'));
SELECT is(sandbox_persist.blob_upload_append(pg_temp.got('d4.id'), 0, '\x0102030405'::bytea)::text,
    '{"received":5}', 'issue 9 defect 4: (setup) a 5-byte piece leaves a 5-byte tail');
-- 256 MiB + 1 bytes; convert_to in the database encoding does not copy.
SELECT pg_temp.state() AS d4_before \gset
SELECT pg_temp.err(format($$SELECT sandbox_persist.blob_upload_append(%L, 5,
                                convert_to(repeat('a', 268435457), current_setting('server_encoding')))$$,
                          pg_temp.got('d4.id'))) AS d4_err \gset
SELECT is((:'d4_err'::text[])[1], '54000',
    'issue 9 defect 4: a piece of 256 MiB + 1 bytes onto an upload with a tail -> 54000, not XX000');
SELECT matches((:'d4_err'::text[])[2], '268435456',
    'issue 9 defect 4: the message names the maximum piece size (268435456 bytes)');
SELECT matches((:'d4_err'::text[])[3], '268435457',
    'issue 9 defect 4: the detail names the size of the refused piece');
SELECT is(pg_temp.state(), :'d4_before',
    'issue 9 defect 4: nothing staged: upload row, tail and chunks unchanged');
SELECT is(sandbox_persist.blob_upload_append(pg_temp.got('d4.id'), 5, '\x06'::bytea)::text,
    '{"received":6}', 'issue 9 defect 4: the upload still takes the next piece at offset 5');
SELECT is((SELECT body FROM sandbox_persist.blob_get('d4/big')), NULL::bytea,
    'issue 9 defect 4: (control) the upload is still invisible to readers');
SELECT is(sandbox_persist.blob_upload_commit(pg_temp.got('d4.id'))->>'size', '6',
    'issue 9 defect 4: commit publishes exactly the accepted 6 bytes');

------------------------------------------------------------------------------
-- Defect 5: cutoffs saturate instead of wrapping.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT pg_temp.now_ms() AS r \gset
SET LOCAL sandbox_persist.reaper_ttl = '1h';
SET LOCAL sandbox_persist.reaper_sweep_interval = '1min';
SET LOCAL sandbox_persist.watchdog_idle = '1min';
SET LOCAL sandbox_persist.run_retention = '1s';
SET LOCAL sandbox_persist.event_log_retention = '1s';
-- an unexpired lock, a content-addressed blob inside its grace, a fresh
-- upload, a closed log, a terminal run, a detached run, a fresh instance and
-- a reaper heartbeat
SELECT sandbox_persist.lock_acquire('d5-lock', 600000, :r) IS NOT NULL AS d5_lock \gset
SELECT sandbox_persist.blob_put('sandbox-files/sha256/' || encode(sha256('d5'), 'hex'), 'd5', NULL, :r)
    IS NOT NULL AS d5_blob \gset
SELECT pg_temp.keep('d5.up', sandbox_persist.blob_upload_begin('d5/upload', NULL, :r));
SELECT sandbox_persist.blob_upload_append(pg_temp.got('d5.up'), 0, '\x0102'::bytea, :r) IS NOT NULL AS d5_up \gset
SELECT sandbox_persist.event_log_append('d5-closed', '[{"i":1}]') IS NOT NULL AS d5_log \gset
SELECT sandbox_persist.event_log_close('d5-closed');
SELECT sandbox_persist.run_create_or_resume(json_build_object(
    'runId', 'd5-done', 'threadId', 't-d5', 'startedAt', 1, 'status', 'running')) IS NOT NULL AS d5_r1 \gset
SELECT sandbox_persist.run_update('d5-done', '{"status":"completed","finishedAt":2}') AS d5_r2 \gset
SELECT sandbox_persist.run_create_or_resume(json_build_object(
    'runId', 'd5-detached', 'threadId', 't-d5', 'startedAt', 1, 'status', 'running')) IS NOT NULL AS d5_r3 \gset
SELECT sandbox_persist.run_update('d5-detached', json_build_object('detachedSince', :r, 'sandboxKey', 'd5-sb'))
    AS d5_r4 \gset
SELECT sandbox_persist.instance_upsert(json_build_object('key', 'd5-inst', 'provider', 'fake',
    'providerSandboxId', 'sb', 'threadId', 't-d5', 'updatedAt', :r));
SELECT sandbox_persist.reaper_heartbeat('d5-replica', NULL, :r);
SELECT ok(ARRAY[:'d5_lock', :'d5_blob', :'d5_up', :'d5_log', :'d5_r1', :'d5_r2', :'d5_r3', :'d5_r4']::boolean[]
          = array_fill(true, ARRAY[8]),
    'issue 9 defect 5: (setup) lock, blob, upload, closed log, runs and instance exist');

SELECT pg_temp.state() AS d5_before \gset
SELECT is(pg_temp.sp('SELECT sandbox_persist.maintain(1000, -9223372036854000000)'), 'no error',
    'issue 9 defect 5: maintain with now_ms -9223372036854000000 raises no overflow error');
SELECT sandbox_persist.maintain(1000, -9223372036854000000)::jsonb AS d5_m1 \gset
SELECT is(pg_temp.state(), :'d5_before',
    'issue 9 defect 5: maintain at a far-past clock deletes nothing: lock, blob in grace, fresh upload, log, runs kept');
SELECT is(:'d5_m1'::jsonb - 'detachedRuns',
    '{"blobsDeleted":0,"uploadsRemoved":0,"locksPurged":0,"logsClosed":0,"logsProducerLost":0,
      "logsDeleted":0,"runsDeleted":0,"dueRuns":0,"attentionNew":0,"attentionResolved":0,
      "conversationPositionsDeleted":0,"conversationMessagesDeleted":0,"blobsRecompressed":0,"streamsPurged":0}'::jsonb,
    'issue 9 defect 5: at a far-past clock every count is zero (nothing is due)');
SELECT is(pg_temp.sp('SELECT sandbox_persist.maintain(1000, -9223372036854775808)'), 'no error',
    'issue 9 defect 5: maintain with now_ms = min bigint raises no overflow error');
SELECT sandbox_persist.maintain(1000, -9223372036854775808) IS NOT NULL AS d5_m2 \gset
SELECT is(pg_temp.state(), :'d5_before',
    'issue 9 defect 5: maintain at min bigint deletes nothing');
SELECT is(sandbox_persist.blob_head('sandbox-files/sha256/' || encode(sha256('d5'), 'hex'),
                                    -9223372036854775808)->>'size', '2',
    'issue 9 defect 5: blob_head at min bigint answers (no overflow in the touch interval)');
SELECT is(pg_temp.state(), :'d5_before',
    'issue 9 defect 5: blob_head at min bigint does not move relied_on_at');
SELECT is(sandbox_persist.instance_gc_candidates(1000000000000, 100, -9223372036854000000)::text, '[]',
    'issue 9 defect 5: instance_gc_candidates at a far-past clock offers no fresh instance');
SELECT is(sandbox_persist.instance_gc_candidates(9223372036854775807, 100, -1000)::text, '[]',
    'issue 9 defect 5: instance_gc_candidates with now -1000 and retention max bigint offers nothing');
SELECT is(pg_temp.sp('SELECT sandbox_persist.maintain(1000, 9223372036854775807)'), 'no error',
    'issue 9 defect 5: maintain with now_ms = max bigint raises no overflow error');
SELECT is(jsonb_build_object('locksPurged', m->'locksPurged', 'uploadsRemoved', m->'uploadsRemoved',
                             'blobsDeleted', m->'blobsDeleted'),
          '{"locksPurged":1,"uploadsRemoved":1,"blobsDeleted":1}'::jsonb,
    'issue 9 defect 5: at max bigint everything is long expired and is purged (the clock is honoured, not wrapped)')
FROM (SELECT sandbox_persist.maintain(1000, 9223372036854775807)::jsonb AS m) s;
SELECT * FROM pg_temp.rejects('SELECT sandbox_persist.lock_acquire(''d5-far'', 1000, 9223372036854775000)',
    '22003', 'issue 9 defect 5: a lock expiry beyond bigint is refused with a clear range error');
SELECT * FROM pg_temp.rejects('SELECT sandbox_persist.checkpoint_acquire_writer(''d5-thread'', 1000, 9223372036854775000)',
    '22003', 'issue 9 defect 5: a writer lease expiry beyond bigint is refused with a clear range error');

------------------------------------------------------------------------------
-- Defect 6: lock_renew_many matches key and token.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT pg_temp.keep('d6.tok', sandbox_persist.lock_acquire('d6-key', 10000, 1000)->>'ownerToken');
SELECT is(sandbox_persist.lock_renew_many(json_build_array(
        json_build_object('key', 'd6-key', 'ownerToken', '00000000-0000-4000-8000-000000000000'),
        json_build_object('key', 'd6-key', 'ownerToken', pg_temp.got('d6.tok'))), 3000, 5000)::text,
    '{"renewed":[{"key":"d6-key","expiresAt":8000}],"lost":["d6-key"]}',
    'issue 9 defect 6: wrong token then right token for one key: the wrong-token entry is lost');
SELECT is(sandbox_persist.lock_renew_many(json_build_array(
        json_build_object('key', 'd6-key', 'ownerToken', pg_temp.got('d6.tok')),
        json_build_object('key', 'd6-key', 'ownerToken', 'not-a-token')), 3000, 6000)::text,
    '{"renewed":[{"key":"d6-key","expiresAt":9000}],"lost":["d6-key"]}',
    'issue 9 defect 6: right token then wrong token for one key: only the right one is renewed');
SELECT is((sandbox_persist.lock_holder('d6-key', 6000)->>'expiresAt')::bigint, 9000::bigint,
    'issue 9 defect 6: the lease itself was renewed by its owner');
SELECT is(sandbox_persist.lock_renew_many(json_build_array(
        json_build_object('key', 'd6-key', 'ownerToken', pg_temp.got('d6.tok')),
        json_build_object('key', 'd6-key', 'ownerToken', pg_temp.got('d6.tok'))), 3000, 7000)::text,
    '{"renewed":[{"key":"d6-key","expiresAt":10000},{"key":"d6-key","expiresAt":10000}],"lost":[]}',
    'issue 9 defect 6: the same right pair twice is reported renewed twice');
SELECT pg_temp.state() AS d6_before \gset
SELECT is(sandbox_persist.lock_renew_many(json_build_array(
        json_build_object('key', 'd6-key', 'ownerToken', 'wrong-1'),
        json_build_object('key', 'd6-key', 'ownerToken', 'wrong-2')), 3000, 7000)::text,
    '{"renewed":[],"lost":["d6-key","d6-key"]}',
    'issue 9 defect 6: two wrong tokens for a held key: both lost');
SELECT is(pg_temp.state(), :'d6_before',
    'issue 9 defect 6: wrong tokens change nothing');

------------------------------------------------------------------------------
-- Defect 10: blob_max_read is capped so every whole read can be sent.
------------------------------------------------------------------------------
SELECT is((SELECT max_val FROM pg_settings WHERE name = 'sandbox_persist.blob_max_read'), '535822336',
    'issue 9 defect 10: the maximum of blob_max_read is 511 MiB (535822336 bytes)');
SELECT is((SELECT boot_val FROM pg_settings WHERE name = 'sandbox_persist.blob_max_read'), '535822336',
    'issue 9 defect 10: the default of blob_max_read is that maximum');
SELECT is(pg_temp.sp('SET LOCAL sandbox_persist.blob_max_read = 535822337'), '22023',
    'issue 9 defect 10: blob_max_read one byte above the cap -> 22023');
SELECT is(pg_temp.sp($$SET LOCAL sandbox_persist.blob_max_read = '512MB'$$), '22023',
    'issue 9 defect 10: blob_max_read 512MB (a read whose hex text cannot be sent) -> 22023');
SELECT is(pg_temp.sp('SET LOCAL sandbox_persist.blob_max_read = 535822336'), 'no error',
    'issue 9 defect 10: blob_max_read exactly at the cap is accepted');
SELECT sandbox_persist.blob_put('d10/blob', convert_to(repeat('x', 5000), 'UTF8')) IS NOT NULL AS d10_put \gset
SET LOCAL sandbox_persist.blob_max_read = '4kB';
SELECT pg_temp.state() AS d10_before \gset
SELECT pg_temp.err($$SELECT * FROM sandbox_persist.blob_get('d10/blob')$$) AS d10_err \gset
SELECT is((:'d10_err'::text[])[1], '54000',
    'issue 9 defect 10: a whole read of 5000 bytes with blob_max_read 4kB -> 54000');
SELECT matches((:'d10_err'::text[])[3], '5000 bytes.*4096',
    'issue 9 defect 10: the detail names the read size and the setting');
SELECT matches((:'d10_err'::text[])[4], 'range_offset.*range_length.*4096',
    'issue 9 defect 10: the hint says to read in ranges of at most 4096 bytes');
SELECT is(pg_temp.state(), :'d10_before', 'issue 9 defect 10: the refused read changed nothing');
SELECT is(length((SELECT body FROM sandbox_persist.blob_get('d10/blob', 4096, 4096))), 904,
    'issue 9 defect 10: (control) a ranged read within the limit works');

SELECT * FROM finish();
ROLLBACK;
