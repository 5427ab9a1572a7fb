/*
 * stream_reads.c
 *
 * Reads of the durable streams (docs/contract/streams.md §3, §4 rule 3):
 * the check that an offset names an entry the stream holds with that epoch
 * (SP708 otherwise), the entries of a stream through its fork chain in one
 * statement, and stream_read with its sliding-TTL touch. The offset format
 * is in stream_offsets.c.
 *
 * Locking: reads take no row lock. Entries never change once written and
 * are purged only for detached streams, so entries up to the tail read from
 * the stream row are all there for the statement that reads them. The TTL
 * touch is a guarded UPDATE of touched_at (a reader may wait behind an
 * appender's row lock for it, never the other way round), done at most once
 * per ttl/16, capped at STREAM_TOUCH_MAX_MS.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/builtins.h"

#include "streams.h"

PG_FUNCTION_INFO_V1(stream_read);

/* max_bytes of stream_read when left out or NULL: the SQL signature's DEFAULT. */
#define STREAM_READ_DEFAULT_BYTES 1048576

/* The longest interval between two touches of a sliding TTL (§4 rule 3). */
#define STREAM_TOUCH_MAX_MS 60000

/* The fraction of the TTL a touch may lag behind (§4 rule 3). */
#define STREAM_TOUCH_DIVISOR 16

/*
 * The entries ($2, $3] of stream $1 through its fork chain, in seq order:
 * each stream of the chain serves (its fork_seq, the fork point of the
 * stream below it]; the walk stops at the first stream whose own range
 * starts at or before $2.
 */
static SpQuery stream_chain_entries = {
	"WITH RECURSIVE chain (stream_id, source_id, lo, hi) AS ("
	"  SELECT s.stream_id, s.source_id, coalesce(s.fork_seq, 0), $3::bigint"
	"    FROM sandbox_persist.streams s WHERE s.stream_id = $1"
	"  UNION ALL"
	"  SELECT p.stream_id, p.source_id, coalesce(p.fork_seq, 0), c.lo"
	"    FROM chain c JOIN sandbox_persist.streams p ON p.stream_id = c.source_id"
	"   WHERE c.lo > $2)"
	" SELECT e.seq, e.epoch, e.message_count, e.data"
	"   FROM chain c JOIN sandbox_persist.stream_entries e"
	"     ON e.stream_id = c.stream_id AND e.seq > greatest(c.lo, $2) AND e.seq <= c.hi"
	"  ORDER BY e.seq",
	3, {INT8OID, INT8OID, INT8OID}
};

/* The sliding-TTL touch: only when the stored touch is older than $3. */
static SpQuery stream_touch = {
	"UPDATE sandbox_persist.streams SET touched_at = $2"
	" WHERE stream_id = $1 AND touched_at <= $3",
	3, {INT8OID, INT8OID, INT8OID}
};

/*
 * Entry seq of a stream, through its fork chain: false when there is none;
 * else its epoch, message count and (when data is not NULL) a copy of its
 * bytes in the current context. Inside SPI.
 */
bool
StreamEntryAt(int64 stream_id, int64 seq, int64 *epoch, int64 *message_count, bytea **data)
{
	SpArgs		args;
	bool		isnull;

	SpArgsInit(&args);
	SpArgInt64(&args, stream_id);
	SpArgInt64(&args, seq - 1);
	SpArgInt64(&args, seq);
	if (SpExec(&stream_chain_entries, &args, false, 1) == 0)
		return false;
	SpGetInt64(0, SpColumn("epoch"), epoch);
	*message_count = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
												 SpColumn("message_count"), &isnull));
	if (data != NULL)
		*data = DatumGetByteaPCopy(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
												 SpColumn("data"), &isnull));
	return true;
}

/* Whether the stream issued offset (epoch, seq): it holds entry seq with that epoch (seq 0: epoch 0). Inside SPI. */
bool
StreamIssued(const StreamRow *row, int64 epoch, int64 seq)
{
	int64		stored = -1;
	int64		count = 0;

	if (seq > row->tail_seq)
		return false;
	if (seq == 0)
		stored = 0;
	else if (seq == row->tail_seq)
		stored = row->tail_epoch;
	else if (!StreamEntryAt(row->stream_id, seq, &stored, &count, NULL))
		stored = -1;
	return stored == epoch;
}


/* Renew a sliding TTL, at most once per ttl/16 (capped at 60 s). Inside SPI. */
static void
StreamTouch(const StreamRow *row, int64 now)
{
	SpArgs		args;
	int64		interval;

	if (!row->has_ttl)
		return;
	interval = Min(row->ttl_seconds, PG_INT64_MAX / 1000) * 1000 / STREAM_TOUCH_DIVISOR;
	interval = Min(interval, STREAM_TOUCH_MAX_MS);
	if (row->touched_at > SpTimeBefore(now, interval))
		return;
	SpArgsInit(&args);
	SpArgInt64(&args, row->stream_id);
	SpArgInt64(&args, now);
	SpArgInt64(&args, SpTimeBefore(now, interval));
	SpExec(&stream_touch, &args, false, 0);
}

/*
 * stream_read(path text, "offset" text, max_bytes integer, now_ms bigint,
 * OUT meta json, OUT body bytea): whole entries from the offset up to
 * max_bytes (at least one), through the fork chain (§4 rule 3); meta =
 * {streamId, contentType, startOffset, nextOffset, upToDate, closed,
 * ttlSeconds?, expiresAt?}. A JSON stream's body is the array of its
 * messages. Renews a sliding TTL. A run-logs/<run_id> path reads the run's event
 * log (stream_run_logs.c).
 */
Datum
stream_read(PG_FUNCTION_ARGS)
{
	char	   *path = SpCheckIdArg(fcinfo, 0, "path", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	char	   *offset = PG_ARGISNULL(1) ? "-1" : text_to_cstring(PG_GETARG_TEXT_PP(1));
	int64		max_bytes = PG_ARGISNULL(2) ? STREAM_READ_DEFAULT_BYTES : PG_GETARG_INT32(2);
	int64		now = SpNowMs(fcinfo, 3);
	MemoryContext outer = CurrentMemoryContext;
	MemoryContext spi;
	StringInfoData meta;
	StringInfoData body;
	TupleDesc	desc;
	Datum		values[2];
	bool		nulls[2] = {false, false};
	StreamRow	row;
	StreamOffsetKind kind;
	int64		epoch = 0;
	int64		seq = 0;
	int64		next_epoch;
	int64		next_seq;
	bool		found;
	bool		up_to_date;
	bytea	   *out;

	if (max_bytes < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_bytes must be positive"),
				 errdetail("A value of " INT64_FORMAT " was given.", max_bytes)));
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "stream_read must return a record");
	kind = StreamParseOffset(offset, &epoch, &seq);
	if (StreamIsRunLogPath(path))
		PG_RETURN_DATUM(StreamRunLogRead(fcinfo, path, offset, kind, epoch, seq, max_bytes));
	initStringInfo(&body);

	SPI_connect();
	found = StreamLoad(path, false, &row);
	StreamRequireVisible(&row, found, now, path);
	if (kind == STREAM_OFFSET_START)
		epoch = seq = 0;
	else if (kind == STREAM_OFFSET_NOW)
	{
		epoch = row.tail_epoch;
		seq = row.tail_seq;
	}
	else
		StreamVouchOffset(path, offset, seq, row.tail_seq, StreamIssued(&row, epoch, seq));
	StreamTouch(&row, now);
	next_epoch = epoch;
	next_seq = seq;
	if (seq < row.tail_seq)
	{
		SpArgs		args;

		SpArgsInit(&args);
		SpArgInt64(&args, row.stream_id);
		SpArgInt64(&args, seq);
		SpArgInt64(&args, row.tail_seq);
		StreamPageEntries(SpOpenCursor(&stream_chain_entries, &args, false), true, row.json_mode,
						  max_bytes, outer, &body, &next_epoch, &next_seq);
	}
	up_to_date = next_seq == row.tail_seq;

	spi = MemoryContextSwitchTo(outer);
	initStringInfo(&meta);
	appendStringInfo(&meta, "{\"streamId\":" INT64_FORMAT ",\"contentType\":", row.stream_id);
	SpAppendString(&meta, row.content_type);
	appendStringInfoString(&meta, ",\"startOffset\":");
	StreamAppendOffset(&meta, epoch, seq);
	appendStringInfoString(&meta, ",\"nextOffset\":");
	StreamAppendOffset(&meta, next_epoch, next_seq);
	appendStringInfo(&meta, ",\"upToDate\":%s,\"closed\":%s", up_to_date ? "true" : "false",
					 up_to_date && row.closed ? "true" : "false");
	StreamAppendTtl(&meta, &row);
	appendStringInfoChar(&meta, '}');
	out = palloc(VARHDRSZ + body.len + 2);
	if (row.json_mode)
	{
		SET_VARSIZE(out, VARHDRSZ + body.len + 2);
		VARDATA(out)[0] = '[';
		memcpy(VARDATA(out) + 1, body.data, body.len);
		VARDATA(out)[body.len + 1] = ']';
	}
	else
	{
		SET_VARSIZE(out, VARHDRSZ + body.len);
		memcpy(VARDATA(out), body.data, body.len);
	}
	MemoryContextSwitchTo(spi);
	SPI_finish();

	values[0] = SpJsonResult(&meta);
	values[1] = PointerGetDatum(out);
	desc = BlessTupleDesc(desc);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}
