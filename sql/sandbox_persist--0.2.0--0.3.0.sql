-- sandbox_persist 0.2.0 -> 0.3.0. CREATE EXTENSION runs 0.1.0, 0.1.0--0.2.0
-- and then this script; ALTER EXTENSION sandbox_persist UPDATE runs it on a
-- 0.2.0 database (and after 0.1.0--0.2.0 on a 0.1.0 one).
-- What it changes is listed, section by section, below and in CHANGELOG.md.
\echo Use "ALTER EXTENSION sandbox_persist UPDATE" to load this file. \quit

------------------------------------------------------------------------------
-- runs: updates that can be HOT (heap-only tuples).
-- Every write sets runs.changed_at (the server clock of the last write: the
-- watchdog's "row activity", A4's and A6's "unchanged that long"), and
-- runs_running and runs_terminal were keyed on it, so no update of a run could
-- be HOT: each rewrote all six indexes. The two partial indexes are now keyed
-- on a new column, status_changed_at, the server clock of the last change of
-- status (set at creation and when a patch changes the status, never by a
-- durable-field, usage, error or finishedAt patch). It is never later than
-- changed_at, so "status_changed_at < cutoff" is a safe bound for a scan
-- that then tests changed_at itself: A6 (maintain) walks runs_terminal in
-- status_changed_at order, and the watchdog's invisible_run and stuck_cancel
-- bound their runs_running scan the same way (their conditions unchanged).
-- Existing rows take their changed_at (the latest their status can have
-- changed); 0, the default, means "unknown, as old as possible", which keeps
-- the bound safe for a writer that does not set it. fillfactor 90 leaves
-- room on each page for the new version of a row, so an update stays on its
-- page; it applies to pages written from now on.
------------------------------------------------------------------------------
ALTER TABLE runs ADD COLUMN status_changed_at bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN runs.status_changed_at IS
    'Server clock (epoch ms) of the last change of status; never later than changed_at. 0 = unknown.';
UPDATE runs SET status_changed_at = changed_at;
DROP INDEX runs_running;
DROP INDEX runs_terminal;
CREATE INDEX runs_running ON runs (status_changed_at) WHERE status = 'running';
CREATE INDEX runs_terminal ON runs (status_changed_at)
    WHERE status IN ('completed', 'failed', 'aborted');
ALTER TABLE runs SET (fillfactor = 90);

-- _watchdog_items keeps its signature and, like every function of the
-- extension, SECURITY DEFINER with the pinned search_path (CREATE OR REPLACE
-- would otherwise reset both).
CREATE OR REPLACE FUNCTION _watchdog_items(now_ms bigint, reaper_ttl_ms bigint,
                                           sweep_interval_ms bigint, idle_ms bigint)
RETURNS TABLE (kind text, run_id text, detail json)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT 'reaper_missing', r.run_id, json_build_object('detachedSince', r.detached_since)
      FROM sandbox_persist.runs r
     WHERE reaper_ttl_ms > 0 AND sweep_interval_ms > 0
       AND r.status = 'running' AND r.detached_since IS NOT NULL
       AND r.detached_since < now_ms - (reaper_ttl_ms + 2 * sweep_interval_ms)
    UNION ALL
    SELECT 'reaper_missing', '', json_build_object('detachedRuns', count(*))
      FROM sandbox_persist.runs r
     WHERE sweep_interval_ms > 0 AND r.status = 'running' AND r.detached_since IS NOT NULL
    HAVING count(*) > 0
       AND NOT EXISTS (SELECT 1 FROM sandbox_persist.reaper_heartbeats h
                        WHERE h.seen_at >= now_ms - 2 * sweep_interval_ms)
    UNION ALL
    SELECT 'invisible_run', r.run_id, NULL
      FROM sandbox_persist.runs r
     WHERE r.status = 'running' AND r.detached_since IS NULL
       AND r.status_changed_at < now_ms - idle_ms AND r.changed_at < now_ms - idle_ms
       AND NOT EXISTS (SELECT 1 FROM sandbox_persist.locks l
                        WHERE l.lock_key = 'run-driver:' || r.run_id AND l.expires_at > now_ms)
       AND NOT EXISTS (SELECT 1 FROM sandbox_persist.event_logs e
                        WHERE e.run_id = r.run_id AND e.last_append_at >= now_ms - idle_ms)
    UNION ALL
    SELECT 'stuck_cancel', r.run_id, NULL
      FROM sandbox_persist.runs r
     WHERE r.status = 'running' AND r.cancel_requested
       AND r.status_changed_at < now_ms - idle_ms AND r.changed_at < now_ms - idle_ms
    UNION ALL
    SELECT 'append_after_close', e.run_id,
           json_build_object('appendsAfterClose', e.appends_after_close)
      FROM sandbox_persist.event_logs e
     WHERE e.appends_after_close > 0
$$;

-- Sections are added above this line, one per change, each opened by a
-- comment block that says what it changes and why.

-- Every upgrade script ends with the hardening (see the 0.1.0--0.2.0 header).
SELECT sandbox_persist._harden();
