-- bench/experiments/durable_read_measure.sql (run by durable.sh with -v samples=N -v warmup=W):
-- time reads of 100 entries after an offset, server-side, with
-- clock_timestamp() around each call, on the 10^3- and the 10^6-chunk log:
--   sp:    sandbox_persist.event_log_read(run, after_seq, 100)
--   plain: bench_durable.plain_read(log_id, after_seq, 100), the baseline
--          (the same rows fetched from a plain table, no JSON built)
-- at three kinds of offset:
--   tail:   after_seq uniform in [tail-199, tail-100]
--   middle: after_seq uniform in [tail/4, 3*tail/4 - 100]
--   reread: the middle offset just read, again (its pages are now cached;
--           a diagnostic that separates cache misses from the code path)
-- All 12 cases are interleaved in every round so machine noise hits them
-- alike; every read must return the right 100 entries. The first W rounds
-- warm caches and plans and are not recorded.
\set ON_ERROR_STOP 1
TRUNCATE bench_durable.read_latency;
SELECT setseed(0.42);
-- psql does not expand variables inside the DO body; pass them as settings
SET bench_durable.samples = :samples;
SET bench_durable.warmup = :warmup;
DO $$
DECLARE
    samples int := current_setting('bench_durable.samples')::int;
    warmup  int := current_setting('bench_durable.warmup')::int;
    runs    text[] := ARRAY['bench-read-small', 'bench-read-big'];
    sizes   text[] := ARRAY['small', 'big'];
    impls   text[] := ARRAY['sp', 'plain'];
    poss    text[] := ARRAY['tail', 'middle', 'reread'];
    tails   bigint[] := ARRAY[0, 0];
    log_ids bigint[] := ARRAY[0, 0];
    lat     double precision[][] := array_fill(0::double precision, ARRAY[12, samples]);
    r       json;
    e       json;
    et      text[];
    ok      boolean;
    after   bigint;
    t0      timestamptz;
    t1      timestamptz;
    c       int;
BEGIN
    FOR s IN 1..2 LOOP
        r := sandbox_persist.event_log_read(runs[s], 0, 0);
        tails[s] := (r->>'tail')::bigint;
        log_ids[s] := (r->>'logId')::bigint;
    END LOOP;
    IF tails[1] <> 1000 OR tails[2] <> 1000000 THEN
        RAISE EXCEPTION 'unexpected log tails % (want 1000 and 1000000)', tails;
    END IF;
    FOR i IN 1..(warmup + samples) LOOP
        FOR s IN 1..2 LOOP
            FOR p IN 1..3 LOOP
                IF p = 1 THEN
                    after := tails[s] - 100 - floor(random() * 100)::bigint;
                ELSIF p = 2 THEN
                    after := tails[s] / 4 + floor(random() * (tails[s] / 2 - 100))::bigint;
                END IF;   -- p = 3 rereads the middle offset
                FOR m IN 1..2 LOOP
                    IF m = 1 THEN
                        t0 := clock_timestamp();
                        r := sandbox_persist.event_log_read(runs[s], after, 100);
                        t1 := clock_timestamp();
                        e := r->'entries';
                        ok := json_array_length(e) = 100 AND (e->0->>'seq')::bigint = after + 1
                              AND (e->99->>'seq')::bigint = after + 100;
                    ELSE
                        t0 := clock_timestamp();
                        et := string_to_array(bench_durable.plain_read(log_ids[s], after, 100), ' ');
                        t1 := clock_timestamp();
                        ok := et[1]::int = 100 AND et[2]::bigint = after + 1 AND et[3]::bigint = after + 100;
                    END IF;
                    IF NOT ok THEN
                        RAISE EXCEPTION '% read of % after % returned a wrong page', impls[m], runs[s], after;
                    END IF;
                    IF i > warmup THEN
                        c := ((s - 1) * 3 + (p - 1)) * 2 + m;
                        lat[c][i - warmup] := extract(epoch FROM t1 - t0) * 1e6;
                    END IF;
                END LOOP;
            END LOOP;
        END LOOP;
    END LOOP;
    FOR s IN 1..2 LOOP
        FOR p IN 1..3 LOOP
            FOR m IN 1..2 LOOP
                c := ((s - 1) * 3 + (p - 1)) * 2 + m;
                INSERT INTO bench_durable.read_latency (impl, size, pos, us)
                SELECT impls[m], sizes[s], poss[p], lat[c][j] FROM generate_series(1, samples) AS j;
            END LOOP;
        END LOOP;
    END LOOP;
END
$$;
