/*
 * stream_writes.c
 *
 * The stream functions that act on one existing stream
 * (docs/contract/streams.md §4): stream_append (with idempotent producers,
 * the stream-wide producer fence and Stream-Seq), stream_head and
 * stream_delete. An append with a body wakes the stream's idle
 * subscriptions (stream_wakes.c); a delete drops the stream's subscription
 * links.
 *
 * Locking: append and delete lock the stream row FOR UPDATE until commit
 * (streams.c states the lock order); head never locks.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "streams.h"

PG_FUNCTION_INFO_V1(stream_append);
PG_FUNCTION_INFO_V1(stream_head);
PG_FUNCTION_INFO_V1(stream_delete);

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

static SpQuery stream_raise_fence = {
	"UPDATE sandbox_persist.streams SET producer_fence = $2 WHERE stream_id = $1",
	2, {INT8OID, INT8OID}
};

/* Read stream_append's options (argument argno; SQL NULL means none). */
static void
StreamReadAppendOptions(FunctionCallInfo fcinfo, int argno, StreamAppendOptions *out)
{
	static const char *const names[] = {"close", "producerId", "producerEpoch", "producerSeq",
	"streamSeq", "streamFence"};
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
	out->stream_fence = StreamBoolOption(m[5], "streamFence");
	if (out->stream_fence && out->producer_id == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("streamFence needs a producer"),
				 errdetail("A stream-wide fence is set by an idempotent append's producerEpoch.")));
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

	if (row->has_fence && o->producer_epoch < row->producer_fence)
		sp_error(SP_STREAM_PRODUCER_EPOCH_STALE,
				 ("stream producer epoch is stale"),
				 "The stream is fenced at producer epoch " INT64_FORMAT "; producer \"%s\" gave epoch "
				 INT64_FORMAT ".", row->producer_fence, o->producer_id, o->producer_epoch);
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
		if (o.stream_fence && (!row.has_fence || o.producer_epoch > row.producer_fence))
		{
			SpArgsInit(&args);
			SpArgInt64(&args, row.stream_id);
			SpArgInt64(&args, o.producer_epoch);
			SpExec(&stream_raise_fence, &args, false, 0);
		}
		if (empty)
			outcome = "closed";
		else
			StreamSubscriptionsWake(path, now);
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
 * contentType, nextOffset, closed, ttlSeconds?, expiresAt?, producerFence?,
 * producer?}: the stream's state without renewing its TTL; producerFence once
 * an append set it; producer {epoch, lastSeq} when producer_id is given and
 * known. A run-logs/<run_id> path is the run's event log (stream_run_logs.c).
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
	if (row.has_fence)
		appendStringInfo(&result, ",\"producerFence\":" INT64_FORMAT, row.producer_fence);
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
	StreamSubscriptionsUnlinkPath(path);
	SPI_finish();
	StreamNotify(row.stream_id);
	initStringInfo(&result);
	appendStringInfo(&result, "{\"softDeleted\":%s}", soft ? "true" : "false");
	PG_RETURN_DATUM(SpJsonResult(&result));
}
