-- pgTAP: the two promises kept across a failover that lost acknowledged
-- commits (docs/contract/failover.md): fences carry the timeline, and
-- event-log resume tokens are vouched for by the server. Cases: T1-T13, T23
-- (T22, a thread moved between shards, is in cross_shard_import.sql).
-- A failover is simulated: sandbox_persist.test_timeline stands for the
-- promoted standby's timeline, and the commits an asynchronous standby never
-- received are removed by hand (pg_temp.lose_*), as the standby would lack them.
-- (T14-T18 are NODE, T19 is test/upgrade, T20 the isolation spec
-- t20_lock_fence_epoch_race, T21 test/ha/timeline_loss.sh, T24 the isolation
-- spec t24_claim_epoch_timeline_race.)
-- Run with: pg_prove -d <db> test/pgtap/failover.sql
-- (needs sandbox_persist.allow_test_reset and allow_client_clock on).
BEGIN;
SELECT plan(89);
SELECT sandbox_persist._reset_for_tests();
SET LOCAL sandbox_persist.allow_client_clock = on;
SET LOCAL sandbox_persist.event_log_reopen_on_append = off;

------------------------------------------------------------------------------
-- Helpers (temporary, gone at ROLLBACK).
------------------------------------------------------------------------------

-- Every row the fenced stores and the event log keep: equal values mean
-- nothing changed.
CREATE FUNCTION pg_temp.state() RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(E'\n',
        (SELECT string_agg(l::text, E'\n' ORDER BY l.lock_key) FROM sandbox_persist.locks l),
        (SELECT string_agg(t::text, E'\n' ORDER BY t.thread_id) FROM sandbox_persist.checkpoint_threads t),
        (SELECT string_agg(l::text, E'\n' ORDER BY l.log_id) FROM sandbox_persist.event_logs l),
        (SELECT string_agg(format('%s/%s %s %s', e.log_id, e.seq, e.digest, e.chunk::text), E'\n'
                           ORDER BY e.log_id, e.seq) FROM sandbox_persist.event_log_entries e),
        (SELECT string_agg(p::text, E'\n' ORDER BY p.log_id, p.producer_id, p.producer_seq)
           FROM sandbox_persist.event_log_producers p),
        (SELECT string_agg(r::text, E'\n' ORDER BY r.run_id) FROM sandbox_persist.runs r))
$$;

\ir lib/durable_helpers.psql

-- The floor of timeline tl's fences: (tl - 1) * 2^40.
CREATE FUNCTION pg_temp.floor_of(tl int) RETURNS bigint LANGUAGE sql AS $$
    SELECT (tl - 1)::bigint * 1099511627776
$$;

-- The SQL hash of one entry and the running digest recomputed from the chunks.
CREATE FUNCTION pg_temp.entry_hash(seq bigint, chunk json) RETURNS bigint LANGUAGE sql AS $$
    SELECT ('x' || encode(substr(sha256(int8send(seq) || convert_to(chunk::text, 'UTF8')), 1, 8),
                          'hex'))::bit(64)::bigint
$$;
CREATE FUNCTION pg_temp.digest_mismatches() RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM (
        SELECT e.digest, bit_xor(pg_temp.entry_hash(e.seq, e.chunk))
                   OVER (PARTITION BY e.log_id ORDER BY e.seq) AS recomputed
          FROM sandbox_persist.event_log_entries e) d
     WHERE d.digest <> d.recomputed
$$;
CREATE FUNCTION pg_temp.tail_mismatches() RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM sandbox_persist.event_logs l
      LEFT JOIN sandbox_persist.event_log_entries e ON e.log_id = l.log_id AND e.seq = l.tail_seq
     WHERE l.tail_digest IS DISTINCT FROM coalesce(e.digest, 0)
$$;

-- What an asynchronous standby lacks after the lost window: the thread row
-- as it was before (fence, no lease), ...
CREATE FUNCTION pg_temp.lose_thread_grant(thread text, fence_before bigint) RETURNS void LANGUAGE sql AS $$
    UPDATE sandbox_persist.checkpoint_threads
       SET fence = fence_before, owner_token = NULL, lease_expires_at = NULL
     WHERE thread_id = thread
$$;
-- ... the lock rows granted in it and the sequence values it drew, ...
CREATE FUNCTION pg_temp.lose_lock_grants(k text, seq_before bigint) RETURNS void LANGUAGE sql AS $$
    DELETE FROM sandbox_persist.locks WHERE lock_key = k;
    SELECT setval('sandbox_persist.lock_fences', seq_before);
$$;
-- ... and the entries after keep (with their ledger rows and the tail).
CREATE FUNCTION pg_temp.lose_log_after(run text, keep bigint) RETURNS void LANGUAGE sql AS $$
    DELETE FROM sandbox_persist.event_log_entries e USING sandbox_persist.event_logs l
     WHERE l.run_id = run AND e.log_id = l.log_id AND e.seq > keep;
    DELETE FROM sandbox_persist.event_log_producers p USING sandbox_persist.event_logs l
     WHERE l.run_id = run AND p.log_id = l.log_id AND p.first_seq > keep;
    UPDATE sandbox_persist.event_logs l
       SET tail_seq = keep,
           tail_digest = coalesce((SELECT e.digest FROM sandbox_persist.event_log_entries e
                                    WHERE e.log_id = l.log_id AND e.seq = keep), 0)
     WHERE l.run_id = run;
$$;

-- The token digest of entry seq of run's log, as the server stores it.
CREATE FUNCTION pg_temp.digest_at(run text, s bigint) RETURNS text LANGUAGE sql AS $$
    SELECT lpad(to_hex(e.digest), 16, '0')
      FROM sandbox_persist.event_log_entries e JOIN sandbox_persist.event_logs l USING (log_id)
     WHERE l.run_id = run AND e.seq = s
$$;
CREATE FUNCTION pg_temp.seqs(entries json) RETURNS bigint[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg((e->>'seq')::bigint ORDER BY n), '{}')
    FROM json_array_elements(entries) WITH ORDINALITY AS t(e, n)
$$;

------------------------------------------------------------------------------
-- T1: on timeline 1 (epoch 0) fences are the plain counters of 0.3.0.
------------------------------------------------------------------------------
SET LOCAL sandbox_persist.test_timeline = 1;
SELECT is((sandbox_persist.checkpoint_acquire_writer('t1', 1000, 1000)->>'fence')::bigint, 1::bigint,
    'T1.1 the first writer fence of a thread on timeline 1 is 1');
SELECT is((sandbox_persist.lock_acquire('t1-k', 1000, 1000)->>'fence')::bigint, 1::bigint,
    'T1.2 the first lock fence on timeline 1 is 1');
SELECT is((sandbox_persist.checkpoint_acquire_writer('t1', 1000, 5000)->>'fence')::bigint, 2::bigint,
    'T1.3 a takeover on the same timeline adds one');

------------------------------------------------------------------------------
-- T2: a checkpoint writer fence granted in a lost window is never granted
-- again: the issue's reproduction, thread t at fence 1 replicated, fence 2
-- granted to A and lost, the standby promoted to timeline 2.
------------------------------------------------------------------------------
SELECT sandbox_persist.checkpoint_acquire_writer('t2', 1000, 1000);            -- fence 1, replicated
CREATE TEMP TABLE lost AS SELECT sandbox_persist.checkpoint_acquire_writer('t2', 1000, 3000) AS w;  -- fence 2
SELECT is((SELECT (w->>'fence')::bigint FROM lost), 2::bigint, 'T2.1 on the old primary A is granted fence 2');
SELECT pg_temp.lose_thread_grant('t2', 1);
SET LOCAL sandbox_persist.test_timeline = 2;
CREATE TEMP TABLE after_failover AS SELECT sandbox_persist.checkpoint_acquire_writer('t2', 1000, 5000) AS w;
SELECT is((SELECT (w->>'fence')::bigint FROM after_failover), pg_temp.floor_of(2) + 1,
    'T2.2 on timeline 2 the next acquire is granted (timeline - 1) * 2^40 + 1, not 2 again');
SELECT cmp_ok((SELECT (w->>'fence')::bigint FROM after_failover), '>', (SELECT (w->>'fence')::bigint FROM lost),
    'T2.3 it is greater than the fence granted in the lost window');
SELECT is(pg_temp.sp(format($$SELECT sandbox_persist.checkpoint_renew_writer(%L, 1000, 5500)$$,
        json_build_object('threadId', 't2', 'ownerToken', (SELECT w->>'ownerToken' FROM lost),
                          'fence', 2))),
    'SP006 SANDBOX_SNAPSHOT_WRITER_LOST', 'T2.4 the lost writer A (fence 2) is not current on the new primary');
SELECT is((sandbox_persist.checkpoint_acquire_writer('t2', 1000, 7000)->>'fence')::bigint, pg_temp.floor_of(2) + 2,
    'T2.5 later acquires on timeline 2 add one');
SELECT is((sandbox_persist.checkpoint_acquire_writer('t2-new', 1000, 7000)->>'fence')::bigint, pg_temp.floor_of(2) + 1,
    'T2.6 a thread first acquired on timeline 2 starts at its floor + 1');
SELECT cmp_ok((sandbox_persist.checkpoint_acquire_writer('t1', 1000, 9000)->>'fence')::bigint, '>', 2::bigint,
    'T2.7 a thread last acquired on timeline 1 jumps past its old fences too');

------------------------------------------------------------------------------
-- T3: durable-lock fences drawn in a lost window are never granted again,
-- also past the 32 values a sequence logs ahead.
------------------------------------------------------------------------------
SET LOCAL sandbox_persist.test_timeline = 2;
SELECT sandbox_persist._reset_for_tests();
CREATE TEMP TABLE lock_lost AS
    SELECT k, (sandbox_persist.lock_acquire('t3-' || k, 1000, 1000)->>'fence')::bigint AS fence
      FROM generate_series(1, 40) AS k;                                          -- drawn on timeline 2
SELECT is((SELECT max(fence) FROM lock_lost), pg_temp.floor_of(2) + 40,
    'T3.1 forty grants on timeline 2: fences floor + 1 .. floor + 40');
SELECT pg_temp.lose_lock_grants('t3-' || k, pg_temp.floor_of(2) + 1) FROM generate_series(2, 40) AS k;
SET LOCAL sandbox_persist.test_timeline = 3;
CREATE TEMP TABLE lock_after AS
    SELECT k, (sandbox_persist.lock_acquire('t3-' || k, 1000, 2000)->>'fence')::bigint AS fence
      FROM generate_series(2, 40) AS k;
SELECT is((SELECT count(*) FROM lock_after a JOIN lock_lost l ON l.fence = a.fence), 0::bigint,
    'T3.2 none of the 39 fences granted on timeline 3 repeats a fence of the lost window');
SELECT cmp_ok((SELECT min(fence) FROM lock_after), '>', (SELECT max(fence) FROM lock_lost),
    'T3.3 every timeline-3 fence exceeds every timeline-2 fence');
SELECT is((SELECT min(fence) FROM lock_after), pg_temp.floor_of(3) + 1,
    'T3.4 the first grant on timeline 3 is its floor + 1');
SELECT is((SELECT array_agg(fence ORDER BY k) = array_agg(fence ORDER BY fence) AND count(DISTINCT fence) = 39
             FROM lock_after), true,
    'T3.5 timeline-3 fences are distinct and increase in grant order');
SELECT is(sandbox_persist.lock_check('t3-5', (SELECT l.owner_token::text FROM sandbox_persist.locks l WHERE lock_key = 't3-5'),
                                     (SELECT fence FROM lock_after WHERE k = 5), 2500), true,
    'T3.6 lock_check is true for the timeline-3 token and fence');
SELECT is(sandbox_persist.lock_check('t3-5', (SELECT l.owner_token::text FROM sandbox_persist.locks l WHERE lock_key = 't3-5'),
                                     (SELECT fence FROM lock_lost WHERE k = 5), 2500), false,
    'T3.7 and false for the fence the lost window had drawn for that key');

------------------------------------------------------------------------------
-- T4: a timeline lower than the data's (a logical restore into a new
-- cluster) never makes a fence go back or repeat.
------------------------------------------------------------------------------
SET LOCAL sandbox_persist.test_timeline = 3;
SELECT sandbox_persist.checkpoint_acquire_writer('t4', 1000, 10000);             -- floor(3) + 1
SET LOCAL sandbox_persist.test_timeline = 1;
SELECT is((sandbox_persist.checkpoint_acquire_writer('t4', 1000, 20000)->>'fence')::bigint,
              pg_temp.floor_of(3) + 2, 'T4.1 a writer fence on a lower timeline still grows by one per thread');
SELECT cmp_ok((sandbox_persist.lock_acquire('t4-k', 1000, 20000)->>'fence')::bigint, '>',
              (SELECT max(fence) FROM lock_after), 'T4.2 a lock fence on a lower timeline still exceeds every earlier one');

------------------------------------------------------------------------------
-- T5: fences stay at most 2^53 - 1: timelines past 8192 grant nothing.
------------------------------------------------------------------------------
SET LOCAL sandbox_persist.test_timeline = 8192;
SELECT is((sandbox_persist.lock_acquire('t5-k', 1000, 30000)->>'fence')::bigint, pg_temp.floor_of(8192) + 1,
    'T5.1 timeline 8192 is the last epoch: floor 8191 * 2^40');
SELECT cmp_ok(pg_temp.floor_of(8192) + 1099511627775, '=', 9007199254740991::bigint,
    'T5.2 its last fence would be 2^53 - 1');
SET LOCAL sandbox_persist.test_timeline = 8193;
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.lock_acquire('t5-k2', 1000, 30000)$$, '54000',
    'T5.3 lock_acquire on timeline 8193');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.checkpoint_acquire_writer('t5-t', 1000, 30000)$$, '54000',
    'T5.4 checkpoint_acquire_writer on timeline 8193');
RESET sandbox_persist.test_timeline;
SET LOCAL sandbox_persist.test_timeline = 0;
SELECT is(current_setting('sandbox_persist.test_timeline'), '0', 'T5.5 the setting defaults to 0: the server''s timeline');

------------------------------------------------------------------------------
-- T6: only a superuser may move the timeline.
------------------------------------------------------------------------------
CREATE ROLE sp_failover_plain NOLOGIN;
SET LOCAL ROLE sp_failover_plain;
SELECT is(pg_temp.sp($$SET sandbox_persist.test_timeline = 5$$), '42501',
    'T6.1 a plain role cannot set sandbox_persist.test_timeline');
RESET ROLE;

------------------------------------------------------------------------------
-- T7: every entry's digest is the running XOR of the SQL entry hash, the
-- log row keeps the tail's, for appends and the producer-lost chunk alike.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT sandbox_persist.event_log_append('t7', '[{"a":1},{"b":"\u0000"},{"c":[1,2]}]');
SELECT sandbox_persist.event_log_append('t7', '[{"d": "x",  "d":"y"}]');
SELECT sandbox_persist.event_log_append('t7-other', '[{"a":1}]');
SET LOCAL sandbox_persist.event_log_idle_close = '1s';
SELECT sandbox_persist.event_log_append('t7-lost', '[{"e":1}]');
UPDATE sandbox_persist.event_logs SET last_append_at = 0 WHERE run_id = 't7-lost';
SELECT sandbox_persist.maintain();
SELECT is((SELECT count(*) FROM sandbox_persist.event_log_entries e JOIN sandbox_persist.event_logs l USING (log_id)
            WHERE l.run_id = 't7-lost'), 2::bigint, 'T7.1 maintenance appended the producer-lost chunk');
SELECT is(pg_temp.digest_mismatches(), 0::bigint,
    'T7.2 every stored digest equals the XOR of the SQL hashes of the entries up to it');
SELECT is(pg_temp.tail_mismatches(), 0::bigint, 'T7.3 every log row keeps its tail entry''s digest');
SELECT is(pg_temp.digest_at('t7', 1), pg_temp.digest_at('t7-other', 1),
    'T7.4 the same first chunk at the same seq has the same digest in another log (the run is checked by the adapter''s tag)');

------------------------------------------------------------------------------
-- T8: withDigests: append returns tokens; a producer retry returns the same.
------------------------------------------------------------------------------
SELECT is(sandbox_persist.event_log_append('t8', '[{"a":1},{"b":2}]',
        '{"producerId":"00000000-0000-4000-8000-000000000008","producerSeq":1,"withDigests":true}')::jsonb,
    json_build_array(json_build_object('seq', 1, 'digest', pg_temp.digest_at('t8', 1)),
                     json_build_object('seq', 2, 'digest', pg_temp.digest_at('t8', 2)))::jsonb,
    'T8.1 an append with withDigests returns [{seq, digest}] as stored');
CREATE TEMP TABLE t8_tokens AS SELECT sandbox_persist.event_log_append('t8', '[{"a":1},{"b":2}]',
        '{"producerId":"00000000-0000-4000-8000-000000000008","producerSeq":1,"withDigests":true}')::text AS r;
SELECT is(sandbox_persist.event_log_append('t8', '[{"a":1},{"b":2}]',
        '{"producerId":"00000000-0000-4000-8000-000000000008","producerSeq":1,"withDigests":true}')::text,
    (SELECT r FROM t8_tokens), 'T8.2 a retried append returns the same tokens and appends nothing');
SELECT is((sandbox_persist.event_log_read_verified('t8', 0, NULL)->>'tail')::bigint, 2::bigint,
    'T8.3 the retry appended nothing');
SELECT is(sandbox_persist.event_log_append('t8', '[{"c":3}]',
        '{"producerId":"00000000-0000-4000-8000-000000000008","producerSeq":2}')::text, '[3]',
    'T8.4 without withDigests an append still returns plain numbers');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append('t8', '[{"d":4}]', '{"withDigests":1}')$$,
    '22023', 'T8.5 withDigests that is not a boolean');

------------------------------------------------------------------------------
-- T9: the verified read: tailDigest, each entry's digest, a matching token
-- continues the stream.
------------------------------------------------------------------------------
SELECT is(sandbox_persist.event_log_read_verified('t8', 0, NULL)::jsonb,
    json_build_object('logId', (SELECT log_id FROM sandbox_persist.event_logs WHERE run_id = 't8'),
        'exists', true, 'closed', false, 'tail', 3, 'tailDigest', pg_temp.digest_at('t8', 3),
        'entries', json_build_array(
            json_build_object('seq', 1, 'digest', pg_temp.digest_at('t8', 1), 'chunk', '{"a":1}'::json),
            json_build_object('seq', 2, 'digest', pg_temp.digest_at('t8', 2), 'chunk', '{"b":2}'::json),
            json_build_object('seq', 3, 'digest', pg_temp.digest_at('t8', 3), 'chunk', '{"c":3}'::json)))::jsonb,
    'T9.1 a verified read from 0 returns tailDigest and every entry with its digest');
SELECT is(pg_temp.seqs(sandbox_persist.event_log_read_verified('t8', 1, pg_temp.digest_at('t8', 1))->'entries'),
    '{2,3}'::bigint[], 'T9.2 a token the log vouches for continues after it');
SELECT is(pg_temp.seqs(sandbox_persist.event_log_read_verified('t8', 3, pg_temp.digest_at('t8', 3))->'entries'),
    '{}'::bigint[], 'T9.3 a token at the tail reads nothing, without error');
SELECT is(pg_temp.seqs(sandbox_persist.event_log_read_verified('t8', 0, '0000000000000000', 1)->'entries'),
    '{1}'::bigint[], 'T9.4 position 0 has digest 0; max_rows bounds the page');
SELECT is(sandbox_persist.event_log_read_verified('t9-none', 0, NULL)::text,
    '{"exists":false,"closed":false,"tail":0,"tailDigest":"0000000000000000","entries":[]}',
    'T9.5 a missing log from 0: exists false, tail digest 0');

------------------------------------------------------------------------------
-- T10: the issue's reproduction: a reader read seqs 3-5 from the old
-- primary; those were lost and the producer's retry wrote other chunks as
-- 3-5. Resuming with any token past 2 fails SP405, never another stream.
------------------------------------------------------------------------------
SELECT sandbox_persist.event_log_append('t10', '[{"n":1},{"n":2}]');           -- replicated
SELECT sandbox_persist.event_log_append('t10', '[{"old":3},{"old":4},{"same":5}]');  -- lost
CREATE TEMP TABLE reader AS
    SELECT (e->>'seq')::bigint AS seq, e->>'digest' AS digest
      FROM json_array_elements(sandbox_persist.event_log_read_verified('t10', 0, NULL)->'entries') AS e;
SELECT pg_temp.lose_log_after('t10', 2);
SELECT * FROM pg_temp.rejects(format($$SELECT sandbox_persist.event_log_read_verified('t10', 3, %L)$$,
        (SELECT digest FROM reader WHERE seq = 3)),
    'SP405 EVENT_LOG_OFFSET_DIVERGED', 'T10.1 a token past the new tail (entries lost)');
SELECT is(pg_temp.sp($$SELECT sandbox_persist.event_log_read('t10', 3)$$),
    'SP402 EVENT_LOG_OFFSET_OUT_OF_RANGE', 'T10.2 (the plain read says only: out of range)');
SELECT sandbox_persist.event_log_append('t10', '[{"new":3},{"new":4},{"same":5}]');  -- the producer's retry
SELECT * FROM pg_temp.rejects(format($$SELECT sandbox_persist.event_log_read_verified('t10', 3, %L)$$,
        (SELECT digest FROM reader WHERE seq = 3)),
    'SP405 EVENT_LOG_OFFSET_DIVERGED', 'T10.3 a token naming an entry the log holds with other content');
SELECT * FROM pg_temp.rejects(format($$SELECT sandbox_persist.event_log_read_verified('t10', 5, %L)$$,
        (SELECT digest FROM reader WHERE seq = 5)),
    'SP405 EVENT_LOG_OFFSET_DIVERGED', 'T10.4 a token whose own chunk is the same but an earlier one differs');
SELECT is(pg_temp.seqs(sandbox_persist.event_log_read_verified('t10', 2, (SELECT digest FROM reader WHERE seq = 2))->'entries'),
    '{3,4,5}'::bigint[], 'T10.5 a token from before the lost window still resumes (the new 3-5 follow 1-2)');
SELECT is(pg_temp.seqs(sandbox_persist.event_log_read('t10', 3)->'entries'), '{4,5}'::bigint[],
    'T10.6 (the plain read of 0.3.0 cannot tell: it returns the new 4 and 5; the adapter uses tokens)');
SELECT is(pg_temp.digest_mismatches(), 0::bigint, 'T10.7 the digests after the loss and the retry still chain');

------------------------------------------------------------------------------
-- T11: without a digest, the verified read keeps the plain read's errors.
------------------------------------------------------------------------------
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_read_verified('t10', 6, NULL)$$,
    'SP402 EVENT_LOG_OFFSET_OUT_OF_RANGE', 'T11.1 no digest, past the tail');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_read_verified('t11-none', 1, NULL)$$,
    'SP401 EVENT_LOG_NOT_FOUND', 'T11.2 no digest, a missing log');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_read_verified('t11-none', 1, '0000000000000001')$$,
    'SP401 EVENT_LOG_NOT_FOUND', 'T11.3 a token for a log that does not exist: not found');

------------------------------------------------------------------------------
-- T12: bad input to the verified read.
------------------------------------------------------------------------------
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_read_verified('t10', 1, 'ABCDEF0123456789')$$,
    '22023', 'T12.1 an upper-case digest');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_read_verified('t10', 1, '0123')$$,
    '22023', 'T12.2 a short digest');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_read_verified('t10', 1, '0123456789abcdef0')$$,
    '22023', 'T12.3 a long digest');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_read_verified('t10', -1, NULL)$$,
    '22023', 'T12.4 a negative after_seq');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_read_verified('t10', NULL, NULL)$$,
    '22004', 'T12.5 a NULL after_seq');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_read_verified('t10', 0, NULL, -1)$$,
    '22023', 'T12.6 a negative max_rows');

------------------------------------------------------------------------------
-- T13: the verified read is STABLE and creates nothing.
------------------------------------------------------------------------------
SELECT is((SELECT provolatile FROM pg_proc WHERE oid = 'sandbox_persist.event_log_read_verified'::regproc),
    's', 'T13.1 event_log_read_verified is STABLE');
SELECT is(pg_temp.sp($$SELECT sandbox_persist.event_log_read_verified('t13-none', 0, NULL)$$), 'no error',
    'T13.2 reading a missing log from 0 is no error');
SELECT ok(NOT EXISTS (SELECT 1 FROM sandbox_persist.event_logs WHERE run_id = 't13-none'),
    'T13.3 and creates no log');

------------------------------------------------------------------------------
-- T23: run-claim epochs are fences too: an epoch claimed in a lost window is
-- never claimed again, later ones exceed every earlier one.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SET LOCAL sandbox_persist.test_timeline = 1;
SELECT sandbox_persist.run_create_or_resume('{"runId":"t23","threadId":"t23-th","startedAt":1}');
SELECT is(sandbox_persist.run_claim('t23')->>'epoch', '1', 'T23.1 on timeline 1 claims are the plain counter: the first is 1');
CREATE TEMP TABLE claim_lost AS SELECT (sandbox_persist.run_claim('t23')->>'epoch')::bigint AS epoch;   -- 2, lost
SELECT is((SELECT epoch FROM claim_lost), 2::bigint, 'T23.2 on the old primary the next claim is epoch 2');
UPDATE sandbox_persist.runs SET driver_epoch = 1 WHERE run_id = 't23';            -- the standby lacks it
SET LOCAL sandbox_persist.test_timeline = 2;
CREATE TEMP TABLE claim_after AS SELECT sandbox_persist.run_claim('t23') AS c;
SELECT is((SELECT c::jsonb FROM claim_after),
    json_build_object('outcome', 'claimed', 'epoch', pg_temp.floor_of(2) + 1, 'threadId', 't23-th')::jsonb,
    'T23.3 on timeline 2 the next claim is (timeline - 1) * 2^40 + 1, not 2 again');
SELECT is((sandbox_persist.run_get('t23')->>'driverEpoch')::bigint, pg_temp.floor_of(2) + 1,
    'T23.4 and it is stored as driverEpoch');
SELECT is((sandbox_persist.run_claim('t23')->>'epoch')::bigint, pg_temp.floor_of(2) + 2,
    'T23.5 later claims on timeline 2 add one');
SELECT is(pg_temp.sp($$SELECT sandbox_persist.event_log_append('t23', '[{"a":1}]',
        '{"producerId":"00000000-0000-4000-8000-000000000023","producerSeq":1,"fenceEpoch":2}')$$),
    'SP404 EVENT_LOG_FENCE_STALE', 'T23.6 the driver of the lost epoch 2 is fenced out of the log');
SELECT is(pg_temp.sp($$SELECT sandbox_persist.run_update('t23', '{"driverEpoch":2}')$$),
    'SP201 RUN_EPOCH_NOT_INCREASING', 'T23.7 and refused by run_update''s epoch check');
SELECT is(pg_temp.sp(format($$SELECT sandbox_persist.event_log_append('t23', '[{"a":1}]',
        '{"producerId":"00000000-0000-4000-8000-000000000023","producerSeq":1,"fenceEpoch":%s}')$$,
        pg_temp.floor_of(2) + 2)), 'no error', 'T23.8 while the current epoch (above 2^40) fences appends exactly');
SELECT sandbox_persist.run_create_or_resume('{"runId":"t23-new","threadId":"t23-th","startedAt":2}');
SELECT is((sandbox_persist.run_claim('t23-new')->>'epoch')::bigint, pg_temp.floor_of(2) + 1,
    'T23.9 a run first claimed on timeline 2 starts at its floor + 1');
SELECT sandbox_persist.run_create_or_resume('{"runId":"t23-set","threadId":"t23-th","startedAt":3}');
SELECT sandbox_persist.run_update('t23-set', json_build_object('driverEpoch', pg_temp.floor_of(2) + 100));
SELECT is((sandbox_persist.run_claim('t23-set')->>'epoch')::bigint, pg_temp.floor_of(2) + 101,
    'T23.10 a run whose epoch is already above the floor adds one');
SET LOCAL sandbox_persist.test_timeline = 1;
SELECT is((sandbox_persist.run_claim('t23')->>'epoch')::bigint, pg_temp.floor_of(2) + 3,
    'T23.11 on a timeline lower than the data''s a claim still adds one, never goes back');
SET LOCAL sandbox_persist.test_timeline = 8192;
SELECT is((sandbox_persist.run_claim('t23-new')->>'epoch')::bigint, pg_temp.floor_of(8192) + 1,
    'T23.12 timeline 8192 claims from its floor');
SELECT sandbox_persist.run_create_or_resume('{"runId":"t23-max","threadId":"t23-th","startedAt":4}');
SELECT sandbox_persist.run_update('t23-max', '{"driverEpoch":9007199254740991}');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_claim('t23-max')$$, '54000',
    'T23.13 a claim past 2^53 - 1');
SET LOCAL sandbox_persist.test_timeline = 8193;
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_claim('t23')$$, '54000',
    'T23.14 a claim on timeline 8193');
SET LOCAL sandbox_persist.test_timeline = 0;

SELECT * FROM finish();
ROLLBACK;
