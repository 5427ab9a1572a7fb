-- Run on the router after install with the shard's catalog on standard input
-- (one line per function: "name(arguments) -> result"). Fails when a shard
-- function is missing on the router or has another signature there, except
-- the shard-internal ones (route "shard"); the proxies must be callable by
-- the same SQL as the extension's functions.
SELECT set_config('sandbox_persist_router.internal', :'internal', false) \gset
CREATE TEMP TABLE shard_catalog (sig text);
\copy shard_catalog FROM pstdin
DO $$
DECLARE
    diff text;
BEGIN
    SELECT string_agg(s.sig, '; ' ORDER BY s.sig) INTO diff
    FROM shard_catalog s
    WHERE s.sig !~ ('^(' || current_setting('sandbox_persist_router.internal') || ')\(')
      AND NOT EXISTS (
        SELECT 1 FROM pg_proc p
        WHERE p.pronamespace = 'sandbox_persist'::regnamespace
          AND p.proname || '(' || pg_get_function_arguments(p.oid) || ') -> ' || pg_get_function_result(p.oid) = s.sig);
    IF diff IS NOT NULL THEN
        RAISE EXCEPTION 'router signatures differ from the shard''s'
            USING ERRCODE = '42883', DETAIL = format('Missing or different on the router: %s.', diff);
    END IF;
END
$$;
