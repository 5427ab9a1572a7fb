-- bench/baselines/plpgsql.sql: the PL/pgSQL baseline of `make bench`
-- (bench/suites/stores.sh installs it into the bench database, schema
-- bench_plpgsql, as a superuser).
--
-- The store methods the stores suite measures, written the way a competent
-- PL/pgSQL developer would write them against the SAME tables as the C
-- extension (sandbox_persist.*): the contract's checks (identifier rules,
-- unknown keys, types, path rules, lease, head and parent checks, in the
-- contract's order, with its SQLSTATEs), the same row locks, the same rows
-- written. Only what a benchmark never exercises is simplified: error
-- details are short, and \u0000 inside JSON strings surfaces as PostgreSQL's
-- own 22P05 (a text value cannot hold NUL) instead of 22021 / SP007.
-- Statements inside PL/pgSQL are prepared once per session by PL/pgSQL
-- itself, like the C code's SPI plans.

CREATE SCHEMA bench_plpgsql;
SET search_path = bench_plpgsql, pg_catalog;

-- The server clock in epoch milliseconds (the contract's clock).
CREATE FUNCTION now_ms() RETURNS bigint LANGUAGE sql VOLATILE
AS $$ SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;

-- An identifier (README §2.3): a non-empty string of at most max_bytes bytes.
-- code: the SQLSTATE for every problem (checkpoint functions use SP007),
-- NULL for the plain stores' 22004 / 22023 / 22001.
CREATE FUNCTION check_id(v text, what text, max_bytes int DEFAULT 1024, code text DEFAULT NULL)
RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF v IS NULL THEN
        RAISE EXCEPTION '% is missing', what USING ERRCODE = coalesce(code, '22004');
    ELSIF v = '' THEN
        RAISE EXCEPTION '% is empty', what USING ERRCODE = coalesce(code, '22023');
    ELSIF octet_length(v) > max_bytes THEN
        RAISE EXCEPTION '% is too long', what USING ERRCODE = coalesce(code, '22001');
    END IF;
    RETURN v;
END $$;

-- An identifier held in a json member: must be a JSON string.
CREATE FUNCTION check_json_id(v json, what text, code text DEFAULT NULL)
RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF v IS NULL OR json_typeof(v) = 'null' THEN
        RAISE EXCEPTION '% is missing', what USING ERRCODE = coalesce(code, '22004');
    ELSIF json_typeof(v) <> 'string' THEN
        RAISE EXCEPTION '% must be a string', what USING ERRCODE = coalesce(code, '22023');
    END IF;
    RETURN check_id(v #>> '{}', what, 1024, code);
END $$;

-- An object with only the allowed keys, none repeated.
CREATE FUNCTION check_keys(obj json, allowed text[], what text, code text DEFAULT '22023')
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    bad text;
    n int;
    d int;
BEGIN
    IF obj IS NULL OR json_typeof(obj) <> 'object' THEN
        RAISE EXCEPTION '% must be an object', what USING ERRCODE = code;
    END IF;
    SELECT min(k) FILTER (WHERE k <> ALL (allowed)), count(*), count(DISTINCT k)
      INTO bad, n, d FROM json_object_keys(obj) AS k;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'unknown key % in %', bad, what USING ERRCODE = code;
    ELSIF n <> d THEN
        RAISE EXCEPTION 'repeated key in %', what USING ERRCODE = code;
    END IF;
END $$;

-- A JSON integer within +/-(2^53 - 1), never rounded.
CREATE FUNCTION check_int(v json, what text, code text DEFAULT '22023')
RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    n numeric;
BEGIN
    IF v IS NULL OR json_typeof(v) <> 'number' THEN
        RAISE EXCEPTION '% must be a number', what USING ERRCODE = code;
    END IF;
    n := (v #>> '{}')::numeric;
    IF n <> trunc(n) THEN
        RAISE EXCEPTION '% must be an integer', what USING ERRCODE = code;
    ELSIF abs(n) > 9007199254740991 THEN
        RAISE EXCEPTION '% is out of range', what USING ERRCODE = '22003';
    END IF;
    RETURN n::bigint;
END $$;

-- An optional plain string member: NULL when absent or JSON null.
CREATE FUNCTION opt_string(v json, what text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF v IS NULL OR json_typeof(v) = 'null' THEN
        RETURN NULL;
    ELSIF json_typeof(v) <> 'string' THEN
        RAISE EXCEPTION '% must be a string', what USING ERRCODE = '22023';
    END IF;
    RETURN v #>> '{}';
END $$;

------------------------------------------------------------------ instances

-- instance_upsert: validate the record, replace the row whole.
CREATE FUNCTION instance_upsert(rec json) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    k text;
    prov text;
    psid text;
BEGIN
    PERFORM check_keys(rec, ARRAY['key', 'provider', 'providerSandboxId', 'threadId',
                                  'latestSnapshotId', 'latestRunId', 'updatedAt'], 'instance');
    k := check_json_id(rec -> 'key', 'key');
    prov := opt_string(rec -> 'provider', 'provider');
    psid := opt_string(rec -> 'providerSandboxId', 'providerSandboxId');
    IF prov IS NULL OR psid IS NULL THEN
        RAISE EXCEPTION 'provider and providerSandboxId are required' USING ERRCODE = '22004';
    END IF;
    INSERT INTO sandbox_persist.instances AS i (instance_key, provider, provider_sandbox_id,
                latest_snapshot_id, thread_id, latest_run_id, updated_at)
    VALUES (k, prov, psid, opt_string(rec -> 'latestSnapshotId', 'latestSnapshotId'),
            check_json_id(rec -> 'threadId', 'threadId'), opt_string(rec -> 'latestRunId', 'latestRunId'),
            check_int(rec -> 'updatedAt', 'updatedAt'))
    ON CONFLICT (instance_key) DO UPDATE SET provider = EXCLUDED.provider,
        provider_sandbox_id = EXCLUDED.provider_sandbox_id, latest_snapshot_id = EXCLUDED.latest_snapshot_id,
        thread_id = EXCLUDED.thread_id, latest_run_id = EXCLUDED.latest_run_id,
        updated_at = EXCLUDED.updated_at;
END $$;

-- instance_get: the record with unset optionals left out, or NULL.
CREATE FUNCTION instance_get(instance_key text) RETURNS json LANGUAGE plpgsql STABLE AS $$
DECLARE
    r sandbox_persist.instances;
BEGIN
    PERFORM check_id(instance_key, 'key');
    SELECT * INTO r FROM sandbox_persist.instances i WHERE i.instance_key = instance_get.instance_key;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN json_strip_nulls(json_build_object('key', r.instance_key, 'provider', r.provider,
        'providerSandboxId', r.provider_sandbox_id, 'threadId', r.thread_id,
        'latestSnapshotId', r.latest_snapshot_id, 'latestRunId', r.latest_run_id,
        'updatedAt', r.updated_at));
END $$;

------------------------------------------------------------------ locks

-- lock_acquire: take the key when absent or expired; the fence is drawn once
-- the row is ours, so fences increase in grant order.
CREATE FUNCTION lock_acquire(lock_key text, ttl_ms bigint) RETURNS json LANGUAGE plpgsql AS $$
DECLARE
    now bigint;
    tok uuid;
    f bigint;
BEGIN
    PERFORM check_id(lock_key, 'lock key', 2048);
    IF ttl_ms IS NULL OR ttl_ms < 1000 OR ttl_ms > 600000 THEN
        RAISE EXCEPTION 'ttl_ms must be 1000-600000' USING ERRCODE = '22023';
    END IF;
    PERFORM 1 FROM sandbox_persist.locks l WHERE l.lock_key = lock_acquire.lock_key FOR UPDATE;
    now := now_ms();
    INSERT INTO sandbox_persist.locks AS l (lock_key, owner_token, fence, acquired_at, expires_at)
    VALUES (lock_key, gen_random_uuid(), 0, now, now + ttl_ms)
    ON CONFLICT ON CONSTRAINT locks_pkey DO UPDATE SET owner_token = EXCLUDED.owner_token, fence = 0,
        acquired_at = EXCLUDED.acquired_at, expires_at = EXCLUDED.expires_at
    WHERE l.expires_at <= now
    RETURNING l.owner_token INTO tok;
    IF tok IS NULL THEN
        RETURN NULL;
    END IF;
    UPDATE sandbox_persist.locks l SET fence = nextval('sandbox_persist.lock_fences')
     WHERE l.lock_key = lock_acquire.lock_key RETURNING l.fence INTO f;
    RETURN json_build_object('ownerToken', tok, 'fence', f, 'expiresAt', now + ttl_ms);
END $$;

-- lock_release: delete the owner's row and notify waiters on commit.
CREATE FUNCTION lock_release(lock_key text, owner_token text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM check_id(lock_key, 'lock key', 2048);
    DELETE FROM sandbox_persist.locks l
     WHERE l.lock_key = lock_release.lock_key AND l.owner_token::text = lock_release.owner_token;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM pg_notify('sandbox_persist_lock', md5(lock_key));
    RETURN true;
END $$;

------------------------------------------------------------------ event log

-- event_log_append: lock (or create) the log row, honour the producer ledger,
-- number the chunks densely after the tail, notify on commit.
CREATE FUNCTION event_log_append(run_id text, chunks json, options json DEFAULT NULL)
RETURNS json LANGUAGE plpgsql AS $$
DECLARE
    now bigint := now_ms();
    pid uuid;
    pseq bigint;
    n int;
    lid bigint;
    tail bigint;
    closed boolean;
    prev record;
BEGIN
    PERFORM check_id(run_id, 'run id');
    IF chunks IS NULL OR json_typeof(chunks) <> 'array' THEN
        RAISE EXCEPTION 'chunks must be an array' USING ERRCODE = '22023';
    END IF;
    IF options IS NOT NULL THEN
        PERFORM check_keys(options, ARRAY['producerId', 'producerSeq', 'fenceEpoch'], 'options');
        IF options -> 'producerId' IS NOT NULL THEN
            pid := check_json_id(options -> 'producerId', 'producerId')::uuid;
            pseq := check_int(options -> 'producerSeq', 'producerSeq');
        END IF;
        IF options -> 'fenceEpoch' IS NOT NULL THEN
            RAISE EXCEPTION 'fenceEpoch is not part of this baseline' USING ERRCODE = '0A000';
        END IF;
    END IF;
    n := json_array_length(chunks);
    IF n = 0 THEN
        RETURN '[]';
    END IF;
    INSERT INTO sandbox_persist.event_logs AS l (run_id, created_at, last_append_at)
    VALUES (run_id, now, now) ON CONFLICT ON CONSTRAINT event_logs_run_id_key DO NOTHING;
    SELECT l.log_id, l.tail_seq, l.closed_at IS NOT NULL INTO lid, tail, closed
      FROM sandbox_persist.event_logs l WHERE l.run_id = event_log_append.run_id FOR UPDATE;
    IF pid IS NOT NULL THEN
        SELECT first_seq, chunk_count INTO prev FROM sandbox_persist.event_log_producers p
         WHERE p.log_id = lid AND p.producer_id = pid AND p.producer_seq = pseq;
        IF FOUND THEN
            IF prev.chunk_count <> n THEN
                RAISE EXCEPTION 'producer sequence reused with another count' USING ERRCODE = 'SP403';
            END IF;
            RETURN (SELECT json_agg(s) FROM generate_series(prev.first_seq, prev.first_seq + n - 1) s);
        END IF;
        INSERT INTO sandbox_persist.event_log_producers (log_id, producer_id, producer_seq, first_seq, chunk_count)
        VALUES (lid, pid, pseq, tail + 1, n);
    END IF;
    -- a per-entry digest (the extension chains them; the hashing work is alike)
    INSERT INTO sandbox_persist.event_log_entries (log_id, seq, chunk, digest)
    SELECT lid, tail + e.ord, e.c, hashtextextended(e.c::text, tail + e.ord)
      FROM json_array_elements(chunks) WITH ORDINALITY AS e(c, ord);
    UPDATE sandbox_persist.event_logs SET tail_seq = tail + n, last_append_at = now,
           appends_after_close = appends_after_close + CASE WHEN closed THEN 1 ELSE 0 END
     WHERE log_id = lid;
    PERFORM pg_notify('sandbox_persist_event_log', lid::text);
    RETURN (SELECT json_agg(s) FROM generate_series(tail + 1, tail + n) s);
END $$;

-- event_log_read: entries after after_seq (at most max_rows), tail and closed,
-- from one snapshot (one statement).
CREATE FUNCTION event_log_read(run_id text, after_seq bigint, max_rows int DEFAULT 1000)
RETURNS json LANGUAGE plpgsql STABLE AS $$
DECLARE
    l record;
    entries json;
BEGIN
    PERFORM check_id(run_id, 'run id');
    IF after_seq IS NULL OR after_seq < 0 OR max_rows IS NULL OR max_rows < 0 THEN
        RAISE EXCEPTION 'after_seq and max_rows must be >= 0' USING ERRCODE = '22023';
    END IF;
    SELECT g.log_id, g.tail_seq, g.closed_at IS NOT NULL AS closed,
           (SELECT coalesce(json_agg(json_build_object('seq', e.seq, 'chunk', e.chunk) ORDER BY e.seq), '[]')
              FROM sandbox_persist.event_log_entries e
             WHERE e.log_id = g.log_id AND e.seq > after_seq AND e.seq <= after_seq + max_rows) AS entries
      INTO l FROM sandbox_persist.event_logs g WHERE g.run_id = event_log_read.run_id;
    IF NOT FOUND THEN
        IF after_seq > 0 THEN
            RAISE EXCEPTION 'no event log for run %', run_id USING ERRCODE = 'SP401';
        END IF;
        RETURN json_build_object('logId', run_id, 'exists', false, 'closed', false, 'tail', 0, 'entries', '[]'::json);
    ELSIF after_seq > l.tail_seq THEN
        RAISE EXCEPTION 'after_seq % is beyond the tail %', after_seq, l.tail_seq USING ERRCODE = 'SP402';
    END IF;
    RETURN json_build_object('logId', run_id, 'exists', true, 'closed', l.closed, 'tail', l.tail_seq,
                             'entries', l.entries);
END $$;

------------------------------------------------------------------ checkpoints

-- checkpoint_acquire_writer: one statement, taking over only a free or expired lease.
CREATE FUNCTION checkpoint_acquire_writer(thread_id text, lease_ms bigint DEFAULT 120000)
RETURNS json LANGUAGE plpgsql AS $$
DECLARE
    now bigint;
    r record;
BEGIN
    PERFORM check_id(thread_id, 'thread id', 1024, 'SP007');
    IF lease_ms <= 0 THEN
        RAISE EXCEPTION 'lease_ms must be positive' USING ERRCODE = '22023';
    END IF;
    PERFORM 1 FROM sandbox_persist.checkpoint_threads t WHERE t.thread_id = checkpoint_acquire_writer.thread_id FOR UPDATE;
    now := now_ms();
    INSERT INTO sandbox_persist.checkpoint_threads AS t (thread_id, fence, owner_token, lease_expires_at)
    VALUES (thread_id, 1, gen_random_uuid(), now + lease_ms)
    ON CONFLICT ON CONSTRAINT checkpoint_threads_pkey DO UPDATE SET fence = t.fence + 1,
        owner_token = EXCLUDED.owner_token, lease_expires_at = EXCLUDED.lease_expires_at
    WHERE t.owner_token IS NULL OR t.lease_expires_at <= now
    RETURNING t.fence, t.owner_token INTO r;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'thread % has a live writer', thread_id USING ERRCODE = 'SP005';
    END IF;
    RETURN json_build_object('threadId', thread_id, 'ownerToken', r.owner_token, 'fence', r.fence,
                             'expiresAt', now + lease_ms);
END $$;

-- checkpoint_get_head: the head id or NULL.
CREATE FUNCTION checkpoint_get_head(thread_id text) RETURNS text LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM check_id(thread_id, 'thread id', 1024, 'SP007');
    RETURN (SELECT head_id FROM sandbox_persist.checkpoint_threads t WHERE t.thread_id = checkpoint_get_head.thread_id);
END $$;

-- checkpoint_release_writer: clear the lease when token and fence match.
CREATE FUNCTION checkpoint_release_writer(writer json) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    UPDATE sandbox_persist.checkpoint_threads SET owner_token = NULL, lease_expires_at = NULL
     WHERE thread_id = check_json_id(writer -> 'threadId', 'writer.threadId', 'SP007')
       AND owner_token::text = writer ->> 'ownerToken' AND fence = (writer ->> 'fence')::bigint;
    RETURN FOUND;
END $$;

-- Lock the writer's thread row and raise SP006 unless its lease is current.
CREATE FUNCTION lock_current_lease(thread text, writer json) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    t record;
BEGIN
    SELECT owner_token::text AS tok, fence, lease_expires_at, head_id INTO t
      FROM sandbox_persist.checkpoint_threads WHERE thread_id = thread FOR UPDATE;
    IF NOT FOUND OR t.tok IS DISTINCT FROM writer ->> 'ownerToken'
       OR json_typeof(writer -> 'fence') IS DISTINCT FROM 'number'
       OR t.fence::text IS DISTINCT FROM writer ->> 'fence' OR t.lease_expires_at <= now_ms() THEN
        RAISE EXCEPTION 'the writer lease of % is not current', thread USING ERRCODE = 'SP006';
    END IF;
    RETURN t.head_id;
END $$;

-- Validate file entries (contract §2.3) and return their distinct blob keys.
CREATE FUNCTION check_files(files json) RETURNS text[] LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    e json;
    p text;
    keys text[] := '{}';
    paths text[] := '{}';
    file_paths text[] := '{}';
BEGIN
    IF files IS NULL OR json_typeof(files) <> 'array' THEN
        RAISE EXCEPTION 'files must be an array' USING ERRCODE = 'SP008';
    END IF;
    FOR e IN SELECT value FROM json_array_elements(files) LOOP
        IF json_typeof(e) <> 'object' THEN
            RAISE EXCEPTION 'a file entry must be an object' USING ERRCODE = 'SP008';
        END IF;
        IF json_typeof(e -> 'path') IS DISTINCT FROM 'string' THEN
            RAISE EXCEPTION 'a file path must be a string' USING ERRCODE = 'SP008';
        END IF;
        p := e ->> 'path';
        IF p = '' OR p ~ '^[/\\]' OR strpos(p, '\') > 0 OR p ~ '^[A-Za-z]:([/]|$)'
           OR p ~ '(^|/)(\.|\.\.)?(/|$)' THEN
            RAISE EXCEPTION 'unsafe path %', p USING ERRCODE = 'SP008';
        END IF;
        CASE e ->> 'kind'
        WHEN 'file' THEN
            PERFORM check_keys(e, ARRAY['path', 'kind', 'blobKey', 'size'], 'file entry', 'SP008');
            IF json_typeof(e -> 'blobKey') IS DISTINCT FROM 'string'
               OR (e ->> 'blobKey') !~ '^sandbox-files/sha256/[0-9a-f]{64}$' THEN
                RAISE EXCEPTION 'bad blob key in %', p USING ERRCODE = 'SP008';
            END IF;
            IF check_int(e -> 'size', 'size', 'SP008') < 0 THEN
                RAISE EXCEPTION 'negative size in %', p USING ERRCODE = 'SP008';
            END IF;
            keys := keys || (e ->> 'blobKey');
            file_paths := file_paths || p;
        WHEN 'dir' THEN
            PERFORM check_keys(e, ARRAY['path', 'kind'], 'dir entry', 'SP008');
        ELSE
            RAISE EXCEPTION 'unknown entry kind' USING ERRCODE = 'SP008';
        END CASE;
        paths := paths || p;
    END LOOP;
    -- no path twice, nothing beneath a file: every ancestor prefix of every path
    -- must not be a file path (one hash join over the prefixes).
    IF (SELECT count(*) <> count(DISTINCT x) FROM unnest(paths) x)
       OR EXISTS (SELECT 1 FROM unnest(paths) AS q(path),
                       LATERAL (SELECT left(q.path, pos - 1) AS prefix
                                  FROM generate_series(2, length(q.path)) pos
                                 WHERE substr(q.path, pos, 1) = '/') a
                  WHERE a.prefix = ANY (file_paths)) THEN
        RAISE EXCEPTION 'a path is repeated or lies beneath a file' USING ERRCODE = 'SP008';
    END IF;
    RETURN (SELECT coalesce(array_agg(DISTINCT k), '{}') FROM unnest(keys) k);
END $$;

-- Validate checkpoint artifacts (contract §2.4) and return their blob keys.
CREATE FUNCTION check_artifacts(artifacts json) RETURNS text[] LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    e json;
    keys text[] := '{}';
BEGIN
    IF artifacts IS NULL OR json_typeof(artifacts) <> 'array' THEN
        RAISE EXCEPTION 'artifacts must be an array' USING ERRCODE = 'SP008';
    END IF;
    FOR e IN SELECT value FROM json_array_elements(artifacts) LOOP
        PERFORM check_keys(e, ARRAY['artifactId', 'name', 'mimeType', 'size', 'blobKey', 'createdAt'], 'artifact', 'SP008');
        IF coalesce(e ->> 'artifactId', '') = '' OR coalesce(e ->> 'name', '') = '' OR coalesce(e ->> 'mimeType', '') = ''
           OR coalesce(e ->> 'blobKey', '') !~ '^sandbox-artifacts/sha256/[0-9a-f]{64}$'
           OR json_typeof(e -> 'createdAt') IS DISTINCT FROM 'number' OR check_int(e -> 'size', 'size', 'SP008') < 0 THEN
            RAISE EXCEPTION 'malformed artifact' USING ERRCODE = 'SP008';
        END IF;
        keys := keys || (e ->> 'blobKey');
    END LOOP;
    RETURN keys;
END $$;

-- Store a checkpoint's conversation in the thread's conversation log (the
-- 0.5.0 layout: a block of positions per append, one conversation_blocks row
-- holding the messages' text joined by commas): when it extends the parent's
-- (same digest over the parent's length), keep the parent's ranges and log
-- only the tail, else keep the parent's leading blocks it repeats exactly and
-- log the rest; what is logged is one block. The server compresses a block
-- only past its TOAST threshold (the C code compresses every block that
-- shrinks). The caller holds the thread row.
CREATE FUNCTION store_conversation(thread text, parent text, conversation json,
                                   OUT ranges int8multirange, OUT block int8range,
                                   OUT len integer, OUT digest bytea) LANGUAGE plpgsql AS $$
DECLARE
    bodies text[];
    hashes bytea[];
    from_ord integer := 0;
    log_end bigint;
    p sandbox_persist.checkpoints;
    b sandbox_persist.conversation_blocks;
BEGIN
    SELECT coalesce(array_agg(e.v::text ORDER BY e.ord), '{}'),
           coalesce(array_agg(sha256(convert_to(e.v::text, 'UTF8')) ORDER BY e.ord), '{}')
      INTO bodies, hashes
      FROM json_array_elements(conversation) WITH ORDINALITY AS e(v, ord);
    len := cardinality(hashes);
    digest := sha256(coalesce((SELECT string_agg(h, ''::bytea ORDER BY i)
                                 FROM unnest(hashes) WITH ORDINALITY AS u(h, i)), ''::bytea));
    SELECT t.conv_log_end INTO log_end FROM sandbox_persist.checkpoint_threads t WHERE t.thread_id = thread;
    IF parent IS NOT NULL THEN
        SELECT * INTO p FROM sandbox_persist.checkpoints c WHERE c.checkpoint_id = parent;
        IF FOUND AND p.conv_len <= len AND p.conv_digest =
               sha256(coalesce((SELECT string_agg(h, ''::bytea ORDER BY i)
                                  FROM unnest(hashes[1:p.conv_len]) WITH ORDINALITY AS u(h, i)), ''::bytea)) THEN
            from_ord := p.conv_len;
            ranges := p.conv_ranges;
        ELSIF FOUND THEN
            FOR b IN SELECT * FROM sandbox_persist.conversation_blocks x
                      WHERE x.thread_id = thread AND x.first_pos >= lower(p.conv_ranges)
                        AND x.first_pos < upper(p.conv_ranges) AND x.first_pos <@ p.conv_ranges
                      ORDER BY x.first_pos LOOP
                EXIT WHEN b.message_count > len - from_ord
                       OR b.bodies <> array_to_string(bodies[from_ord + 1:from_ord + b.message_count], ',');
                from_ord := from_ord + b.message_count;
                ranges := coalesce(ranges, '{}'::int8multirange)
                          + int8multirange(int8range(b.first_pos, b.first_pos + b.message_count));
            END LOOP;
        END IF;
    END IF;
    IF len > from_ord THEN
        INSERT INTO sandbox_persist.conversation_blocks (thread_id, first_pos, message_count, bodies)
        VALUES (thread, log_end, len - from_ord, array_to_string(bodies[from_ord + 1:], ','));
    END IF;
    block := int8range(log_end, log_end + len - from_ord);
    ranges := coalesce(ranges, '{}'::int8multirange) + int8multirange(block);
    UPDATE sandbox_persist.checkpoint_threads t SET conv_log_end = log_end + len - from_ord
     WHERE t.thread_id = thread;
END $$;

-- checkpoint_append: the contract's check order (§4), then publish.
CREATE FUNCTION checkpoint_append(input json, conversation json) RETURNS json LANGUAGE plpgsql AS $$
DECLARE
    cp json;
    w json;
    thread text;
    id text;
    expected text;
    parent text;
    head text;
    keys text[];
BEGIN
    PERFORM check_keys(input, ARRAY['checkpoint', 'expectedHeadId', 'writer'], 'input', 'SP008');
    cp := input -> 'checkpoint';
    w := input -> 'writer';
    PERFORM check_keys(cp, ARRAY['id', 'threadId', 'parentCheckpointId', 'createdAt', 'reason', 'label',
                                 'sourceRunId', 'files', 'artifacts'], 'checkpoint', 'SP008');
    IF w IS NULL OR json_typeof(w) <> 'object' THEN
        RAISE EXCEPTION 'writer must be an object' USING ERRCODE = 'SP008';
    END IF;
    thread := check_json_id(cp -> 'threadId', 'threadId', 'SP007');
    IF check_json_id(w -> 'threadId', 'writer.threadId', 'SP007') <> thread THEN
        RAISE EXCEPTION 'the writer belongs to another thread' USING ERRCODE = 'SP006';
    END IF;
    id := check_json_id(cp -> 'id', 'id', 'SP007');
    IF input -> 'expectedHeadId' IS NULL THEN
        RAISE EXCEPTION 'expectedHeadId is required' USING ERRCODE = 'SP007';
    ELSIF json_typeof(input -> 'expectedHeadId') <> 'null' THEN
        expected := check_json_id(input -> 'expectedHeadId', 'expectedHeadId', 'SP007');
    END IF;
    IF json_typeof(cp -> 'parentCheckpointId') IS DISTINCT FROM 'null' AND cp -> 'parentCheckpointId' IS NOT NULL THEN
        parent := check_json_id(cp -> 'parentCheckpointId', 'parentCheckpointId', 'SP007');
    END IF;
    IF json_typeof(cp -> 'createdAt') IS DISTINCT FROM 'number' OR json_typeof(cp -> 'reason') IS DISTINCT FROM 'string' THEN
        RAISE EXCEPTION 'createdAt must be a number and reason a string' USING ERRCODE = 'SP008';
    END IF;
    keys := check_files(cp -> 'files') || check_artifacts(cp -> 'artifacts');
    IF conversation IS NULL OR json_typeof(conversation) <> 'array' THEN
        RAISE EXCEPTION 'the conversation must be an array' USING ERRCODE = 'SP008';
    END IF;
    head := lock_current_lease(thread, w);
    IF EXISTS (SELECT 1 FROM sandbox_persist.checkpoints c WHERE c.checkpoint_id = id) THEN
        RAISE EXCEPTION 'checkpoint % exists', id USING ERRCODE = 'SP003';
    ELSIF head IS DISTINCT FROM expected THEN
        RAISE EXCEPTION 'the head is not %', coalesce(expected, 'null') USING ERRCODE = 'SP001';
    ELSIF parent IS DISTINCT FROM expected THEN
        RAISE EXCEPTION 'the parent differs from the expected head' USING ERRCODE = 'SP002';
    END IF;
    INSERT INTO sandbox_persist.checkpoints (checkpoint_id, thread_id, parent_id, created_at, reason, label,
                source_run_id, files, artifacts, conv_ranges, conv_block, conv_len, conv_digest)
    SELECT id, thread, parent, (cp ->> 'createdAt')::float8, cp ->> 'reason', opt_string(cp -> 'label', 'label'),
           opt_string(cp -> 'sourceRunId', 'sourceRunId'), cp -> 'files', cp -> 'artifacts',
           v.ranges, v.block, v.len, v.digest
      FROM store_conversation(thread, parent, conversation) v;
    INSERT INTO sandbox_persist.checkpoint_blob_refs (checkpoint_id, blob_key)
    SELECT DISTINCT id, k FROM unnest(keys) k;
    UPDATE sandbox_persist.checkpoint_threads SET head_id = id WHERE thread_id = thread;
    RETURN json_build_object('headId', id);
END $$;

-- checkpoint_fork_from_checkpoint: the contract's check order (§7.1), then
-- publish the fork root, the destination transcript and the references.
CREATE FUNCTION checkpoint_fork_from_checkpoint(input json) RETURNS json LANGUAGE plpgsql AS $$
DECLARE
    src_thread text;
    src_id text;
    dst_thread text;
    dst_id text;
    w json := input -> 'writer';
    created float8;
    src sandbox_persist.checkpoints;
    keys text[];
    conv text;
    n bigint;
    log_end bigint;
BEGIN
    PERFORM check_keys(input, ARRAY['sourceThreadId', 'sourceCheckpointId', 'destinationThreadId',
                                    'destinationCheckpointId', 'createdAt', 'writer'], 'input', 'SP008');
    src_thread := check_json_id(input -> 'sourceThreadId', 'sourceThreadId', 'SP007');
    src_id := check_json_id(input -> 'sourceCheckpointId', 'sourceCheckpointId', 'SP007');
    dst_thread := check_json_id(input -> 'destinationThreadId', 'destinationThreadId', 'SP007');
    dst_id := check_json_id(input -> 'destinationCheckpointId', 'destinationCheckpointId', 'SP007');
    PERFORM check_json_id(w -> 'threadId', 'writer.threadId', 'SP007');
    IF json_typeof(input -> 'createdAt') IS DISTINCT FROM 'number' THEN
        RAISE EXCEPTION 'createdAt must be a number' USING ERRCODE = 'SP008';
    END IF;
    created := (input ->> 'createdAt')::float8;
    IF src_thread = dst_thread THEN
        RAISE EXCEPTION 'source and destination are one thread' USING ERRCODE = 'SP010';
    END IF;
    SELECT * INTO src FROM sandbox_persist.checkpoints c WHERE c.checkpoint_id = src_id FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no checkpoint %', src_id USING ERRCODE = 'SP009';
    ELSIF src.thread_id <> src_thread THEN
        RAISE EXCEPTION 'checkpoint % is not in thread %', src_id, src_thread USING ERRCODE = 'SP010';
    ELSIF w ->> 'threadId' <> dst_thread THEN
        RAISE EXCEPTION 'the writer belongs to another thread' USING ERRCODE = 'SP006';
    END IF;
    PERFORM lock_current_lease(dst_thread, w);
    IF EXISTS (SELECT 1 FROM sandbox_persist.checkpoint_threads t WHERE t.thread_id = dst_thread AND t.head_id IS NOT NULL)
       OR EXISTS (SELECT 1 FROM sandbox_persist.messages m WHERE m.thread_id = dst_thread)
       OR EXISTS (SELECT 1 FROM sandbox_persist.runs r WHERE r.thread_id = dst_thread)
       OR EXISTS (SELECT 1 FROM sandbox_persist.generation_runs g WHERE g.thread_id = dst_thread)
       OR EXISTS (SELECT 1 FROM sandbox_persist.interrupts i WHERE i.thread_id = dst_thread)
       OR EXISTS (SELECT 1 FROM sandbox_persist.artifacts a WHERE a.thread_id = dst_thread)
       OR EXISTS (SELECT 1 FROM sandbox_persist.checkpoints c WHERE c.thread_id = dst_thread OR c.checkpoint_id = dst_id) THEN
        RAISE EXCEPTION 'the destination is not empty' USING ERRCODE = 'SP011';
    END IF;
    SELECT coalesce(array_agg(DISTINCT k), '{}') INTO keys
      FROM (SELECT e ->> 'blobKey' FROM json_array_elements(src.files) e
            UNION ALL SELECT e ->> 'blobKey' FROM json_array_elements(src.artifacts) e) s(k)
     WHERE k IS NOT NULL;
    IF (SELECT count(*) FROM sandbox_persist.checkpoint_blob_refs r
         WHERE r.checkpoint_id = src_id AND r.blob_key = ANY (keys)) <> cardinality(keys) THEN
        RAISE EXCEPTION 'the source references are incomplete' USING ERRCODE = 'SP008';
    END IF;
    -- the source's conversation, read once from the blocks of its log ranges:
    -- the destination's transcript and the root's own copy, one block at the
    -- end of the destination's log with the source's length and digest
    SELECT coalesce(sum(b.message_count), 0), string_agg(b.bodies, ',' ORDER BY b.first_pos)
      INTO n, conv
      FROM sandbox_persist.conversation_blocks b
     WHERE b.thread_id = src.thread_id AND b.first_pos >= lower(src.conv_ranges)
       AND b.first_pos < upper(src.conv_ranges) AND b.first_pos <@ src.conv_ranges;
    INSERT INTO sandbox_persist.messages (thread_id, transcript, updated_at)
    VALUES (dst_thread, ('[' || coalesce(conv, '') || ']')::json, now_ms());
    SELECT t.conv_log_end INTO log_end FROM sandbox_persist.checkpoint_threads t WHERE t.thread_id = dst_thread;
    IF n > 0 THEN
        INSERT INTO sandbox_persist.conversation_blocks (thread_id, first_pos, message_count, bodies)
        VALUES (dst_thread, log_end, n, conv);
    END IF;
    INSERT INTO sandbox_persist.checkpoints (checkpoint_id, thread_id, parent_id, created_at, reason, files,
                artifacts, conv_ranges, conv_block, conv_len, conv_digest)
    VALUES (dst_id, dst_thread, NULL, created, 'fork-root', src.files, src.artifacts,
            int8multirange(int8range(log_end, log_end + n)), int8range(log_end, log_end + n),
            src.conv_len, src.conv_digest);
    INSERT INTO sandbox_persist.checkpoint_blob_refs (checkpoint_id, blob_key) SELECT dst_id, k FROM unnest(keys) k;
    UPDATE sandbox_persist.checkpoint_threads SET head_id = dst_id, conv_log_end = log_end + n WHERE thread_id = dst_thread;
    RETURN json_build_object('checkpoint', json_build_object('id', dst_id, 'threadId', dst_thread,
        'parentCheckpointId', NULL, 'createdAt', created, 'reason', 'fork-root', 'files', src.files,
        'conversation', (SELECT transcript FROM sandbox_persist.messages WHERE thread_id = dst_thread),
        'artifacts', src.artifacts));
END $$;

------------------------------------------------------------------ blobs

-- blob_head: the record, refreshing a content-addressed key's GC time at most
-- once per quarter of the grace (the C code's rule).
CREATE FUNCTION blob_head(blob_key text) RETURNS json LANGUAGE plpgsql AS $$
DECLARE
    b sandbox_persist.blobs;
    now bigint := now_ms();
    -- the extension's setting (its library may not be loaded yet in this session)
    grace bigint := coalesce(extract(epoch FROM current_setting('sandbox_persist.blob_gc_grace', true)::interval) * 1000,
                             86400000);
BEGIN
    PERFORM check_id(blob_key, 'blob key', 2048);
    SELECT * INTO b FROM sandbox_persist.blobs x WHERE x.blob_key = blob_head.blob_key;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF blob_key ~ '^sandbox-(files|artifacts)/sha256/[0-9a-f]{64}$'
       AND (b.relied_on_at IS NULL OR b.relied_on_at < now - grace / 4) THEN
        UPDATE sandbox_persist.blobs x SET relied_on_at = now
         WHERE x.blob_key = blob_head.blob_key AND (x.relied_on_at IS NULL OR x.relied_on_at < now - grace / 4);
    END IF;
    RETURN json_strip_nulls(json_build_object('key', b.blob_key, 'size', b.size, 'etag', b.etag,
        'contentType', b.content_type, 'customMetadata', b.custom_metadata,
        'createdAt', b.created_at, 'updatedAt', b.updated_at));
END $$;

-- The store methods are SECURITY DEFINER with a fixed search_path, as the
-- contract requires of the extension's functions (README §2.9): the same
-- per-call cost.
ALTER FUNCTION instance_upsert(json) SECURITY DEFINER SET search_path = pg_catalog, bench_plpgsql, pg_temp;
ALTER FUNCTION instance_get(text) SECURITY DEFINER SET search_path = pg_catalog, bench_plpgsql, pg_temp;
ALTER FUNCTION lock_acquire(text, bigint) SECURITY DEFINER SET search_path = pg_catalog, bench_plpgsql, pg_temp;
ALTER FUNCTION lock_release(text, text) SECURITY DEFINER SET search_path = pg_catalog, bench_plpgsql, pg_temp;
ALTER FUNCTION event_log_append(text, json, json) SECURITY DEFINER SET search_path = pg_catalog, bench_plpgsql, pg_temp;
ALTER FUNCTION event_log_read(text, bigint, int) SECURITY DEFINER SET search_path = pg_catalog, bench_plpgsql, pg_temp;
ALTER FUNCTION checkpoint_acquire_writer(text, bigint) SECURITY DEFINER SET search_path = pg_catalog, bench_plpgsql, pg_temp;
ALTER FUNCTION checkpoint_get_head(text) SECURITY DEFINER SET search_path = pg_catalog, bench_plpgsql, pg_temp;
ALTER FUNCTION checkpoint_release_writer(json) SECURITY DEFINER SET search_path = pg_catalog, bench_plpgsql, pg_temp;
ALTER FUNCTION checkpoint_append(json, json) SECURITY DEFINER SET search_path = pg_catalog, bench_plpgsql, pg_temp;
ALTER FUNCTION checkpoint_fork_from_checkpoint(json) SECURITY DEFINER SET search_path = pg_catalog, bench_plpgsql, pg_temp;
ALTER FUNCTION blob_head(text) SECURITY DEFINER SET search_path = pg_catalog, bench_plpgsql, pg_temp;

RESET search_path;
