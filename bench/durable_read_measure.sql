-- bench/durable_read_measure.sql (run by durable.sh with -v samples=N -v warmup=W):
-- time event_log_read(run, after_seq, 100) server-side with clock_timestamp(),
-- interleaving the four cases (small/big log x offset near the tail/in the
-- middle) so machine noise hits them alike. Every read must return 100
-- entries. Offsets: near the tail, after_seq in [tail-199, tail-100]; in the
-- middle, after_seq in [tail/4, 3*tail/4 - 100]. The first W rounds warm the
-- caches and plans and are not recorded.
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
    tails   bigint[] := ARRAY[0, 0];
    lat     double precision[][] := array_fill(0::double precision, ARRAY[4, samples]);
    r       json;
    after   bigint;
    t0      timestamptz;
    t1      timestamptz;
    c       int;
BEGIN
    FOR s IN 1..2 LOOP
        tails[s] := (sandbox_persist.event_log_read(runs[s], 0, 0)->>'tail')::bigint;
    END LOOP;
    IF tails[1] <> 1000 OR tails[2] <> 1000000 THEN
        RAISE EXCEPTION 'unexpected log tails % (want 1000 and 1000000)', tails;
    END IF;
    FOR i IN 1..(warmup + samples) LOOP
        FOR s IN 1..2 LOOP
            FOR p IN 1..2 LOOP
                IF p = 1 THEN
                    after := tails[s] - 100 - floor(random() * 100)::bigint;
                ELSE
                    after := tails[s] / 4 + floor(random() * (tails[s] / 2 - 100))::bigint;
                END IF;
                t0 := clock_timestamp();
                r := sandbox_persist.event_log_read(runs[s], after, 100);
                t1 := clock_timestamp();
                IF json_array_length(r->'entries') <> 100
                   OR (r->'entries'->0->>'seq')::bigint <> after + 1 THEN
                    RAISE EXCEPTION 'read of % after % returned a wrong page', runs[s], after;
                END IF;
                IF i > warmup THEN
                    c := (s - 1) * 2 + p;
                    lat[c][i - warmup] := extract(epoch FROM t1 - t0) * 1e6;
                END IF;
            END LOOP;
        END LOOP;
    END LOOP;
    FOR s IN 1..2 LOOP
        FOR p IN 1..2 LOOP
            c := (s - 1) * 2 + p;
            INSERT INTO bench_durable.read_latency (size, pos, us)
            SELECT sizes[s], CASE p WHEN 1 THEN 'tail' ELSE 'middle' END, lat[c][j]
            FROM generate_series(1, samples) AS j;
        END LOOP;
    END LOOP;
END
$$;
