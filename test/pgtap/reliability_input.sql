-- pgTAP: input-side reliability defects (issue 9), one regression test each.
-- Defect 1: a repeated key in checkpoint input or in a writer object is SP008.
-- Defect 3: JSON nested deeper than json_in accepts is refused with 54001.
-- Defect 7: over-long integers map to 22003 (out of range) and 22023 (not
--           integral) the right way round.
-- Defect 9: every indexed text column has a byte cap enforced with 22001
--           (checkpoint identifiers: SP007).
-- Defect 12: metadata values and interrupt responses are stored byte for byte.
-- Every rejection asserts its SQLSTATE (and, for class SP, its code name, with
-- an errdetail that does not start with it) and that no table of the extension changed.
-- Run with: pg_prove -d <db> test/pgtap/reliability_input.sql
-- (needs sandbox_persist.allow_test_reset and allow_client_clock on).
BEGIN;
SELECT plan(255);
SELECT sandbox_persist._reset_for_tests();
SET sandbox_persist.allow_client_clock = on;

------------------------------------------------------------------------------
-- Helpers (temporary, gone at ROLLBACK).
------------------------------------------------------------------------------

CREATE TEMP TABLE writers (thread_id text PRIMARY KEY, writer json NOT NULL);

-- pg_temp.w(thread): a thread's writer; pg_temp.sp(stmt): 'SQLSTATE CODE_NAME'.
\ir lib/checkpoint_helpers.psql

-- Every row of every table of the extension: equal values mean nothing changed.
CREATE FUNCTION pg_temp.state() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    t text;
    r text;
    acc text := '';
BEGIN
    FOR t IN SELECT c.relname FROM pg_catalog.pg_class c
              WHERE c.relnamespace = 'sandbox_persist'::regnamespace AND c.relkind = 'r'
              ORDER BY c.relname
    LOOP
        EXECUTE format('SELECT %L || '' '' || count(*) || '' '' || coalesce(md5(string_agg(x::text, E''\n'' ORDER BY x::text)), '''') FROM sandbox_persist.%I x', t, t)
            INTO r;
        acc := acc || r || E'\n';
    END LOOP;
    RETURN acc;
END
$$;

-- A call that must fail: its code (a bare SQLSTATE, or 'SPnnn NAME' for
-- contract errors), then that nothing changed.
CREATE FUNCTION pg_temp.rejects(stmt text, expected text, descr text)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    before text := pg_temp.state();
    got text := pg_temp.sp(stmt);
BEGIN
    IF length(expected) = 5 THEN
        got := left(got, 5);
    END IF;
    RETURN NEXT is(got, expected, descr || ' -> ' || expected);
    RETURN NEXT is(pg_temp.state(), before, descr || ': nothing changed');
END
$$;

-- Runs a statement and rolls it back: 'accepted', or its SQLSTATE.
CREATE FUNCTION pg_temp.try(stmt text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    st text;
BEGIN
    EXECUTE stmt;
    RAISE EXCEPTION 'roll back' USING ERRCODE = 'ZX999';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE;
    RETURN CASE st WHEN 'ZX999' THEN 'accepted' ELSE st END;
END
$$;

-- A json value nested n arrays deep around 1, built server-side: it never
-- passes through json_in.
CREATE FUNCTION pg_temp.deep(n int) RETURNS json LANGUAGE plpgsql AS $$
DECLARE
    j json := '1';
BEGIN
    FOR i IN 1..n LOOP
        j := json_build_array(j);
    END LOOP;
    RETURN j;
END
$$;
-- The same with objects: {"k":{"k":...1}}.
CREATE FUNCTION pg_temp.deep_object(n int) RETURNS json LANGUAGE plpgsql AS $$
DECLARE
    j json := '1';
BEGIN
    FOR i IN 1..n LOOP
        j := json_build_object('k', j);
    END LOOP;
    RETURN j;
END
$$;

-- A string of exactly n UTF-8 bytes: hex digits (little to compress), or
-- 4-byte characters padded with ASCII.
CREATE FUNCTION pg_temp.str(n int, multibyte bool) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN multibyte THEN repeat('😀', n / 4) || repeat('x', n % 4)
                ELSE left((SELECT string_agg(md5(i::text), '') FROM generate_series(1, n / 32 + 1) i), n)
           END
$$;

-- A checkpoint of thread-a with the given id and parent.
CREATE FUNCTION pg_temp.cp(id text, parent text) RETURNS json LANGUAGE sql IMMUTABLE AS $$
    SELECT json_build_object('id', id, 'threadId', 'thread-a', 'parentCheckpointId', parent,
        'createdAt', 2, 'reason', 'automatic', 'files', '[]'::json, 'artifacts', '[]'::json)
$$;
-- A writer object's text with one extra member inserted first.
CREATE FUNCTION pg_temp.writer_plus(member text, thread text DEFAULT 'thread-a') RETURNS text
LANGUAGE sql AS $$
    SELECT regexp_replace(pg_temp.w(thread)::text, '^\{', '{' || member || ',')
$$;
-- The writer's own ownerToken member, as JSON text.
CREATE FUNCTION pg_temp.token_member(thread text DEFAULT 'thread-a') RETURNS text LANGUAGE sql AS $$
    SELECT '"ownerToken":' || (pg_temp.w(thread)->'ownerToken')::text
$$;

------------------------------------------------------------------------------
-- Fixture: thread-a has head 1 and a current writer; thread-b and thread-len
-- have writers; run-1 and interrupt int-1 exist.
------------------------------------------------------------------------------
SELECT sandbox_persist.checkpoint_append(json_build_object('checkpoint', pg_temp.cp('1', NULL),
    'expectedHeadId', NULL, 'writer', pg_temp.w()), '[{"role":"user","content":"1"}]');
SELECT pg_temp.w('thread-b');
SELECT pg_temp.w('thread-len');
SELECT sandbox_persist.run_create_or_resume('{"runId":"run-1","threadId":"thread-r","startedAt":1}');
SELECT sandbox_persist.interrupt_create('{"interruptId":"int-1","runId":"run-1","threadId":"thread-r","requestedAt":1,"payload":{}}');

------------------------------------------------------------------------------
-- Defect 1: a repeated key is SP008 in all five checkpoint writers.
------------------------------------------------------------------------------
SELECT is(pg_temp.try(format('SELECT sandbox_persist.checkpoint_append(%L::json, ''[]'')',
        format('{"checkpoint":%s,"expectedHeadId":"1","writer":%s}', pg_temp.cp('2', '1'), pg_temp.w()))),
    'accepted', 'issue 9 defect 1: the baseline append (no repeated key) is accepted');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.checkpoint_append(%L::json, ''[]'')',
        format('{"checkpoint":%s,"checkpoint":%s,"expectedHeadId":"1","writer":%s}',
               pg_temp.cp('2', '1'), pg_temp.cp('2', '1'), pg_temp.w())),
    'SP008 SANDBOX_SNAPSHOT_INVALID_ENTRY', 'issue 9 defect 1: append input with "checkpoint" twice');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.checkpoint_append(%L::json, ''[]'')',
        format('{"checkpoint":%s,"expectedHeadId":"1","writer":%s}',
               regexp_replace(pg_temp.cp('2', '1')::text, '^\{', '{"reason":"automatic",'), pg_temp.w())),
    'SP008 SANDBOX_SNAPSHOT_INVALID_ENTRY', 'issue 9 defect 1: append of a checkpoint with "reason" twice');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.checkpoint_append(%L::json, ''[]'')',
        format('{"checkpoint":%s,"expectedHeadId":"1","writer":%s}',
               pg_temp.cp('2', '1'), pg_temp.writer_plus('"threadId":"thread-a"'))),
    'SP008 SANDBOX_SNAPSHOT_INVALID_ENTRY', 'issue 9 defect 1: append with writer.threadId twice');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.checkpoint_append(%L::json, ''[]'')',
        format('{"checkpoint":%s,"expectedHeadId":"1","writer":%s}',
               pg_temp.cp('2', '1'), pg_temp.writer_plus(pg_temp.token_member()))),
    'SP008 SANDBOX_SNAPSHOT_INVALID_ENTRY', 'issue 9 defect 1: append with writer.ownerToken twice');

SELECT is(pg_temp.try(format('SELECT sandbox_persist.checkpoint_delete_head(%L::json)',
        format('{"threadId":"thread-a","checkpointId":"1","writer":%s}', pg_temp.w()))),
    'accepted', 'issue 9 defect 1: the baseline deleteHead is accepted');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.checkpoint_delete_head(%L::json)',
        format('{"threadId":"thread-a","threadId":"thread-a","checkpointId":"1","writer":%s}', pg_temp.w())),
    'SP008 SANDBOX_SNAPSHOT_INVALID_ENTRY', 'issue 9 defect 1: deleteHead input with "threadId" twice');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.checkpoint_delete_head(%L::json)',
        format('{"threadId":"thread-a","checkpointId":"1","writer":%s}', pg_temp.writer_plus(pg_temp.token_member()))),
    'SP008 SANDBOX_SNAPSHOT_INVALID_ENTRY', 'issue 9 defect 1: deleteHead with writer.ownerToken twice');

SELECT is(pg_temp.try(format('SELECT sandbox_persist.checkpoint_fork_from_checkpoint(%L::json)',
        format('{"sourceThreadId":"thread-a","sourceCheckpointId":"1","destinationThreadId":"thread-b",'
               '"destinationCheckpointId":"f1","createdAt":3,"writer":%s}', pg_temp.w('thread-b')))),
    'accepted', 'issue 9 defect 1: the baseline fork is accepted');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.checkpoint_fork_from_checkpoint(%L::json)',
        format('{"sourceThreadId":"thread-a","sourceCheckpointId":"1","destinationThreadId":"thread-b",'
               '"destinationThreadId":"thread-b","destinationCheckpointId":"f1","createdAt":3,"writer":%s}',
               pg_temp.w('thread-b'))),
    'SP008 SANDBOX_SNAPSHOT_INVALID_ENTRY', 'issue 9 defect 1: fork input with "destinationThreadId" twice');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.checkpoint_fork_from_checkpoint(%L::json)',
        format('{"sourceThreadId":"thread-a","sourceCheckpointId":"1","destinationThreadId":"thread-b",'
               '"destinationCheckpointId":"f1","createdAt":3,"writer":%s}',
               pg_temp.writer_plus('"threadId":"thread-b"', 'thread-b'))),
    'SP008 SANDBOX_SNAPSHOT_INVALID_ENTRY', 'issue 9 defect 1: fork with writer.threadId twice');

SELECT is(pg_temp.try(format('SELECT sandbox_persist.checkpoint_renew_writer(%L::json)', pg_temp.w())),
    'accepted', 'issue 9 defect 1: the baseline renew is accepted');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.checkpoint_renew_writer(%L::json)',
        pg_temp.writer_plus('"threadId":"thread-a"')),
    'SP008 SANDBOX_SNAPSHOT_INVALID_ENTRY', 'issue 9 defect 1: renew with writer.threadId twice');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.checkpoint_renew_writer(%L::json)',
        pg_temp.writer_plus(pg_temp.token_member())),
    'SP008 SANDBOX_SNAPSHOT_INVALID_ENTRY', 'issue 9 defect 1: renew with writer.ownerToken twice');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.checkpoint_renew_writer(%L::json)',
        pg_temp.writer_plus('"fence":' || (pg_temp.w()->'fence')::text)),
    'SP008 SANDBOX_SNAPSHOT_INVALID_ENTRY', 'issue 9 defect 1: renew with writer.fence twice');

SELECT is(pg_temp.try(format('SELECT sandbox_persist.checkpoint_release_writer(%L::json)', pg_temp.w())),
    'accepted', 'issue 9 defect 1: the baseline release is accepted');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.checkpoint_release_writer(%L::json)',
        pg_temp.writer_plus('"threadId":"thread-a"')),
    'SP008 SANDBOX_SNAPSHOT_INVALID_ENTRY', 'issue 9 defect 1: release with writer.threadId twice');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.checkpoint_release_writer(%L::json)',
        pg_temp.writer_plus(pg_temp.token_member())),
    'SP008 SANDBOX_SNAPSHOT_INVALID_ENTRY', 'issue 9 defect 1: release with writer.ownerToken twice');

------------------------------------------------------------------------------
-- Defect 3: nesting json_in refuses is refused (54001) and nothing is stored;
-- moderate nesting is stored and read back byte for byte.
------------------------------------------------------------------------------
SELECT throws_ok($$SELECT (repeat('[', 20000) || '1' || repeat(']', 20000))::json$$, '54001', NULL,
    'issue 9 defect 3: json_in itself refuses 20000 nested arrays (the premise)');
SELECT * FROM pg_temp.rejects('SELECT sandbox_persist.message_save_thread(''thread-deep'', pg_temp.deep(20000))',
    '54001', 'issue 9 defect 3: message_save_thread of a transcript 20000 arrays deep');
SELECT * FROM pg_temp.rejects('SELECT sandbox_persist.message_save_thread(''thread-deep'', json_build_array(pg_temp.deep_object(20000)))',
    '54001', 'issue 9 defect 3: message_save_thread of a message 20000 objects deep');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.checkpoint_append(%L::json, json_build_array(pg_temp.deep_object(20000)))',
        format('{"checkpoint":%s,"expectedHeadId":"1","writer":%s}', pg_temp.cp('2', '1'), pg_temp.w())),
    '54001', 'issue 9 defect 3: checkpoint_append of a conversation message 20000 objects deep');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.checkpoint_append(json_build_object(''checkpoint'', %L::json, ''expectedHeadId'', ''1'', ''writer'', %L::json, ''extra'', pg_temp.deep(20000)), ''[]'')',
        pg_temp.cp('2', '1'), pg_temp.w()),
    '54001', 'issue 9 defect 3: checkpoint_append input with a member 20000 arrays deep');
SELECT * FROM pg_temp.rejects('SELECT sandbox_persist.metadata_set(''ns'', ''deep'', pg_temp.deep(20000))',
    '54001', 'issue 9 defect 3: metadata_set of a value 20000 arrays deep');
SELECT * FROM pg_temp.rejects('SELECT sandbox_persist.interrupt_resolve(''int-1'', pg_temp.deep(20000))',
    '54001', 'issue 9 defect 3: interrupt_resolve with a response 20000 arrays deep');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create(json_build_object('interruptId', 'int-deep',
        'runId', 'run-1', 'threadId', 'thread-r', 'requestedAt', 1, 'payload', pg_temp.deep_object(20000)))$$,
    '54001', 'issue 9 defect 3: interrupt_create with a payload 20000 objects deep');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('run-1', json_build_object('usage',
        json_build_object('k', pg_temp.deep(20000))))$$,
    '54001', 'issue 9 defect 3: run_update with usage 20000 arrays deep');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append('run-1',
        json_build_array(json_build_object('k', pg_temp.deep(20000))))$$,
    '54001', 'issue 9 defect 3: event_log_append of a chunk 20000 arrays deep');
SELECT * FROM pg_temp.rejects('SELECT sandbox_persist.reaper_heartbeat(''replica-1'', pg_temp.deep(20000))',
    '54001', 'issue 9 defect 3: reaper_heartbeat with a summary 20000 arrays deep');

SELECT lives_ok('SELECT sandbox_persist.message_save_thread(''thread-100'', pg_temp.deep(100))',
    'issue 9 defect 3: a transcript 100 arrays deep is accepted');
SELECT is(sandbox_persist.message_load_thread('thread-100')::text, pg_temp.deep(100)::text,
    'issue 9 defect 3: the 100-deep transcript reads back byte for byte');
SELECT is(md5(sandbox_persist.message_load_thread('thread-100')::text),
    md5('[' || repeat('[', 99) || '1' || repeat(']', 100)), 'issue 9 defect 3: ... and is the expected text');
SELECT lives_ok('SELECT sandbox_persist.metadata_set(''ns'', ''d100'', pg_temp.deep_object(100))',
    'issue 9 defect 3: a metadata value 100 objects deep is accepted');
SELECT is(sandbox_persist.metadata_get('ns', 'd100')::text, pg_temp.deep_object(100)::text,
    'issue 9 defect 3: the 100-deep metadata value reads back byte for byte');
SELECT lives_ok('SELECT sandbox_persist.interrupt_resolve(''int-1'', pg_temp.deep(100))',
    'issue 9 defect 3: an interrupt response 100 arrays deep is accepted');
SELECT is((SELECT response::text FROM sandbox_persist.interrupts WHERE interrupt_id = 'int-1'),
    pg_temp.deep(100)::text, 'issue 9 defect 3: the 100-deep response is stored byte for byte');
SELECT lives_ok(format('SELECT sandbox_persist.checkpoint_append(%L::json, json_build_array(pg_temp.deep_object(100)))',
        format('{"checkpoint":%s,"expectedHeadId":"1","writer":%s}', pg_temp.cp('2', '1'), pg_temp.w())),
    'issue 9 defect 3: a conversation message 100 objects deep is accepted');
SELECT is((SELECT bodies FROM sandbox_persist.conversation_blocks WHERE bodies LIKE '{"k" : {"k"%'),
    pg_temp.deep_object(100)::text, 'issue 9 defect 3: the 100-deep conversation message is stored byte for byte');
SELECT lives_ok($$SELECT sandbox_persist.checkpoint_fork_from_checkpoint(json_build_object(
        'sourceThreadId', 'thread-a', 'sourceCheckpointId', '2', 'destinationThreadId', 'thread-b',
        'destinationCheckpointId', 'f2', 'createdAt', 3, 'writer', pg_temp.w('thread-b')))$$,
    'issue 9 defect 3: a checkpoint carrying the 100-deep message forks');

------------------------------------------------------------------------------
-- Defect 7: integers written with many digits. A nonzero digit after the
-- decimal point is 22023 (not integral) whatever the size; any other value
-- beyond +/-(2^53 - 1) is 22003 (out of range).
------------------------------------------------------------------------------
SELECT pg_temp.rejects(format('SELECT sandbox_persist.run_create_or_resume(''{"runId":"run-n","threadId":"thread-r","startedAt":%s}'')', v),
        code, format('issue 9 defect 7: startedAt %s (%s)', v, why))
    FROM (VALUES ('1e40', '22003', 'integral, out of range'),
                 ('-1e40', '22003', 'integral, out of range'),
                 ('123456789012345678901234567890123', '22003', '33 digits, integral'),
                 ('-123456789012345678901234567890123', '22003', '33 digits, integral'),
                 ('1234567890123456789012345678901234567890', '22003', '40 digits, integral'),
                 ('1.2345678901234567890123456789012345e40', '22003', '35 significant digits, integral'),
                 ('123456789012345678901234567890123.0000', '22003', '33 digits and zero fraction'),
                 ('1234567890123456789012345678901234.5', '22023', '34 digits, not integral'),
                 ('123456789012345678901234567890123456e-3', '22023', '36 significant digits, not integral'),
                 ('-1234567890123456789012345678901234.5', '22023', 'negative, not integral'),
                 ('1e-40', '22023', 'between 0 and 1'),
                 ('9007199254740992', '22003', '2^53'),
                 ('-9007199254740992', '22003', '-2^53'),
                 ('9.007199254740992e15', '22003', '2^53 with an exponent'),
                 ('9007199254740991.5', '22023', '2^53 - 1/2'),
                 ('9007199254740991.000000000000000000000000000000000001', '22023', 'a nonzero digit 36 places after the point'),
                 ('9007199254740993.5', '22023', 'past 2^53 and not integral'))
         AS t(v, code, why);
SELECT is(sandbox_persist.run_create_or_resume(format('{"runId":"run-n%s","threadId":"thread-r","startedAt":%s}', n, v)::json)->>'startedAt',
        expected, format('issue 9 defect 7: startedAt %s is accepted as %s', v, expected))
    FROM (VALUES (1, '9007199254740991', '9007199254740991'),
                 (2, '-9007199254740991', '-9007199254740991'),
                 (3, '9007199254740991.0', '9007199254740991'),
                 (4, '90071992547409910e-1', '9007199254740991'),
                 (5, '9.007199254740991e15', '9007199254740991'),
                 (6, '9007199254740990.000000000000000000000000000000000000', '9007199254740990'),
                 (7, '0.000000000000000000000000000000000000', '0'),
                 (8, '100000000000000000000000000000000000000e-23', '1000000000000000'))
         AS t(n, v, expected);

------------------------------------------------------------------------------
-- Defect 9: every indexed text column has a byte cap: exactly the cap is
-- accepted, one byte more is 22001 (checkpoint identifiers: SP007) and
-- nothing is stored. Multibyte values count bytes, not characters.
------------------------------------------------------------------------------
CREATE TEMP TABLE capped (n int, field text, cap int, stmt text, code text);
INSERT INTO capped VALUES
    (1, 'instances.instance_key (instance_upsert key)', 1024,
     $$SELECT sandbox_persist.instance_upsert(json_build_object('key', %s::text, 'provider', 'p', 'providerSandboxId', 's', 'threadId', 't', 'updatedAt', 1))$$, '22001'),
    (2, 'instances.latest_run_id (instance_upsert latestRunId)', 1024,
     $$SELECT sandbox_persist.instance_upsert(json_build_object('key', 'inst-1', 'provider', 'p', 'providerSandboxId', 's', 'threadId', 't', 'latestRunId', %s::text, 'updatedAt', 1))$$, '22001'),
    (3, 'runs.run_id (run_create_or_resume runId)', 1024,
     $$SELECT sandbox_persist.run_create_or_resume(json_build_object('runId', %s::text, 'threadId', 't', 'startedAt', 1))$$, '22001'),
    (4, 'runs.thread_id (run_create_or_resume threadId)', 1024,
     $$SELECT sandbox_persist.run_create_or_resume(json_build_object('runId', 'run-x', 'threadId', %s::text, 'startedAt', 1))$$, '22001'),
    (5, 'runs.sandbox_key (run_update sandboxKey)', 1024,
     $$SELECT sandbox_persist.run_update('run-1', json_build_object('sandboxKey', %s::text))$$, '22001'),
    (6, 'messages.thread_id (message_save_thread)', 1024,
     $$SELECT sandbox_persist.message_save_thread(%s, '[]')$$, '22001'),
    (7, 'interrupts.interrupt_id (interrupt_create interruptId)', 1024,
     $$SELECT sandbox_persist.interrupt_create(json_build_object('interruptId', %s::text, 'runId', 'r', 'threadId', 't', 'requestedAt', 1, 'payload', '{}'::json))$$, '22001'),
    (8, 'interrupts.run_id (interrupt_create runId)', 1024,
     $$SELECT sandbox_persist.interrupt_create(json_build_object('interruptId', 'int-x', 'runId', %s::text, 'threadId', 't', 'requestedAt', 1, 'payload', '{}'::json))$$, '22001'),
    (9, 'interrupts.thread_id (interrupt_create threadId)', 1024,
     $$SELECT sandbox_persist.interrupt_create(json_build_object('interruptId', 'int-x', 'runId', 'r', 'threadId', %s::text, 'requestedAt', 1, 'payload', '{}'::json))$$, '22001'),
    (10, 'metadata.namespace (metadata_set)', 1024,
     $$SELECT sandbox_persist.metadata_set(%s, 'k', '1')$$, '22001'),
    (11, 'metadata.meta_key (metadata_set)', 1024,
     $$SELECT sandbox_persist.metadata_set('ns', %s, '1')$$, '22001'),
    (12, 'generation_runs.run_id (generation_run_create_or_resume runId)', 1024,
     $$SELECT sandbox_persist.generation_run_create_or_resume(json_build_object('runId', %s::text, 'threadId', 't', 'activity', 'a', 'provider', 'p', 'model', 'm', 'startedAt', 1))$$, '22001'),
    (13, 'generation_runs.thread_id (generation_run_create_or_resume threadId)', 1024,
     $$SELECT sandbox_persist.generation_run_create_or_resume(json_build_object('runId', 'g-x', 'threadId', %s::text, 'activity', 'a', 'provider', 'p', 'model', 'm', 'startedAt', 1))$$, '22001'),
    (14, 'artifacts.artifact_id (artifact_save artifactId)', 1024,
     $$SELECT sandbox_persist.artifact_save(json_build_object('artifactId', %s::text, 'runId', 'r', 'threadId', 't', 'name', 'n', 'mimeType', 'text/plain', 'size', 1, 'createdAt', 1))$$, '22001'),
    (15, 'artifacts.run_id (artifact_save runId)', 1024,
     $$SELECT sandbox_persist.artifact_save(json_build_object('artifactId', 'a-x', 'runId', %s::text, 'threadId', 't', 'name', 'n', 'mimeType', 'text/plain', 'size', 1, 'createdAt', 1))$$, '22001'),
    (16, 'artifacts.thread_id (artifact_save threadId)', 1024,
     $$SELECT sandbox_persist.artifact_save(json_build_object('artifactId', 'a-x', 'runId', 'r', 'threadId', %s::text, 'name', 'n', 'mimeType', 'text/plain', 'size', 1, 'createdAt', 1))$$, '22001'),
    (17, 'artifacts.blob_key (artifact_save blobKey)', 2048,
     $$SELECT sandbox_persist.artifact_save(json_build_object('artifactId', 'a-x', 'runId', 'r', 'threadId', 't', 'blobKey', %s::text, 'name', 'n', 'mimeType', 'text/plain', 'size', 1, 'createdAt', 1))$$, '22001'),
    (18, 'blobs.blob_key (blob_put)', 2048,
     $$SELECT sandbox_persist.blob_put(%s, '\x01'::bytea)$$, '22001'),
    (19, 'locks.lock_key (lock_acquire)', 2048,
     $$SELECT sandbox_persist.lock_acquire(%s, 1000)$$, '22001'),
    (20, 'event_logs.run_id (event_log_append)', 1024,
     $$SELECT sandbox_persist.event_log_append(%s, '[{}]')$$, '22001'),
    (21, 'reaper_heartbeats.replica (reaper_heartbeat)', 1024,
     $$SELECT sandbox_persist.reaper_heartbeat(%s)$$, '22001'),
    (22, 'checkpoint_threads.thread_id (checkpoint_acquire_writer)', 1024,
     $$SELECT sandbox_persist.checkpoint_acquire_writer(%s)$$, 'SP007'),
    (23, 'checkpoints.checkpoint_id (checkpoint_append id)', 1024,
     $$SELECT sandbox_persist.checkpoint_append(json_build_object('checkpoint', json_build_object('id', %s::text, 'threadId', 'thread-len', 'parentCheckpointId', NULL, 'createdAt', 1, 'reason', 'automatic', 'files', '[]'::json, 'artifacts', '[]'::json), 'expectedHeadId', NULL, 'writer', pg_temp.w('thread-len')), '[]')$$, 'SP007');

SELECT is(pg_temp.try(format(stmt, quote_literal(pg_temp.str(cap, mb)))), 'accepted',
        format('issue 9 defect 9: %s of exactly %s bytes (%s) is accepted', field, cap,
               CASE WHEN mb THEN '4-byte characters' ELSE 'ASCII' END))
    FROM capped, (VALUES (false), (true)) AS m(mb) ORDER BY n, mb;
SELECT pg_temp.rejects(format(stmt, quote_literal(pg_temp.str(cap + 1, mb))), code,
        format('issue 9 defect 9: %s of %s bytes (%s)', field, cap + 1,
               CASE WHEN mb THEN '4-byte characters' ELSE 'ASCII' END))
    FROM capped, (VALUES (false), (true)) AS m(mb) ORDER BY n, mb;

-- The widest index rows: every column of a compound index at its cap.
SELECT is(pg_temp.try(format($$SELECT sandbox_persist.artifact_save(json_build_object('artifactId', %1$s::text,
        'runId', %2$s::text, 'threadId', %3$s::text, 'blobKey', %4$s::text, 'name', 'n', 'mimeType', 'text/plain',
        'size', 1, 'createdAt', 1))$$, quote_literal(pg_temp.str(1024, false)), quote_literal(pg_temp.str(1023, false) || 'r'),
        quote_literal(pg_temp.str(1023, false) || 't'), quote_literal(pg_temp.str(2048, false)))),
    'accepted', 'issue 9 defect 9: an artifact with every indexed id at 1024 bytes and a 2048-byte blobKey is accepted');
SELECT is(pg_temp.try(format('SELECT sandbox_persist.metadata_set(%s, %s, ''1'')',
        quote_literal(pg_temp.str(1024, false)), quote_literal(pg_temp.str(1023, false) || 'k'))),
    'accepted', 'issue 9 defect 9: a metadata entry with namespace and key both at 1024 bytes is accepted');

-- The two columns that had no cap store a value at the cap exactly.
SELECT sandbox_persist.instance_upsert(json_build_object('key', 'inst-1', 'provider', 'p',
    'providerSandboxId', 's', 'threadId', 't', 'latestRunId', pg_temp.str(1024, true), 'updatedAt', 1));
SELECT is(sandbox_persist.instance_get('inst-1')->>'latestRunId', pg_temp.str(1024, true),
    'issue 9 defect 9: a 1024-byte latestRunId reads back unchanged');
SELECT sandbox_persist.run_update('run-1', json_build_object('sandboxKey', pg_temp.str(1024, false)));
SELECT is(sandbox_persist.run_get('run-1')->>'sandboxKey', pg_temp.str(1024, false),
    'issue 9 defect 9: a 1024-byte sandboxKey reads back unchanged');
SELECT throws_ok($$SELECT sandbox_persist.run_update('run-1', json_build_object('sandboxKey', repeat('é', 1450)))$$,
    '22001', 'sandboxKey is too long',
    'issue 9 defect 9: a 2.9 KB sandboxKey gets our 22001 and message, not the index row error');

------------------------------------------------------------------------------
-- Defect 12: metadata values and interrupt responses are byte-faithful,
-- surrounding whitespace included.
------------------------------------------------------------------------------
SELECT sandbox_persist.metadata_set('ns', 'ws', E'  {"a" : 1}\n\t ');
SELECT is(sandbox_persist.metadata_get('ns', 'ws')::text, E'  {"a" : 1}\n\t ',
    'issue 9 defect 12: metadata_set keeps the whitespace around an object value');
SELECT sandbox_persist.metadata_set('ns', 'ws2', E'\n "left" \n');
SELECT is(sandbox_persist.metadata_get('ns', 'ws2')::text, E'\n "left" \n',
    'issue 9 defect 12: metadata_set keeps the whitespace around a string value');
SELECT is((SELECT value::text FROM sandbox_persist.metadata WHERE namespace = 'ns' AND meta_key = 'ws'),
    E'  {"a" : 1}\n\t ', 'issue 9 defect 12: the stored metadata text is the argument text');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.metadata_set('ns', 'ws3', E'\n null \t')$$, '22004',
    'issue 9 defect 12: JSON null surrounded by whitespace is still refused');
SELECT sandbox_persist.interrupt_resolve('int-1', E'  {"a" : 1}\n  ');
SELECT is((SELECT response::text FROM sandbox_persist.interrupts WHERE interrupt_id = 'int-1'),
    E'  {"a" : 1}\n  ', 'issue 9 defect 12: interrupt_resolve stores the response text exactly');
SELECT ok(strpos(sandbox_persist.interrupt_get('int-1')::text, E'"response":  {"a" : 1}\n  }') > 0,
    'issue 9 defect 12: interrupt_get splices the response exactly');
SELECT sandbox_persist.message_save_thread('thread-ws', E' [ {"role" : "user"} ]\n');
SELECT is(sandbox_persist.message_load_thread('thread-ws')::text, E' [ {"role" : "user"} ]\n',
    'issue 9 defect 12: message_save_thread (the reference behaviour) keeps the text exactly');

SELECT * FROM finish();
ROLLBACK;
