-- bench/experiments/durable_setup.sql: run once in the scratch database (sp_bench_durable)
-- by bench/experiments/durable.sh. Creates the extension, the deterministic chunk
-- generator and the baseline objects. Everything outside the extension's own
-- tables lives in schema bench_durable and disappears with the database.

CREATE EXTENSION sandbox_persist;
CREATE SCHEMA bench_durable;

-- Deterministic prose of exactly nbytes ASCII bytes, from a small vocabulary
-- (what streamed model output looks like once JSON-escaped: plain words).
CREATE FUNCTION bench_durable.prose(seed text, nbytes int) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT left(string_agg(w[1 + abs(hashtext(seed || ':' || j)) % array_length(w, 1)], ' ' ORDER BY j),
                nbytes)
    FROM generate_series(1, nbytes / 3 + 8) AS j,
         (SELECT '{the,a,file,function,returns,value,we,need,to,check,this,because,index,
                   module,error,handler,stream,chunk,token,result,so,and,then,it,is,not,when,
                   caller,types,config,test,build,import,export,const,async,await,retry}'::text[] AS w) v
$$;

-- AG-UI-like event number i of run `run`, as the exact JSON text a client
-- sends (JSON.stringify style, no whitespace), about 200 bytes. Mostly
-- TEXT_MESSAGE_CONTENT deltas; every 8th is a TOOL_CALL_ARGS delta.
CREATE FUNCTION bench_durable.chunk(run text, i int) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN i % 8 = 7 THEN
        format('{"type":"TOOL_CALL_ARGS","toolCallId":"call_%s_%s","delta":%s,"timestamp":%s}',
               run, i / 8,
               to_json(format('{"path":"src/%s.ts","reason":"%s"}', i % 43,
                              bench_durable.prose(run || 't' || i, 68)))::text,
               1732867200000 + i * 37)
    ELSE
        format('{"type":"TEXT_MESSAGE_CONTENT","messageId":"%s-%s","delta":%s,"timestamp":%s}',
               run, i / 64, to_json(bench_durable.prose(run || 'm' || i, 100) || ' ')::text,
               1732867200000 + i * 37)
    END
$$;

-- The JSON array text of chunks first..first+n-1 of a run.
CREATE FUNCTION bench_durable.batch(run text, first int, n int) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT '[' || string_agg(bench_durable.chunk(run, i), ',' ORDER BY i) || ']'
    FROM generate_series(first, first + n - 1) AS i
$$;

-- Baseline for (1): the same chunk text in a plain table with the same key.
CREATE TABLE bench_durable.plain_log (
    log_id bigint NOT NULL,
    seq    bigint NOT NULL,
    chunk  json NOT NULL,
    PRIMARY KEY (log_id, seq)
);

-- Baseline for (3): a lease row with nothing but its key and owner.
CREATE TABLE bench_durable.plain_locks (
    lock_key    text COLLATE "C" PRIMARY KEY,
    owner_token uuid NOT NULL
);

-- (3) counts successful acquire/release pairs with this sequence (a failed
-- acquire of a contended key is a transaction too, but not a pair).
CREATE SEQUENCE bench_durable.pairs;

-- Baseline for (2): the storage side of a read, in plain SQL. The same index range scan
-- over plain_log (loaded with the same rows as the extension's log) fetches
-- the page's 100 rows and reads every chunk's text, but builds no JSON:
-- returns 'count first_seq last_seq total_bytes'. PL/pgSQL, so its plan is
-- prepared once and kept, like the extension's.
CREATE FUNCTION bench_durable.plain_read(p_log_id bigint, p_after bigint, p_max int) RETURNS text
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT count(*) || ' ' || min(seq) || ' ' || max(seq) || ' ' || sum(octet_length(chunk::text))
            FROM (SELECT seq, chunk FROM bench_durable.plain_log
                  WHERE log_id = p_log_id AND seq > p_after ORDER BY seq LIMIT p_max) page);
END
$$;

-- (2) keeps its latency samples here.
CREATE TABLE bench_durable.read_latency (
    impl    text NOT NULL,   -- 'sp' (event_log_read) or 'plain' (plain_read)
    size    text NOT NULL,   -- 'small' (10^3 chunks) or 'big' (10^6 chunks)
    pos     text NOT NULL,   -- 'tail', 'middle', or 'reread' (the middle offset again)
    us      double precision NOT NULL
);

-- (2) diagnostics: buffers per read, from EXPLAIN (ANALYZE, BUFFERS).
CREATE TABLE bench_durable.read_buffers (
    size    text NOT NULL,
    pos     text NOT NULL,
    hit     int NOT NULL,
    read    int NOT NULL,
    dirtied int NOT NULL,
    io_us   double precision NOT NULL,
    exec_us double precision NOT NULL
);
