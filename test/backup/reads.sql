-- Dump-and-restore suite: every read of every store, as the application role,
-- plus the catalog facts a restore must keep (sequence positions, owners and
-- privileges), as the superuser. One line "R <store> <label> <result>" each;
-- the caller compares the lines of the two databases. Owner tokens of leases
-- taken after the restore are random, so lock_holder is printed without them.
\set ON_ERROR_STOP 0
\pset format unaligned
\pset tuples_only on
\pset fieldsep '\t'
SET client_min_messages = warning;
SET ROLE :"app";
SET search_path = sandbox_persist;

-- sandbox instances
SELECT 'R', 'instances', 'get ' || k, instance_get(k)
  FROM unnest(ARRAY['bk-inst-1', 'bk-inst-2', 'bk-inst-3']) AS k;
SELECT 'R', 'instances', 'gc candidates', instance_gc_candidates(3600000, 100, :t0 + 100000);

-- runs
SELECT 'R', 'runs', 'get ' || k, run_get(k)
  FROM unnest(ARRAY['bk-run-a', 'bk-run-b', 'bk-run-c', 'bk-run-d', 'bk-run-done']) AS k;
SELECT 'R', 'runs', 'find active ' || k, run_find_active_run(k)
  FROM unnest(ARRAY['bk-thread', 'bk-thread-2']) AS k;
SELECT 'R', 'runs', 'list by thread ' || k, run_list_by_thread(k)
  FROM unnest(ARRAY['bk-thread', 'bk-thread-2']) AS k;
SELECT 'R', 'runs', 'list reclaimable', run_list_reclaimable(100000, 5000);

-- messages
SELECT 'R', 'messages', 'load ' || k, message_load_thread(k)
  FROM unnest(ARRAY['bk-thread', 'bk-fork', 'bk-fork-2', 'bk-thread-3']) AS k;

-- checkpoints
SELECT 'R', 'checkpoints', 'get ' || k, checkpoint_get(k)
  FROM unnest(ARRAY['bk-cp-1', 'bk-cp-2', 'bk-cp-3', 'bk-fork-root', 'bk-fork-2-root', 'bk-cp-t3']) AS k;
SELECT 'R', 'checkpoints', 'list ' || k, checkpoint_list(k)
  FROM unnest(ARRAY['bk-thread', 'bk-fork', 'bk-fork-2', 'bk-thread-3']) AS k;
SELECT 'R', 'checkpoints', 'head ' || k, checkpoint_get_head(k)
  FROM unnest(ARRAY['bk-thread', 'bk-fork', 'bk-fork-2', 'bk-thread-3']) AS k;
SELECT 'R', 'checkpoints', 'blob references', checkpoint_list_blob_references();

-- interrupts
SELECT 'R', 'interrupts', 'get ' || k, interrupt_get(k)
  FROM unnest(ARRAY['bk-int-1', 'bk-int-2', 'bk-int-3', 'bk-int-4']) AS k;
SELECT 'R', 'interrupts', 'list', interrupt_list('bk-thread');
SELECT 'R', 'interrupts', 'list pending', interrupt_list_pending('bk-thread');
SELECT 'R', 'interrupts', 'list by run ' || k, interrupt_list_by_run(k)
  FROM unnest(ARRAY['bk-run-a', 'bk-run-b']) AS k;
SELECT 'R', 'interrupts', 'list pending by run ' || k, interrupt_list_pending_by_run(k)
  FROM unnest(ARRAY['bk-run-a', 'bk-run-b']) AS k;

-- metadata
SELECT 'R', 'metadata', 'get ' || n || '/' || k, metadata_get(n, k)
  FROM (VALUES ('ui', 'sidebar'), ('ui', 'nested'), ('ui', 'theme'),
               ('backup', 'writer'), ('backup', 'lock_c')) AS t(n, k);

-- generation runs
SELECT 'R', 'generation runs', 'get ' || k, generation_run_get(k)
  FROM unnest(ARRAY['bk-gen-1', 'bk-gen-2', 'bk-gen-3']) AS k;
SELECT 'R', 'generation runs', 'latest', generation_run_find_latest_for_thread('bk-thread');

-- artifacts
SELECT 'R', 'artifacts', 'get ' || k, artifact_get(k)
  FROM unnest(ARRAY['bk-art-1', 'bk-art-2', 'bk-art-3', 'bk-art-4']) AS k;
SELECT 'R', 'artifacts', 'list ' || k, artifact_list(k)
  FROM unnest(ARRAY['bk-gen-1', 'bk-gen-2', 'bk-gen-3']) AS k;
SELECT 'R', 'artifacts', 'list for thread', artifact_list_for_thread('bk-thread');

-- blobs: whole objects (record and md5 of the body), a range, the listing
SELECT 'R', 'blobs', 'get ' || k, (SELECT record::text || ' ' || coalesce(md5(body), '-')
                                     FROM blob_get(k))
  FROM unnest(ARRAY['artifacts/bk-gen-1/bk-art-1', 'bk/large.bin', 'bk/uploaded.txt',
                    'bk/streamed.txt', 'bk/new.txt', 'bk/aborted.txt',
                    'sandbox-files/sha256/' || encode(sha256('hello'), 'hex'),
                    'sandbox-files/sha256/' || encode(sha256('world'), 'hex')]) AS k;
SELECT 'R', 'blobs', 'range ' || k, (SELECT encode(body, 'escape') FROM blob_get(k, 3, 9))
  FROM unnest(ARRAY['bk/streamed.txt', 'bk/large.bin']) AS k;
SELECT 'R', 'blobs', 'list', blob_list();
SELECT 'R', 'blobs', 'list bk/ page', blob_list('bk/', NULL, 1);

-- locks
SELECT 'R', 'locks', 'holder ' || k, lock_holder(k, :t0 + 1400)::jsonb - 'ownerToken'
  FROM unnest(ARRAY['run-driver:bk-run-c', 'bk-lock-2', 'bk-lock-3', 'bk-lock-4']) AS k;
SELECT 'R', 'locks', 'check c', lock_check('run-driver:bk-run-c',
    metadata_get('backup', 'lock_c')->>'ownerToken',
    (metadata_get('backup', 'lock_c')->>'fence')::bigint, :t0 + 1400);

-- event logs
SELECT 'R', 'event logs', 'read ' || k, event_log_read(k, 0)
  FROM unnest(ARRAY['bk-run-c', 'bk-run-d', 'bk-run-done']) AS k;
SELECT 'R', 'event logs', 'read after 1 ' || k, event_log_read(k, 1, 1)
  FROM unnest(ARRAY['bk-run-c']) AS k;
SELECT 'R', 'event logs', 'snapshot ' || k, event_log_snapshot(k)
  FROM unnest(ARRAY['bk-run-c', 'bk-run-d', 'bk-run-done']) AS k;

-- maintenance
SELECT 'R', 'maintenance', 'attention', attention_list();

-- what the superuser sees: the overview, sequence positions, owners and grants
RESET ROLE;
-- (the duration of the last maintain() round, 0.4.0, is wall-clock time: masked;
-- maintenance_health is left out: the report carries the time it was judged and
-- what pg_cron this database has, which belong to the moment and the cluster)
SELECT 'R', 'catalog', 'overview',
       regexp_replace(
           regexp_replace(row_to_json(o)::text, '"maintenance_last_duration_ms":([0-9]+|null)',
                          '"maintenance_last_duration_ms":"<wall clock>"'),
           ',"maintenance_health":\{.*\}(\})$', '\1')
  FROM sandbox_persist.overview o;
SELECT 'R', 'catalog', 'sequence ' || sequencename, coalesce(last_value::text, 'unused')
  FROM pg_catalog.pg_sequences WHERE schemaname = 'sandbox_persist' ORDER BY sequencename;
SELECT 'R', 'catalog', 'owners and grants of relations',
       string_agg(c.relname || ' ' || c.relowner::regrole || ' ' || coalesce(c.relacl::text, '-'),
                  '; ' ORDER BY c.relname)
  FROM pg_catalog.pg_class c WHERE c.relnamespace = 'sandbox_persist'::regnamespace;
SELECT 'R', 'catalog', 'owners and grants of functions',
       string_agg(p.oid::regprocedure || ' ' || p.proowner::regrole || ' ' ||
                  coalesce(p.proacl::text, '-') || ' ' || p.prosecdef, '; ' ORDER BY p.oid::regprocedure::text)
  FROM pg_catalog.pg_proc p WHERE p.pronamespace = 'sandbox_persist'::regnamespace;
SELECT 'R', 'catalog', 'schema', n.nspowner::regrole || ' ' || coalesce(n.nspacl::text, '-')
  FROM pg_catalog.pg_namespace n WHERE n.nspname = 'sandbox_persist';
SELECT 'R', 'catalog', 'extension', extversion FROM pg_catalog.pg_extension
 WHERE extname = 'sandbox_persist';
