-- sandbox_persist 0.2.0 -> 0.3.0. CREATE EXTENSION runs 0.1.0, 0.1.0--0.2.0
-- and then this script; ALTER EXTENSION sandbox_persist UPDATE runs it on a
-- 0.2.0 database (and after 0.1.0--0.2.0 on a 0.1.0 one).
-- What it changes is listed, section by section, below and in CHANGELOG.md.
\echo Use "ALTER EXTENSION sandbox_persist UPDATE" to load this file. \quit

------------------------------------------------------------------------------
-- Small blobs inline (issue 13). A non-empty object of at most one chunk
-- (and at most sandbox_persist.blob_inline_max bytes) is kept in its blobs
-- row: inline_codec and inline_data hold what its one chunk row would hold
-- (zstd or raw, compressed by the extension, so TOAST must not compress it
-- again: STORAGE EXTERNAL, which also lets a ranged read of a raw object
-- fetch only the TOAST pieces it needs). A put of such an object is one
-- statement and leaves one heap row and one primary-key entry instead of two
-- rows and two index entries. Both are NULL for a chunked (or empty) object;
-- existing objects stay chunked and read as before, so nothing is migrated.
-- blob_put, blob_get and blob_upload_commit now run the library's _v3
-- entry points, which know the columns (the previous ones keep serving
-- databases not yet updated); attributes are those 0.1.0 gave them.
------------------------------------------------------------------------------
ALTER TABLE blobs
    ADD COLUMN inline_codec smallint,
    ADD COLUMN inline_data bytea,
    ADD CONSTRAINT blobs_inline_codec CHECK (inline_codec IN (0, 1)),   -- 0 raw, 1 zstd
    ADD CONSTRAINT blobs_inline_whole CHECK ((inline_codec IS NULL) = (inline_data IS NULL));
ALTER TABLE blobs ALTER COLUMN inline_data SET STORAGE EXTERNAL;

CREATE OR REPLACE FUNCTION blob_put(blob_key text, body bytea, options json DEFAULT NULL,
                                    now_ms bigint DEFAULT NULL) RETURNS json
    AS 'MODULE_PATHNAME', 'blob_put_v3' LANGUAGE C VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
CREATE OR REPLACE FUNCTION blob_get(blob_key text, range_offset bigint DEFAULT NULL,
                                    range_length bigint DEFAULT NULL)
    RETURNS TABLE (record json, body bytea)
    AS 'MODULE_PATHNAME', 'blob_get_v3' LANGUAGE C STABLE ROWS 1
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
CREATE OR REPLACE FUNCTION blob_upload_commit(upload_id text, now_ms bigint DEFAULT NULL)
    RETURNS json
    AS 'MODULE_PATHNAME', 'blob_upload_commit_v3' LANGUAGE C VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

------------------------------------------------------------------------------
-- overview.blob_stored_bytes counts inline objects too (the section above):
-- their compressed bytes live in blobs.inline_data, not in chunk rows. The
-- view is otherwise the one 0.1.0 created, column for column.
------------------------------------------------------------------------------
CREATE OR REPLACE VIEW overview AS
WITH now_ms AS (
    SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now,
           sandbox_persist._reaper_ttl_ms() AS reaper_ttl
)
SELECT
    (SELECT count(*) FROM runs WHERE status = 'running')                 AS runs_running,
    (SELECT count(*) FROM runs WHERE status = 'interrupted')             AS runs_interrupted,
    (SELECT count(*) FROM runs WHERE status = 'completed')               AS runs_completed,
    (SELECT count(*) FROM runs WHERE status = 'failed')                  AS runs_failed,
    (SELECT count(*) FROM runs WHERE status = 'aborted')                 AS runs_aborted,
    (SELECT count(*) FROM runs WHERE status = 'running' AND detached_since IS NOT NULL)
                                                                          AS runs_detached,
    (SELECT count(*) FROM runs, now_ms
      WHERE status = 'running' AND detached_since IS NOT NULL AND reaper_ttl > 0
        AND detached_since <= now - reaper_ttl)                          AS runs_detached_past_ttl,
    (SELECT count(*) FROM locks, now_ms WHERE expires_at > now)          AS locks_held,
    (SELECT count(*) FROM event_logs WHERE closed_at IS NULL)            AS event_logs_open,
    (SELECT count(*) FROM blobs)                                          AS blobs,
    (SELECT coalesce(sum(size), 0) FROM blobs)                            AS blob_raw_bytes,
    (SELECT coalesce(sum(pg_column_size(c.data)), 0)
       FROM blob_chunks c JOIN blobs b ON b.version = c.version)
      + (SELECT coalesce(sum(pg_column_size(inline_data)), 0) FROM blobs) AS blob_stored_bytes,
    (SELECT count(*) FROM blobs b
      WHERE b.relied_on_at IS NOT NULL
        AND b.blob_key ~ '^sandbox-(files|artifacts)/sha256/[0-9a-f]{64}$'
        AND NOT EXISTS (SELECT 1 FROM checkpoint_blob_refs r WHERE r.blob_key = b.blob_key)
        AND NOT EXISTS (SELECT 1 FROM artifacts a WHERE a.blob_key = b.blob_key))
                                                                          AS blobs_awaiting_gc,
    (SELECT count(*) FROM blob_uploads)                                   AS uploads_open,
    (SELECT count(*) FROM attention)                                      AS attention_items,
    (SELECT to_timestamp(last_run_at / 1000.0) FROM maintenance_state)    AS maintenance_last_run,
    (SELECT last_summary FROM maintenance_state)                          AS maintenance_last_summary;

-- Sections are added above this line, one per change, each opened by a
-- comment block that says what it changes and why.

-- Every upgrade script ends with the hardening (see the 0.1.0--0.2.0 header).
SELECT sandbox_persist._harden();
