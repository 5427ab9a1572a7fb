/*
 * blob_storage.c
 *
 * The storage layer under blob_put and streamed uploads: key and option
 * checks, content addressing, writing a byte range as fixed-size chunks,
 * reading any byte range back (only the chunks that overlap it), slicing a
 * stored chunk or inline object, publishing a staged version as the object
 * behind a key, and publishing a small object inline in its blobs row.
 *
 * Locking: BlobPublish, BlobPublishInline and BlobTouch write the key's
 * blobs row, whose row lock serialises writers of one key until commit;
 * readers never lock and see either the old version or the new one (chunks
 * of a version and the bytes of an inline row version are immutable).
 */
#include "postgres.h"

#include "access/detoast.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "blobs.h"

static SpQuery blob_chunk_insert = {
	"INSERT INTO sandbox_persist.blob_chunks (version, chunk_offset, raw_length, codec, data)"
	" VALUES ($1, $2, $3, $4, $5)",
	5, {INT8OID, INT8OID, INT4OID, INT2OID, BYTEAOID}
};

static SpQuery blob_chunk_delete = {
	"DELETE FROM sandbox_persist.blob_chunks WHERE version = $1",
	1, {INT8OID}
};

/* The chunks overlapping [$2, $3): from the one containing $2, in order. */
static SpQuery blob_chunk_range = {
	"SELECT chunk_offset, raw_length, codec, data FROM sandbox_persist.blob_chunks"
	" WHERE version = $1 AND chunk_offset < $3"
	"   AND chunk_offset >= coalesce((SELECT max(chunk_offset)"
	"         FROM sandbox_persist.blob_chunks WHERE version = $1 AND chunk_offset <= $2), 0)"
	" ORDER BY chunk_offset",
	3, {INT8OID, INT8OID, INT8OID}
};

/*
 * Publish a version as the object behind a key: insert, or replace every
 * field but createdAt. replaced_version hands back the version the update
 * replaced, so its chunks can be deleted; the row lock taken by ON CONFLICT
 * makes a concurrent writer of the same key wait and then replace ours.
 * Two texts: the 0.3.0 one also drops an inline object the chunks replace;
 * the 0.2.0 schema, still served by this library until it is updated, has
 * no inline columns.
 */
#define BLOB_PUBLISH_SQL(CLEAR_INLINE) \
	"INSERT INTO sandbox_persist.blobs AS b (blob_key, version, size, etag, content_type," \
	" custom_metadata, created_at, updated_at, relied_on_at)" \
	" VALUES ($1, $2, $3, nextval('sandbox_persist.blob_etags')::text, $4, $5, $6, $6," \
	"         CASE WHEN $7 THEN $6 END)" \
	" ON CONFLICT (blob_key) DO UPDATE SET version = EXCLUDED.version, size = EXCLUDED.size," \
	" etag = EXCLUDED.etag, content_type = EXCLUDED.content_type," \
	" custom_metadata = EXCLUDED.custom_metadata, updated_at = EXCLUDED.updated_at," \
	" relied_on_at = EXCLUDED.relied_on_at, replaced_version = b.version" CLEAR_INLINE \
	" RETURNING replaced_version, " BLOB_RECORD_COLUMNS

static SpQuery blob_publish = {
	BLOB_PUBLISH_SQL(", inline_codec = NULL, inline_data = NULL"),
	7, {TEXTOID, INT8OID, INT8OID, TEXTOID, JSONOID, INT8OID, BOOLOID}
};

/*
 * Publish a small object inline, in its blobs row: one statement, one heap
 * row (plus its TOAST), no chunk row. The same rules as blob_publish, and for
 * a content address ($6) that already exists those of blob_touch: the row
 * keeps its version, size, etag and bytes (chunked or inline), only options
 * and times change. Sequence values drawn for a kept row are simply skipped.
 * RETURNING gives the version now behind the key and the one replaced.
 */
static SpQuery blob_publish_inline = {
	"INSERT INTO sandbox_persist.blobs AS b (blob_key, version, size, etag, content_type,"
	" custom_metadata, created_at, updated_at, relied_on_at, inline_codec, inline_data)"
	" VALUES ($1, nextval('sandbox_persist.blob_versions'), $2,"
	"         nextval('sandbox_persist.blob_etags')::text, $3, $4, $5, $5,"
	"         CASE WHEN $6 THEN $5 END, $7, $8)"
	" ON CONFLICT (blob_key) DO UPDATE SET"
	" version = CASE WHEN $6 THEN b.version ELSE EXCLUDED.version END,"
	" size = CASE WHEN $6 THEN b.size ELSE EXCLUDED.size END,"
	" etag = CASE WHEN $6 THEN b.etag ELSE EXCLUDED.etag END,"
	" content_type = EXCLUDED.content_type, custom_metadata = EXCLUDED.custom_metadata,"
	" updated_at = EXCLUDED.updated_at, relied_on_at = EXCLUDED.relied_on_at,"
	" inline_codec = CASE WHEN $6 THEN b.inline_codec ELSE EXCLUDED.inline_codec END,"
	" inline_data = CASE WHEN $6 THEN b.inline_data ELSE EXCLUDED.inline_data END,"
	" replaced_version = CASE WHEN $6 THEN b.replaced_version ELSE b.version END"
	" RETURNING version, replaced_version, " BLOB_RECORD_COLUMNS,
	8, {TEXTOID, INT8OID, TEXTOID, JSONOID, INT8OID, BOOLOID, INT2OID, BYTEAOID}
};

/* A put of content already stored under a content address: no bytes written. */
static SpQuery blob_touch = {
	"UPDATE sandbox_persist.blobs SET content_type = $2, custom_metadata = $3,"
	" updated_at = $4, relied_on_at = $4"
	" WHERE blob_key = $1 RETURNING " BLOB_RECORD_COLUMNS,
	4, {TEXTOID, TEXTOID, JSONOID, INT8OID}
};

/* Read a blob key argument: an identifier of at most 2048 bytes. */
char *
BlobCheckKeyArg(FunctionCallInfo fcinfo, int argno)
{
	return SpCheckIdArg(fcinfo, argno, "blob_key", SP_KEY_MAX_BYTES, SP_CHECK_PLAIN);
}

/* True for a content-addressed key of either kind (contract.h). */
bool
BlobIsContentAddressed(const char *key)
{
	return SpIsContentKey(key, SP_CONTENT_FILES_PREFIX) ||
		SpIsContentKey(key, SP_CONTENT_ARTIFACTS_PREFIX);
}

/* Read put/upload options; absent or SQL NULL options mean none. */
void
BlobReadOptions(FunctionCallInfo fcinfo, int argno, BlobOptions *out)
{
	static const char *const names[] = {"contentType", "customMetadata", "expectedLength"};
	SpJson	   *opts;
	SpJson	   *m[lengthof(names)];

	memset(out, 0, sizeof(BlobOptions));
	if (PG_ARGISNULL(argno))
		return;
	opts = SpCheckJsonKindArg(fcinfo, argno, "options", SPJ_OBJECT, "a JSON object", SP_CHECK_PLAIN);
	SpJsonMembers(opts, names, lengthof(names), m, "blob options", false,
				  ERRCODE_INVALID_PARAMETER_VALUE, -1);
	out->content_type = SpCheckStringJson(m[0], "contentType", false, -1, SP_CHECK_PLAIN);
	if (out->content_type != NULL && out->content_type[0] == '\0')
		out->content_type = NULL;	/* an empty content type is absence */
	if (m[1] != NULL && m[1]->kind != SPJ_NULL)
	{
		if (m[1]->kind != SPJ_OBJECT)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("customMetadata must be an object of strings"),
					 errdetail("A JSON %s was given.", SpJsonKindName(m[1]->kind))));
		for (int i = 0; i < m[1]->count; i++)
			if (m[1]->items[i]->kind != SPJ_STRING)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("customMetadata must be an object of strings"),
						 errdetail("The value of \"%s\" is a JSON %s.",
								   SpJsonKeyName(m[1], i),
								   SpJsonKindName(m[1]->items[i]->kind))));
		out->custom_metadata = m[1]->raw;
		out->custom_metadata_len = m[1]->rawlen;
	}
	/* expectedLength is advisory: checked for type, never used as the size */
	if (m[2] != NULL && m[2]->kind != SPJ_NULL && m[2]->kind != SPJ_NUMBER)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("expectedLength must be a number"),
				 errdetail("A JSON %s was given.", SpJsonKindName(m[2]->kind))));
}

/* Start a SHA-256 over the bytes of a content-addressed object. */
pg_cryptohash_ctx *
BlobHashStart(void)
{
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);

	if (ctx == NULL || pg_cryptohash_init(ctx) < 0)
		elog(ERROR, "could not start a SHA-256 hash");
	return ctx;
}

/* Finish the hash and refuse bytes that do not hash to the key. */
void
BlobHashCheck(pg_cryptohash_ctx *ctx, const char *key)
{
	uint8		digest[SP_CONTENT_HASH_HEX_LEN / 2];
	char		hex[SP_CONTENT_HASH_HEX_LEN + 1];
	const char *expected = key + strlen(key) - SP_CONTENT_HASH_HEX_LEN;

	if (pg_cryptohash_final(ctx, digest, sizeof(digest)) < 0)
		elog(ERROR, "could not finish a SHA-256 hash");
	pg_cryptohash_free(ctx);
	for (int i = 0; i < sizeof(digest); i++)
		sprintf(hex + 2 * i, "%02x", digest[i]);
	if (strcmp(hex, expected) != 0)
		sp_error(SP_BLOB_CONTENT_HASH_MISMATCH,
				 ("blob content does not match its content address"),
				 "The bytes hash to %s, but the key \"%s\" names %s.", hex, key, expected);
}

/* Store data[0..len) as chunks of chunk_size bytes starting at `offset`. Inside SPI. */
void
BlobWriteChunks(int64 version, int64 offset, const char *data, int64 len, int chunk_size)
{
	MemoryContext chunk_cxt = AllocSetContextCreate(CurrentMemoryContext, "blob chunk",
													ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(chunk_cxt);

	for (int64 pos = 0; pos < len; pos += chunk_size)
	{
		int			raw = (int) Min((int64) chunk_size, len - pos);
		bytea	   *b;
		int			codec = BlobEncodeChunk(sp_blob_codec, data + pos, raw, &b);
		SpArgs		args;

		SpArgsInit(&args);
		SpArgInt64(&args, version);
		SpArgInt64(&args, offset + pos);
		SpArgDatum(&args, Int32GetDatum(raw));
		SpArgDatum(&args, Int16GetDatum(codec));
		SpArgDatum(&args, PointerGetDatum(b));
		SpExec(&blob_chunk_insert, &args, false, 0);
		MemoryContextReset(chunk_cxt);
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(chunk_cxt);
}

/*
 * Copy bytes [start, start + len) of one stored chunk, or of an inline
 * object (stored the same way), to dst when not NULL and feed them to hash
 * when not NULL. A raw chunk is stored uncompressed and out of line (STORAGE
 * EXTERNAL), so PostgreSQL fetches just the TOAST pieces covering the slice;
 * a compressed chunk (zstd or lz4) is decoded whole, straight into dst when
 * all of it is wanted (a whole read then copies each byte once). The stored
 * length is checked against raw_length first; an unknown codec is corruption.
 */
void
BlobSliceStored(int codec, Datum data, int32 raw_length, int64 start, int64 len, char *dst,
				pg_cryptohash_ctx *hash)
{
	bytea	   *stored;
	const char *bytes;

	if (codec == BLOB_CODEC_RAW)
	{
		if (toast_raw_datum_size(data) - VARHDRSZ != (Size) raw_length)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("stored blob chunk is corrupt"),
					 errdetail("A raw chunk holds %zu bytes, not %d.",
							   toast_raw_datum_size(data) - VARHDRSZ, raw_length)));
		stored = DatumGetByteaPSlice(data, start, len);
		if (VARSIZE_ANY_EXHDR(stored) != len)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("stored blob chunk is corrupt"),
					 errdetail("A slice of " INT64_FORMAT " bytes came back with %zu.",
							   len, (Size) VARSIZE_ANY_EXHDR(stored))));
		bytes = VARDATA_ANY(stored);
	}
	else
	{
		/* all of it wanted: decoded straight into dst; else into a buffer of its own */
		bool		whole = dst != NULL && start == 0 && len == raw_length;

		stored = DatumGetByteaPP(data);
		bytes = BlobDecodeChunk(codec, VARDATA_ANY(stored), VARSIZE_ANY_EXHDR(stored), raw_length,
								whole ? dst : NULL) + (whole ? 0 : start);
	}
	if (dst != NULL && bytes != dst)
		memcpy(dst, bytes, len);
	if (hash != NULL && pg_cryptohash_update(hash, (const uint8 *) bytes, len) < 0)
		elog(ERROR, "could not update a SHA-256 hash");
}

/* Delete every chunk of a version. Inside SPI. */
void
BlobDeleteVersion(int64 version)
{
	SpArgs		args;

	SpArgsInit(&args);
	SpArgInt64(&args, version);
	SpExec(&blob_chunk_delete, &args, false, 0);
}

/*
 * Copy bytes [offset, offset + len) of a version into dst (when not NULL) and
 * feed them to `hash` (when not NULL). Reads only the overlapping chunks,
 * and of a raw chunk only the overlapping bytes, through a cursor, one small
 * batch at a time. A volatile caller passes
 * read_only = false so the cursor sees the chunks it just wrote. Inside SPI.
 */
void
BlobReadRange(int64 version, int64 offset, int64 len, char *dst, pg_cryptohash_ctx *hash,
			  bool read_only)
{
	MemoryContext batch_cxt;
	MemoryContext old;
	int			col_offset;
	int			col_raw;
	int			col_codec;
	int			col_data;
	Portal		portal;
	SpArgs		args;
	int64		end = offset + len;
	int64		next = offset;

	if (len <= 0)
		return;
	SpArgsInit(&args);
	SpArgInt64(&args, version);
	SpArgInt64(&args, offset);
	SpArgInt64(&args, end);
	portal = SpOpenCursor(&blob_chunk_range, &args, read_only);
	batch_cxt = AllocSetContextCreate(CurrentMemoryContext, "blob read batch",
									  ALLOCSET_DEFAULT_SIZES);
	for (;;)
	{
		SPI_cursor_fetch(portal, true, 4);
		if (SPI_processed == 0)
			break;
		old = MemoryContextSwitchTo(batch_cxt);
		col_offset = SpColumn("chunk_offset");
		col_raw = SpColumn("raw_length");
		col_codec = SpColumn("codec");
		col_data = SpColumn("data");
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			int64		chunk_offset = 0;
			int32		raw_length;
			int16		codec;
			bool		isnull;
			Datum		data;
			int64		from;
			int64		to;

			SpGetInt64(i, col_offset, &chunk_offset);
			raw_length = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i],
													 SPI_tuptable->tupdesc, col_raw, &isnull));
			codec = DatumGetInt16(SPI_getbinval(SPI_tuptable->vals[i],
												SPI_tuptable->tupdesc, col_codec, &isnull));
			data = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, col_data, &isnull);
			if (chunk_offset != next && !(chunk_offset < next && chunk_offset + raw_length > next))
				ereport(ERROR,
						(errcode(ERRCODE_DATA_CORRUPTED),
						 errmsg("stored blob chunks are not contiguous"),
						 errdetail("Expected a chunk covering offset " INT64_FORMAT
								   ", found one at " INT64_FORMAT ".", next, chunk_offset)));
			from = Max(offset, chunk_offset);
			to = Min(end, chunk_offset + raw_length);
			if (to <= from)
				continue;
			BlobSliceStored(codec, data, raw_length, from - chunk_offset, to - from,
							dst != NULL ? dst + (from - offset) : NULL, hash);
			next = to;
			MemoryContextReset(batch_cxt);
		}
		MemoryContextSwitchTo(old);
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
	MemoryContextDelete(batch_cxt);
	if (next != end)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("stored blob chunks are missing"),
				 errdetail("The chunks end at offset " INT64_FORMAT ", not " INT64_FORMAT ".",
						   next, end)));
}

/* Add the options to an argument list: content type, then custom metadata. */
static void
BlobOptionArgs(SpArgs *args, const BlobOptions *opts)
{
	SpArgText(args, opts->content_type);
	if (opts->custom_metadata != NULL)
		SpArgTextLen(args, opts->custom_metadata, opts->custom_metadata_len);
	else
		SpArgNull(args);
}

/* Build the record of the single SPI result row as a json datum in `outer`. */
static Datum
BlobRecordResult(int first_col, MemoryContext outer)
{
	MemoryContext spi = MemoryContextSwitchTo(outer);
	StringInfoData buf;
	Datum		result;

	initStringInfo(&buf);
	BlobAppendRecord(&buf, 0, first_col);
	result = SpJsonResult(&buf);
	MemoryContextSwitchTo(spi);
	return result;
}

/*
 * Make `version` the object behind `key` (createdAt kept on overwrite, new
 * etag, options replaced whole, an inline object being replaced cleared)
 * and drop the replaced version's chunks. Returns the BlobRecord. Inside SPI.
 */
Datum
BlobPublish(const char *key, int64 version, int64 size, const BlobOptions *opts, int64 now,
			MemoryContext outer)
{
	SpArgs		args;
	int64		replaced;
	Datum		record;

	SpArgsInit(&args);
	SpArgText(&args, key);
	SpArgInt64(&args, version);
	SpArgInt64(&args, size);
	BlobOptionArgs(&args, opts);
	SpArgInt64(&args, now);
	SpArgBool(&args, BlobIsContentAddressed(key));
	SpExec(&blob_publish, &args, false, 0);
	record = BlobRecordResult(SpColumn("blob_key"), outer);
	if (SpGetInt64(0, SpColumn("replaced_version"), &replaced) && replaced != version)
		BlobDeleteVersion(replaced);
	return record;
}

/*
 * Refresh an existing content-addressed object without writing bytes:
 * updatedAt and the GC time move, options are replaced, etag and size stay.
 * *found is false when the key does not exist. Inside SPI.
 */
Datum
BlobTouch(const char *key, const BlobOptions *opts, int64 now, MemoryContext outer, bool *found)
{
	SpArgs		args;

	SpArgsInit(&args);
	SpArgText(&args, key);
	BlobOptionArgs(&args, opts);
	SpArgInt64(&args, now);
	*found = SpExec(&blob_touch, &args, false, 0) == 1;
	return *found ? BlobRecordResult(SpColumn("blob_key"), outer) : (Datum) 0;
}

/*
 * Store a non-empty object of at most one chunk inline in its blobs row,
 * compressed like a chunk, with the overwrite and content-address rules of
 * BlobPublish and BlobTouch in one write (BlobUpsertInline, or this
 * statement). Returns the BlobRecord. Inside SPI; the schema must be 0.3.0.
 */
Datum
BlobPublishInline(const char *key, const char *data, int len, const BlobOptions *opts,
				  int64 now, MemoryContext outer)
{
	bool		content_addressed = BlobIsContentAddressed(key);
	bytea	   *b;
	int			codec = BlobEncodeChunk(sp_blob_codec, data, len, &b);
	SpArgs		args;
	int64		version = 0;
	int64		replaced;
	Datum		record;
	BlobRow		row;

	/* without SPI when the table is the one blob_upsert.c knows */
	if (BlobUpsertInline(key, content_addressed, len, (int16) codec, b, opts, now, &row, &replaced))
	{
		MemoryContext spi = MemoryContextSwitchTo(outer);
		StringInfoData buf;

		initStringInfo(&buf);
		BlobAppendRow(&buf, &row);
		record = SpJsonResult(&buf);
		MemoryContextSwitchTo(spi);
		if (replaced != 0)
			BlobDeleteVersion(replaced);
		return record;
	}
	SpArgsInit(&args);
	SpArgText(&args, key);
	SpArgInt64(&args, len);
	BlobOptionArgs(&args, opts);
	SpArgInt64(&args, now);
	SpArgBool(&args, content_addressed);
	SpArgDatum(&args, Int16GetDatum(codec));
	SpArgDatum(&args, PointerGetDatum(b));
	SpExec(&blob_publish_inline, &args, false, 0);
	record = BlobRecordResult(SpColumn("blob_key"), outer);
	SpGetInt64(0, SpColumn("version"), &version);
	/* an overwrite of a chunked object leaves its chunks to delete; a kept content address does not */
	if (!content_addressed && SpGetInt64(0, SpColumn("replaced_version"), &replaced) &&
		replaced != version)
		BlobDeleteVersion(replaced);
	return record;
}
