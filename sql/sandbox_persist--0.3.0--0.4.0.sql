-- sandbox_persist 0.3.0 -> 0.4.0. CREATE EXTENSION runs 0.1.0, the upgrade
-- scripts up to 0.3.0 and then this one; ALTER EXTENSION sandbox_persist
-- UPDATE runs it on a 0.3.0 database (after the earlier scripts on older ones).
-- What it changes is listed, section by section, below and in CHANGELOG.md.
\echo Use "ALTER EXTENSION sandbox_persist UPDATE" to load this file. \quit

-- Failover safety (issue 19). An asynchronous standby promoted after a crash
-- of its primary can lack commits the primary acknowledged. Two promises are
-- kept across that:
-- * Fences never repeat. They now carry the timeline they were granted on
--   (fence = (timeline - 1) * 2^40 + counter, see docs/contract/failover.md
--   §1); that needs no schema change, only the library. Nothing is
--   rewritten here: a fence granted before the upgrade is a plain counter
--   and every later one is at least as large plus one.
-- * Event-log offsets are vouched for. Every entry gets a running digest (the
--   XOR of a 64-bit hash of (seq, chunk text) over the entries up to it), the
--   log row keeps the tail's, and event_log_read_verified refuses a resume
--   token (seq + digest) past the tail or naming other content (SP405)
--   instead of continuing a different stream. The digests of existing
--   entries are computed here, by the same hash the library uses.
ALTER TABLE event_log_entries ADD COLUMN digest bigint;
UPDATE event_log_entries e SET digest = d.digest
  FROM (SELECT h.log_id, h.seq,
               pg_catalog.bit_xor(h.h) OVER (PARTITION BY h.log_id ORDER BY h.seq) AS digest
          FROM (SELECT x.log_id, x.seq,
                       ('x' || pg_catalog.encode(pg_catalog.substr(pg_catalog.sha256(
                           pg_catalog.int8send(x.seq) || pg_catalog.convert_to(x.chunk::text, 'UTF8')),
                           1, 8), 'hex'))::pg_catalog.bit(64)::bigint AS h
                  FROM event_log_entries x) h) d
 WHERE e.log_id = d.log_id AND e.seq = d.seq;
ALTER TABLE event_log_entries ALTER COLUMN digest SET NOT NULL;
ALTER TABLE event_logs ADD COLUMN tail_digest bigint NOT NULL DEFAULT 0;
UPDATE event_logs l SET tail_digest = e.digest
  FROM event_log_entries e
 WHERE e.log_id = l.log_id AND e.seq = l.tail_seq;
COMMENT ON COLUMN event_log_entries.digest IS
    'Running digest of the log up to this entry: XOR over entries 1..seq of the first 8 bytes of sha256(int8send(seq) || chunk text); the second half of a resume token.';
COMMENT ON COLUMN event_logs.tail_digest IS
    'The running digest of the entry at tail_seq (0 for an empty log), continued by the next append.';

CREATE FUNCTION event_log_read_verified(run_id text, after_seq bigint, after_digest text,
                                        max_rows integer DEFAULT 1000) RETURNS json
    AS 'MODULE_PATHNAME', 'event_log_read_verified' LANGUAGE C STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION event_log_read_verified(text, bigint, text, integer) IS
    'Durable event log read of a resume token: like event_log_read, with tailDigest and each entry''s digest; with after_digest, an offset past the tail or whose entry has another digest is SP405 (EVENT_LOG_OFFSET_DIVERGED), never a different stream.';
COMMENT ON FUNCTION event_log_append(text, json, json) IS
    'Durable event log append: adds the chunks array to the log of run_id; options {producerId, producerSeq, fenceEpoch?, withDigests?} make it idempotent and fenced (SP403, SP404). Returns the sequence numbers given, or [{seq, digest}] with withDigests.';

-- Sections are added above this line, one per change, each opened by a
-- comment block that says what it changes and why.

-- Every upgrade script ends with the hardening (see the 0.1.0--0.2.0 header).
SELECT sandbox_persist._harden();
