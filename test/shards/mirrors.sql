-- Test-only: read-only mirrors of the shards' tables and views on the router.
-- Run on a shard (psql -At); its output, run on the router, creates for each
-- relation R of schema sandbox_persist a row type, a RUN ON ALL function that
-- reads R on every shard, and a view sandbox_persist.R over it: the union of
-- the shards' rows. The pgTAP suites compare table state before and after a
-- call; through the router they then compare the state of every shard. Writes
-- to these views fail, so a suite that corrupts rows on purpose cannot run.
SELECT format(
    E'DROP VIEW IF EXISTS sandbox_persist.%1$I;\n'
    'DROP FUNCTION IF EXISTS sandbox_persist.%2$I();\n'
    'DROP TYPE IF EXISTS sandbox_persist.%3$I;\n'
    'CREATE TYPE sandbox_persist.%3$I AS (%4$s);\n'
    'CREATE FUNCTION sandbox_persist.%2$I() RETURNS SETOF sandbox_persist.%3$I LANGUAGE plproxy AS $p$'
    ' CLUSTER ''sandbox_persist_shards''; RUN ON ALL; SELECT %5$s FROM sandbox_persist.%1$I AS t; $p$;\n'
    'CREATE VIEW sandbox_persist.%1$I AS SELECT * FROM sandbox_persist.%2$I();',
    c.relname, '_mirror_' || c.relname, '_mirror_row_' || c.relname,
    string_agg(format('%I %s', a.attname, format_type(a.atttypid, a.atttypmod))
               || CASE WHEN a.attcollation <> 0 AND a.attcollation <> 100
                       THEN ' COLLATE ' || (SELECT quote_ident(collname) FROM pg_collation WHERE oid = a.attcollation)
                       ELSE '' END, ', ' ORDER BY a.attnum),
    string_agg(format('t.%I', a.attname), ', ' ORDER BY a.attnum))
FROM pg_class c
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE c.relnamespace = 'sandbox_persist'::regnamespace AND c.relkind IN ('r', 'v')
GROUP BY c.oid, c.relname
ORDER BY c.relname;
