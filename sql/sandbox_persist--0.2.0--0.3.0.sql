-- sandbox_persist 0.2.0 -> 0.3.0. CREATE EXTENSION runs 0.1.0, 0.1.0--0.2.0
-- and then this script; ALTER EXTENSION sandbox_persist UPDATE runs it on a
-- 0.2.0 database (and after 0.1.0--0.2.0 on a 0.1.0 one).
-- What it changes is listed, section by section, below and in CHANGELOG.md.
\echo Use "ALTER EXTENSION sandbox_persist UPDATE" to load this file. \quit

-- ---------------------------------------------------------------------------
-- Checkpoint conversations as a per-thread log (issue 13, item 1).
--
-- What: each thread gets an append-only log of message ids (conversation_log,
-- one row per position; positions are handed out from
-- checkpoint_threads.conv_log_end and never reused). A checkpoint's
-- conversation is a set of ranges of its thread's log (conv_ranges, in
-- position order), almost always its parent's ranges plus the block it
-- appended itself (conv_block). conv_len and conv_digest (SHA-256 over the
-- SHA-256 of each message, in order) let an append tell cheaply whether its
-- transcript extends the parent's: then only the new tail is hashed into
-- conversation_messages and logged. deleteHead queues the block its
-- checkpoint appended (conversation_garbage); maintain() action A11 deletes
-- those positions and then the messages no position refers to any more.
-- A fork root gets its own copy of the source's messages in its thread, so
-- every message row belongs to the thread whose log uses it.
--
-- Why: 0.2.0 kept per checkpoint the bigint[] of all its message ids, so K
-- automatic checkpoints of an N-message transcript stored K x N ids, every
-- append hashed and looked up all N messages (drawing N identity values),
-- and unreferenced messages were never collected.
--
-- Data: every 0.2.0 checkpoint is migrated in insertion order; one whose id
-- array starts with its parent's array extends the parent's ranges, any
-- other (a fork root, a rewritten transcript) gets a block of its own.
-- Messages no checkpoint refers to are dropped. The functions that read or
-- write conversations move to new C symbols, so one shared library serves
-- databases at 0.2.0 (old symbols, old layout) and at 0.3.0 alike.
--
-- The identity column checkpoints.seq goes too: nothing reads it (lists
-- order by createdAt and id); this script reads it one last time to migrate
-- in insertion order.
-- ---------------------------------------------------------------------------
ALTER TABLE checkpoint_threads ADD COLUMN conv_log_end bigint NOT NULL DEFAULT 0;

-- One row per position of a thread's conversation log; positions only grow.
CREATE TABLE conversation_log (
    thread_id  text COLLATE "C" NOT NULL,
    pos        bigint NOT NULL,
    message_id bigint NOT NULL,   -- conversation_messages of the same thread
    PRIMARY KEY (thread_id, pos)
);

-- Log blocks of deleted checkpoints, waiting for maintain() (A11).
CREATE TABLE conversation_garbage (
    thread_id text COLLATE "C" NOT NULL,
    block     int8range NOT NULL,
    PRIMARY KEY (thread_id, block)
);

ALTER TABLE checkpoints
    ADD COLUMN conv_ranges int8multirange,  -- log positions of the conversation
    ADD COLUMN conv_block  int8range,       -- the positions this checkpoint appended
    ADD COLUMN conv_len    integer,         -- number of messages
    ADD COLUMN conv_digest bytea;           -- sha256(sha256(m1) || ... || sha256(mN))

DO $migrate$
DECLARE
    c        record;
    p        record;
    base     int8multirange;
    tail     bigint[];
    log_end  bigint;
    n        integer;
BEGIN
    FOR c IN SELECT checkpoint_id, thread_id, parent_id, conversation
               FROM checkpoints ORDER BY thread_id, seq
    LOOP
        SELECT x.conversation, x.conv_ranges INTO p
          FROM checkpoints x WHERE x.checkpoint_id = c.parent_id AND x.thread_id = c.thread_id;
        IF FOUND AND c.conversation[1:cardinality(p.conversation)] = p.conversation THEN
            base := p.conv_ranges;
            tail := c.conversation[cardinality(p.conversation) + 1:];
        ELSE
            base := '{}';
            tail := c.conversation;
        END IF;
        n := coalesce(cardinality(tail), 0);
        SELECT coalesce(max(pos) + 1, 0) INTO log_end
          FROM conversation_log WHERE thread_id = c.thread_id;
        -- a message of another thread (a fork root's) is copied into this one
        INSERT INTO conversation_messages (thread_id, hash, body)
            SELECT DISTINCT ON (m.hash) c.thread_id, m.hash, m.body
              FROM unnest(tail) AS u(id)
              JOIN conversation_messages m ON m.message_id = u.id
             WHERE m.thread_id <> c.thread_id
               AND NOT EXISTS (SELECT 1 FROM conversation_messages o
                                WHERE o.thread_id = c.thread_id AND o.hash = m.hash);
        INSERT INTO conversation_log (thread_id, pos, message_id)
            SELECT c.thread_id, log_end + u.ord - 1, o.message_id
              FROM unnest(tail) WITH ORDINALITY AS u(id, ord)
              JOIN conversation_messages m ON m.message_id = u.id
              JOIN conversation_messages o ON o.thread_id = c.thread_id AND o.hash = m.hash;
        UPDATE checkpoints x
           SET conv_ranges = base + int8multirange(int8range(log_end, log_end + n)),
               conv_block = int8range(log_end, log_end + n),
               conv_len = coalesce(cardinality(c.conversation), 0),
               conv_digest = (SELECT pg_catalog.sha256(coalesce(string_agg(m.hash, ''::bytea ORDER BY u.ord), ''::bytea))
                                FROM unnest(c.conversation) WITH ORDINALITY AS u(id, ord)
                                JOIN conversation_messages m ON m.message_id = u.id)
         WHERE x.checkpoint_id = c.checkpoint_id;
    END LOOP;
    UPDATE checkpoint_threads t SET conv_log_end = l.log_end
      FROM (SELECT thread_id, max(pos) + 1 AS log_end FROM conversation_log GROUP BY thread_id) l
     WHERE t.thread_id = l.thread_id;
    DELETE FROM conversation_messages m
     WHERE NOT EXISTS (SELECT 1 FROM conversation_log l
                        WHERE l.thread_id = m.thread_id AND l.message_id = m.message_id);
END
$migrate$;

ALTER TABLE checkpoints
    ALTER COLUMN conv_ranges SET NOT NULL,
    ALTER COLUMN conv_block SET NOT NULL,
    ALTER COLUMN conv_len SET NOT NULL,
    ALTER COLUMN conv_digest SET NOT NULL,
    DROP COLUMN conversation,
    DROP COLUMN seq;

SELECT pg_catalog.pg_extension_config_dump('conversation_log', '');
SELECT pg_catalog.pg_extension_config_dump('conversation_garbage', '');

-- The functions that read or write conversations, on their 0.3.0 symbols
-- (CREATE OR REPLACE resets the attributes, so they are restated).
CREATE OR REPLACE FUNCTION checkpoint_append(input json, conversation json,
                                             now_ms bigint DEFAULT NULL) RETURNS json
    AS 'MODULE_PATHNAME', 'checkpoint_append_v3' LANGUAGE C VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
CREATE OR REPLACE FUNCTION checkpoint_delete_head(input json, now_ms bigint DEFAULT NULL) RETURNS void
    AS 'MODULE_PATHNAME', 'checkpoint_delete_head_v3' LANGUAGE C VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
CREATE OR REPLACE FUNCTION checkpoint_get(checkpoint_id text) RETURNS json
    AS 'MODULE_PATHNAME', 'checkpoint_get_v3' LANGUAGE C STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
CREATE OR REPLACE FUNCTION checkpoint_list(thread_id text) RETURNS json
    AS 'MODULE_PATHNAME', 'checkpoint_list_v3' LANGUAGE C STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
CREATE OR REPLACE FUNCTION checkpoint_fork_from_checkpoint(input json, now_ms bigint DEFAULT NULL)
    RETURNS json
    AS 'MODULE_PATHNAME', 'checkpoint_fork_from_checkpoint_v3' LANGUAGE C VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

-- Sections are added above this line, one per change, each opened by a
-- comment block that says what it changes and why.

-- Every upgrade script ends with the hardening (see the 0.1.0--0.2.0 header).
SELECT sandbox_persist._harden();
