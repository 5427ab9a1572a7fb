-- Emit the router's generated proxies as SQL text. Run on a shard (a database
-- with the extension installed) with the routing table on standard input,
-- comment lines removed (router/install.sh does both); the output is run on
-- the router. Signatures (argument names, types, defaults, results) come from
-- the installed catalog, so the router always matches the shard it was
-- generated from; routes come from router/routes.tsv.
CREATE TEMP TABLE routes (fn text PRIMARY KEY, route text NOT NULL, expr text, note text);
\copy routes FROM pstdin
-- A function without a route, or a route without a function, stops the
-- install here: the router would silently lack or invent a method.
DO $$
DECLARE
    missing text;
    extra text;
BEGIN
    SELECT string_agg(p.proname, ', ' ORDER BY p.proname) INTO missing
    FROM pg_proc p
    WHERE p.pronamespace = 'sandbox_persist'::regnamespace
      AND NOT EXISTS (SELECT 1 FROM routes r WHERE r.fn = p.proname);
    SELECT string_agg(r.fn, ', ' ORDER BY r.fn) INTO extra
    FROM routes r
    WHERE NOT EXISTS (SELECT 1 FROM pg_proc p
                      WHERE p.pronamespace = 'sandbox_persist'::regnamespace AND p.proname = r.fn);
    IF missing IS NOT NULL OR extra IS NOT NULL THEN
        RAISE EXCEPTION 'router routes out of date'
            USING ERRCODE = '42883',
                  DETAIL = format('Functions without a route: %s. Routes without a function: %s.',
                                  coalesce(missing, 'none'), coalesce(extra, 'none'));
    END IF;
    IF EXISTS (SELECT 1 FROM routes WHERE route NOT IN ('one', 'all', 'custom', 'shard')) THEN
        RAISE EXCEPTION 'router routes: unknown route kind' USING ERRCODE = '22023';
    END IF;
END
$$;

-- Every public function is a PL/pgSQL wrapper with the extension's exact
-- signature. It computes the route first (PL/Proxy refuses a PL/Proxy call
-- nested inside its RUN ON expression, and the run look-up is one), calls the
-- inner function (_on_*: one partition; _all_*: every partition, then the
-- merge; _custom_*: router/custom.sql), and re-raises a shard's error as the
-- shard raised it: PL/Proxy keeps the SQLSTATE but prefixes the message,
-- detail and hint, and clients read all three (the SQLSTATE names the code,
-- the detail and hint are sentences). A function
-- with a now_ms argument first applies the router's client clock gate
-- (_check_client_clock in router/base.sql).
SELECT format(
    E'CREATE OR REPLACE FUNCTION sandbox_persist.%I(%s) RETURNS %s\n'
    'LANGUAGE plpgsql AS $w$\nDECLARE\n    st text; m text; d text; h text;\nBEGIN\n    %s%s\n'
    'EXCEPTION WHEN others THEN\n'
    '    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;\n'
    '    PERFORM sandbox_persist._reraise(st, m, d, h);\n'
    '    RAISE;\nEND\n$w$;',
    p.proname, pg_get_function_arguments(p.oid), pg_get_function_result(p.oid),
    CASE WHEN 'now_ms' = ANY (p.proargnames[1:p.pronargs])
         THEN E'PERFORM sandbox_persist._check_client_clock(now_ms);\n    ' ELSE '' END,
    CASE
        -- A function with OUT parameters (one row, several columns, e.g.
        -- stream_read): PL/pgSQL cannot RETURN a value there, so the row is
        -- selected into the OUT parameters.
        WHEN o.names IS NOT NULL AND NOT p.proretset AND r.route = 'custom' THEN
            format('SELECT x.* INTO %s FROM sandbox_persist.%I(%s) AS x;', o.names, '_custom_' || p.proname, a.names)
        WHEN o.names IS NOT NULL AND NOT p.proretset AND r.route = 'one' THEN
            format('SELECT x.* INTO %s FROM sandbox_persist.%I(%s, %s) AS x;', o.names, '_on_' || p.proname, r.expr, a.names)
        WHEN r.route = 'custom' AND p.proretset THEN
            format('RETURN QUERY SELECT * FROM sandbox_persist.%I(%s);', '_custom_' || p.proname, a.names)
        WHEN r.route = 'custom' AND p.prorettype = 'void'::regtype THEN
            format('PERFORM sandbox_persist.%I(%s);', '_custom_' || p.proname, a.names)
        WHEN r.route = 'custom' THEN
            format('RETURN sandbox_persist.%I(%s);', '_custom_' || p.proname, a.names)
        -- A set (event_log_read_pieces): the shard's rows, in its order.
        WHEN r.route = 'one' AND p.proretset THEN
            format('RETURN QUERY SELECT * FROM sandbox_persist.%I(%s, %s);', '_on_' || p.proname, r.expr, a.names)
        WHEN r.route = 'one' AND p.prorettype = 'void'::regtype THEN
            format('PERFORM sandbox_persist.%I(%s, %s);', '_on_' || p.proname, r.expr, a.names)
        WHEN r.route = 'one' THEN
            format('RETURN sandbox_persist.%I(%s, %s);', '_on_' || p.proname, r.expr, a.names)
        ELSE
            format('RETURN (SELECT %s FROM (SELECT array_agg(x.r) AS r FROM sandbox_persist.%I(%s) AS x(r)) AS m);',
                   r.expr, '_all_' || p.proname, a.names)
    END)
    || CASE r.route
    WHEN 'one' THEN format(
        E'\nCREATE OR REPLACE FUNCTION sandbox_persist.%I(part integer, %s) RETURNS %s\n'
        'LANGUAGE plproxy AS $p$ CLUSTER ''sandbox_persist_shards''; RUN ON part; %s $p$;',
        '_on_' || p.proname, pg_get_function_identity_arguments(p.oid),
        CASE WHEN p.prorettype = 'void'::regtype THEN 'SETOF integer' ELSE pg_get_function_result(p.oid) END,
        CASE WHEN p.prorettype = 'void'::regtype
             THEN format('SELECT 1 AS %I FROM sandbox_persist.%I(%s) AS v;', '_on_' || p.proname, p.proname, a.on_names)
             -- OUT parameters (in the identity arguments): PL/Proxy matches the columns by name.
             WHEN o.names IS NOT NULL
             THEN format('SELECT x.* FROM sandbox_persist.%I(%s) AS x;', p.proname, a.on_names)
             ELSE format('SELECT sandbox_persist.%I(%s) AS %I;', p.proname, a.on_names, '_on_' || p.proname) END)
    WHEN 'all' THEN format(
        E'\nCREATE OR REPLACE FUNCTION sandbox_persist.%I(%s) RETURNS SETOF %s\n'
        'LANGUAGE plproxy AS $p$ CLUSTER ''sandbox_persist_shards''; RUN ON ALL; SELECT sandbox_persist.%I(%s) AS %I; $p$;',
        '_all_' || p.proname, pg_get_function_identity_arguments(p.oid), pg_get_function_result(p.oid),
        p.proname, a.all_names, '_all_' || p.proname)
    ELSE '' END
FROM pg_proc p
JOIN routes r ON r.fn = p.proname
CROSS JOIN LATERAL (SELECT coalesce(string_agg(quote_ident(n), ', ' ORDER BY i), '') AS names,
                           -- In a PL/Proxy query an argument is named bare or by
                           -- position: a name that needs quotes ("offset") goes by
                           -- position ($1 is part in an _on_ function).
                           coalesce(string_agg(CASE WHEN quote_ident(n) = n THEN n ELSE '$' || (i + 1) END,
                                               ', ' ORDER BY i), '') AS on_names,
                           coalesce(string_agg(CASE WHEN quote_ident(n) = n THEN n ELSE '$' || i END,
                                               ', ' ORDER BY i), '') AS all_names
                    FROM unnest(p.proargnames[1:p.pronargs]) WITH ORDINALITY AS u(n, i)) AS a
CROSS JOIN LATERAL (SELECT string_agg(quote_ident(u.n), ', ' ORDER BY u.i) AS names
                    FROM unnest(p.proargnames, p.proargmodes) WITH ORDINALITY AS u(n, m, i)
                    WHERE u.m IN ('o', 'b')) AS o
WHERE p.pronamespace = 'sandbox_persist'::regnamespace AND r.route <> 'shard'
-- Inner functions before the wrappers that call them: plpgsql resolves names
-- at call time, but keep the output readable.
ORDER BY p.proname;
