/*
 * streams.c
 *
 * Durable streams, the Durable Streams protocol stored in PostgreSQL
 * (docs/contract/streams.md): what the stream files share: loading a row by
 * path or from an SPI result, the visibility rule, the release of fork
 * sources, the expiry of a stream, and the write of a body as the next
 * entry. Append, head and delete are in stream_writes.c, creates and forks
 * in stream_create.c, bodies and content types in stream_bodies.c, the
 * offset format in stream_offsets.c, reads in stream_reads.c, maintain()'s
 * purge (A13) in stream_purge.c, subscriptions in stream_subscriptions.c and
 * stream_wakes.c.
 *
 * Locking: every write locks its stream row FOR UPDATE until commit, so a
 * producer's check and append serialise on it and commit order is seq order.
 * A fork locks its source row FOR UPDATE (its fork_count changes) before it
 * inserts its own row (stream_create.c); a delete locks the stream, then each
 * source up the chain whose fork_count it decrements. Lock order is therefore
 * always a stream before its source (a new fork has no row anyone else can
 * lock), and no two calls can wait on each other in a cycle. Head never locks.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/async.h"
#include "common/int.h"
#include "utils/builtins.h"

#include "streams.h"

static SpQuery stream_by_path = {
	"SELECT " STREAM_ROW_COLUMNS " FROM sandbox_persist.streams WHERE path = $1",
	1, {TEXTOID}
};

static SpQuery stream_by_path_lock = {
	"SELECT " STREAM_ROW_COLUMNS " FROM sandbox_persist.streams WHERE path = $1 FOR UPDATE",
	1, {TEXTOID}
};

/*
 * One fork fewer reads through $1; a soft-deleted source left without forks
 * is detached (path NULL) and releases its own source in turn.
 */
static SpQuery stream_fork_count_down = {
	"UPDATE sandbox_persist.streams SET fork_count = fork_count - 1,"
	"  path = CASE WHEN deleted_at IS NOT NULL AND fork_count = 1 THEN NULL ELSE path END"
	" WHERE stream_id = $1 RETURNING path IS NULL AS detached, source_id",
	1, {INT8OID}
};

static SpQuery stream_insert_entry = {
	"INSERT INTO sandbox_persist.stream_entries (stream_id, seq, epoch, message_count, data)"
	" VALUES ($1, $2, $3, $4, $5)",
	5, {INT8OID, INT8OID, INT8OID, INT4OID, BYTEAOID}
};

/* The new tail; $4 the Stream-Seq (NULL: kept); $6 close, with the closing producer tuple $7-$9. */
static SpQuery stream_advance = {
	"UPDATE sandbox_persist.streams SET tail_seq = $2, tail_epoch = $3,"
	"  stream_seq = coalesce($4, stream_seq), touched_at = greatest(touched_at, $5),"
	"  closed_at = CASE WHEN $6 AND closed_at IS NULL THEN $5 ELSE closed_at END,"
	"  closed_producer = CASE WHEN $6 THEN $7 ELSE closed_producer END,"
	"  closed_epoch = CASE WHEN $6 THEN $8 ELSE closed_epoch END,"
	"  closed_seq = CASE WHEN $6 THEN $9 ELSE closed_seq END"
	" WHERE stream_id = $1",
	9, {INT8OID, INT8OID, INT8OID, TEXTOID, INT8OID, BOOLOID, TEXTOID, INT8OID, INT8OID}
};

static SpQuery stream_soft_delete = {
	"UPDATE sandbox_persist.streams SET deleted_at = $2 WHERE stream_id = $1",
	2, {INT8OID, INT8OID}
};

static SpQuery stream_detach = {
	"UPDATE sandbox_persist.streams SET path = NULL, deleted_at = coalesce(deleted_at, $2)"
	" WHERE stream_id = $1",
	2, {INT8OID, INT8OID}
};

/* Copy the first row of the current SPI result into *out (strings in the current context). */
void
StreamReadRow(StreamRow *out)
{
	memset(out, 0, sizeof(StreamRow));
	SpGetInt64(0, SpColumn(STREAM_COL_ID), &out->stream_id);
	out->content_type = SpGetText(0, SpColumn(STREAM_COL_CONTENT_TYPE));
	SpGetBool(0, SpColumn(STREAM_COL_JSON_MODE), &out->json_mode);
	out->has_ttl = SpGetInt64(0, SpColumn(STREAM_COL_TTL), &out->ttl_seconds);
	out->has_expires = SpGetInt64(0, SpColumn(STREAM_COL_EXPIRES), &out->expires_at);
	SpGetInt64(0, SpColumn(STREAM_COL_TOUCHED), &out->touched_at);
	SpGetBool(0, SpColumn(STREAM_COL_CLOSED), &out->closed);
	out->closed_producer = SpGetText(0, SpColumn(STREAM_COL_CLOSED_PRODUCER));
	SpGetInt64(0, SpColumn(STREAM_COL_CLOSED_EPOCH), &out->closed_epoch);
	SpGetInt64(0, SpColumn(STREAM_COL_CLOSED_SEQ), &out->closed_seq);
	SpGetInt64(0, SpColumn(STREAM_COL_TAIL_SEQ), &out->tail_seq);
	SpGetInt64(0, SpColumn(STREAM_COL_TAIL_EPOCH), &out->tail_epoch);
	out->stream_seq = SpGetText(0, SpColumn(STREAM_COL_STREAM_SEQ));
	out->has_source = SpGetInt64(0, SpColumn(STREAM_COL_SOURCE), &out->source_id);
	SpGetInt64(0, SpColumn(STREAM_COL_FORK_SEQ), &out->fork_seq);
	out->fork_offset = SpGetText(0, SpColumn(STREAM_COL_FORK_OFFSET));
	out->has_sub = SpGetInt64(0, SpColumn(STREAM_COL_FORK_SUB), &out->fork_sub_offset);
	SpGetInt64(0, SpColumn(STREAM_COL_FORK_COUNT), &out->fork_count);
	SpGetBool(0, SpColumn(STREAM_COL_DELETED), &out->deleted);
	out->has_fence = SpGetInt64(0, SpColumn(STREAM_COL_PRODUCER_FENCE), &out->producer_fence);
}

/* The row at path (FOR UPDATE when asked); false when no row holds the path. Inside SPI. */
bool
StreamLoad(const char *path, bool for_update, StreamRow *out)
{
	SpArgs		args;

	SpArgsInit(&args);
	SpArgText(&args, path);
	if (SpExec(for_update ? &stream_by_path_lock : &stream_by_path, &args, !for_update, 1) == 0)
	{
		memset(out, 0, sizeof(StreamRow));
		return false;
	}
	StreamReadRow(out);
	return true;
}

/* Whether a stream's TTL or absolute expiry has passed at now (§2). */
bool
StreamExpired(const StreamRow *row, int64 now)
{
	int64		ttl_ms;

	if (row->has_expires && row->expires_at <= now)
		return true;
	if (row->has_ttl && !pg_mul_s64_overflow(row->ttl_seconds, 1000, &ttl_ms))
		return row->touched_at <= SpTimeBefore(now, ttl_ms);
	return false;
}

/* STREAM_NOT_FOUND unless the row exists and has not expired; STREAM_GONE when soft-deleted. */
void
StreamRequireVisible(const StreamRow *row, bool found, int64 now, const char *path)
{
	if (!found || StreamExpired(row, now))
		sp_error(SP_STREAM_NOT_FOUND,
				 ("stream not found"),
				 "No stream is at path \"%s\".", path);
	if (row->deleted)
		sp_error(SP_STREAM_GONE,
				 ("stream deleted"),
				 "The stream at path \"%s\" was deleted; forks of it still read through it.", path);
}

/* Append ,"ttlSeconds":n or ,"expiresAt":ms when the stream has one. */
void
StreamAppendTtl(StringInfo buf, const StreamRow *row)
{
	if (row->has_ttl)
		appendStringInfo(buf, ",\"ttlSeconds\":" INT64_FORMAT, row->ttl_seconds);
	if (row->has_expires)
		appendStringInfo(buf, ",\"expiresAt\":" INT64_FORMAT, row->expires_at);
}

/*
 * One fork of source_id went away: decrement its fork_count and, while that
 * detaches a soft-deleted source, go on up the chain (§4 rule 4). Inside SPI.
 */
void
StreamRelease(int64 source_id)
{
	SpArgs		args;
	int64		id = source_id;

	for (;;)
	{
		bool		detached = false;

		SpArgsInit(&args);
		SpArgInt64(&args, id);
		if (SpExec(&stream_fork_count_down, &args, false, 0) != 1)
			return;
		SpGetBool(0, SpColumn("detached"), &detached);
		if (!detached || !SpGetInt64(0, SpColumn("source_id"), &id))
			return;
	}
}

/*
 * Delete a stream whose row is locked, at a DELETE or once expired: its path
 * is left as a delete leaves it (for A13 and a create at that path):
 * soft-deleted while forks read through it, else detached (path NULL,
 * entries left for A13) and its source released. Returns 1 when
 * soft-deleted, 0 when detached. Inside SPI.
 */
int64
StreamRemove(const StreamRow *row, int64 now)
{
	SpArgs		args;

	SpArgsInit(&args);
	SpArgInt64(&args, row->stream_id);
	SpArgInt64(&args, now);
	if (row->fork_count > 0)
	{
		SpExec(&stream_soft_delete, &args, false, 0);
		return 1;
	}
	SpExec(&stream_detach, &args, false, 0);
	if (row->has_source)
		StreamRelease(row->source_id);
	return 0;
}

/* Wake the readers waiting on this stream; delivered at commit. */
void
StreamNotify(int64 stream_id)
{
	char		payload[32];

	snprintf(payload, sizeof(payload), INT64_FORMAT, stream_id);
	Async_Notify(SP_CHANNEL_STREAM, payload);
}

/* The epoch of an entry appended now after one of prev_epoch (§3). */
static int64
StreamEpochAfter(int64 prev_epoch)
{
	int64		epoch = SpFenceFloor() >> SP_FENCE_EPOCH_SHIFT;

	return Max(epoch, prev_epoch);
}

/* Insert entry seq of a stream with these bytes. Inside SPI. */
static void
StreamInsertEntry(int64 stream_id, int64 seq, int64 epoch, int message_count,
				  const char *data, int len)
{
	SpArgs		args;
	bytea	   *b = palloc(VARHDRSZ + len);

	SET_VARSIZE(b, VARHDRSZ + len);
	memcpy(VARDATA(b), data, len);
	SpArgsInit(&args);
	SpArgInt64(&args, stream_id);
	SpArgInt64(&args, seq);
	SpArgInt64(&args, epoch);
	SpArgDatum(&args, Int32GetDatum(message_count));
	SpArgDatum(&args, PointerGetDatum(b));
	SpExec(&stream_insert_entry, &args, false, 0);
}

/*
 * Append a body as the next entry (when it has any) and move the tail, the
 * Stream-Seq and, with close, the closed state; *row's tail follows. Inside SPI.
 */
void
StreamWrite(StreamRow *row, const StreamBody *body, const StreamAppendOptions *opts, int64 now)
{
	SpArgs		args;

	if (!body->empty)
	{
		row->tail_epoch = StreamEpochAfter(row->tail_epoch);
		row->tail_seq++;
		StreamInsertEntry(row->stream_id, row->tail_seq, row->tail_epoch, body->message_count,
						  body->data.data, body->data.len);
	}
	SpArgsInit(&args);
	SpArgInt64(&args, row->stream_id);
	SpArgInt64(&args, row->tail_seq);
	SpArgInt64(&args, row->tail_epoch);
	SpArgText(&args, opts->stream_seq);
	SpArgInt64(&args, now);
	SpArgBool(&args, opts->close);
	SpArgText(&args, opts->close ? opts->producer_id : NULL);
	if (opts->close && opts->producer_id != NULL)
	{
		SpArgInt64(&args, opts->producer_epoch);
		SpArgInt64(&args, opts->producer_seq);
	}
	else
	{
		SpArgNull(&args);
		SpArgNull(&args);
	}
	SpExec(&stream_advance, &args, false, 0);
	if (opts->close)
		row->closed = true;
}

/*
 * The members names[0..nnames) of the options argument argno into m (absent
 * ones left NULL); false when the argument is SQL NULL, no options. Anything
 * but a JSON object, and an unknown or repeated member, is an error.
 */
bool
StreamOptionMembers(FunctionCallInfo fcinfo, int argno, const char *const *names, int nnames,
					SpJson **m, const char *what)
{
	if (PG_ARGISNULL(argno))
		return false;
	SpJsonMembers(SpCheckJsonKindArg(fcinfo, argno, "options", SPJ_OBJECT, "a JSON object",
									 SP_CHECK_PLAIN),
				  names, nnames, m, what, false, ERRCODE_INVALID_PARAMETER_VALUE, -1);
	return true;
}

/* A boolean option member (absent: false). */
bool
StreamBoolOption(const SpJson *node, const char *field)
{
	if (node == NULL)
		return false;
	if (node->kind != SPJ_BOOL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a boolean", field),
				 errdetail("A JSON %s was given.", SpJsonKindName(node->kind))));
	return node->raw[0] == 't';
}


/* Append {"created":...} or the head of a stream's row: the fields every answer shares. */
void
StreamAppendState(StringInfo buf, const StreamRow *row)
{
	appendStringInfo(buf, "\"streamId\":" INT64_FORMAT ",\"contentType\":", row->stream_id);
	SpAppendString(buf, row->content_type);
	appendStringInfoString(buf, ",\"nextOffset\":");
	StreamAppendOffset(buf, row->tail_epoch, row->tail_seq);
	appendStringInfo(buf, ",\"closed\":%s", row->closed ? "true" : "false");
	StreamAppendTtl(buf, row);
}
