-- bench/suites/scale/build.sql: the builder of bench/suites/scale.sh. Run once
-- per database with psql -v scale=<factor>; it creates schema bench_scale
-- (the sizes, the virtual clock, the record helpers the pgbench scripts share,
-- and the fill procedure). The suite then calls, in parallel sessions,
--   CALL bench_scale.fill('old', part, parts)   the runs that will be expired
--   (then sets bench_scale.params.vnow, the virtual now: 7 days later)
--   CALL bench_scale.fill('new', part, parts)   everything else
-- Every record is written through the extension's own functions, in
-- SELECT ... FROM generate_series statements, one transaction per batch of
-- 2 000 ids. Every count below is scaled and rounded (at least 1).
--
-- Time. Runs and event logs carry server-clock times no call can inject, so
-- the database is judged at a virtual now (vnow), 7 days after the last of
-- the 'old' runs was written. With run_retention = 7 days (set by the suite)
-- those runs, and only those, are past the retention at vnow. Everything
-- written with a client clock (locks, blob puts, checkpoint leases, instance
-- updatedAt, detachedSince, interrupt resolutions) is placed relative to vnow,
-- and the suite passes vnow as now_ms to maintain() and the other clocked
-- calls (the database sets sandbox_persist.allow_client_clock).
--
-- Shape at scale 1 (run j belongs to thread ((j - 1) % threads) + 1):
--   runs 1 .. 95 000          terminal, written first: expired at vnow (A6)
--   runs .. running_from - 1  terminal (completed; every 20th failed, every
--                             50th aborted), kept; the last 2 000 of them have
--                             an open event log (A4 closes those)
--   then 5 000 interrupted, 5 000 detached (detachedSince within the hour
--   before vnow), 3 000 live (run-driver and sandbox locks held at vnow, open
--   logs) and 2 000 lost runs (running, no lock, open logs: A10 ends them,
--   the watchdog reports them; every 4th has cancelRequested)
--   10^6 instances: instance k names run k as its latest run (a later run of
--   the same thread when run k is expired), updatedAt over the 30 days
--   before vnow
--   10^5 checkpoint threads (threads 1 ..), 3 checkpoints each capturing 14,
--   27 and 40 messages of one 40-message conversation (4 * 10^6 stored
--   messages), 2 file entries of which one names the thread's blob
--   1.1 * 10^5 small blobs: the 10^5 the checkpoints name, 6 000
--   unreferenced and past the grace (A1), 2 000 unreferenced within it,
--   2 000 named by artifact records
--   10^5 event logs of 50 chunks (5 appends of 10, with producer ids) on the
--   last 10^5 runs; the live, lost and finished-open ones (7 %) stay open
--   10^5 locks: the live runs' run-driver and sandbox locks, 20 000 other
--   held ones, 70 000 expired for days (A3), 4 000 expired within
--   lock_purge_after
--   10^5 interrupts on the last 10^5 runs (pending on the interrupted runs,
--   every 25th cancelled, the rest resolved), 10^5 metadata entries, 20 000
--   generation runs, 20 000 artifacts
\set ON_ERROR_STOP on
SET client_min_messages = warning;
CREATE SCHEMA bench_scale;

CREATE TABLE bench_scale.params (
    scale numeric NOT NULL,
    threads bigint, runs bigint, expired bigint, interrupted bigint, detached bigint,
    live bigint, lost bigint, finished_open bigint, instances bigint, ckpt_threads bigint,
    blobs_old bigint, blobs_recent bigint, blobs_artifact bigint, logs bigint,
    locks_held bigint, locks_expired bigint, locks_recent bigint, interrupts bigint,
    metadata bigint, generation_runs bigint, artifacts bigint,
    vnow bigint NOT NULL,
    running_from bigint GENERATED ALWAYS AS (runs - interrupted - detached - live - lost + 1) STORED,
    detached_from bigint GENERATED ALWAYS AS (runs - detached - live - lost + 1) STORED,
    live_from bigint GENERATED ALWAYS AS (runs - live - lost + 1) STORED,
    lost_from bigint GENERATED ALWAYS AS (runs - lost + 1) STORED,
    logs_from bigint GENERATED ALWAYS AS (runs - logs + 1) STORED,
    interrupts_from bigint GENERATED ALWAYS AS (runs - interrupts + 1) STORED,
    blobs bigint GENERATED ALWAYS AS (ckpt_threads + blobs_old + blobs_recent + blobs_artifact) STORED,
    locks bigint GENERATED ALWAYS AS (2 * live + locks_held + locks_expired + locks_recent) STORED,
    -- the ranges above must nest as the shape says
    CHECK (logs >= interrupted + detached + live + lost + finished_open AND logs <= runs - expired),
    CHECK (interrupts >= interrupted + detached + live + lost AND artifacts <= runs - expired),
    CHECK (expired + threads <= runs AND instances <= runs),
    CHECK (ckpt_threads <= threads AND metadata <= threads)
);
-- the factor, for pg_temp.n (psql does not interpolate inside function bodies)
SELECT set_config('bench_scale.factor', :'scale', false) AS factor \gset
CREATE FUNCTION pg_temp.n(base numeric) RETURNS bigint LANGUAGE sql AS
    $$ SELECT greatest(1, round(base * current_setting('bench_scale.factor')::numeric))::bigint $$;
INSERT INTO bench_scale.params
VALUES (:scale, pg_temp.n(200000), pg_temp.n(1000000), pg_temp.n(95000), pg_temp.n(5000),
        pg_temp.n(5000), pg_temp.n(3000), pg_temp.n(2000), pg_temp.n(2000), pg_temp.n(1000000),
        pg_temp.n(100000), pg_temp.n(6000), pg_temp.n(2000), pg_temp.n(2000), pg_temp.n(100000),
        pg_temp.n(20000), pg_temp.n(70000), pg_temp.n(4000), pg_temp.n(100000),
        pg_temp.n(100000), pg_temp.n(20000), pg_temp.n(20000),
        -- a first estimate, for the 'old' runs' client-side times; the suite sets vnow
        (extract(epoch FROM clock_timestamp()) * 1000)::bigint + 7 * 86400000);

------------------------------------------------------------------------------
-- Record helpers (also called by the pgbench scripts, so both write alike)
------------------------------------------------------------------------------
CREATE FUNCTION bench_scale.thread_of(j bigint, threads bigint) RETURNS text
    LANGUAGE sql IMMUTABLE AS $$ SELECT 'thread-' || ((j - 1) % threads + 1) $$;
CREATE FUNCTION bench_scale.started_at(j bigint, p bench_scale.params) RETURNS bigint
    LANGUAGE sql IMMUTABLE AS $$ SELECT p.vnow - (p.runs - j + 1) * 2000 $$;

-- Message i of the conversation template (~400 bytes of JSON text).
CREATE FUNCTION bench_scale.msg(i int) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT json_build_object('id', 'm' || i, 'role', CASE WHEN i % 2 = 1 THEN 'user' ELSE 'assistant' END,
               'parts', json_build_array(json_build_object('type', 'text', 'content',
                   format('Message %s: %s', i, repeat('lorem ipsum dolor sit amet, ' || md5(i::text) || ' ', 5)))))::text
$$;
-- The first n messages of the template, as a JSON array.
CREATE FUNCTION bench_scale.conv(n int) RETURNS json LANGUAGE sql IMMUTABLE AS $$
    SELECT ('[' || string_agg(bench_scale.msg(i), ',' ORDER BY i) || ']')::json FROM generate_series(1, n) i
$$;

-- Blob b: a small source file (400-900 bytes) and its content address.
CREATE FUNCTION bench_scale.blob_body(b bigint) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
    SELECT convert_to(format(E'// src/app.ts, version %s\nexport const answer%s = %s;\n%s', b, b, b,
                             repeat('// lorem ipsum dolor sit amet ' || md5(b::text) || E'\n', 4 + (b % 8)::int)), 'UTF8')
$$;
CREATE FUNCTION bench_scale.blob_key(prefix text, b bigint) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT prefix || '/sha256/' || encode(sha256(bench_scale.blob_body(b)), 'hex')
$$;
-- The file entries of thread t's checkpoints: a directory and its blob.
CREATE FUNCTION bench_scale.files(t bigint) RETURNS json LANGUAGE sql IMMUTABLE AS $$
    SELECT json_build_array(json_build_object('path', 'src', 'kind', 'dir'),
               json_build_object('path', 'src/app.ts', 'kind', 'file',
                                 'blobKey', bench_scale.blob_key('sandbox-files', t),
                                 'size', octet_length(bench_scale.blob_body(t))))
$$;

-- Instance k's record.
CREATE FUNCTION bench_scale.instance_record(k bigint, threads bigint, expired bigint, vnow bigint) RETURNS json
    LANGUAGE sql IMMUTABLE AS $$
    SELECT json_build_object('key', 'inst-' || k, 'provider', 'e2b', 'providerSandboxId', 'sbx-' || k,
               'threadId', bench_scale.thread_of(k, threads), 'latestSnapshotId', 'snap-' || k,
               'latestRunId', 'run-' || CASE WHEN k <= expired THEN k + threads ELSE k END,
               'updatedAt', vnow - ((k * 7919) % 2592000) * 1000)
$$;

-- Chunk seq of run j's event log (~200 bytes); the last one of a closed log ends the run.
CREATE FUNCTION bench_scale.chunk(j bigint, seq int, closing boolean, started bigint) RETURNS json
    LANGUAGE sql IMMUTABLE AS $$
    SELECT json_build_object('type', CASE WHEN seq = 1 THEN 'RUN_STARTED' WHEN seq = 2 THEN 'TEXT_MESSAGE_START'
                                          WHEN seq = 50 AND closing THEN 'RUN_FINISHED'
                                          WHEN seq = 49 AND closing THEN 'TEXT_MESSAGE_END'
                                          ELSE 'TEXT_MESSAGE_CONTENT' END,
               'messageId', 'msg-' || j, 'delta', left(repeat(md5(j::text || ':' || seq), 3), 80 + seq),
               'timestamp', started + seq * 150)
$$;

-- What the update after run j's creation sets: its final status, or the
-- durable fields of a running run.
CREATE FUNCTION bench_scale.run_patch(j bigint, p bench_scale.params) RETURNS json LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN j < p.running_from THEN json_strip_nulls(json_build_object(
            'status', CASE WHEN j % 50 = 0 THEN 'aborted' WHEN j % 20 = 0 THEN 'failed' ELSE 'completed' END,
            'finishedAt', bench_scale.started_at(j, p) + 20000 + (j % 97) * 1000,
            'usage', json_build_object('promptTokens', 500 + j % 1500, 'completionTokens', 100 + j % 700),
            'error', CASE WHEN j % 20 = 0 AND j % 50 <> 0 THEN
                json_build_object('message', 'tool call failed: the sandbox exited with code 1', 'code', 'SANDBOX_EXIT') END))
        WHEN j < p.detached_from THEN json_build_object('status', 'interrupted')
        WHEN j < p.live_from THEN json_build_object('sandboxKey', 'inst-' || j, 'driverEpoch', 1,
            'detachedSince', p.vnow - ((j * 37) % 3600) * 1000)
        WHEN j < p.lost_from THEN json_build_object('sandboxKey', 'inst-' || j, 'driverEpoch', 1)
        ELSE json_strip_nulls(json_build_object('sandboxKey', 'inst-' || j, 'driverEpoch', 1,
            'cancelRequested', CASE WHEN j % 4 = 0 THEN true END))
    END
$$;

------------------------------------------------------------------------------
-- Fill steps: each writes ids lo .. hi (those of this part) and returns a count
------------------------------------------------------------------------------
CREATE FUNCTION bench_scale.fill_runs(p bench_scale.params, lo bigint, hi bigint, part int, parts int)
    RETURNS bigint LANGUAGE sql AS $$
    SELECT count(sandbox_persist.run_create_or_resume(json_build_object('runId', 'run-' || j,
                     'threadId', bench_scale.thread_of(j, p.threads), 'startedAt', bench_scale.started_at(j, p))))
         + count(sandbox_persist.run_update('run-' || j, bench_scale.run_patch(j, p)))
      FROM generate_series(lo, hi) j WHERE j % parts = part
$$;

CREATE FUNCTION bench_scale.fill_instances(p bench_scale.params, lo bigint, hi bigint, part int, parts int)
    RETURNS bigint LANGUAGE sql AS $$
    SELECT count(sandbox_persist.instance_upsert(bench_scale.instance_record(k, p.threads, p.expired, p.vnow)))
      FROM generate_series(lo, hi) k WHERE k % parts = part
$$;

-- Thread t's three checkpoints under one writer lease, taken 3 days before vnow.
CREATE FUNCTION bench_scale.checkpoint_thread(t bigint, p bench_scale.params, convs json[]) RETURNS int
    LANGUAGE plpgsql AS $$
DECLARE
    thread text := 'thread-' || t;
    at bigint := p.vnow - 3 * 86400000 - (t % 86400) * 1000;
    w json := sandbox_persist.checkpoint_acquire_writer(thread, 600000, at);
    head text;
BEGIN
    FOR k IN 1 .. 3 LOOP
        PERFORM sandbox_persist.checkpoint_append(json_build_object(
            'checkpoint', json_build_object('id', 'cp-' || t || '-' || k, 'threadId', thread,
                'parentCheckpointId', head, 'createdAt', at + k * 60000, 'reason', 'automatic',
                'sourceRunId', 'run-' || t, 'files', bench_scale.files(t), 'artifacts', '[]'::json),
            'expectedHeadId', head, 'writer', w), convs[k], at + k);
        head := 'cp-' || t || '-' || k;
    END LOOP;
    PERFORM sandbox_persist.checkpoint_release_writer(w);
    RETURN 3;
END
$$;
CREATE FUNCTION bench_scale.fill_checkpoints(p bench_scale.params, lo bigint, hi bigint, part int, parts int)
    RETURNS bigint LANGUAGE sql AS $$
    SELECT sum(bench_scale.checkpoint_thread(t, p, c.convs))
      FROM generate_series(lo, hi) t,
           (SELECT ARRAY[bench_scale.conv(14), bench_scale.conv(27), bench_scale.conv(40)] AS convs) c
     WHERE t % parts = part
$$;

-- Blobs 1 .. ckpt_threads are the checkpoints' (put before them), then the
-- unreferenced old and recent ones, then the artifacts'.
CREATE FUNCTION bench_scale.fill_blobs(p bench_scale.params, lo bigint, hi bigint, part int, parts int)
    RETURNS bigint LANGUAGE sql AS $$
    SELECT count(sandbox_persist.blob_put(
               bench_scale.blob_key(CASE WHEN art THEN 'sandbox-artifacts' ELSE 'sandbox-files' END, b),
               bench_scale.blob_body(b),
               json_build_object('contentType', CASE WHEN art THEN 'text/plain' ELSE 'text/typescript' END),
               CASE WHEN b <= p.ckpt_threads THEN p.vnow - 5 * 86400000 - (b % 86400) * 1000
                    WHEN b <= p.ckpt_threads + p.blobs_old THEN p.vnow - 2 * 86400000 - (b % 1555200) * 1000
                    WHEN NOT art THEN p.vnow - 3600000 + (b % 600) * 1000
                    ELSE p.vnow - 2 * 86400000 - (b % 86400) * 1000 END))
      FROM generate_series(lo, hi) b,
           LATERAL (SELECT b > p.ckpt_threads + p.blobs_old + p.blobs_recent AS art) x
     WHERE b % parts = part
$$;

-- Log l belongs to run logs_from + l - 1: five appends of 10 chunks by one
-- producer, then the close, unless the log stays open.
CREATE FUNCTION bench_scale.log_open(j bigint, p bench_scale.params) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT j >= p.live_from OR j BETWEEN p.running_from - p.finished_open AND p.running_from - 1
$$;
CREATE FUNCTION bench_scale.fill_logs(p bench_scale.params, lo bigint, hi bigint, part int, parts int)
    RETURNS bigint LANGUAGE sql AS $$
    SELECT count(sandbox_persist.event_log_append('run-' || j,
               (SELECT json_agg(bench_scale.chunk(j, s, NOT bench_scale.log_open(j, p), bench_scale.started_at(j, p)) ORDER BY s)
                  FROM generate_series(a * 10 - 9, a * 10) s),
               json_build_object('producerId', md5('producer-' || j)::uuid, 'producerSeq', a)))
      FROM generate_series(lo, hi) l, LATERAL (SELECT p.logs_from + l - 1 AS j) x, generate_series(1, 5) a
     WHERE l % parts = part;
    SELECT count(sandbox_persist.event_log_close('run-' || j))
      FROM generate_series(lo, hi) l, LATERAL (SELECT p.logs_from + l - 1 AS j) x
     WHERE l % parts = part AND NOT bench_scale.log_open(j, p);
$$;

-- Locks: the live runs' run-driver and sandbox locks, held ones, long expired
-- ones, recently expired ones (all acquired at client times around vnow).
CREATE FUNCTION bench_scale.lock_spec(k bigint, p bench_scale.params, OUT key text, OUT ttl bigint, OUT at bigint)
    LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN k <= p.live THEN 'run-driver:run-' || (p.live_from + k - 1)
                WHEN k <= 2 * p.live THEN 'sandbox:inst-' || (p.live_from + k - p.live - 1)
                WHEN k <= 2 * p.live + p.locks_held THEN 'app:thread-' || k
                ELSE 'job:' || k END,
           CASE WHEN k <= 2 * p.live + p.locks_held THEN 600000 ELSE 60000 END,
           CASE WHEN k <= 2 * p.live THEN p.vnow - 60000
                WHEN k <= 2 * p.live + p.locks_held THEN p.vnow - (k % 300) * 1000
                WHEN k <= 2 * p.live + p.locks_held + p.locks_expired THEN p.vnow - 2 * 86400000 - (k % 86400) * 1000
                ELSE p.vnow - 1800000 + (k % 1200) * 1000 END
$$;
CREATE FUNCTION bench_scale.fill_locks(p bench_scale.params, lo bigint, hi bigint, part int, parts int)
    RETURNS bigint LANGUAGE sql AS $$
    SELECT count(sandbox_persist.lock_acquire(s.key, s.ttl, s.at))
      FROM generate_series(lo, hi) k, LATERAL bench_scale.lock_spec(k, p) s
     WHERE k % parts = part
$$;

-- Interrupt x is on run interrupts_from + x - 1: pending while that run is
-- interrupted, else resolved (every 25th cancelled) 30 s after the request.
CREATE FUNCTION bench_scale.fill_interrupts(p bench_scale.params, lo bigint, hi bigint, part int, parts int)
    RETURNS bigint LANGUAGE sql AS $$
    SELECT count(sandbox_persist.interrupt_create(json_build_object('interruptId', 'int-' || x, 'runId', 'run-' || j,
               'threadId', bench_scale.thread_of(j, p.threads), 'requestedAt', at,
               'payload', json_build_object('toolName', 'run_command',
                   'args', json_build_object('command', 'npm install --save lodash@' || x % 5, 'cwd', '/workspace')))))
      FROM generate_series(lo, hi) x,
           LATERAL (SELECT p.interrupts_from + x - 1 AS j, bench_scale.started_at(p.interrupts_from + x - 1, p) + 10000 AS at) y
     WHERE x % parts = part;
    SELECT count(CASE WHEN x % 25 = 0 THEN sandbox_persist.interrupt_cancel('int-' || x, at + 30000)
                      ELSE sandbox_persist.interrupt_resolve('int-' || x, '{"approved":true}', at + 30000) END)
      FROM generate_series(lo, hi) x,
           LATERAL (SELECT p.interrupts_from + x - 1 AS j, bench_scale.started_at(p.interrupts_from + x - 1, p) + 10000 AS at) y
     WHERE x % parts = part AND NOT (j >= p.running_from AND j < p.detached_from);
$$;

CREATE FUNCTION bench_scale.fill_metadata(p bench_scale.params, lo bigint, hi bigint, part int, parts int)
    RETURNS bigint LANGUAGE sql AS $$
    SELECT count(sandbox_persist.metadata_set('thread', 'thread-' || m, json_build_object(
               'title', 'Chat about ' || md5(m::text), 'model', 'gpt-4.1', 'pinned', m % 7 = 0)))
      FROM generate_series(lo, hi) m WHERE m % parts = part
$$;

CREATE FUNCTION bench_scale.fill_generation_runs(p bench_scale.params, lo bigint, hi bigint, part int, parts int)
    RETURNS bigint LANGUAGE sql AS $$
    SELECT count(sandbox_persist.generation_run_create_or_resume(json_build_object('runId', 'gen-' || g,
               'threadId', bench_scale.thread_of(g, p.threads),
               'activity', (ARRAY['image', 'audio', 'video'])[g % 3 + 1], 'provider', 'openai',
               'model', 'gpt-image-1', 'startedAt', p.vnow - g * 60000)))
         + count(sandbox_persist.generation_run_update('gen-' || g, json_build_object('status', 'completed',
               'finishedAt', p.vnow - g * 60000 + 15000,
               'result', json_build_object('url', 'https://cdn.example.com/gen-' || g || '.png', 'width', 1024, 'height', 1024),
               'usage', json_build_object('images', 1))))
      FROM generate_series(lo, hi) g WHERE g % parts = part
$$;

-- Artifact a is from run expired + a; the first blobs_artifact name a blob.
CREATE FUNCTION bench_scale.fill_artifacts(p bench_scale.params, lo bigint, hi bigint, part int, parts int)
    RETURNS bigint LANGUAGE sql AS $$
    SELECT count(sandbox_persist.artifact_save(json_strip_nulls(json_build_object('artifactId', 'art-' || a,
               'runId', 'run-' || (p.expired + a), 'threadId', bench_scale.thread_of(p.expired + a, p.threads),
               'name', 'report-' || a || '.txt', 'mimeType', 'text/plain', 'size', 1000 + a % 5000,
               'createdAt', p.vnow - a * 1000,
               'blobKey', CASE WHEN a <= p.blobs_artifact
                    THEN bench_scale.blob_key('sandbox-artifacts', p.ckpt_threads + p.blobs_old + p.blobs_recent + a) END,
               'sourceUrl', CASE WHEN a > p.blobs_artifact THEN 'https://cdn.example.com/art-' || a || '.txt' END))))
      FROM generate_series(lo, hi) a WHERE a % parts = part
$$;

-- fill(phase, part, parts): this part's share (ids with id % parts = part) of
-- every step of the phase, a transaction per batch; a NOTICE per step.
CREATE PROCEDURE bench_scale.fill(phase text, part int, parts int, batch int DEFAULT 2000) LANGUAGE plpgsql AS $$
DECLARE
    p bench_scale.params;
    steps text[];
    firsts bigint[];
    lasts bigint[];
    lo bigint;
    t0 timestamptz;
BEGIN
    SELECT * INTO p FROM bench_scale.params;
    IF phase = 'old' THEN
        steps := '{runs}'; firsts := ARRAY[1]; lasts := ARRAY[p.expired];
    ELSE
        steps := '{runs,instances,blobs,checkpoints,logs,locks,interrupts,metadata,generation_runs,artifacts}';
        firsts := ARRAY[p.expired + 1, 1, 1, 1, 1, 1, 1, 1, 1, 1];
        lasts := ARRAY[p.runs, p.instances, p.blobs, p.ckpt_threads, p.logs, p.locks, p.interrupts,
                       p.metadata, p.generation_runs, p.artifacts];
    END IF;
    FOR i IN 1 .. cardinality(steps) LOOP
        lo := firsts[i];
        t0 := clock_timestamp();
        WHILE lo <= lasts[i] LOOP
            EXECUTE format('SELECT bench_scale.fill_%s($1, $2, $3, $4, $5)', steps[i])
              USING p, lo, least(lo + batch - 1, lasts[i]), part, parts;
            COMMIT;
            lo := lo + batch;
        END LOOP;
        RAISE NOTICE 'scale build: % %, ids % .. %, part %/%: % s', phase, steps[i], firsts[i], lasts[i],
            part + 1, parts, round(extract(epoch FROM clock_timestamp() - t0)::numeric, 1);
    END LOOP;
END
$$;
