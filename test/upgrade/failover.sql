-- T19 (docs/contract/failover.md §4): after ALTER EXTENSION ... UPDATE to
-- 0.4.0, fences keep growing past every fence granted before the update (on
-- the same timeline and after a timeline change), and the digests the update
-- computed for the stored event-log entries are the ones the library
-- computes, so every stored entry is a resume token the log vouches for.
-- Run by data.sh on the upgraded database with
--   -v thread_fences='{thread:fence,...}' -v lock_seq=<last value>
-- read before the update; prints one 'ok'/'not ok' line per check.
\set ON_ERROR_STOP 1
\pset format unaligned
\pset tuples_only on
BEGIN;
SELECT CASE WHEN count(*) = 0 THEN 'ok' ELSE 'not ok' END
       || ' T19.1 every stored digest is the XOR of the SQL entry hashes up to it (' || count(*) || ' differ)'
  FROM (SELECT e.digest, bit_xor(('x' || encode(substr(sha256(int8send(e.seq) || convert_to(e.chunk::text, 'UTF8')), 1, 8),
                                                'hex'))::bit(64)::bigint)
                   OVER (PARTITION BY e.log_id ORDER BY e.seq) AS recomputed
          FROM sandbox_persist.event_log_entries e) d
 WHERE d.digest <> d.recomputed;
SELECT CASE WHEN count(*) = 0 THEN 'ok' ELSE 'not ok' END
       || ' T19.2 every log row keeps its tail entry''s digest (' || count(*) || ' differ)'
  FROM sandbox_persist.event_logs l
  LEFT JOIN sandbox_persist.event_log_entries e ON e.log_id = l.log_id AND e.seq = l.tail_seq
 WHERE l.tail_digest IS DISTINCT FROM coalesce(e.digest, 0);
SELECT CASE WHEN count(*) > 0 AND bool_and((sandbox_persist.event_log_read_verified(
                l.run_id, e.seq, lpad(to_hex(e.digest), 16, '0'), 0)->>'tail')::bigint = l.tail_seq)
            THEN 'ok' ELSE 'not ok' END
       || ' T19.3 every stored entry (' || count(*) || ') resumes as a verified token'
  FROM sandbox_persist.event_log_entries e JOIN sandbox_persist.event_logs l USING (log_id);
-- the old fences: expire every lease, then take each thread again
UPDATE sandbox_persist.checkpoint_threads SET owner_token = NULL, lease_expires_at = NULL;
CREATE TEMP TABLE before_fences AS
    SELECT key AS thread_id, value::bigint AS fence FROM json_each_text(:'thread_fences'::json);
SELECT CASE WHEN count(*) > 0 AND bool_and((sandbox_persist.checkpoint_acquire_writer(b.thread_id, 1000)->>'fence')::bigint > b.fence)
            THEN 'ok' ELSE 'not ok' END
       || ' T19.4 each of ' || count(*) || ' threads acquired after the update gets a fence above its fence from before'
  FROM before_fences b;
SELECT CASE WHEN (sandbox_persist.lock_acquire('t19-lock', 1000)->>'fence')::bigint > :lock_seq
            THEN 'ok' ELSE 'not ok' END || ' T19.5 a lock granted after the update gets a fence above every one before';
UPDATE sandbox_persist.checkpoint_threads SET owner_token = NULL, lease_expires_at = NULL;
SET LOCAL sandbox_persist.test_timeline = 2;
SELECT CASE WHEN bool_and((sandbox_persist.checkpoint_acquire_writer(b.thread_id, 1000)->>'fence')::bigint > 1099511627776)
            THEN 'ok' ELSE 'not ok' END
       || ' T19.6 after a timeline change every old thread jumps past 2^40'
  FROM before_fences b;
SELECT CASE WHEN (sandbox_persist.lock_acquire('t19-lock-2', 1000)->>'fence')::bigint = 1099511627777
            THEN 'ok' ELSE 'not ok' END || ' T19.7 and the lock sequence to 2^40 + 1';
ROLLBACK;
