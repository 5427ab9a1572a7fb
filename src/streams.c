/*
 * streams.c
 *
 * Durable streams, the Durable Streams protocol stored in PostgreSQL
 * (docs/contract/streams.md): stream_append, stream_head and stream_delete,
 * and what the other stream files share: loading a row by path or from an
 * SPI result, the visibility rule, the release of fork sources, the expiry
 * of a stream, and the write of a body as the next entry. Creates and forks
 * are in stream_create.c, bodies and content types in stream_bodies.c, the
 * offset format in stream_offsets.c, reads in stream_reads.c, and
 * maintain()'s purge (A13) in stream_purge.c.
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

PG_FUNCTION_INFO_V1(stream_append);
PG_FUNCTION_INFO_V1(stream_head);
PG_FUNCTION_INFO_V1(stream_delete);

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

static SpQuery stream_producer = {
	"SELECT epoch, last_seq FROM sandbox_persist.stream_producers"
	" WHERE stream_id = $1 AND producer_id = $2",
	2, {INT8OID, TEXTOID}
};

static SpQuery stream_producer_upsert = {
	"INSERT INTO sandbox_persist.stream_producers (stream_id, producer_id, epoch, last_seq)"
	" VALUES ($1, $2, $3, $4) ON CONFLICT (stream_id, producer_id)"
	" DO UPDATE SET epoch = EXCLUDED.epoch, last_seq = EXCLUDED.last_seq",
	4, {INT8OID, TEXTOID, INT8OID, INT8OID}
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

/* Read stream_append's options (argument argno; SQL NULL means none). */
static void
StreamReadAppendOptions(FunctionCallInfo fcinfo, int argno, StreamAppendOptions *out)
{
	static const char *const names[] = {"close", "producerId", "producerEpoch", "producerSeq",
	"streamSeq"};
	SpJson	   *m[lengthof(names)] = {NULL};

	memset(out, 0, sizeof(StreamAppendOptions));
	if (!StreamOptionMembers(fcinfo, argno, names, lengthof(names), m, "stream append options"))
		return;
	out->close = StreamBoolOption(m[0], "close");
	if ((m[1] == NULL) != (m[2] == NULL) || (m[1] == NULL) != (m[3] == NULL))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("producerId, producerEpoch and producerSeq go together"),
				 errdetail("An idempotent append names its producer, the producer's epoch and its sequence number.")));
	if (m[1] != NULL)
	{
		out->producer_id = SpCheckIdJson(m[1], "producerId", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
		out->producer_epoch = SpCheckIntJson(m[2], "producerEpoch", 0);
		out->producer_seq = SpCheckIntJson(m[3], "producerSeq", 0);
		out->accepted_seq = out->producer_seq;
	}
	if (m[4] != NULL)
		out->stream_seq = SpCheckStringJson(m[4], "streamSeq", true, SP_ID_MAX_BYTES,
											SP_CHECK_PLAIN);
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

/* Whether an append repeats the producer tuple that closed the stream. */
static bool
StreamRepeatsClose(const StreamRow *row, const StreamAppendOptions *o)
{
	return o->producer_id != NULL && row->closed_producer != NULL &&
		strcmp(o->producer_id, row->closed_producer) == 0 &&
		o->producer_epoch == row->closed_epoch && o->producer_seq == row->closed_seq;
}

/*
 * A producer's epoch and last seq on a stream into *epoch and *last; false
 * (both left as they are) when the stream has not seen it. Inside SPI.
 */
static bool
StreamProducerAt(int64 stream_id, const char *producer_id, bool read_only, int64 *epoch,
				 int64 *last)
{
	SpArgs		args;

	SpArgsInit(&args);
	SpArgInt64(&args, stream_id);
	SpArgText(&args, producer_id);
	if (SpExec(&stream_producer, &args, read_only, 1) != 1)
		return false;
	SpGetInt64(0, SpColumn("epoch"), epoch);
	SpGetInt64(0, SpColumn("last_seq"), last);
	return true;
}

/*
 * The producer rules of §4 rule 2: true when the append is a duplicate
 * (nothing to write; o->accepted_seq becomes the producer's last seq, which
 * the protocol's Producer-Seq reports); raises PRODUCER_EPOCH_STALE,
 * PRODUCER_SEQ_GAP or 22023. Inside SPI, under the stream row lock.
 */
static bool
StreamCheckProducer(const StreamRow *row, StreamAppendOptions *o)
{
	int64		epoch = -1;
	int64		last = -1;

	StreamProducerAt(row->stream_id, o->producer_id, false, &epoch, &last);
	if (o->producer_epoch < epoch)
		sp_error(SP_STREAM_PRODUCER_EPOCH_STALE,
				 ("stream producer epoch is stale"),
				 "Producer \"%s\" is at epoch " INT64_FORMAT "; epoch " INT64_FORMAT
				 " was given.", o->producer_id, epoch, o->producer_epoch);
	if (o->producer_epoch > epoch)
	{
		if (o->producer_seq != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("a new producer epoch starts at producerSeq 0"),
					 errdetail("Producer \"%s\" began epoch " INT64_FORMAT " at sequence "
							   INT64_FORMAT ".", o->producer_id, o->producer_epoch,
							   o->producer_seq)));
		return false;
	}
	if (o->producer_seq <= last)
	{
		o->accepted_seq = last;
		return true;
	}
	if (o->producer_seq > last + 1)
		sp_error(SP_STREAM_PRODUCER_SEQ_GAP,
				 ("stream producer sequence gap"),
				 "Producer \"%s\" expected sequence " INT64_FORMAT ", received " INT64_FORMAT ".",
				 o->producer_id, last + 1, o->producer_seq);
	return false;
}

/* Append the producer fields of an append's answer and close it. */
static void
StreamAppendResultEnd(StringInfo buf, const StreamAppendOptions *o)
{
	if (o->producer_id != NULL)
		appendStringInfo(buf, ",\"producerEpoch\":" INT64_FORMAT ",\"producerSeq\":" INT64_FORMAT,
						 o->producer_epoch, o->accepted_seq);
	appendStringInfoChar(buf, '}');
}

/*
 * stream_append(path text, content_type text, body bytea, options json,
 * now_ms bigint) -> json {outcome, streamId, nextOffset, closed,
 * producerEpoch?, producerSeq?}: append one body as one entry, and/or close
 * (§4 rule 2, in its check order).
 */
Datum
stream_append(PG_FUNCTION_ARGS)
{
	char	   *path = SpCheckIdArg(fcinfo, 0, "path", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	char	   *content_type = PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1));
	bytea	   *body = PG_ARGISNULL(2) ? NULL : PG_GETARG_BYTEA_PP(2);
	int64		now = SpNowMs(fcinfo, 4);
	bool		empty = body == NULL || VARSIZE_ANY_EXHDR(body) == 0;
	const char *outcome = "appended";
	StreamAppendOptions o;
	StreamRow	row;
	StreamBody	b;
	StringInfoData result;
	MemoryContext outer = CurrentMemoryContext;
	MemoryContext spi;
	SpArgs		args;
	bool		found;
	bool		write = true;

	if (StreamIsRunLogPath(path))
		StreamRefuseRunLogWrite(path, "append");
	StreamReadAppendOptions(fcinfo, 3, &o);
	SPI_connect();
	found = StreamLoad(path, true, &row);
	StreamRequireVisible(&row, found, now, path);
	if (row.closed)
	{
		if (StreamRepeatsClose(&row, &o))
			outcome = "duplicate";
		else if (o.close && empty)
			outcome = "closed";
		else
			sp_error(SP_STREAM_CLOSED,
					 ("stream closed"),
					 "The stream at path \"%s\" is closed; it takes no more appends.", path);
		write = false;
	}
	if (write && !empty &&
		(content_type == NULL || !StreamSameMediaType(content_type, row.content_type)))
		sp_error(SP_STREAM_CONFLICT,
				 ("append content type differs from the stream's"),
				 "The stream at path \"%s\" has content type \"%s\".", path, row.content_type);
	if (write && o.producer_id != NULL && StreamCheckProducer(&row, &o))
	{
		outcome = "duplicate";
		write = false;
	}
	if (write && o.stream_seq != NULL && row.stream_seq != NULL &&
		strcmp(o.stream_seq, row.stream_seq) <= 0)
		sp_error(SP_STREAM_SEQ_CONFLICT,
				 ("stream sequence not above the last"),
				 "Stream-Seq \"%s\" is not above the last one, \"%s\".", o.stream_seq,
				 row.stream_seq);
	if (write)
	{
		if (empty && !o.close)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("append body is empty"),
					 errdetail("An append without close carries at least one byte.")));
		StreamReadBody(body, row.json_mode, &b);
		if (b.empty && !empty)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("append body is an empty JSON array"),
					 errdetail("An append to a JSON stream carries at least one message.")));
		StreamWrite(&row, &b, &o, now);
		if (o.producer_id != NULL)
		{
			SpArgsInit(&args);
			SpArgInt64(&args, row.stream_id);
			SpArgText(&args, o.producer_id);
			SpArgInt64(&args, o.producer_epoch);
			SpArgInt64(&args, o.producer_seq);
			SpExec(&stream_producer_upsert, &args, false, 0);
		}
		if (empty)
			outcome = "closed";
		StreamNotify(row.stream_id);
	}
	spi = MemoryContextSwitchTo(outer);
	initStringInfo(&result);
	appendStringInfo(&result, "{\"outcome\":\"%s\",\"streamId\":" INT64_FORMAT ",\"nextOffset\":",
					 outcome, row.stream_id);
	StreamAppendOffset(&result, row.tail_epoch, row.tail_seq);
	appendStringInfo(&result, ",\"closed\":%s", row.closed ? "true" : "false");
	StreamAppendResultEnd(&result, &o);
	MemoryContextSwitchTo(spi);
	SPI_finish();
	PG_RETURN_DATUM(SpJsonResult(&result));
}

/*
 * stream_head(path text, producer_id text, now_ms bigint) -> json {streamId,
 * contentType, nextOffset, closed, ttlSeconds?, expiresAt?, producer?}: the
 * stream's state without renewing its TTL; producer {epoch, lastSeq} when
 * producer_id is given and known. A runs/<run_id> path is the run's event
 * log (stream_run_logs.c).
 */
Datum
stream_head(PG_FUNCTION_ARGS)
{
	char	   *path = SpCheckIdArg(fcinfo, 0, "path", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	char	   *producer_id = PG_ARGISNULL(1) ? NULL :
		SpCheckIdArg(fcinfo, 1, "producer_id", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	int64		now = SpNowMs(fcinfo, 2);
	StreamRow	row;
	StringInfoData result;
	MemoryContext outer = CurrentMemoryContext;
	MemoryContext spi;
	bool		found;

	if (StreamIsRunLogPath(path))
		PG_RETURN_DATUM(StreamRunLogHead(path));
	SPI_connect();
	found = StreamLoad(path, false, &row);
	StreamRequireVisible(&row, found, now, path);
	spi = MemoryContextSwitchTo(outer);
	initStringInfo(&result);
	appendStringInfoChar(&result, '{');
	StreamAppendState(&result, &row);
	MemoryContextSwitchTo(spi);
	if (producer_id != NULL)
	{
		int64		epoch = 0;
		int64		last = 0;

		if (StreamProducerAt(row.stream_id, producer_id, true, &epoch, &last))
		{
			spi = MemoryContextSwitchTo(outer);
			appendStringInfo(&result, ",\"producer\":{\"epoch\":" INT64_FORMAT ",\"lastSeq\":"
							 INT64_FORMAT "}", epoch, last);
			MemoryContextSwitchTo(spi);
		}
	}
	spi = MemoryContextSwitchTo(outer);
	appendStringInfoChar(&result, '}');
	MemoryContextSwitchTo(spi);
	SPI_finish();
	PG_RETURN_DATUM(SpJsonResult(&result));
}

/*
 * stream_delete(path text, now_ms bigint) -> json {softDeleted}: delete a
 * stream (§4 rule 4): soft-deleted while forks read through it, else detached
 * for A13 to purge, its sources released up the chain.
 */
Datum
stream_delete(PG_FUNCTION_ARGS)
{
	char	   *path = SpCheckIdArg(fcinfo, 0, "path", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	int64		now = SpNowMs(fcinfo, 1);
	StreamRow	row;
	StringInfoData result;
	bool		found;
	int64		soft;

	if (StreamIsRunLogPath(path))
		StreamRefuseRunLogWrite(path, "delete");
	SPI_connect();
	found = StreamLoad(path, true, &row);
	StreamRequireVisible(&row, found, now, path);
	soft = StreamRemove(&row, now);
	SPI_finish();
	StreamNotify(row.stream_id);
	initStringInfo(&result);
	appendStringInfo(&result, "{\"softDeleted\":%s}", soft ? "true" : "false");
	PG_RETURN_DATUM(SpJsonResult(&result));
}
