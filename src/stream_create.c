/*
 * stream_create.c
 *
 * Creation of durable streams (docs/contract/streams.md §4 rule 1):
 * stream_create, plain or as a fork of another stream, with its options, the
 * idempotent comparison with a stream already at the path, and the fork
 * point: the source's tail or an offset it issued, and a sub-offset's copy
 * of the first messages or bytes of the next entry.
 *
 * Locking: a create locks the row at its path FOR UPDATE when there is one
 * (an expired one leaves the path as a delete does, streams.c). A fork then
 * locks its source row FOR UPDATE (its fork_count changes) before it inserts
 * its own row, which no one else can lock yet; two creates of one path meet
 * on the path's unique index (ON CONFLICT DO NOTHING), and the loser compares
 * with the winner's row. Lock order is thus a stream before its source, as
 * everywhere in the streams (streams.c). A new stream is then linked to the
 * subscriptions that name or match it, under the shared pattern lock
 * (stream_subscriptions.c), and a first body wakes them (stream_wakes.c).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "streams.h"

PG_FUNCTION_INFO_V1(stream_create);

/* The id of the row at a path, whatever its state (idempotent fork creates compare it). */
static SpQuery stream_id_by_path = {
	"SELECT stream_id FROM sandbox_persist.streams WHERE path = $1",
	1, {TEXTOID}
};

/* A new stream; nothing when a concurrent create took the path first. */
static SpQuery stream_insert = {
	"INSERT INTO sandbox_persist.streams (path, content_type, json_mode, ttl_seconds, expires_at,"
	"  created_at, touched_at, tail_seq, tail_epoch, source_id, fork_seq, fork_offset,"
	"  fork_sub_offset)"
	" VALUES ($1, $2, $3, $4, $5, $6, $6, $7, $8, $9, $10, $11, $12)"
	" ON CONFLICT (path) DO NOTHING RETURNING stream_id",
	12, {TEXTOID, TEXTOID, BOOLOID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID,
	INT8OID, TEXTOID, INT8OID}
};

static SpQuery stream_fork_count_up = {
	"UPDATE sandbox_persist.streams SET fork_count = fork_count + 1 WHERE stream_id = $1",
	1, {INT8OID}
};

/* The parsed options of stream_create. */
typedef struct StreamCreateOptions
{
	bool		has_ttl;
	int64		ttl_seconds;
	bool		has_expires;
	int64		expires_at;
	bool		closed;
	char	   *forked_from;	/* NULL: not a fork */
	char	   *fork_offset;	/* NULL: the source's tail */
	bool		has_sub;
	int64		fork_sub_offset;
} StreamCreateOptions;

/* An integer option member that must not be negative (22023 when it is). */
static int64
StreamNonNegativeOption(const SpJson *node, const char *field)
{
	int64		v = SpCheckIntJson(node, field, PG_INT64_MIN);

	if (v < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be negative", field),
				 errdetail("A value of " INT64_FORMAT " was given.", v)));
	return v;
}

/* Read stream_create's options (argument argno; SQL NULL means none). */
static void
StreamReadCreateOptions(FunctionCallInfo fcinfo, int argno, StreamCreateOptions *out)
{
	static const char *const names[] = {"ttlSeconds", "expiresAt", "closed", "forkedFrom",
	"forkOffset", "forkSubOffset"};
	SpJson	   *m[lengthof(names)] = {NULL};

	memset(out, 0, sizeof(StreamCreateOptions));
	if (!StreamOptionMembers(fcinfo, argno, names, lengthof(names), m, "stream create options"))
		return;
	if (m[0] != NULL)
	{
		out->has_ttl = true;
		out->ttl_seconds = StreamNonNegativeOption(m[0], "ttlSeconds");
	}
	if (m[1] != NULL)
	{
		out->has_expires = true;
		out->expires_at = SpCheckIntJson(m[1], "expiresAt", PG_INT64_MIN);
	}
	if (out->has_ttl && out->has_expires)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ttlSeconds and expiresAt exclude each other"),
				 errdetail("A stream has a sliding TTL or an absolute expiry, never both.")));
	out->closed = StreamBoolOption(m[2], "closed");
	if (m[3] != NULL)
		out->forked_from = SpCheckIdJson(m[3], "forkedFrom", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	if (m[4] != NULL)
		out->fork_offset = SpCheckStringJson(m[4], "forkOffset", true, 64, SP_CHECK_PLAIN);
	if (m[5] != NULL)
	{
		out->fork_sub_offset = StreamNonNegativeOption(m[5], "forkSubOffset");
		/* Sub-offset 0 is the same request as none (protocol §4.2): one form. */
		out->has_sub = out->fork_sub_offset > 0;
	}
	if (out->forked_from == NULL && (m[4] != NULL || m[5] != NULL))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("forkOffset and forkSubOffset need forkedFrom"),
				 errdetail("Only a fork is created at an offset of its source.")));
}

/* The id of the row at a path, or -1. Inside SPI. */
static int64
StreamIdAt(const char *path)
{
	SpArgs		args;
	int64		id = -1;

	SpArgsInit(&args);
	SpArgText(&args, path);
	if (SpExec(&stream_id_by_path, &args, false, 1) == 1)
		SpGetInt64(0, SpColumn("stream_id"), &id);
	return id;
}

/*
 * Whether an existing visible stream was created with these parameters
 * (§4 rule 1); a fork created without TTL or expiry compares as inheriting.
 */
static bool
StreamSameCreate(const StreamRow *row, const char *content_type, const StreamCreateOptions *o)
{
	bool		inherited = o->forked_from != NULL && !o->has_ttl && !o->has_expires;

	if (content_type != NULL && !StreamSameMediaType(row->content_type, content_type))
		return false;
	if (!inherited &&
		(row->has_ttl != o->has_ttl || (o->has_ttl && row->ttl_seconds != o->ttl_seconds) ||
		 row->has_expires != o->has_expires || (o->has_expires && row->expires_at != o->expires_at)))
		return false;
	if (row->closed != o->closed)
		return false;
	if ((o->forked_from != NULL) != row->has_source)
		return false;
	if (o->forked_from == NULL)
		return true;
	if (StreamIdAt(o->forked_from) != row->source_id)
		return false;
	if ((o->fork_offset == NULL) != (row->fork_offset == NULL) ||
		(o->fork_offset != NULL && strcmp(o->fork_offset, row->fork_offset) != 0))
		return false;
	return o->has_sub == row->has_sub && (!o->has_sub || o->fork_sub_offset == row->fork_sub_offset);
}

/* 22023 for a fork offset its source cannot serve. */
static void
StreamBadForkOffset(const char *detail, const char *offset)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("fork offset is not an offset of the source"),
			 errdetail(detail, offset)));
}

/*
 * The first j messages (JSON) or bytes of an entry's data into *out; 22023
 * when the entry has fewer.
 */
static void
StreamEntryPrefix(bytea *data, int64 message_count, bool json_mode, int64 j, StreamBody *out)
{
	char	   *d = VARDATA_ANY(data);
	int			len = VARSIZE_ANY_EXHDR(data);

	initStringInfo(&out->data);
	out->empty = false;
	out->message_count = 1;
	if ((json_mode && j > message_count) || (!json_mode && j > len))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("forkSubOffset is past the next entry"),
				 errdetail("The entry after the fork offset holds " INT64_FORMAT " %s; "
						   INT64_FORMAT " were asked for.",
						   json_mode ? message_count : (int64) len,
						   json_mode ? "messages" : "bytes", j)));
	if (!json_mode)
	{
		appendBinaryStringInfo(&out->data, d, (int) j);
		return;
	}
	else
	{
		StringInfoData whole;
		SpJson	   *root;

		initStringInfo(&whole);
		appendStringInfoChar(&whole, '[');
		appendBinaryStringInfo(&whole, d, len);
		appendStringInfoChar(&whole, ']');
		root = SpJsonParse(whole.data, whole.len);
		StreamAppendMessages(&out->data, root, (int) j);
		out->message_count = (int) j;
	}
}

/*
 * Lock and check a fork's source and resolve the fork point: *fork_seq,
 * *fork_epoch; *prefix gets the sub-offset's copy (empty when none). Inside SPI.
 */
static void
StreamForkSource(const StreamCreateOptions *o, const char *content_type, int64 now,
				 StreamRow *src, int64 *fork_seq, int64 *fork_epoch, StreamBody *prefix)
{
	bool		found = StreamLoad(o->forked_from, true, src);
	int64		epoch = src->tail_epoch;
	int64		seq = src->tail_seq;

	if (!found || StreamExpired(src, now))
		sp_error(SP_STREAM_NOT_FOUND,
				 ("fork source not found"),
				 "No stream is at path \"%s\" to fork from.", o->forked_from);
	if (src->deleted)
		sp_error(SP_STREAM_CONFLICT,
				 ("fork source deleted"),
				 "The stream at path \"%s\" was deleted; it cannot be forked.", o->forked_from);
	if (content_type != NULL && !StreamSameMediaType(content_type, src->content_type))
		sp_error(SP_STREAM_CONFLICT,
				 ("fork content type differs from its source"),
				 "The source at path \"%s\" has content type \"%s\".", o->forked_from,
				 src->content_type);
	if (o->fork_offset != NULL)
	{
		StreamOffsetKind kind = StreamParseOffset(o->fork_offset, &epoch, &seq);

		if (kind == STREAM_OFFSET_START)
			epoch = seq = 0;
		else if (kind == STREAM_OFFSET_NOW)
		{
			epoch = src->tail_epoch;
			seq = src->tail_seq;
		}
		else if (seq > src->tail_seq)
			StreamBadForkOffset("Offset %s is past the source's tail.", o->fork_offset);
		else if (seq == 0 ? epoch != 0 :
				 seq == src->tail_seq ? epoch != src->tail_epoch : false)
			StreamBadForkOffset("The source did not issue offset %s.", o->fork_offset);
		else if (seq > 0 && seq < src->tail_seq)
		{
			int64		stored = 0;
			int64		count = 0;

			if (!StreamEntryAt(src->stream_id, seq, &stored, &count, NULL) || stored != epoch)
				StreamBadForkOffset("The source did not issue offset %s.", o->fork_offset);
		}
	}
	*fork_seq = seq;
	*fork_epoch = epoch;
	prefix->empty = true;
	prefix->message_count = 0;
	if (o->has_sub && o->fork_sub_offset > 0)
	{
		int64		next_epoch = 0;
		int64		count = 0;
		bytea	   *data = NULL;

		if (seq >= src->tail_seq ||
			!StreamEntryAt(src->stream_id, seq + 1, &next_epoch, &count, &data))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("forkSubOffset is past the next entry"),
					 errdetail("The source has no entry after the fork offset.")));
		StreamEntryPrefix(data, count, src->json_mode, o->fork_sub_offset, prefix);
	}
}

/*
 * stream_create(path text, content_type text, options json, body bytea,
 * now_ms bigint) -> json {created, streamId, contentType, nextOffset, closed,
 * ttlSeconds?, expiresAt?}: create a stream, or a fork of another, with an
 * optional first body (§4 rule 1); an identical visible stream answers
 * created: false and nothing is written.
 */
Datum
stream_create(PG_FUNCTION_ARGS)
{
	char	   *path = SpCheckIdArg(fcinfo, 0, "path", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	char	   *content_type = PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1));
	bytea	   *body = PG_ARGISNULL(3) ? NULL : PG_GETARG_BYTEA_PP(3);
	int64		now = SpNowMs(fcinfo, 4);
	StreamCreateOptions o;
	StreamAppendOptions close_opts;
	StreamRow	row;
	StreamRow	src;
	StreamBody	prefix;
	StreamBody	first;
	StringInfoData result;
	MemoryContext outer = CurrentMemoryContext;
	MemoryContext spi;
	SpArgs		args;
	int64		fork_seq = 0;
	int64		fork_epoch = 0;
	bool		created = false;

	prefix.empty = true;
	if (StreamIsRunLogPath(path))
		StreamRefuseRunLogWrite(path, "create");
	StreamReadCreateOptions(fcinfo, 2, &o);
	if (o.forked_from != NULL && StreamIsRunLogPath(o.forked_from))
		StreamRefuseRunLogWrite(o.forked_from, "fork");
	SPI_connect();
	for (int attempt = 0; !created; attempt++)
	{
		bool		found = StreamLoad(path, true, &row);
		bool		json_mode;
		const char *ct;

		if (found && !row.deleted && StreamExpired(&row, now))
			found = StreamRemove(&row, now) > 0 && StreamLoad(path, true, &row);
		if (found)
		{
			if (row.deleted)
				sp_error(SP_STREAM_CONFLICT,
						 ("stream path blocked"),
						 "The stream at path \"%s\" was deleted while forks read through it; the path stays taken.",
						 path);
			if (!StreamSameCreate(&row, content_type, &o))
				sp_error(SP_STREAM_CONFLICT,
						 ("stream exists with other parameters"),
						 "The stream at path \"%s\" has another content type, TTL, expiry, closed state or fork source.",
						 path);
			break;
		}
		if (attempt > 0)
			elog(ERROR, "stream path \"%s\" was taken and released during the create", path);
		if (o.forked_from != NULL)
			StreamForkSource(&o, content_type, now, &src, &fork_seq, &fork_epoch, &prefix);
		ct = content_type != NULL ? content_type :
			o.forked_from != NULL ? src.content_type : STREAM_DEFAULT_CONTENT_TYPE;
		json_mode = StreamIsJson(ct);
		StreamReadBody(body, json_mode, &first);
		if (o.forked_from != NULL && !o.has_ttl && !o.has_expires)
		{
			o.has_ttl = src.has_ttl;
			o.ttl_seconds = src.ttl_seconds;
			o.has_expires = src.has_expires;
			o.expires_at = src.expires_at;
		}
		SpArgsInit(&args);
		SpArgText(&args, path);
		SpArgText(&args, ct);
		SpArgBool(&args, json_mode);
		if (o.has_ttl)
			SpArgInt64(&args, o.ttl_seconds);
		else
			SpArgNull(&args);
		if (o.has_expires)
			SpArgInt64(&args, o.expires_at);
		else
			SpArgNull(&args);
		SpArgInt64(&args, now);
		SpArgInt64(&args, fork_seq);
		SpArgInt64(&args, fork_epoch);
		if (o.forked_from != NULL)
		{
			SpArgInt64(&args, src.stream_id);
			SpArgInt64(&args, fork_seq);
			SpArgText(&args, o.fork_offset);
			if (o.has_sub)
				SpArgInt64(&args, o.fork_sub_offset);
			else
				SpArgNull(&args);
		}
		else
		{
			SpArgNull(&args);
			SpArgNull(&args);
			SpArgNull(&args);
			SpArgNull(&args);
		}
		if (SpExec(&stream_insert, &args, false, 1) == 0)
			continue;			/* a concurrent create won: compare with it */
		created = true;
		memset(&row, 0, sizeof(row));
		SpGetInt64(0, SpColumn("stream_id"), &row.stream_id);
		row.content_type = (char *) ct;
		row.json_mode = json_mode;
		row.has_ttl = o.has_ttl;
		row.ttl_seconds = o.ttl_seconds;
		row.has_expires = o.has_expires;
		row.expires_at = o.expires_at;
		row.tail_seq = fork_seq;
		row.tail_epoch = fork_epoch;
		if (o.forked_from != NULL)
		{
			SpArgsInit(&args);
			SpArgInt64(&args, src.stream_id);
			SpExec(&stream_fork_count_up, &args, false, 0);
		}
		StreamSubscriptionsLinkNew(path, &row);
		memset(&close_opts, 0, sizeof(close_opts));
		if (!prefix.empty && o.forked_from != NULL)
			StreamWrite(&row, &prefix, &close_opts, now);
		close_opts.close = o.closed;
		StreamWrite(&row, &first, &close_opts, now);
		if (!first.empty || (!prefix.empty && o.forked_from != NULL))
			StreamSubscriptionsWake(path, now);
	}
	spi = MemoryContextSwitchTo(outer);
	initStringInfo(&result);
	appendStringInfo(&result, "{\"created\":%s,", created ? "true" : "false");
	StreamAppendState(&result, &row);
	appendStringInfoChar(&result, '}');
	MemoryContextSwitchTo(spi);
	SPI_finish();
	PG_RETURN_DATUM(SpJsonResult(&result));
}
