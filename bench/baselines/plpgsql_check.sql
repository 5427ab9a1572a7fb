-- bench/baselines/plpgsql_check.sql: the PL/pgSQL baseline really implements
-- the contract it is measured against. Run by bench/suites/stores.sh right
-- after installing bench/baselines/plpgsql.sql (a failure stops the suite):
-- every case runs against sandbox_persist and bench_plpgsql, each on its own
-- ids, and both must end with the same outcome: the same SQLSTATE, or the same
-- result (compared as jsonb: key order is not part of these results).
-- %1$s is the schema, %2$s a prefix that keeps the two runs' ids apart.
-- SET bench.verbose = on to see every outcome.

CREATE FUNCTION pg_temp.outcome(stmt text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r text;
BEGIN
    BEGIN
        EXECUTE stmt INTO r;
    EXCEPTION WHEN OTHERS THEN
        RETURN 'error ' || SQLSTATE;
    END;
    BEGIN
        RETURN 'ok ' || coalesce(r::jsonb::text, 'NULL');
    EXCEPTION WHEN invalid_text_representation THEN
        RETURN 'ok ' || r;   -- a result that is not JSON (void, a head id)
    END;
END $$;

DO $check$
DECLARE
    cases text[] := ARRAY[
        -- instances (I1, I2, I3, I4 and the bad inputs)
        $$SELECT %1$s.instance_get('%2$sinst-none')::text$$,
        $$SELECT %1$s.instance_upsert('{"key":"%2$si1","provider":"e2b","providerSandboxId":"s","threadId":"t","latestSnapshotId":"a","latestRunId":"r","updatedAt":5}')::text$$,
        $$SELECT %1$s.instance_get('%2$si1')::text$$,
        $$SELECT %1$s.instance_upsert('{"key":"%2$si1","provider":"e2b","providerSandboxId":"s","threadId":"t","updatedAt":6}')::text$$,
        $$SELECT %1$s.instance_get('%2$si1')::text$$,
        $$SELECT %1$s.instance_upsert('{"key":"%2$si2","provider":"e2b","providerSandboxId":"s","threadId":"t","updatedAt":6,"extra":1}')::text$$,
        $$SELECT %1$s.instance_upsert('{"key":"","provider":"e2b","providerSandboxId":"s","threadId":"t","updatedAt":6}')::text$$,
        $$SELECT %1$s.instance_upsert('{"provider":"e2b","providerSandboxId":"s","threadId":"t","updatedAt":6}')::text$$,
        $$SELECT %1$s.instance_upsert('{"key":"%2$si3","provider":"e2b","providerSandboxId":"s","threadId":"t","updatedAt":6.5}')::text$$,
        $$SELECT %1$s.instance_upsert(json_build_object('key', repeat('k', 1025), 'provider', 'e2b', 'providerSandboxId', 's', 'threadId', 't', 'updatedAt', 1))::text$$,
        -- locks (L1, L2, L5, L13)
        $$SELECT (%1$s.lock_acquire('%2$slk', 30000) ->> 'ownerToken') IS NOT NULL$$,
        $$SELECT %1$s.lock_acquire('%2$slk', 30000)::text$$,
        $$SELECT %1$s.lock_release('%2$slk', '00000000-0000-0000-0000-000000000000')$$,
        $$SELECT %1$s.lock_acquire('%2$slk2', 999)::text$$,
        $$SELECT %1$s.lock_acquire('', 30000)::text$$,
        $$SELECT %1$s.lock_acquire(repeat('k', 2049), 30000)::text$$,
        -- event log (E1, E2, E4, E6, E7, E12, E13, E16)
        $$SELECT %1$s.event_log_append('%2$srun', '[{"a":1},{"b":2}]')::text$$,
        $$SELECT %1$s.event_log_append('%2$srun', '[{"c":3}]', '{"producerId":"6f1c2d3e-0000-4000-8000-000000000001","producerSeq":1}')::text$$,
        $$SELECT %1$s.event_log_append('%2$srun', '[{"c":3}]', '{"producerId":"6f1c2d3e-0000-4000-8000-000000000001","producerSeq":1}')::text$$,
        $$SELECT %1$s.event_log_append('%2$srun', '[{"c":3},{"d":4}]', '{"producerId":"6f1c2d3e-0000-4000-8000-000000000001","producerSeq":1}')::text$$,
        $$SELECT %1$s.event_log_append('%2$srun', '[]')::text$$,
        $$SELECT %1$s.event_log_append('%2$srun', '{"a":1}')::text$$,
        $$SELECT (%1$s.event_log_read('%2$srun', 1, 10)::jsonb - 'logId')::text$$,
        $$SELECT (%1$s.event_log_read('%2$snorun', 0, 10)::jsonb - 'logId')::text$$,
        $$SELECT %1$s.event_log_read('%2$snorun', 1, 10)::text$$,
        $$SELECT %1$s.event_log_read('%2$srun', 4, 10)::text$$,
        -- checkpoints (C2, C3, C4, R15, R16, R18, R19, C14, C18-like head checks)
        $$SELECT (%1$s.checkpoint_acquire_writer('%2$sth') ->> 'fence')$$,
        $$SELECT %1$s.checkpoint_acquire_writer('%2$sth')::text$$,
        $$SELECT %1$s.checkpoint_acquire_writer('')::text$$,
        $$SELECT %1$s.checkpoint_append(json_build_object('checkpoint', json_build_object('id', '%2$scp1', 'threadId', '%2$sth', 'createdAt', 1, 'reason', 'automatic',
              'files', json_build_array(json_build_object('path', 'a/b.txt', 'kind', 'file', 'blobKey', 'sandbox-files/sha256/' || repeat('ab', 32), 'size', 3), json_build_object('path', 'a', 'kind', 'dir')),
              'artifacts', '[]'::json), 'expectedHeadId', NULL,
              'writer', (SELECT json_build_object('threadId', thread_id, 'ownerToken', owner_token, 'fence', fence) FROM sandbox_persist.checkpoint_threads WHERE thread_id = '%2$sth')),
              '[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]')::text$$,
        $$SELECT %1$s.checkpoint_get_head('%2$sth')$$,
        $$SELECT %1$s.checkpoint_append(json_build_object('checkpoint', json_build_object('id', '%2$scp2', 'threadId', '%2$sth', 'parentCheckpointId', '%2$scp0', 'createdAt', 2, 'reason', 'automatic', 'files', '[]'::json, 'artifacts', '[]'::json),
              'expectedHeadId', '%2$scp0', 'writer', (SELECT json_build_object('threadId', thread_id, 'ownerToken', owner_token, 'fence', fence) FROM sandbox_persist.checkpoint_threads WHERE thread_id = '%2$sth')), '[]')::text$$,
        $$SELECT %1$s.checkpoint_append(json_build_object('checkpoint', json_build_object('id', '%2$scp2', 'threadId', '%2$sth', 'parentCheckpointId', '%2$scp0', 'createdAt', 2, 'reason', 'automatic', 'files', '[]'::json, 'artifacts', '[]'::json),
              'expectedHeadId', '%2$scp1', 'writer', (SELECT json_build_object('threadId', thread_id, 'ownerToken', owner_token, 'fence', fence) FROM sandbox_persist.checkpoint_threads WHERE thread_id = '%2$sth')), '[]')::text$$,
        $$SELECT %1$s.checkpoint_append(json_build_object('checkpoint', json_build_object('id', '%2$scp1', 'threadId', '%2$sth', 'parentCheckpointId', '%2$scp1', 'createdAt', 2, 'reason', 'automatic', 'files', '[]'::json, 'artifacts', '[]'::json),
              'expectedHeadId', '%2$scp1', 'writer', (SELECT json_build_object('threadId', thread_id, 'ownerToken', owner_token, 'fence', fence) FROM sandbox_persist.checkpoint_threads WHERE thread_id = '%2$sth')), '[]')::text$$,
        $$SELECT %1$s.checkpoint_append(json_build_object('checkpoint', json_build_object('id', '%2$scp3', 'threadId', '%2$sth', 'parentCheckpointId', '%2$scp1', 'createdAt', 2, 'reason', 'automatic', 'files', '[]'::json, 'artifacts', '[]'::json),
              'expectedHeadId', '%2$scp1', 'writer', json_build_object('threadId', '%2$sother', 'ownerToken', 'x', 'fence', 1)), '[]')::text$$,
        $$SELECT %1$s.checkpoint_append(json_build_object('checkpoint', json_build_object('id', '%2$scp3', 'threadId', '%2$sth', 'parentCheckpointId', '%2$scp1', 'createdAt', 2, 'reason', 'automatic', 'files', '[]'::json, 'artifacts', '[]'::json),
              'expectedHeadId', '%2$scp1', 'writer', json_build_object('threadId', '%2$sth', 'ownerToken', '00000000-0000-0000-0000-000000000000', 'fence', 1)), '[]')::text$$,
        $$SELECT %1$s.checkpoint_append(json_build_object('checkpoint', json_build_object('id', '', 'threadId', '%2$sth', 'createdAt', 2, 'reason', 'automatic', 'files', '[]'::json, 'artifacts', '[]'::json),
              'expectedHeadId', '%2$scp1', 'writer', json_build_object('threadId', '%2$sth')), '[]')::text$$,
        $$SELECT %1$s.checkpoint_append(json_build_object('checkpoint', json_build_object('id', '%2$scp3', 'threadId', '%2$sth', 'parentCheckpointId', '%2$scp1', 'createdAt', 2, 'reason', 'automatic',
              'files', json_build_array(json_build_object('path', '../x', 'kind', 'dir')), 'artifacts', '[]'::json), 'expectedHeadId', '%2$scp1', 'writer', json_build_object('threadId', '%2$sth')), '[]')::text$$,
        $$SELECT %1$s.checkpoint_append(json_build_object('checkpoint', json_build_object('id', '%2$scp3', 'threadId', '%2$sth', 'parentCheckpointId', '%2$scp1', 'createdAt', 2, 'reason', 'automatic',
              'files', json_build_array(json_build_object('path', 'x', 'kind', 'file', 'blobKey', 'sandbox-files/sha256/' || repeat('a', 63), 'size', 1)), 'artifacts', '[]'::json), 'expectedHeadId', '%2$scp1', 'writer', json_build_object('threadId', '%2$sth')), '[]')::text$$,
        $$SELECT %1$s.checkpoint_append(json_build_object('checkpoint', json_build_object('id', '%2$scp3', 'threadId', '%2$sth', 'parentCheckpointId', '%2$scp1', 'createdAt', 2, 'reason', 'automatic',
              'files', json_build_array(json_build_object('path', 'x', 'kind', 'file', 'blobKey', 'sandbox-files/sha256/' || repeat('a', 64), 'size', 1), json_build_object('path', 'x/y', 'kind', 'dir')), 'artifacts', '[]'::json),
              'expectedHeadId', '%2$scp1', 'writer', json_build_object('threadId', '%2$sth')), '[]')::text$$,
        $$SELECT %1$s.checkpoint_release_writer((SELECT json_build_object('threadId', thread_id, 'ownerToken', owner_token, 'fence', fence) FROM sandbox_persist.checkpoint_threads WHERE thread_id = '%2$sth'))$$,
        $$SELECT (%1$s.checkpoint_acquire_writer('%2$sth') ->> 'fence')$$,
        -- fork (F1, F3, F5, F6, F10-like emptiness, R31)
        $$SELECT (%1$s.checkpoint_acquire_writer('%2$sdst') ->> 'fence')$$,
        $$SELECT (%1$s.checkpoint_fork_from_checkpoint(json_build_object('sourceThreadId', '%2$sth', 'sourceCheckpointId', '%2$scp1', 'destinationThreadId', '%2$sth',
              'destinationCheckpointId', '%2$sroot', 'createdAt', 9, 'writer', json_build_object('threadId', '%2$sth'))))::text$$,
        $$SELECT (%1$s.checkpoint_fork_from_checkpoint(json_build_object('sourceThreadId', '%2$sth', 'sourceCheckpointId', '%2$snone', 'destinationThreadId', '%2$sdst',
              'destinationCheckpointId', '%2$sroot', 'createdAt', 9, 'writer', json_build_object('threadId', '%2$sdst'))))::text$$,
        $$SELECT (%1$s.checkpoint_fork_from_checkpoint(json_build_object('sourceThreadId', '%2$sth', 'sourceCheckpointId', '%2$scp1', 'destinationThreadId', '%2$sdst',
              'destinationCheckpointId', '%2$sroot', 'createdAt', 9, 'writer', json_build_object('threadId', '%2$sdst', 'ownerToken', 'x', 'fence', 1))))::text$$,
        $$SELECT (%1$s.checkpoint_fork_from_checkpoint(json_build_object('sourceThreadId', '%2$sth', 'sourceCheckpointId', '%2$scp1', 'destinationThreadId', '%2$sdst',
              'destinationCheckpointId', '%2$sroot', 'createdAt', 9,
              'writer', (SELECT json_build_object('threadId', thread_id, 'ownerToken', owner_token, 'fence', fence) FROM sandbox_persist.checkpoint_threads WHERE thread_id = '%2$sdst')))::jsonb #- '{checkpoint,id}' #- '{checkpoint,threadId}')::text$$,
        $$SELECT count(*) FROM sandbox_persist.checkpoint_blob_refs WHERE checkpoint_id = '%2$sroot'$$,
        $$SELECT transcript::text FROM sandbox_persist.messages WHERE thread_id = '%2$sdst'$$,
        $$SELECT (%1$s.checkpoint_fork_from_checkpoint(json_build_object('sourceThreadId', '%2$sth', 'sourceCheckpointId', '%2$scp1', 'destinationThreadId', '%2$sdst',
              'destinationCheckpointId', '%2$sroot2', 'createdAt', 9,
              'writer', (SELECT json_build_object('threadId', thread_id, 'ownerToken', owner_token, 'fence', fence) FROM sandbox_persist.checkpoint_threads WHERE thread_id = '%2$sdst'))))::text$$,
        -- blob head
        $$SELECT (%1$s.blob_head('sandbox-files/sha256/' || encode(sha256('check'::bytea), 'hex'))::jsonb - 'etag')::text$$,
        $$SELECT %1$s.blob_head('%2$snone')::text$$
    ];
    c text;
    a text;
    b text;
    bad int := 0;
BEGIN
    PERFORM sandbox_persist.blob_put('sandbox-files/sha256/' || encode(sha256('check'::bytea), 'hex'), 'check'::bytea);
    FOREACH c IN ARRAY cases LOOP
        a := pg_temp.outcome(format(c, 'sandbox_persist', 'chk-sp-'));
        b := pg_temp.outcome(format(c, 'bench_plpgsql', 'chk-pl-'));
        IF current_setting('bench.verbose', true) = 'on' THEN
            RAISE NOTICE '% | %', a, b;
        END IF;
        -- ids carry the run's prefix; compare without it
        IF replace(a, 'chk-sp-', '') IS DISTINCT FROM replace(b, 'chk-pl-', '') THEN
            RAISE WARNING 'plpgsql baseline differs: % gives % (sandbox_persist: %)', left(c, 160), b, a;
            bad := bad + 1;
        END IF;
    END LOOP;
    IF bad > 0 THEN
        RAISE EXCEPTION '% of % cases differ between the PL/pgSQL baseline and sandbox_persist', bad, cardinality(cases);
    END IF;
    RAISE NOTICE 'plpgsql baseline: % cases agree with sandbox_persist', cardinality(cases);
END $check$;
