/*
 * maintenance.c
 *
 * maintain(): the bounded, idempotent housekeeping pg_cron runs every minute
 * (durable-runs.md section 7). It does only the SAFE actions A1-A9: delete
 * unreferenced content-addressed blobs past their grace, abandoned uploads,
 * long-expired lock rows, closed logs past retention and (when enabled) old
 * terminal runs; close the logs of finished runs; wake the application's
 * reaper; record watchdog items. It never changes a run, a checkpoint, a
 * transcript, a head, a lease or an instance row.
 *
 * Locking: every action takes its candidate rows with FOR UPDATE SKIP LOCKED
 * (so it never waits on application traffic and two concurrent calls never
 * double-count) and re-checks its condition in the deleting statement. A
 * short lock_timeout, scoped to the call by the function's SET clause, guards
 * the rest. Each action handles at most max_rows rows per call.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/async.h"
#include "utils/builtins.h"

#include "sandbox_persist.h"
#include "blobs.h"

PG_FUNCTION_INFO_V1(maintain);
PG_FUNCTION_INFO_V1(attention_list);
PG_FUNCTION_INFO_V1(reaper_heartbeat);

#define SP_CONTENT_KEY_PATTERN "'^sandbox-(files|artifacts)/sha256/[0-9a-f]{64}$'"
#define SP_TERMINAL "('completed', 'failed', 'aborted')"

static SpQuery maint_lock_timeout = {
	"SELECT pg_catalog.set_config('lock_timeout', '2s', true)",
	0, {InvalidOid}
};

/* A1: candidates are locked first; the delete re-checks in a fresh snapshot. */
static SpQuery maint_blob_candidates = {
	"WITH c AS (SELECT b.blob_key FROM sandbox_persist.blobs b"
	"  WHERE b.relied_on_at IS NOT NULL AND b.relied_on_at < $1"
	"    AND b.blob_key ~ " SP_CONTENT_KEY_PATTERN
	"    AND NOT EXISTS (SELECT 1 FROM sandbox_persist.checkpoint_blob_refs r WHERE r.blob_key = b.blob_key)"
	"    AND NOT EXISTS (SELECT 1 FROM sandbox_persist.artifacts a WHERE a.blob_key = b.blob_key)"
	"  ORDER BY b.relied_on_at LIMIT $2 FOR UPDATE SKIP LOCKED)"
	" SELECT coalesce(array_agg(blob_key), '{}') FROM c",
	2, {INT8OID, INT8OID}
};

static SpQuery maint_blob_delete = {
	"WITH d AS (DELETE FROM sandbox_persist.blobs b"
	"  WHERE b.blob_key = ANY ($1) AND b.relied_on_at < $2"
	"    AND NOT EXISTS (SELECT 1 FROM sandbox_persist.checkpoint_blob_refs r WHERE r.blob_key = b.blob_key)"
	"    AND NOT EXISTS (SELECT 1 FROM sandbox_persist.artifacts a WHERE a.blob_key = b.blob_key)"
	"  RETURNING b.version),"
	" x AS (DELETE FROM sandbox_persist.blob_chunks WHERE version IN (SELECT version FROM d))"
	" SELECT count(*) FROM d",
	2, {TEXTARRAYOID, INT8OID}
};

/* A2 */
static SpQuery maint_uploads = {
	"WITH c AS (SELECT upload_id FROM sandbox_persist.blob_uploads WHERE touched_at < $1"
	"  ORDER BY touched_at LIMIT $2 FOR UPDATE SKIP LOCKED),"
	" d AS (DELETE FROM sandbox_persist.blob_uploads u USING c"
	"  WHERE u.upload_id = c.upload_id AND u.touched_at < $1 RETURNING u.version),"
	" x AS (DELETE FROM sandbox_persist.blob_chunks WHERE version IN (SELECT version FROM d))"
	" SELECT count(*) FROM d",
	2, {INT8OID, INT8OID}
};

/* A3 */
static SpQuery maint_locks = {
	"WITH c AS (SELECT lock_key FROM sandbox_persist.locks WHERE expires_at < $1"
	"  ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED),"
	" d AS (DELETE FROM sandbox_persist.locks l USING c"
	"  WHERE l.lock_key = c.lock_key AND l.expires_at < $1 RETURNING 1)"
	" SELECT count(*) FROM d",
	2, {INT8OID, INT8OID}
};

/* A4: returns the closed log ids so parked readers can be woken. */
static SpQuery maint_close_logs = {
	"WITH c AS (SELECT l.log_id FROM sandbox_persist.event_logs l"
	"  JOIN sandbox_persist.runs r ON r.run_id = l.run_id"
	"  WHERE l.closed_at IS NULL AND r.status IN " SP_TERMINAL
	"    AND l.last_append_at < $1 AND r.changed_at < $1"
	"  ORDER BY l.log_id LIMIT $2 FOR UPDATE OF l SKIP LOCKED)"
	" UPDATE sandbox_persist.event_logs l SET closed_at = $3 FROM c"
	" WHERE l.log_id = c.log_id AND l.closed_at IS NULL RETURNING l.log_id",
	3, {INT8OID, INT8OID, INT8OID}
};

/* A5: whole closed logs only. */
static SpQuery maint_delete_logs = {
	"WITH c AS (SELECT log_id FROM sandbox_persist.event_logs WHERE closed_at < $1"
	"  ORDER BY closed_at LIMIT $2 FOR UPDATE SKIP LOCKED),"
	" d AS (DELETE FROM sandbox_persist.event_logs l USING c"
	"  WHERE l.log_id = c.log_id AND l.closed_at < $1 RETURNING l.log_id),"
	" e AS (DELETE FROM sandbox_persist.event_log_entries WHERE log_id IN (SELECT log_id FROM d)),"
	" p AS (DELETE FROM sandbox_persist.event_log_producers WHERE log_id IN (SELECT log_id FROM d))"
	" SELECT count(*) FROM d",
	2, {INT8OID, INT8OID}
};

/* A6: terminal runs no instance row still references. */
static SpQuery maint_runs = {
	"WITH c AS (SELECT r.run_id FROM sandbox_persist.runs r"
	"  WHERE r.status IN " SP_TERMINAL " AND r.changed_at < $1"
	"    AND NOT EXISTS (SELECT 1 FROM sandbox_persist.instances i"
	"                    WHERE i.instance_key = r.sandbox_key OR i.latest_run_id = r.run_id)"
	"  ORDER BY r.changed_at LIMIT $2 FOR UPDATE SKIP LOCKED),"
	" d AS (DELETE FROM sandbox_persist.runs r USING c"
	"  WHERE r.run_id = c.run_id AND r.status IN " SP_TERMINAL " AND r.changed_at < $1 RETURNING 1)"
	" SELECT count(*) FROM d",
	2, {INT8OID, INT8OID}
};

/* A7: $2 = reaper_ttl in ms (0 = unknown, so nothing is "due"). */
static SpQuery maint_detached = {
	"SELECT count(*), count(*) FILTER (WHERE $2 > 0 AND detached_since <= $1 - $2)"
	" FROM sandbox_persist.runs WHERE status = 'running' AND detached_since IS NOT NULL",
	2, {INT8OID, INT8OID}
};

/*
 * A8: upsert every current watchdog item; RETURNING tells which are new.
 * $1 now, $2 reaper_ttl ms, $3 sweep interval ms, $4 watchdog_idle ms, $5 max rows.
 */
static SpQuery maint_watchdog = {
	"WITH items AS ("
	"  SELECT 'reaper_missing' AS kind, r.run_id,"
	"         pg_catalog.json_build_object('detachedSince', r.detached_since)::text AS detail"
	"    FROM sandbox_persist.runs r"
	"   WHERE $2 > 0 AND $3 > 0 AND r.status = 'running' AND r.detached_since IS NOT NULL"
	"     AND r.detached_since < $1 - ($2 + 2 * $3)"
	"  UNION ALL"
	"  SELECT 'reaper_missing', '', pg_catalog.json_build_object('detachedRuns', count(*))::text"
	"    FROM sandbox_persist.runs r"
	"   WHERE $3 > 0 AND r.status = 'running' AND r.detached_since IS NOT NULL"
	"  HAVING count(*) > 0 AND NOT EXISTS (SELECT 1 FROM sandbox_persist.reaper_heartbeats h"
	"                                      WHERE h.seen_at >= $1 - 2 * $3)"
	"  UNION ALL"
	"  SELECT 'invisible_run', r.run_id, NULL FROM sandbox_persist.runs r"
	"   WHERE r.status = 'running' AND r.detached_since IS NULL AND r.changed_at < $1 - $4"
	"     AND NOT EXISTS (SELECT 1 FROM sandbox_persist.locks l"
	"                     WHERE l.lock_key = 'run-driver:' || r.run_id AND l.expires_at > $1)"
	"     AND NOT EXISTS (SELECT 1 FROM sandbox_persist.event_logs e"
	"                     WHERE e.run_id = r.run_id AND e.last_append_at >= $1 - $4)"
	"  UNION ALL"
	"  SELECT 'stuck_cancel', r.run_id, NULL FROM sandbox_persist.runs r"
	"   WHERE r.status = 'running' AND r.cancel_requested AND r.changed_at < $1 - $4"
	"  UNION ALL"
	"  SELECT 'append_after_close', e.run_id,"
	"         pg_catalog.json_build_object('appendsAfterClose', e.appends_after_close)::text"
	"    FROM sandbox_persist.event_logs e WHERE e.appends_after_close > 0)"
	" INSERT INTO sandbox_persist.attention AS a (kind, run_id, first_seen, last_seen, detail)"
	" SELECT kind, run_id, $1, $1, detail::json FROM items ORDER BY kind, run_id LIMIT $5"
	" ON CONFLICT (kind, run_id) DO UPDATE SET last_seen = EXCLUDED.last_seen, detail = EXCLUDED.detail"
	" RETURNING kind, run_id, xmax = 0",
	5, {INT8OID, INT8OID, INT8OID, INT8OID, INT8OID}
};

/* A9: items this call did not see again are resolved. */
static SpQuery maint_resolve = {
	"WITH d AS (DELETE FROM sandbox_persist.attention WHERE last_seen < $1 RETURNING 1)"
	" SELECT count(*) FROM d",
	1, {INT8OID}
};

static SpQuery maint_record = {
	"INSERT INTO sandbox_persist.maintenance_state (id, last_run_at, last_summary)"
	" VALUES (1, $1, $2)"
	" ON CONFLICT (id) DO UPDATE SET last_run_at = EXCLUDED.last_run_at,"
	" last_summary = EXCLUDED.last_summary",
	2, {INT8OID, JSONOID}
};

static SpQuery maint_attention = {
	"SELECT kind, run_id, first_seen, last_seen, detail::text FROM sandbox_persist.attention"
	" ORDER BY first_seen, kind, run_id",
	0, {InvalidOid}
};

static SpQuery maint_heartbeat = {
	"INSERT INTO sandbox_persist.reaper_heartbeats (replica, seen_at, summary) VALUES ($1, $2, $3)"
	" ON CONFLICT (replica) DO UPDATE SET seen_at = EXCLUDED.seen_at, summary = EXCLUDED.summary",
	3, {TEXTOID, INT8OID, JSONOID}
};

/* Run one counting action: its statement returns a single count. Inside SPI. */
static int64
MaintCount(SpQuery *q, SpArgs *args)
{
	int64		n = 0;

	SpExec(q, args, false, 1);
	SpGetInt64(0, 1, &n);
	return n;
}

/* Arguments (cutoff, max_rows) for the common two-argument actions. */
static SpArgs *
MaintCutoffArgs(SpArgs *args, int64 cutoff, int64 max_rows)
{
	SpArgsInit(args);
	SpArgInt64(args, cutoff);
	SpArgInt64(args, max_rows);
	return args;
}

/* A1: delete unreferenced content-addressed blobs past their grace period. */
static int64
MaintBlobs(int64 now, int64 max_rows)
{
	SpArgs		args;
	Datum		keys;
	bool		isnull;
	int64		cutoff = now - (int64) sp_blob_gc_grace_s * 1000;

	SpExec(&maint_blob_candidates, MaintCutoffArgs(&args, cutoff, max_rows), false, 1);
	keys = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	SpArgsInit(&args);
	SpArgDatum(&args, keys);
	SpArgInt64(&args, cutoff);
	return MaintCount(&maint_blob_delete, &args);
}

/* A4: close the open logs of terminal runs idle past the grace; wake their readers. */
static int64
MaintCloseLogs(int64 now, int64 max_rows)
{
	SpArgs		args;
	int			n;

	MaintCutoffArgs(&args, now - (int64) sp_event_log_close_grace_s * 1000, max_rows);
	SpArgInt64(&args, now);
	n = SpExec(&maint_close_logs, &args, false, 0);
	for (int i = 0; i < n; i++)
	{
		int64		log_id = 0;
		char		payload[32];

		SpGetInt64(i, 1, &log_id);
		snprintf(payload, sizeof(payload), INT64_FORMAT, log_id);
		Async_Notify("sandbox_persist_event_log", payload);
	}
	return n;
}

/* A8: record watchdog items; announce the new ones. Returns how many are new. */
static int64
MaintWatchdog(int64 now, int64 max_rows)
{
	SpArgs		args;
	int			n;
	int64		fresh = 0;

	SpArgsInit(&args);
	SpArgInt64(&args, now);
	SpArgInt64(&args, (int64) sp_reaper_ttl_s * 1000);
	SpArgInt64(&args, (int64) sp_reaper_sweep_interval_s * 1000);
	SpArgInt64(&args, (int64) sp_watchdog_idle_s * 1000);
	SpArgInt64(&args, max_rows);
	n = SpExec(&maint_watchdog, &args, false, 0);
	for (int i = 0; i < n; i++)
	{
		bool		inserted = false;
		StringInfoData payload;

		SpGetBool(i, 3, &inserted);
		if (!inserted)
			continue;
		fresh++;
		initStringInfo(&payload);
		appendStringInfoString(&payload, "{\"kind\":");
		SpAppendString(&payload, SpGetText(i, 1));
		appendStringInfoString(&payload, ",\"runId\":");
		SpAppendString(&payload, SpGetText(i, 2));
		appendStringInfoChar(&payload, '}');
		/* a notification payload must stay under 8000 bytes */
		if (payload.len < 7900)
			Async_Notify("sandbox_persist_attention", payload.data);
	}
	return fresh;
}

/*
 * maintain(max_rows integer, now_ms bigint) -> json: one bounded round of the
 * SAFE actions; returns (and logs) the count of each.
 */
Datum
maintain(PG_FUNCTION_ARGS)
{
	int64		max_rows;
	int64		now = SpNowMs(fcinfo, 1);
	int64		blobs, uploads, locks, closed, logs, runs, fresh, resolved;
	int64		detached = 0;
	int64		due = 0;
	SpArgs		args;
	StringInfoData summary;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("max_rows must not be null"),
				 errdetail("The value is required.")));
	max_rows = PG_GETARG_INT32(0);
	if (max_rows < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_rows must not be negative"),
				 errdetail("A value of " INT64_FORMAT " was given.", max_rows)));

	SPI_connect();
	SpArgsInit(&args);
	SpExec(&maint_lock_timeout, &args, false, 0);

	blobs = MaintBlobs(now, max_rows);
	uploads = MaintCount(&maint_uploads,
						 MaintCutoffArgs(&args, now - (int64) sp_upload_expiry_s * 1000, max_rows));
	locks = MaintCount(&maint_locks,
					   MaintCutoffArgs(&args, now - (int64) sp_lock_purge_after_s * 1000, max_rows));
	closed = MaintCloseLogs(now, max_rows);
	logs = sp_event_log_retention_s == 0 ? 0 :
		MaintCount(&maint_delete_logs,
				   MaintCutoffArgs(&args, now - (int64) sp_event_log_retention_s * 1000, max_rows));
	runs = sp_run_retention_s == 0 ? 0 :
		MaintCount(&maint_runs,
				   MaintCutoffArgs(&args, now - (int64) sp_run_retention_s * 1000, max_rows));

	/* A7: wake the application's reaper when detached runs exist */
	SpArgsInit(&args);
	SpArgInt64(&args, now);
	SpArgInt64(&args, (int64) sp_reaper_ttl_s * 1000);
	SpExec(&maint_detached, &args, false, 1);
	SpGetInt64(0, 1, &detached);
	SpGetInt64(0, 2, &due);
	if (detached > 0)
	{
		char		payload[64];

		snprintf(payload, sizeof(payload), "{\"detached\": " INT64_FORMAT ", \"due\": " INT64_FORMAT "}",
				 detached, due);
		Async_Notify("sandbox_persist_reaper", payload);
	}

	fresh = MaintWatchdog(now, max_rows);
	SpArgsInit(&args);
	SpArgInt64(&args, now);
	resolved = MaintCount(&maint_resolve, &args);

	initStringInfo(&summary);
	appendStringInfo(&summary,
					 "{\"blobsDeleted\":" INT64_FORMAT ",\"uploadsRemoved\":" INT64_FORMAT
					 ",\"locksPurged\":" INT64_FORMAT ",\"logsClosed\":" INT64_FORMAT
					 ",\"logsDeleted\":" INT64_FORMAT ",\"runsDeleted\":" INT64_FORMAT
					 ",\"detachedRuns\":" INT64_FORMAT ",\"dueRuns\":" INT64_FORMAT
					 ",\"attentionNew\":" INT64_FORMAT ",\"attentionResolved\":" INT64_FORMAT "}",
					 blobs, uploads, locks, closed, logs, runs, detached, due, fresh, resolved);
	SpArgsInit(&args);
	SpArgInt64(&args, now);
	SpArgTextLen(&args, summary.data, summary.len);
	SpExec(&maint_record, &args, false, 0);
	SPI_finish();

	ereport(LOG,
			(errmsg("sandbox_persist maintenance: %s", summary.data)));
	PG_RETURN_DATUM(SpJsonResult(&summary));
}

/* attention_list() -> json: the watchdog's open items, oldest first. */
Datum
attention_list(PG_FUNCTION_ARGS)
{
	MemoryContext outer = CurrentMemoryContext;
	MemoryContext spi;
	StringInfoData buf;
	SpArgs		args;
	int			n;

	SPI_connect();
	SpArgsInit(&args);
	n = SpExec(&maint_attention, &args, true, 0);
	spi = MemoryContextSwitchTo(outer);
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '[');
	for (int i = 0; i < n; i++)
	{
		bool		first = true;
		char	   *run_id = SpGetText(i, 2);
		char	   *detail = SpGetText(i, 5);
		int64		first_seen = 0;
		int64		last_seen = 0;

		SpGetInt64(i, 3, &first_seen);
		SpGetInt64(i, 4, &last_seen);
		appendStringInfoString(&buf, i ? ",{" : "{");
		SpAppendKey(&buf, &first, "kind");
		SpAppendString(&buf, SpGetText(i, 1));
		if (run_id[0] != '\0')
		{
			SpAppendKey(&buf, &first, "runId");
			SpAppendString(&buf, run_id);
		}
		SpAppendKey(&buf, &first, "firstSeen");
		SpAppendInt64(&buf, first_seen);
		SpAppendKey(&buf, &first, "lastSeen");
		SpAppendInt64(&buf, last_seen);
		if (detail != NULL)
		{
			SpAppendKey(&buf, &first, "detail");
			appendStringInfoString(&buf, detail);
		}
		appendStringInfoChar(&buf, '}');
	}
	appendStringInfoChar(&buf, ']');
	MemoryContextSwitchTo(spi);
	SPI_finish();
	PG_RETURN_DATUM(SpJsonResult(&buf));
}

/*
 * reaper_heartbeat(replica text, summary json, now_ms bigint): the app reports
 * a finished reaper sweep; feeds the watchdog's reaper_missing rule.
 */
Datum
reaper_heartbeat(PG_FUNCTION_ARGS)
{
	char	   *replica = CheckIdArg(fcinfo, 0, "replica", SP_ID_MAX_BYTES);
	SpArgs		args;

	SpArgsInit(&args);
	SpArgText(&args, replica);
	SpArgInt64(&args, SpNowMs(fcinfo, 2));
	if (PG_ARGISNULL(1))
		SpArgNull(&args);
	else
		SpArgDatum(&args, PG_GETARG_DATUM(1));
	SPI_connect();
	SpExec(&maint_heartbeat, &args, false, 0);
	SPI_finish();
	PG_RETURN_VOID();
}
