/*
 * stream_purge.c
 *
 * The durable streams' part of maintain() (A13, docs/contract/maintenance.md;
 * docs/contract/streams.md §2, §4 rule 4): live streams whose TTL or
 * absolute expiry has passed leave their paths as a delete does (streams.c),
 * then the entries, producer rows and rows of detached streams are deleted,
 * at most max_rows of each per call.
 *
 * Locking: an expired stream's row is locked FOR UPDATE SKIP LOCKED, so a
 * stream another transaction is writing, reading with a touch or deleting is
 * left for the next run; its expiry then locks its sources up the chain as a
 * delete does (a stream before its source). Detached streams have no path,
 * so no reader or writer reaches them; their rows are deleted FOR UPDATE
 * SKIP LOCKED only once no entry and no producer row is left.
 */
#include "postgres.h"

#include "catalog/pg_type.h"

#include "streams.h"

/*
 * A13: live streams expired at $1, at most $2: those with an absolute expiry
 * by the streams_expires index, those with a sliding TTL by streams_ttl
 * (numeric: an extreme clock or TTL never overflows).
 */
static SpQuery stream_expired = {
	"(SELECT s.stream_id FROM sandbox_persist.streams s"
	"  WHERE s.expires_at <= $1 AND s.path IS NOT NULL AND s.deleted_at IS NULL"
	"  ORDER BY s.expires_at LIMIT $2)"
	" UNION"
	" (SELECT s.stream_id FROM sandbox_persist.streams s"
	"  WHERE s.ttl_seconds IS NOT NULL AND s.path IS NOT NULL AND s.deleted_at IS NULL"
	"    AND s.touched_at::numeric + s.ttl_seconds::numeric * 1000 <= $1"
	"  ORDER BY s.touched_at LIMIT $2)",
	2, {INT8OID, INT8OID}
};

/* A13: one stream row by id, locked unless another transaction holds it. */
static SpQuery stream_by_id_skip_locked = {
	"SELECT " STREAM_ROW_COLUMNS " FROM sandbox_persist.streams"
	" WHERE stream_id = $1 AND path IS NOT NULL AND deleted_at IS NULL"
	" FOR UPDATE SKIP LOCKED",
	1, {INT8OID}
};

/* A13: at most $1 entries of detached streams (no path, so no reader or fork reaches them). */
static SpQuery stream_purge_entries = {
	"DELETE FROM sandbox_persist.stream_entries e WHERE (e.stream_id, e.seq) IN"
	" (SELECT x.stream_id, x.seq FROM sandbox_persist.streams s"
	"   JOIN sandbox_persist.stream_entries x ON x.stream_id = s.stream_id"
	"  WHERE s.path IS NULL LIMIT $1)",
	1, {INT8OID}
};

/* A13: at most $1 producer rows of detached streams. */
static SpQuery stream_purge_producers = {
	"DELETE FROM sandbox_persist.stream_producers p WHERE (p.stream_id, p.producer_id) IN"
	" (SELECT x.stream_id, x.producer_id FROM sandbox_persist.streams s"
	"   JOIN sandbox_persist.stream_producers x ON x.stream_id = s.stream_id"
	"  WHERE s.path IS NULL LIMIT $1)",
	1, {INT8OID}
};

/* A13: at most $1 detached stream rows left with no entry and no producer; returns a count. */
static SpQuery stream_purge_rows = {
	"WITH d AS (DELETE FROM sandbox_persist.streams s WHERE s.stream_id IN"
	"  (SELECT x.stream_id FROM sandbox_persist.streams x WHERE x.path IS NULL"
	"     AND NOT EXISTS (SELECT 1 FROM sandbox_persist.stream_entries e WHERE e.stream_id = x.stream_id)"
	"     AND NOT EXISTS (SELECT 1 FROM sandbox_persist.stream_producers p WHERE p.stream_id = x.stream_id)"
	"   ORDER BY x.stream_id LIMIT $1 FOR UPDATE SKIP LOCKED)"
	"  RETURNING 1)"
	" SELECT count(*) AS purged FROM d",
	1, {INT8OID}
};

/*
 * maintain() A13 (docs/contract/maintenance.md): expired streams leave their
 * paths as a delete does (soft-deleted while forks read through them, else
 * detached), at most max_rows, skipping rows another transaction holds; then
 * at most max_rows entries, producer rows and rows of detached streams are
 * purged. Returns how many stream rows were purged. Inside SPI.
 */
int64
StreamPurge(int64 now, int64 max_rows)
{
	SpArgs		args;
	int			n;
	int64	   *ids;
	int64		purged = 0;

	SpArgsInit(&args);
	SpArgInt64(&args, now);
	SpArgInt64(&args, max_rows);
	n = SpExec(&stream_expired, &args, false, max_rows);
	ids = palloc(sizeof(int64) * Max(n, 1));
	for (int i = 0; i < n; i++)
		SpGetInt64(i, SpColumn("stream_id"), &ids[i]);
	for (int i = 0; i < n; i++)
	{
		StreamRow	row;

		SpArgsInit(&args);
		SpArgInt64(&args, ids[i]);
		if (SpExec(&stream_by_id_skip_locked, &args, false, 1) == 0)
			continue;
		StreamReadRow(&row);
		if (StreamExpired(&row, now))
		{
			StreamRemove(&row, now);
			StreamNotify(row.stream_id);
		}
	}
	SpArgsInit(&args);
	SpArgInt64(&args, max_rows);
	SpExec(&stream_purge_entries, &args, false, 0);
	SpExec(&stream_purge_producers, &args, false, 0);
	SpExec(&stream_purge_rows, &args, false, 1);
	SpGetInt64(0, SpColumn("purged"), &purged);
	return purged;
}
