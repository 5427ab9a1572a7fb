/*
 * blobs.c
 *
 * The blob store (docs/contract/blobs.md): put, get with ranges,
 * head, delete and list. Bytes live in zstd-compressed chunks of a version
 * (blob_storage.c); a range read decodes only the chunks it overlaps.
 *
 * Locking: put and delete write the key's blobs row, so writers of one key
 * serialise; get and list never lock and read metadata and chunks in one
 * snapshot (the functions are STABLE), so a concurrent overwrite is seen
 * entirely or not at all. head refreshes the GC time of content-addressed
 * keys at most once per quarter of the grace period.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/expandeddatum.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "blobs.h"

/*
 * blob_put and blob_get store and read small objects inline in their blobs
 * row (0.3.0) and refuse an older schema (BLOB_LAYOUT_SINCE).
 */
PG_FUNCTION_INFO_V1(blob_put);
PG_FUNCTION_INFO_V1(blob_get);
PG_FUNCTION_INFO_V1(blob_head);
PG_FUNCTION_INFO_V1(blob_delete);
PG_FUNCTION_INFO_V1(blob_list);

/* The object's record, for blob_head (blob_get reads the row itself: BlobReadRow). */
static SpQuery blob_select = {
	"SELECT " BLOB_RECORD_COLUMNS " FROM sandbox_persist.blobs WHERE blob_key = $1",
	1, {TEXTOID}
};

/* The one column of blob_new_version and of blob_remove's RETURNING. */
#define BLOB_VERSION_COL	1

static SpQuery blob_new_version = {
	"SELECT nextval('sandbox_persist.blob_versions')",
	0, {InvalidOid}
};

static SpQuery blob_head_touch = {
	"UPDATE sandbox_persist.blobs SET relied_on_at = $2"
	" WHERE blob_key = $1 AND (relied_on_at IS NULL OR relied_on_at < $3)",
	3, {TEXTOID, INT8OID, INT8OID}
};

static SpQuery blob_remove = {
	"DELETE FROM sandbox_persist.blobs WHERE blob_key = $1 RETURNING version",
	1, {TEXTOID}
};

/*
 * Keys in [$1, $2) (the prefix as a byte range, so a kept generic plan still
 * scans only the prefix), that really start with the prefix, after the
 * cursor $3, in byte order, at most $4 rows.
 */
static SpQuery blob_page = {
	"SELECT " BLOB_RECORD_COLUMNS " FROM sandbox_persist.blobs"
	" WHERE ($1::text IS NULL OR (blob_key >= $1 AND pg_catalog.starts_with(blob_key, $1)))"
	"   AND ($2::text IS NULL OR blob_key < $2)"
	"   AND ($3::text IS NULL OR blob_key > $3)"
	" ORDER BY blob_key LIMIT $4",
	4, {TEXTOID, TEXTOID, TEXTOID, INT8OID}
};

/* A fresh chunk version id. Inside SPI. */
static int64
BlobNewVersion(void)
{
	SpArgs		args;
	int64		version = 0;

	SpArgsInit(&args);
	SpExec(&blob_new_version, &args, false, 1);
	SpGetInt64(0, BLOB_VERSION_COL, &version);
	return version;
}

/*
 * blob_put(blob_key text, body bytea, options json, now_ms bigint) -> json:
 * store the bytes (overwrite semantics) and return the BlobRecord. A
 * content-addressed key must match its bytes' SHA-256; when it already
 * exists no bytes are written. A non-empty body of at most one chunk and
 * sandbox_persist.blob_inline_max bytes goes into its blobs row in one
 * statement.
 */
Datum
blob_put(PG_FUNCTION_ARGS)
{
	char	   *key;
	bytea	   *body;
	BlobOptions opts;
	int64		now;
	MemoryContext outer = CurrentMemoryContext;
	Datum		record = (Datum) 0;
	bool		found = false;
	int64		size;

	SpRequireSchema(BLOB_LAYOUT_SINCE, "blob_put");
	BlobRequireCodecSchema("blob_put");
	key = BlobCheckKeyArg(fcinfo, 0);
	SpCheckArgNotNull(fcinfo, 1, "body", "An empty object is an empty bytea, not NULL.", SP_CHECK_PLAIN);
	body = PG_GETARG_BYTEA_PP(1);
	size = VARSIZE_ANY_EXHDR(body);
	BlobReadOptions(fcinfo, 2, &opts);
	now = SpNowMs(fcinfo, 3);
	if (BlobIsContentAddressed(key))
	{
		pg_cryptohash_ctx *hash = BlobHashStart();

		if (pg_cryptohash_update(hash, (uint8 *) VARDATA_ANY(body), VARSIZE_ANY_EXHDR(body)) < 0)
			elog(ERROR, "could not update a SHA-256 hash");
		BlobHashCheck(hash, key);
	}

	SPI_connect();
	if (size > 0 && size <= Min(sp_blob_inline_max, sp_blob_chunk_size))
		record = BlobPublishInline(key, VARDATA_ANY(body), (int) size, &opts, now, outer);
	else
	{
		if (BlobIsContentAddressed(key))
			record = BlobTouch(key, &opts, now, outer, &found);
		if (!found)
		{
			int64		version = BlobNewVersion();

			BlobWriteChunks(version, 0, VARDATA_ANY(body), size, sp_blob_chunk_size);
			record = BlobPublish(key, version, size, &opts, now, outer);
		}
	}
	SPI_finish();
	PG_RETURN_DATUM(record);
}

/* Raise 22003 with the upstream text for a range outside the object. */
static void
BlobRangeError(const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
			 errmsg("invalid blob range"),
			 errdetail("%s", detail)));
}

/* Bytes of a DataRow message beyond its two column values. */
#define BLOB_ROW_OVERHEAD 64

StaticAssertDecl((Size) BLOB_MAX_READ_LIMIT * 2 + 2 + BLOB_ROW_OVERHEAD < MaxAllocSize,
				 "BLOB_MAX_READ_LIMIT too large for the bytea text of one row");

/* Raise 54000 for a read of served bytes above limit, pointing at ranged reads. */
static void
BlobReadTooLarge(int64 served, int64 limit)
{
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("blob read is too large"),
			 errdetail("Reading " INT64_FORMAT " bytes exceeds the limit of " INT64_FORMAT
					   " bytes (sandbox_persist.blob_max_read is %d bytes).",
					   served, limit, sp_blob_max_read),
			 errhint("Read the object in ranges: blob_get(blob_key, range_offset, range_length)"
					 " with range_length at most " INT64_FORMAT ".", limit)));
}

/*
 * Let the result tuplestore keep a row of row_bytes in memory. The row is in
 * memory already; a store limited to work_mem would write an object larger
 * than that to a temporary file and read it back before it is sent, which
 * made whole reads of large objects slower than a plain bytea column. The
 * store is empty here, so it is simply replaced by a larger one.
 */
static void
BlobRoomForRow(ReturnSetInfo *rsinfo, int64 row_bytes)
{
	int64		need_kb = row_bytes / 1024 + 64;
	MemoryContext old;

	if (need_kb <= work_mem)
		return;
	old = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	tuplestore_end(rsinfo->setResult);
	rsinfo->setResult = tuplestore_begin_heap((rsinfo->allowedModes & SFRM_Materialize_Random) != 0,
											  false, (int) Min(need_kb + work_mem, MAX_KILOBYTES));
	MemoryContextSwitchTo(old);
}

/*
 * The bytes [offset, offset + served) of an object into dst: sliced from its
 * blobs row when inline, else read from its version's chunks through SPI.
 */
static void
BlobReadBody(const BlobRow *row, int64 offset, int64 served, char *dst)
{
	if (!row->is_inline)
	{
		SPI_connect();
		BlobReadRange(row->version, offset, served, dst, NULL, true);
		SPI_finish();
	}
	else if (served > 0)
	{
		if (row->size > BLOB_CHUNK_SIZE_MAX || row->inline_data == (Datum) 0)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("stored blob chunk is corrupt"),
					 errdetail("An inline object of " INT64_FORMAT " bytes is larger than a chunk"
							   " or has no bytes.", row->size)));
		BlobSliceStored(row->inline_codec, row->inline_data, (int32) row->size, offset, served,
						dst, NULL);
	}
}

/*
 * The body of a large read as an expanded datum whose flat form is the
 * bytea: the tuplestore that holds blob_get's row sizes the row with
 * get_flat_size and then has flatten_into decode the bytes straight into it.
 * A body built first is one more buffer of the whole read, written and
 * copied. Above glibc's largest mmap threshold (32 MiB) every such buffer is
 * a fresh mapping whose pages fault in one by one: for a 64 MiB object that
 * was a fifth of the read's server time, on the machine of bench/results.
 * Smaller bodies are built first: there the freed body is the heap memory
 * the row's output buffers reuse, and without it a 1 MiB read faulted in
 * about a thousand pages each time (measured with /proc/self/stat). The
 * datum never leaves blob_get: tuplestore_putvalues flattens it at once.
 */
#define BLOB_BODY_EXPANDED_MIN ((int64) 32 * 1024 * 1024)

typedef struct BlobBody
{
	ExpandedObjectHeader hdr;
	const BlobRow *row;
	int64		offset;
	int64		served;
} BlobBody;

/* get_flat_size of a BlobBody: the bytea of the bytes served. */
static Size
BlobBodyFlatSize(ExpandedObjectHeader *eohptr)
{
	return VARHDRSZ + ((BlobBody *) eohptr)->served;
}

/* flatten_into of a BlobBody: read the bytes into the row being formed. */
static void
BlobBodyFlatten(ExpandedObjectHeader *eohptr, void *result, Size allocated_size)
{
	BlobBody   *b = (BlobBody *) eohptr;
	MemoryContext old = MemoryContextSwitchTo(b->hdr.eoh_context);

	Assert(allocated_size == VARHDRSZ + (Size) b->served);
	SET_VARSIZE(result, allocated_size);
	BlobReadBody(b->row, b->offset, b->served, VARDATA(result));
	MemoryContextSwitchTo(old);
}

static const ExpandedObjectMethods blob_body_methods = {
	BlobBodyFlatSize,
	BlobBodyFlatten
};

/* Bytes [offset, offset + served) of the row's object, a bytea or (large) a BlobBody. */
static Datum
BlobBodyDatum(const BlobRow *row, int64 offset, int64 served)
{
	MemoryContext cxt;
	BlobBody   *b;

	if (served < BLOB_BODY_EXPANDED_MIN)
	{
		bytea	   *body = palloc(VARHDRSZ + served);

		SET_VARSIZE(body, VARHDRSZ + served);
		BlobReadBody(row, offset, served, VARDATA(body));
		return PointerGetDatum(body);
	}
	cxt = AllocSetContextCreate(CurrentMemoryContext, "blob body", ALLOCSET_SMALL_SIZES);
	b = MemoryContextAlloc(cxt, sizeof(BlobBody));
	EOH_init_header(&b->hdr, &blob_body_methods, cxt);
	b->row = row;
	b->offset = offset;
	b->served = served;
	return EOHPGetRODatum(&b->hdr);
}

/*
 * blob_get(blob_key text, range_offset bigint, range_length bigint) ->
 * TABLE(record json, body bytea): the whole object, or exactly the requested
 * slice with `range` in the record; zero rows when the key does not exist.
 * The row is read without SPI (BlobReadRow), and the result descriptor is
 * the executor's expected one, not rebuilt from the catalog on every call.
 */
Datum
blob_get(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bool		ranged = !PG_ARGISNULL(1);
	char	   *key;
	BlobRow		row;
	int64		offset = 0;
	int64		served;
	StringInfoData buf;
	Datum		values[2];
	bool		nulls[2] = {false, false};

	SpRequireSchema(BLOB_LAYOUT_SINCE, "blob_get");
	if (!ranged && !PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("range_length requires range_offset"),
				 errdetail("A range starts at an offset; pass range_offset 0 to read from the start.")));
	key = BlobCheckKeyArg(fcinfo, 0);
	InitMaterializedSRF(fcinfo, rsinfo != NULL && IsA(rsinfo, ReturnSetInfo) && rsinfo->expectedDesc != NULL
						? MAT_SRF_USE_EXPECTED_DESC : 0);
	if (!BlobReadRow(key, &row))
		return (Datum) 0;
	served = row.size;
	if (ranged)
	{
		offset = PG_GETARG_INT64(1);
		if (offset < 0 || offset >= row.size)
			BlobRangeError(psprintf("Blob range offset " INT64_FORMAT
									" is outside the object (size " INT64_FORMAT ").",
									offset, row.size));
		if (!PG_ARGISNULL(2))
		{
			if (PG_GETARG_INT64(2) < 0)
				BlobRangeError(psprintf("Blob range length " INT64_FORMAT " is not valid.",
										PG_GETARG_INT64(2)));
			served = Min(PG_GETARG_INT64(2), row.size - offset);
		}
		else
			served = row.size - offset;
	}
	if (served > sp_blob_max_read)
		BlobReadTooLarge(served, sp_blob_max_read);
	initStringInfo(&buf);
	BlobAppendRow(&buf, &row);
	/* the row (record text + bytea hex text) must fit one message */
	if ((Size) served * 2 + 2 + buf.len + BLOB_ROW_OVERHEAD >= MaxAllocSize)
		BlobReadTooLarge(served, (MaxAllocSize - BLOB_ROW_OVERHEAD - buf.len - 2) / 2);
	if (ranged)
	{
		/* splice "range" in before the closing brace */
		buf.len--;
		appendStringInfo(&buf, ",\"range\":{\"offset\":" INT64_FORMAT ",\"length\":"
						 INT64_FORMAT "}}", offset, served);
	}
	values[0] = SpJsonResult(&buf);
	values[1] = BlobBodyDatum(&row, offset, served);
	BlobRoomForRow(rsinfo, (int64) served + buf.len);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	return (Datum) 0;
}

/*
 * blob_head(blob_key text, now_ms bigint) -> json: the BlobRecord without
 * bytes, or NULL. For a content-addressed key it also refreshes the GC time.
 */
Datum
blob_head(PG_FUNCTION_ARGS)
{
	char	   *key = BlobCheckKeyArg(fcinfo, 0);
	int64		now = SpNowMs(fcinfo, 1);
	MemoryContext outer = CurrentMemoryContext;
	SpArgs		args;
	StringInfoData buf;
	bool		found;

	SPI_connect();
	if (BlobIsContentAddressed(key))
	{
		SpArgsInit(&args);
		SpArgText(&args, key);
		SpArgInt64(&args, now);
		/* refresh at most once per quarter of the grace: $3 is the cutoff */
		SpArgInt64(&args, SpTimeBefore(now, (int64) sp_blob_gc_grace_s * 1000 / 4));
		SpExec(&blob_head_touch, &args, false, 0);
	}
	SpArgsInit(&args);
	SpArgText(&args, key);
	found = SpExec(&blob_select, &args, false, 1) == 1;
	if (found)
	{
		MemoryContext spi = MemoryContextSwitchTo(outer);

		initStringInfo(&buf);
		BlobAppendRecord(&buf, 0, 1);
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();
	if (!found)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(SpJsonResult(&buf));
}

/* blob_delete(blob_key text) -> boolean: remove the object and all its chunks. */
Datum
blob_delete(PG_FUNCTION_ARGS)
{
	char	   *key = BlobCheckKeyArg(fcinfo, 0);
	SpArgs		args;
	int64		version;
	bool		found;

	SPI_connect();
	SpArgsInit(&args);
	SpArgText(&args, key);
	found = SpExec(&blob_remove, &args, false, 0) == 1;
	if (found && SpGetInt64(0, BLOB_VERSION_COL, &version))
		BlobDeleteVersion(version);
	SPI_finish();
	PG_RETURN_BOOL(found);
}

/*
 * The smallest string greater than every string starting with prefix, in
 * byte order: the prefix with its last byte incremented (UTF-8 text never
 * contains 0xFF, so the increment cannot overflow for valid input).
 */
static text *
BlobPrefixUpperBound(const char *prefix)
{
	int			len = strlen(prefix);
	text	   *t;

	while (len > 0 && (unsigned char) prefix[len - 1] == 0xFF)
		len--;
	if (len == 0)
		return NULL;
	t = cstring_to_text_with_len(prefix, len);
	((unsigned char *) VARDATA(t))[len - 1]++;
	return t;
}

/*
 * blob_list(prefix text, list_cursor text, page_limit integer) -> json
 * {objects, truncated, cursor?}: keys starting with prefix (literally), after
 * the cursor, in byte order; the cursor of a truncated page is its last key.
 */
Datum
blob_list(PG_FUNCTION_ARGS)
{
	char	   *prefix = PG_ARGISNULL(0) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(0));
	char	   *cursor = PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1));
	int64		limit = SpCheckRowLimitArg(fcinfo, 2, "page_limit", SP_NO_ROW_LIMIT);
	MemoryContext outer = CurrentMemoryContext;
	MemoryContext spi;
	StringInfoData buf;
	SpArgs		args;
	text	   *upper;
	int			n;
	int			shown;

	initStringInfo(&buf);
	if (limit == 0)
	{
		appendStringInfoString(&buf, "{\"objects\":[],\"truncated\":false}");
		PG_RETURN_DATUM(SpJsonResult(&buf));
	}
	upper = prefix && *prefix ? BlobPrefixUpperBound(prefix) : NULL;

	SPI_connect();
	SpArgsInit(&args);
	SpArgText(&args, prefix && *prefix ? prefix : NULL);
	if (upper != NULL)
		SpArgDatum(&args, PointerGetDatum(upper));
	else
		SpArgNull(&args);
	SpArgText(&args, cursor);
	/* one extra row tells whether more remain */
	SpArgInt64(&args, limit < 0 ? PG_INT64_MAX : limit + 1);
	n = SpExec(&blob_page, &args, true, 0);
	shown = (limit >= 0 && n > limit) ? (int) limit : n;
	spi = MemoryContextSwitchTo(outer);
	appendStringInfoString(&buf, "{\"objects\":[");
	for (int i = 0; i < shown; i++)
	{
		if (i > 0)
			appendStringInfoChar(&buf, ',');
		BlobAppendRecord(&buf, i, 1);
	}
	appendStringInfoString(&buf, "],\"truncated\":");
	if (shown < n)
	{
		appendStringInfoString(&buf, "true,\"cursor\":");
		SpAppendString(&buf, SpGetText(shown - 1, 1));
	}
	else
		appendStringInfoString(&buf, "false");
	appendStringInfoChar(&buf, '}');
	MemoryContextSwitchTo(spi);
	SPI_finish();
	PG_RETURN_DATUM(SpJsonResult(&buf));
}
