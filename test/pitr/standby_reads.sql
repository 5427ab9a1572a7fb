-- The extension's reads, run by test/pitr/run.sh on the restored primary and on
-- the standby rebuilt from it: each line must come out the same on both. Only
-- reads whose answer does not depend on the server's clock, over data the
-- torture load and the PITR checks wrote (threads th-*, logs ev-*, runs run-*,
-- the pitr-* records).
SELECT 'head ' || t || ' ' || coalesce(sandbox_persist.checkpoint_get_head(t), '-') FROM unnest(ARRAY['th-0', 'th-1', 'th-2', 'pitr-keep']) t
UNION ALL SELECT 'list ' || t || ' ' || md5(sandbox_persist.checkpoint_list(t)::text) FROM unnest(ARRAY['th-0', 'th-1', 'th-2']) t
UNION ALL SELECT 'get ' || md5(sandbox_persist.checkpoint_get(sandbox_persist.checkpoint_get_head('th-0'))::text)
UNION ALL SELECT 'get pitr-keep-1 ' || md5(sandbox_persist.checkpoint_get('pitr-keep-1')::text)
UNION ALL SELECT 'refs ' || md5(sandbox_persist.checkpoint_list_blob_references()::text)
UNION ALL SELECT 'read ' || r || ' ' || md5(sandbox_persist.event_log_read(r, 0, 1000)::text) FROM unnest(ARRAY['ev-0', 'ev-1', 'ev-2']) r
UNION ALL SELECT 'snapshot ev-0 ' || md5(sandbox_persist.event_log_snapshot('ev-0')::text)
UNION ALL SELECT 'run ' || r || ' ' || md5(coalesce(sandbox_persist.run_get(r)::text, '-')) FROM unnest(ARRAY['run-0', 'run-1', 'run-2', 'run-3']) r
UNION ALL SELECT 'runs by thread ' || md5(sandbox_persist.run_list_by_thread('rth-run-0')::text)
UNION ALL SELECT 'active ' || md5(coalesce(sandbox_persist.run_find_active_run('rth-run-1')::text, '-'))
UNION ALL SELECT 'blob list ' || md5(sandbox_persist.blob_list('', NULL, 1000)::text)
UNION ALL SELECT 'blob ' || b.blob_key || ' ' || md5(g.body) FROM (SELECT blob_key FROM sandbox_persist.blobs ORDER BY blob_key LIMIT 5) b,
    LATERAL sandbox_persist.blob_get(b.blob_key) g
UNION ALL SELECT 'metadata ' || md5(coalesce(sandbox_persist.metadata_get('pitr', 'before')::text, '-') || coalesce(sandbox_persist.metadata_get('hot', 'k0')::text, '-'))
UNION ALL SELECT 'interrupts ' || md5(sandbox_persist.interrupt_list('ith')::text)
UNION ALL SELECT 'interrupts pending ' || md5(sandbox_persist.interrupt_list_pending('ith')::text)
UNION ALL SELECT 'lock holder ' || md5(coalesce(sandbox_persist.lock_holder('pitr-lk-keep')::text, '-'))
UNION ALL SELECT 'messages ' || sandbox_persist.message_load_thread('pitr-t')::text
UNION ALL SELECT 'instance ' || sandbox_persist.instance_get('pitr-k')::text
UNION ALL SELECT 'generation run ' || sandbox_persist.generation_run_get('pitr-g')::text
UNION ALL SELECT 'artifacts ' || sandbox_persist.artifact_list('pitr-g')::text
UNION ALL SELECT 'probe ' || sandbox_persist.metadata_get('pitr', 'standby-probe')::text;
