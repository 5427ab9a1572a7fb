/*
 * maintenance.c
 *
 * maintain(): the bounded, idempotent housekeeping pg_cron runs every minute
 * (docs/contract/maintenance.md). It does only the SAFE actions A1-A13: delete
 * unreferenced content-addressed blobs past their grace, abandoned uploads,
 * long-expired lock rows, closed logs past retention and (when enabled) old
 * terminal runs; close the logs of finished runs; end the logs whose producer
 * is gone with a terminal RUN_ERROR chunk (A10); wake the application's
 * reaper; record watchdog items; collect the conversation blocks of deleted
 * checkpoints (A11, conversations.c); and, when sandbox_persist.blob_recompress is on, rewrite
 * lz4 blobs as zstd without changing their bytes (A12, blob_recompress.c); and
 * purge expired and detached durable streams (A13, stream_purge.c). It never changes a run, a checkpoint, a transcript, a
 * head, a lease or an instance row. _maintenance_backlog() counts, with the
 * same conditions, what the collecting actions would delete (for metrics()).
 *
 * Locking: every action takes its candidate rows with FOR UPDATE SKIP LOCKED
 * (so it never waits on application traffic and two concurrent calls never
 * double-count) and re-checks its condition in the deleting statement. A
 * short lock_timeout, set by the function's own SET clause (so it ends with
 * the call), guards the rest. Each action handles at most max_rows rows per call.
 *
 * A10 takes the log row lock that every append holds until commit (event_log.c),
 * so an append in flight makes maintenance skip that log, and an append that
 * waited for A10 appends after the close (counted as appends_after_close, or
 * reopening the log under event_log_reopen_on_append). The liveness test reads
 * runs and locks without locking them: a driver that takes run-driver:<runId>
 * after that read and appends is such an append after close.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "catalog/namespace.h"
#include "commands/async.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "sandbox_persist.h"
#include "blobs.h"
#include "checkpoints.h"
#include "maintenance_health.h"
#include "streams.h"

PG_FUNCTION_INFO_V1(maintain);
PG_FUNCTION_INFO_V1(attention_list);
PG_FUNCTION_INFO_V1(reaper_heartbeat);
PG_FUNCTION_INFO_V1(_reaper_ttl_ms);
PG_FUNCTION_INFO_V1(_maintenance_backlog);

/* max_rows of maintain when left out or NULL: the SQL signature's DEFAULT. */
#define MAINT_DEFAULT_ROWS 100000

/*
 * A backlog is counted up to this many rows per action (docs/monitoring.md):
 * the count then says "at least", and a scrape never reads a whole table.
 */
#define MAINT_BACKLOG_MAX 1000

/*
 * The most rows one statement of a collecting action takes: a call drains a
 * larger max_rows in batches of this size, within the time budget.
 */
#define MAINT_BATCH_ROWS 1000

/*
 * The most watchdog items recorded of one kind, the oldest (docs/contract/
 * maintenance.md §3): attention stays small however many runs qualify, and
 * judging it reads no more than that many of each.
 */
#define MAINT_ATTENTION_PER_KIND 100

/*
 * What each collecting action may take, given its cutoff parameter: one home,
 * read by the action and by _maintenance_backlog(), so the GC backlog a
 * monitor sees is exactly what the next rounds would collect.
 */
#define MAINT_BLOB_UNREFERENCED \
	"NOT EXISTS (SELECT 1 FROM sandbox_persist.checkpoint_blob_refs r WHERE r.blob_key = b.blob_key)" \
	" AND NOT EXISTS (SELECT 1 FROM sandbox_persist.artifacts a WHERE a.blob_key = b.blob_key)"
#define MAINT_UPLOAD_EXPIRED(cutoff) "touched_at < " cutoff
#define MAINT_LOCK_PURGEABLE(cutoff) "expires_at < " cutoff
#define MAINT_LOG_DELETABLE(cutoff) "closed_at < " cutoff

/*
 * A1 looks at two kinds of blob, at most $1 of each: those put or headed
 * before the grace cutoff $2 and not settled (the blobs_gc index) and those
 * that lost a reference after they were settled (blob_gc_queue, filled by the
 * reference tables' triggers). Both are locked (SKIP LOCKED: never wait on
 * the application). It returns the keys and the queue entries it may drop
 * once they are handled: every entry looked at but those whose blob another
 * transaction holds, which wait for the next round.
 */
static SpQuery maint_blob_candidates = {
	"WITH q AS (SELECT ctid AS entry, blob_key FROM sandbox_persist.blob_gc_queue"
	"  ORDER BY queued_at LIMIT $1 FOR UPDATE SKIP LOCKED),"
	" relied AS (SELECT b.blob_key FROM sandbox_persist.blobs b"
	"  WHERE b.relied_on_at < $2 AND NOT b.gc_settled"
	"  ORDER BY b.relied_on_at LIMIT $1 FOR UPDATE SKIP LOCKED),"
	" queued AS (SELECT b.blob_key FROM sandbox_persist.blobs b"
	"  WHERE b.blob_key IN (SELECT q.blob_key FROM q) AND b.gc_settled FOR UPDATE SKIP LOCKED)"
	" SELECT ARRAY(SELECT relied.blob_key FROM relied UNION SELECT queued.blob_key FROM queued) AS keys,"
	"  ARRAY(SELECT q.entry FROM q WHERE q.blob_key IN (SELECT queued.blob_key FROM queued)"
	"        OR NOT EXISTS (SELECT 1 FROM sandbox_persist.blobs b"
	"                       WHERE b.blob_key = q.blob_key AND b.gc_settled)) AS entries",
	2, {INT8OID, INT8OID}
};

/* A1: the candidates ($1) still collectable in a fresh snapshot, with their chunks. */
static SpQuery maint_blob_delete = {
	"WITH d AS (DELETE FROM sandbox_persist.blobs b"
	"  WHERE b.blob_key = ANY ($1) AND b.relied_on_at < $2"
	"    AND b.blob_key ~ " SP_SQL_CONTENT_KEY_REGEX " AND " MAINT_BLOB_UNREFERENCED
	"  RETURNING b.version),"
	" x AS (DELETE FROM sandbox_persist.blob_chunks WHERE version IN (SELECT version FROM d))"
	" SELECT count(*) FROM d",
	2, {TEXTARRAYOID, INT8OID}
};

/*
 * A1: a candidate that stays is settled when something references it (or it
 * is no content address): it leaves blobs_gc until the queue brings it back.
 * One the queue brought back that is unreferenced but within its grace goes
 * back to blobs_gc, to be collected once past it.
 */
static SpQuery maint_blob_settle = {
	"UPDATE sandbox_persist.blobs b"
	" SET gc_settled = (b.blob_key !~ " SP_SQL_CONTENT_KEY_REGEX " OR NOT (" MAINT_BLOB_UNREFERENCED "))"
	" WHERE b.blob_key = ANY ($1)"
	"   AND b.gc_settled IS DISTINCT FROM"
	"       (b.blob_key !~ " SP_SQL_CONTENT_KEY_REGEX " OR NOT (" MAINT_BLOB_UNREFERENCED "))",
	1, {TEXTARRAYOID}
};

/*
 * A1: blobs still within their grace ($1) that something already references
 * are settled at once, at most $2 (the oldest first), so blobs_gc holds only
 * what may yet be collected and counting it stays cheap however many blobs a
 * day brings. Returns how many were settled.
 */
static SpQuery maint_blob_settle_recent = {
	"WITH c AS (SELECT b.blob_key FROM sandbox_persist.blobs b"
	"  WHERE b.relied_on_at >= $1 AND NOT b.gc_settled AND NOT (" MAINT_BLOB_UNREFERENCED ")"
	"  ORDER BY b.relied_on_at LIMIT $2 FOR UPDATE SKIP LOCKED),"
	" s AS (UPDATE sandbox_persist.blobs b SET gc_settled = true FROM c"
	"  WHERE b.blob_key = c.blob_key RETURNING 1)"
	" SELECT count(*) FROM s",
	2, {INT8OID, INT8OID}
};

static SpQuery maint_blob_dequeue = {
	"DELETE FROM sandbox_persist.blob_gc_queue WHERE ctid = ANY ($1)",
	1, {TIDARRAYOID}
};

/* A2 */
static SpQuery maint_uploads = {
	"WITH c AS (SELECT upload_id FROM sandbox_persist.blob_uploads WHERE " MAINT_UPLOAD_EXPIRED("$1")
	"  ORDER BY touched_at LIMIT $2 FOR UPDATE SKIP LOCKED),"
	" d AS (DELETE FROM sandbox_persist.blob_uploads u USING c"
	"  WHERE u.upload_id = c.upload_id AND u.touched_at < $1 RETURNING u.version),"
	" x AS (DELETE FROM sandbox_persist.blob_chunks WHERE version IN (SELECT version FROM d))"
	" SELECT count(*) FROM d",
	2, {INT8OID, INT8OID}
};

/* A3 */
static SpQuery maint_locks = {
	"WITH c AS (SELECT lock_key FROM sandbox_persist.locks WHERE " MAINT_LOCK_PURGEABLE("$1")
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
	"  WHERE l.closed_at IS NULL AND r.status IN " SP_SQL_RUN_TERMINAL
	"    AND l.last_append_at < $1 AND r.changed_at < $1"
	"  ORDER BY l.log_id LIMIT $2 FOR UPDATE OF l SKIP LOCKED)"
	" UPDATE sandbox_persist.event_logs l SET closed_at = $3 FROM c"
	" WHERE l.log_id = c.log_id AND l.closed_at IS NULL RETURNING l.log_id",
	3, {INT8OID, INT8OID, INT8OID}
};

/*
 * A10: open logs with no append before $1 whose producer is gone: the run is
 * unrecorded or running (terminal runs are A4's, interrupted runs wait for a
 * person), and no run-driver:<runId> lock is held and unexpired at $3. The
 * terminal chunk ($4 the message) takes the next sequence number; closing and
 * appending happen under the log row lock, as an append does. last_append_at
 * keeps the producer's last append (the watchdog's invisible_run reads it).
 */
/* The logs A10 ends, picked and locked ($1-$3 as above). */
#define MAINT_LOST_LOGS_PICK \
	"  WHERE l.closed_at IS NULL AND l.last_append_at < $1" \
	"    AND NOT EXISTS (SELECT 1 FROM sandbox_persist.runs r" \
	"                    WHERE r.run_id = l.run_id AND r.status <> " SP_SQL_RUN_RUNNING ")" \
	"    AND NOT EXISTS (SELECT 1 FROM sandbox_persist.locks k" \
	"                    WHERE k.lock_key = " SP_SQL_Q(SP_LOCK_RUN_DRIVER_PREFIX) " || l.run_id" \
	"                      AND k.expires_at > $3)" \
	"  ORDER BY l.log_id LIMIT $2 FOR UPDATE OF l SKIP LOCKED),"

/*
 * The terminal chunk continues the log's running digest and takes the
 * epoch an append would ($5, the current epoch: a transition when it is above
 * the log's last, docs/contract/streams.md §1); lost_tail_seq records its
 * sequence number, which the overview counts by.
 */
static SpQuery maint_lost_logs = {
	"WITH c AS (SELECT l.log_id, l.run_id, l.tail_seq, l.tail_digest FROM sandbox_persist.event_logs l"
	MAINT_LOST_LOGS_PICK
	" k AS MATERIALIZED (SELECT c.log_id, c.tail_seq + 1 AS seq, c.tail_digest,"
	"  pg_catalog.json_build_object('type', " SP_SQL_Q(SP_CHUNK_RUN_ERROR) ","
	"    'runId', c.run_id, 'timestamp', $3, 'message', $4, 'code', " SP_SQL_Q(SP_PRODUCER_LOST_CODE) ","
	"    'error', pg_catalog.json_build_object('message', $4, 'code', "
	SP_SQL_Q(SP_PRODUCER_LOST_CODE) ")) AS chunk FROM c),"
	" h AS MATERIALIZED (SELECT k.log_id, k.seq, k.chunk,"
	"  k.tail_digest # " SP_SQL_ENTRY_HASH("k.seq", "k.chunk") " AS digest FROM k),"
	" e AS (INSERT INTO sandbox_persist.event_log_entries (log_id, seq, chunk, digest)"
	"  SELECT h.log_id, h.seq, h.chunk, h.digest FROM h)"
	" UPDATE sandbox_persist.event_logs l SET tail_seq = h.seq, closed_at = $3, tail_digest = h.digest,"
	"  lost_tail_seq = h.seq,"
	"  epoch_first_seqs = CASE WHEN $5 > " SP_SQL_LOG_LAST_EPOCH("l.epochs")
	"    THEN coalesce(l.epoch_first_seqs, '{}') || h.seq ELSE l.epoch_first_seqs END,"
	"  epochs = CASE WHEN $5 > " SP_SQL_LOG_LAST_EPOCH("l.epochs")
	"    THEN coalesce(l.epochs, '{}') || $5 ELSE l.epochs END"
	"   FROM h WHERE l.log_id = h.log_id RETURNING l.log_id",
	5, {INT8OID, INT8OID, INT8OID, TEXTOID, INT8OID}
};

/* A5: whole closed logs only. */
static SpQuery maint_delete_logs = {
	"WITH c AS (SELECT log_id FROM sandbox_persist.event_logs WHERE " MAINT_LOG_DELETABLE("$1")
	"  ORDER BY closed_at LIMIT $2 FOR UPDATE SKIP LOCKED),"
	" d AS (DELETE FROM sandbox_persist.event_logs l USING c"
	"  WHERE l.log_id = c.log_id AND l.closed_at < $1 RETURNING l.log_id),"
	" e AS (DELETE FROM sandbox_persist.event_log_entries WHERE log_id IN (SELECT log_id FROM d)),"
	" p AS (DELETE FROM sandbox_persist.event_log_producers WHERE log_id IN (SELECT log_id FROM d))"
	" SELECT count(*) FROM d",
	2, {INT8OID, INT8OID}
};

/*
 * A6: terminal runs no instance row still references and whose event log (if
 * any) is closed, so maintenance can still close it. Candidates are locked
 * first; the delete re-checks everything in a fresh snapshot. The bound on
 * status_changed_at (never later than changed_at, so it drops no candidate)
 * lets runs_terminal give only the runs old enough, oldest first.
 */
#define MAINT_RUN_DELETABLE_BEFORE(cutoff) \
	"r.status IN " SP_SQL_RUN_TERMINAL " AND r.status_changed_at < " cutoff \
	" AND r.changed_at < " cutoff \
	" AND NOT EXISTS (SELECT 1 FROM sandbox_persist.instances i" \
	"                 WHERE i.instance_key = r.sandbox_key OR i.latest_run_id = r.run_id)" \
	" AND NOT EXISTS (SELECT 1 FROM sandbox_persist.event_logs e" \
	"                 WHERE e.run_id = r.run_id AND e.closed_at IS NULL)"
#define MAINT_RUN_DELETABLE MAINT_RUN_DELETABLE_BEFORE("$2")

static SpQuery maint_run_candidates = {
	"WITH c AS (SELECT r.run_id FROM sandbox_persist.runs r WHERE " MAINT_RUN_DELETABLE
	"  ORDER BY r.status_changed_at LIMIT $1 FOR UPDATE SKIP LOCKED)"
	" SELECT coalesce(array_agg(run_id), '{}') FROM c",
	2, {INT8OID, INT8OID}
};

static SpQuery maint_run_delete = {
	"WITH d AS (DELETE FROM sandbox_persist.runs r"
	"  WHERE r.run_id = ANY ($1) AND " MAINT_RUN_DELETABLE " RETURNING 1)"
	" SELECT count(*) FROM d",
	2, {TEXTARRAYOID, INT8OID}
};

/*
 * A7: $1 = the due cutoff (now - reaper_ttl, saturated), $2 = reaper_ttl in
 * ms (0 = unknown, so nothing is "due").
 */
static SpQuery maint_detached = {
	"SELECT count(*) AS detached, count(*) FILTER (WHERE $2 > 0 AND detached_since <= $1) AS due"
	" FROM sandbox_persist.runs WHERE status = " SP_SQL_RUN_RUNNING " AND detached_since IS NOT NULL",
	2, {INT8OID, INT8OID}
};

/*
 * A8 and A9 in one statement, judging the items once: the items of
 * _watchdog_items(now, reaper_ttl, sweep_interval, idle, per_kind $6), which
 * lists the oldest MAINT_ATTENTION_PER_KIND of each kind, that are not
 * recorded yet are recorded (at most $5); recorded items, least recently seen
 * first (at most $5), are refreshed while they hold and resolved (deleted)
 * once they do not. One row per new item (kind, run_id), then one row with
 * the count resolved.
 */
static SpQuery maint_watchdog = {
	"WITH w AS MATERIALIZED (SELECT * FROM sandbox_persist._watchdog_items($1, $2, $3, $4, $6::integer)),"
	" fresh AS (INSERT INTO sandbox_persist.attention (kind, run_id, first_seen, last_seen, detail)"
	"           SELECT w.kind, w.run_id, $1, $1, w.detail FROM w"
	"            WHERE NOT EXISTS (SELECT 1 FROM sandbox_persist.attention a"
	"                               WHERE a.kind = w.kind AND a.run_id = w.run_id)"
	"            ORDER BY w.kind, w.run_id LIMIT $5"
	"           ON CONFLICT (kind, run_id) DO NOTHING RETURNING kind, run_id),"
	" batch AS (SELECT a.kind, a.run_id FROM sandbox_persist.attention a WHERE a.last_seen < $1"
	"           ORDER BY a.last_seen LIMIT $5 FOR UPDATE SKIP LOCKED),"
	" refreshed AS (UPDATE sandbox_persist.attention a SET last_seen = $1, detail = w.detail"
	"               FROM batch b JOIN w ON w.kind = b.kind AND w.run_id = b.run_id"
	"               WHERE a.kind = b.kind AND a.run_id = b.run_id RETURNING 1),"
	" resolved AS (DELETE FROM sandbox_persist.attention a USING batch b"
	"              WHERE a.kind = b.kind AND a.run_id = b.run_id"
	"                AND NOT EXISTS (SELECT 1 FROM w WHERE w.kind = b.kind AND w.run_id = b.run_id)"
	"              RETURNING 1)"
	" SELECT fresh.kind, fresh.run_id, NULL::bigint AS items_resolved FROM fresh"
	" UNION ALL SELECT NULL, NULL, (SELECT count(*) FROM resolved)",
	6, {INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID}
};

/* The round: when, its summary and its wall-clock duration. */
static SpQuery maint_record = {
	"INSERT INTO sandbox_persist.maintenance_state (id, last_run_at, last_summary, last_duration_ms)"
	" VALUES (1, $1, $2, $3)"
	" ON CONFLICT (id) DO UPDATE SET last_run_at = EXCLUDED.last_run_at,"
	" last_summary = EXCLUDED.last_summary, last_duration_ms = EXCLUDED.last_duration_ms",
	3, {INT8OID, JSONOID, INT8OID}
};

/*
 * _maintenance_backlog: the rows each collecting action would take now,
 * without max_rows but counted up to $6 (MAINT_BACKLOG_MAX), so a monitor's
 * read costs the same however large a backlog grows. A NULL cutoff (the
 * action is off) counts nothing.
 */
/* The rows of `table` (with alias r) meeting `condition`, counted up to `cap`. */
#define MAINT_CAPPED_COUNT(table, condition, cap) \
	"(SELECT count(*) FROM (SELECT FROM sandbox_persist." table " r WHERE " condition \
	" LIMIT " cap ") k)"

static SpQuery maint_backlog = {
	"SELECT sandbox_persist._blobs_awaiting_gc($1, $6) AS blobs,"
	" " MAINT_CAPPED_COUNT("blob_uploads", MAINT_UPLOAD_EXPIRED("$2"), "$6") " AS uploads,"
	" " MAINT_CAPPED_COUNT("locks", MAINT_LOCK_PURGEABLE("$3"), "$6") " AS locks,"
	" " MAINT_CAPPED_COUNT("event_logs", MAINT_LOG_DELETABLE("$4"), "$6") " AS event_logs,"
	" " MAINT_CAPPED_COUNT("runs", MAINT_RUN_DELETABLE_BEFORE("$5"), "$6") " AS runs",
	6, {INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID}
};

/* A11's queue: blocks of deleted checkpoints not yet collected, up to $1. */
static SpQuery maint_backlog_conversation = {
	"SELECT " MAINT_CAPPED_COUNT("conversation_garbage", "true", "$1"),
	1, {INT8OID}
};

static SpQuery maint_attention = {
	"SELECT a.kind, nullif(a.run_id, '') AS run_id, a.first_seen, a.last_seen, a.detail::text"
	" FROM sandbox_persist.attention a"
	" ORDER BY a.first_seen, a.kind, a.run_id",
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

/*
 * Lock up to max_rows candidates (SKIP LOCKED: never wait on the application),
 * then delete, in a new statement with a fresh snapshot, those that still
 * qualify. candidates takes ($1 max_rows, $2 cutoff) and returns an array;
 * remove takes ($1 that array, $2 cutoff) and returns a count.
 */
static int64
MaintLockThenDelete(SpQuery *candidates, SpQuery *remove, int64 cutoff, int64 max_rows)
{
	SpArgs		args;
	Datum		picked;
	bool		isnull;

	SpArgsInit(&args);
	SpArgInt64(&args, max_rows);
	SpArgInt64(&args, cutoff);
	SpExec(candidates, &args, false, 1);
	picked = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	SpArgsInit(&args);
	SpArgDatum(&args, picked);
	SpArgInt64(&args, cutoff);
	return MaintCount(remove, &args);
}

/* The number of elements of a one-dimensional array datum (0 when empty). */
static int64
MaintArrayLength(Datum array)
{
	ArrayType  *a = DatumGetArrayTypeP(array);

	return ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a));
}

/*
 * One batch of a collecting action: its statement or statements, a cutoff
 * and a row bound. It returns how many candidates it took (fewer than rows:
 * nothing is left) and adds how many rows it collected to *collected.
 */
typedef int64 (*MaintBatch) (SpQuery *statement, int64 cutoff, int64 rows, int64 *collected);

/*
 * A1: delete the unreferenced content-addressed blobs past the grace and
 * settle the candidates something references, so a referenced blob is looked
 * at once, not at every round, until a reference to it goes away; the queue
 * entries handled are dropped. Its statements are A1's own.
 */
static int64
MaintCollectBlobs(SpQuery *statement, int64 cutoff, int64 rows, int64 *collected)
{
	SpArgs		args;
	Datum		keys;
	Datum		entries;
	bool		isnull;
	int64		nkeys;
	int64		nentries;

	SpArgsInit(&args);
	SpArgInt64(&args, rows);
	SpArgInt64(&args, cutoff);
	SpExec(&maint_blob_candidates, &args, false, 1);
	keys = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, SpColumn("keys"), &isnull);
	entries = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, SpColumn("entries"),
							&isnull);
	nkeys = MaintArrayLength(keys);
	nentries = MaintArrayLength(entries);
	SpArgsInit(&args);
	SpArgDatum(&args, keys);
	SpArgInt64(&args, cutoff);
	*collected += MaintCount(&maint_blob_delete, &args);
	SpArgsInit(&args);
	SpArgDatum(&args, keys);
	SpExec(&maint_blob_settle, &args, false, 0);
	SpArgsInit(&args);
	SpArgDatum(&args, entries);
	SpExec(&maint_blob_dequeue, &args, false, 0);
	return nkeys > nentries ? nkeys : nentries;
}

/* A batch of A2, A3, A5 or A1's settling of recent blobs: one statement of (cutoff, rows) returning a count. */
static int64
MaintCountBatch(SpQuery *statement, int64 cutoff, int64 rows, int64 *collected)
{
	SpArgs		args;
	int64		n = MaintCount(statement, MaintCutoffArgs(&args, cutoff, rows));

	*collected += n;
	return n;
}

/* A batch of A6: old terminal runs, locked, then deleted (the statements are A6's own). */
static int64
MaintRunsBatch(SpQuery *statement, int64 cutoff, int64 rows, int64 *collected)
{
	int64		n = MaintLockThenDelete(&maint_run_candidates, &maint_run_delete, cutoff, rows);

	*collected += n;
	return n;
}

/*
 * Run one collecting action in batches of at most MAINT_BATCH_ROWS until it
 * has taken max_rows candidates, a batch finds fewer than it asked for
 * (nothing is left), or the round's deadline has passed; returns how many
 * rows it collected: a backlog drains as fast as the
 * time budget allows, while one statement never locks more than a batch.
 */
static int64
MaintDrain(MaintBatch batch, SpQuery *statement, int64 cutoff, int64 max_rows,
		   TimestampTz deadline)
{
	int64		taken = 0;
	int64		collected = 0;

	while (taken < max_rows)
	{
		int64		asked = Min(max_rows - taken, MAINT_BATCH_ROWS);
		int64		got = batch(statement, cutoff, asked, &collected);

		taken += got;
		if (got < asked || GetCurrentTimestamp() >= deadline)
			break;
	}
	return collected;
}

/* Notify the readers parked on each log id of the current SPI result (n rows). */
static void
MaintNotifyLogs(int n)
{
	for (int i = 0; i < n; i++)
	{
		int64		log_id = 0;
		char		payload[32];

		SpGetInt64(i, SpColumn("log_id"), &log_id);
		snprintf(payload, sizeof(payload), INT64_FORMAT, log_id);
		Async_Notify(SP_CHANNEL_EVENT_LOG, payload);
	}
}

/* A4: close the open logs of terminal runs idle past the grace; wake their readers. */
static int64
MaintCloseLogs(int64 now, int64 max_rows)
{
	SpArgs		args;
	int			n;

	MaintCutoffArgs(&args, SpTimeBefore(now, (int64) sp_event_log_close_grace_s * 1000),
					max_rows);
	SpArgInt64(&args, now);
	n = SpExec(&maint_close_logs, &args, false, 0);
	MaintNotifyLogs(n);
	return n;
}

/*
 * A10: end the open logs whose producer is gone (idle past event_log_idle_close,
 * no live run-driver lock) with a RUN_ERROR chunk, code PRODUCER_LOST, and
 * close them; wake their readers. Off when the setting is 0.
 */
static int64
MaintEndLostLogs(int64 now, int64 max_rows)
{
	SpArgs		args;
	int			n;

	if (sp_event_log_idle_close_s == 0)
		return 0;
	MaintCutoffArgs(&args, SpTimeBefore(now, (int64) sp_event_log_idle_close_s * 1000),
					max_rows);
	SpArgInt64(&args, now);
	SpArgText(&args, psprintf("The producer of this run stopped: no chunk was appended for %d s"
							  " and no run-driver lock is held, so maintenance ended the stream.",
							  sp_event_log_idle_close_s));
	SpArgInt64(&args, SpTimelineEpoch());
	n = SpExec(&maint_lost_logs, &args, false, 0);
	MaintNotifyLogs(n);
	return n;
}

/*
 * The watchdog parameters: now, the settings in milliseconds, the row bound,
 * the per-kind bound.
 * _watchdog_items subtracts at most reaper_ttl + 2 * sweep_interval (each
 * below 2^42 ms) from now in SQL, so now is raised to at least
 * SP_WATCHDOG_CLOCK_MIN: a clock that far in the past finds nothing either way.
 */
#define SP_WATCHDOG_CLOCK_MIN (PG_INT64_MIN / 2)

static void
MaintWatchdogArgs(SpArgs *args, int64 now, int64 max_rows)
{
	SpArgsInit(args);
	SpArgInt64(args, Max(now, SP_WATCHDOG_CLOCK_MIN));
	SpArgInt64(args, (int64) sp_reaper_ttl_s * 1000);
	SpArgInt64(args, (int64) sp_reaper_sweep_interval_s * 1000);
	SpArgInt64(args, (int64) sp_watchdog_idle_s * 1000);
	SpArgInt64(args, max_rows);
	SpArgInt64(args, MAINT_ATTENTION_PER_KIND);
}

/*
 * A8 and A9: record new watchdog items and announce each, refresh or resolve
 * the recorded ones; sets how many are new and how many were resolved.
 */
static void
MaintWatchdog(int64 now, int64 max_rows, int64 *fresh, int64 *resolved)
{
	SpArgs		args;
	int			n;

	MaintWatchdogArgs(&args, now, max_rows);
	n = SpExec(&maint_watchdog, &args, false, 0);
	*fresh = 0;
	*resolved = 0;
	for (int i = 0; i < n; i++)
	{
		StringInfoData payload;

		if (SpIsNull(i, SpColumn("kind")))
		{
			SpGetInt64(i, SpColumn("items_resolved"), resolved);
			continue;
		}
		(*fresh)++;
		initStringInfo(&payload);
		appendStringInfoString(&payload, "{\"kind\":");
		SpAppendString(&payload, SpGetText(i, SpColumn("kind")));
		appendStringInfoString(&payload, ",\"runId\":");
		SpAppendString(&payload, SpGetText(i, SpColumn("run_id")));
		appendStringInfoChar(&payload, '}');
		/* a notification payload must stay under 8000 bytes */
		if (payload.len < SP_NOTIFY_PAYLOAD_MAX)
			Async_Notify(SP_CHANNEL_ATTENTION, payload.data);
	}
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
	int64		blobs, uploads, locks, closed, lost, logs, runs, fresh, resolved;
	int64		detached = 0;
	int64		due = 0;
	int64		messages;
	int64		recompressed;
	int64		streams;
	TimestampTz started;
	TimestampTz deadline;
	SpArgs		args;
	StringInfoData summary;
	MemoryContext outer = CurrentMemoryContext;
	MemoryContext spi;

	max_rows = SpCheckRowLimitArg(fcinfo, 0, "max_rows", MAINT_DEFAULT_ROWS);
	SpRequireSchema(MAINT_LAYOUT_SINCE, "maintain");
	started = GetCurrentTimestamp();
	deadline = sp_maintenance_time_budget_ms == 0 ? DT_NOEND :
		TimestampTzPlusMilliseconds(started, sp_maintenance_time_budget_ms);

	SPI_connect();
	blobs = MaintDrain(MaintCollectBlobs, NULL,
					   SpTimeBefore(now, (int64) sp_blob_gc_grace_s * 1000), max_rows, deadline);
	MaintDrain(MaintCountBatch, &maint_blob_settle_recent,
			   SpTimeBefore(now, (int64) sp_blob_gc_grace_s * 1000), max_rows, deadline);
	uploads = MaintDrain(MaintCountBatch, &maint_uploads,
						 SpTimeBefore(now, (int64) sp_upload_expiry_s * 1000), max_rows, deadline);
	locks = MaintDrain(MaintCountBatch, &maint_locks,
					   SpTimeBefore(now, (int64) sp_lock_purge_after_s * 1000), max_rows, deadline);
	closed = MaintCloseLogs(now, max_rows);
	lost = MaintEndLostLogs(now, max_rows);
	logs = sp_event_log_retention_s == 0 ? 0 :
		MaintDrain(MaintCountBatch, &maint_delete_logs,
				   SpTimeBefore(now, (int64) sp_event_log_retention_s * 1000), max_rows, deadline);
	runs = sp_run_retention_s == 0 ? 0 :
		MaintDrain(MaintRunsBatch, NULL,
				   SpTimeBefore(now, (int64) sp_run_retention_s * 1000), max_rows, deadline);

	/* A7: wake the application's reaper when detached runs exist */
	SpArgsInit(&args);
	SpArgInt64(&args, SpTimeBefore(now, (int64) sp_reaper_ttl_s * 1000));
	SpArgInt64(&args, (int64) sp_reaper_ttl_s * 1000);
	SpExec(&maint_detached, &args, false, 1);
	SpGetInt64(0, SpColumn("detached"), &detached);
	SpGetInt64(0, SpColumn("due"), &due);
	if (detached > 0)
	{
		char		payload[64];

		snprintf(payload, sizeof(payload), "{\"detached\": " INT64_FORMAT ", \"due\": " INT64_FORMAT "}",
				 detached, due);
		Async_Notify(SP_CHANNEL_REAPER, payload);
	}

	/* A11: the conversation blocks of deleted checkpoints */
	messages = ConvCollect(max_rows);

	/* A12: lz4 blobs rewritten as zstd */
	recompressed = sp_blob_recompress ? BlobRecompress(max_rows) : 0;

	/* A13: expired streams leave their paths; detached streams are purged */
	streams = StreamPurge(now, max_rows);

	MaintWatchdog(now, max_rows, &fresh, &resolved);
	RowCountsFold();

	/* the summary outlives SPI_finish: build it in the caller's context */
	spi = MemoryContextSwitchTo(outer);
	initStringInfo(&summary);
	MemoryContextSwitchTo(spi);
	appendStringInfo(&summary,
					 "{\"blobsDeleted\":" INT64_FORMAT ",\"uploadsRemoved\":" INT64_FORMAT
					 ",\"locksPurged\":" INT64_FORMAT ",\"logsClosed\":" INT64_FORMAT
					 ",\"logsProducerLost\":" INT64_FORMAT ",\"logsDeleted\":" INT64_FORMAT
					 ",\"runsDeleted\":" INT64_FORMAT
					 ",\"detachedRuns\":" INT64_FORMAT ",\"dueRuns\":" INT64_FORMAT
					 ",\"attentionNew\":" INT64_FORMAT ",\"attentionResolved\":" INT64_FORMAT
					 ",\"conversationPositionsDeleted\":" INT64_FORMAT
					 ",\"conversationMessagesDeleted\":" INT64_FORMAT
					 ",\"blobsRecompressed\":" INT64_FORMAT
					 ",\"streamsPurged\":" INT64_FORMAT "}",
					 blobs, uploads, locks, closed, lost, logs, runs, detached, due, fresh, resolved,
					 messages, messages, recompressed, streams);
	SpArgsInit(&args);
	SpArgInt64(&args, now);
	SpArgTextLen(&args, summary.data, summary.len);
	/* elapsed wall-clock time, whatever clock judged the actions */
	SpArgInt64(&args, (int64) ((GetCurrentTimestamp() - started) / 1000));
	SpExec(&maint_record, &args, false, 0);
	SPI_finish();

	ereport(LOG,
			(errmsg("sandbox_persist maintenance: %s", summary.data)));
	PG_RETURN_DATUM(SpJsonResult(&summary));
}

/* Append the cutoff now - setting_s, or NULL when the setting is 0 (action off). */
static void
MaintArgCutoffOrOff(SpArgs *args, int64 now, int setting_s)
{
	if (setting_s == 0)
		SpArgNull(args);
	else
		SpArgInt64(args, SpTimeBefore(now, (int64) setting_s * 1000));
}

/*
 * _maintenance_backlog(now_ms bigint) -> json {blobs, uploads, locks,
 * eventLogs, runs, conversationBlocks}: how many rows each collecting action
 * (A1, A2, A3, A5, A6, A11) would delete at now_ms, by the same conditions and
 * settings maintain() uses, without its max_rows bound, each counted up to
 * MAINT_BACKLOG_MAX. Reads only.
 */
Datum
_maintenance_backlog(PG_FUNCTION_ARGS)
{
	int64		now = SpNowMs(fcinfo, 0);
	int64		counts[5] = {0};
	int64		blocks = 0;
	static const char *const columns[] = {"blobs", "uploads", "locks", "event_logs", "runs"};
	static const char *const keys[] = {"blobs", "uploads", "locks", "eventLogs", "runs"};
	MemoryContext outer = CurrentMemoryContext;
	MemoryContext spi;
	StringInfoData buf;
	SpArgs		args;
	bool		first = true;

	SpRequireSchema(MAINT_LAYOUT_SINCE, "_maintenance_backlog");
	SPI_connect();
	SpArgsInit(&args);
	SpArgInt64(&args, SpTimeBefore(now, (int64) sp_blob_gc_grace_s * 1000));
	SpArgInt64(&args, SpTimeBefore(now, (int64) sp_upload_expiry_s * 1000));
	SpArgInt64(&args, SpTimeBefore(now, (int64) sp_lock_purge_after_s * 1000));
	MaintArgCutoffOrOff(&args, now, sp_event_log_retention_s);
	MaintArgCutoffOrOff(&args, now, sp_run_retention_s);
	SpArgInt64(&args, MAINT_BACKLOG_MAX);
	SpExec(&maint_backlog, &args, true, 1);
	for (int i = 0; i < lengthof(columns); i++)
		SpGetInt64(0, SpColumn(columns[i]), &counts[i]);
	SpArgsInit(&args);
	SpArgInt64(&args, MAINT_BACKLOG_MAX);
	SpExec(&maint_backlog_conversation, &args, true, 1);
	SpGetInt64(0, 1, &blocks);
	spi = MemoryContextSwitchTo(outer);
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	for (int i = 0; i < lengthof(keys); i++)
	{
		SpAppendKey(&buf, &first, keys[i]);
		SpAppendInt64(&buf, counts[i]);
	}
	SpAppendKey(&buf, &first, "conversationBlocks");
	SpAppendInt64(&buf, blocks);
	appendStringInfoChar(&buf, '}');
	MemoryContextSwitchTo(spi);
	SPI_finish();
	PG_RETURN_DATUM(SpJsonResult(&buf));
}

/*
 * An attention item {kind, runId?, firstSeen, lastSeen, detail?}, read by
 * column name. An item about no run stores run_id '' (part of the key); the
 * statement turns it into NULL, so runId is omitted.
 */
static const SpField attention_fields[] = {
	{"kind", "kind", SPF_STRING},
	{"runId", "run_id", SPF_STRING},
	{"firstSeen", "first_seen", SPF_INT64},
	{"lastSeen", "last_seen", SPF_INT64},
	{"detail", "detail", SPF_JSON}
};
static const SpRecord attention_record = SP_RECORD(attention_fields);

/* Append the attention item of SPI row `row`. */
static void
MaintAppendAttention(StringInfo buf, int row)
{
	SpAppendRecord(buf, row, &attention_record);
}

/*
 * attention_list() -> json: the watchdog's open items, oldest first: the
 * recorded items, then the maintenance health findings (maintenance_failing,
 * maintenance_overdue, since 0.4.0), which are judged at each call because a
 * maintenance that never runs cannot record them (maintenance_health.c). On a
 * schema before 0.4.0 there is nothing to judge, so the answer is the
 * recorded items alone, as that release's library gave. The 0.3.0--0.4.0
 * script names this entry point attention_list_v4 (released_symbols.c).
 */
Datum
attention_list(PG_FUNCTION_ARGS)
{
	MemoryContext outer = CurrentMemoryContext;
	MemoryContext spi;
	MaintHealth health;
	StringInfoData buf;
	SpArgs		args;
	Datum		result;
	bool		any = false;
	int			n;

	SPI_connect();
	MaintHealthGather(&health, SpNowMs(fcinfo, -1));
	SpArgsInit(&args);
	n = SpExec(&maint_attention, &args, true, 0);
	spi = MemoryContextSwitchTo(outer);
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '[');
	for (int i = 0; i < n; i++)
	{
		if (any)
			appendStringInfoChar(&buf, ',');
		MaintAppendAttention(&buf, i);
		any = true;
	}
	MaintHealthAppendItems(&buf, &health, &any);
	appendStringInfoChar(&buf, ']');
	result = SpJsonResult(&buf);
	MemoryContextSwitchTo(spi);
	SPI_finish();
	PG_RETURN_DATUM(result);
}

/*
 * reaper_heartbeat(replica text, summary json, now_ms bigint): the app reports
 * a finished reaper sweep; feeds the watchdog's reaper_missing rule.
 */
Datum
reaper_heartbeat(PG_FUNCTION_ARGS)
{
	char	   *replica = SpCheckIdArg(fcinfo, 0, "replica", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	SpArgs		args;

	SpArgsInit(&args);
	SpArgText(&args, replica);
	SpArgInt64(&args, SpNowMs(fcinfo, 2));
	if (PG_ARGISNULL(1))
		SpArgNull(&args);
	else
	{
		/* stored as sent, so never walked: refuse what json_in would refuse */
		SpJsonCheckNesting(PG_GETARG_TEXT_PP(1));
		SpArgDatum(&args, PointerGetDatum(PG_GETARG_TEXT_PP(1)));
	}
	SPI_connect();
	SpExec(&maint_heartbeat, &args, false, 0);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * _reaper_ttl_ms() -> bigint: sandbox_persist.reaper_ttl in milliseconds, for
 * the overview view. Calling it loads the module, so the value is parsed with
 * its unit even in a session that has not used the extension yet.
 */
Datum
_reaper_ttl_ms(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64((int64) sp_reaper_ttl_s * 1000);
}
