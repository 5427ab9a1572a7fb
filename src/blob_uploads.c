/*
 * blob_uploads.c
 *
 * Streamed uploads for bodies of unknown or large length: begin, append any
 * number of pieces at the offset they start at, then commit (publish
 * atomically, with the overwrite rules of put) or abort (leave nothing).
 *
 * Pieces are cut into full chunks as they arrive and staged under the
 * upload's own version, which no blobs row points at until commit, so staged
 * bytes are invisible to every reader. Bytes that do not yet fill a chunk
 * wait in the upload row's tail. Memory per call is bounded by the piece and
 * one chunk, never by the object's size; a piece is at most
 * BLOB_PIECE_MAX_BYTES (54000 beyond), so tail + piece always fits one buffer.
 *
 * Locking: every call locks the upload row FOR UPDATE, so appends to one
 * upload serialise and an offset check cannot race; commit then takes the
 * key's blobs row lock through BlobPublish.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "blobs.h"

PG_FUNCTION_INFO_V1(blob_upload_begin);
PG_FUNCTION_INFO_V1(blob_upload_append);
PG_FUNCTION_INFO_V1(blob_upload_commit);
PG_FUNCTION_INFO_V1(blob_upload_abort);

/* The tail (shorter than a chunk) plus the largest piece fit one allocation. */
StaticAssertDecl((Size) BLOB_CHUNK_SIZE_MAX + BLOB_PIECE_MAX_BYTES < MaxAllocSize,
				 "BLOB_PIECE_MAX_BYTES too large for one append buffer");

static SpQuery upload_insert = {
	"INSERT INTO sandbox_persist.blob_uploads (upload_id, blob_key, version, content_type,"
	" custom_metadata, chunk_size, created_at, touched_at)"
	" VALUES (pg_catalog.gen_random_uuid(), $1, nextval('sandbox_persist.blob_versions'),"
	"         $2, $3, $4, $5, $5)"
	" RETURNING upload_id::text",
	5, {TEXTOID, TEXTOID, JSONOID, INT4OID, INT8OID}
};

static SpQuery upload_lock = {
	"SELECT blob_key, version, content_type, custom_metadata::text, received, tail, chunk_size"
	" FROM sandbox_persist.blob_uploads WHERE upload_id = $1::uuid FOR UPDATE",
	1, {TEXTOID}
};

static SpQuery upload_progress = {
	"UPDATE sandbox_persist.blob_uploads SET received = $2, tail = $3, touched_at = $4"
	" WHERE upload_id = $1::uuid",
	4, {TEXTOID, INT8OID, BYTEAOID, INT8OID}
};

static SpQuery upload_remove = {
	"DELETE FROM sandbox_persist.blob_uploads WHERE upload_id = $1::uuid RETURNING version",
	1, {TEXTOID}
};

/* A locked upload row, copied out of SPI. */
typedef struct BlobUpload
{
	char	   *upload_id;
	char	   *key;
	int64		version;
	BlobOptions opts;
	int64		received;
	bytea	   *tail;
	int			chunk_size;
} BlobUpload;

/* Raise BLOB_UPLOAD_NOT_FOUND. */
static void
BlobUploadNotFound(const char *upload_id)
{
	sp_error(SP_BLOB_UPLOAD_NOT_FOUND,
			 ("blob upload not found"),
			 "No open upload has id \"%s\"; it was committed, aborted, expired or never begun.",
			 upload_id);
}

/* Read the upload id argument; a malformed id names no upload. */
static char *
BlobUploadIdArg(FunctionCallInfo fcinfo, int argno)
{
	char	   *id = SpCheckIdArg(fcinfo, argno, "upload_id", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);

	if (!SpIsUuid(id))
		BlobUploadNotFound(id);
	return id;
}

/* Lock the upload row and read it; SP302 when it does not exist. Inside SPI. */
static void
BlobLockUpload(const char *upload_id, BlobUpload *up)
{
	SpArgs		args;
	bool		isnull;
	char	   *meta;

	SpArgsInit(&args);
	SpArgText(&args, upload_id);
	if (SpExec(&upload_lock, &args, false, 1) != 1)
		BlobUploadNotFound(upload_id);
	up->upload_id = (char *) upload_id;
	up->key = SpGetText(0, SpColumn("blob_key"));
	SpGetInt64(0, SpColumn("version"), &up->version);
	memset(&up->opts, 0, sizeof(BlobOptions));
	up->opts.content_type = SpGetText(0, SpColumn("content_type"));
	if ((meta = SpGetText(0, SpColumn("custom_metadata"))) != NULL)
	{
		up->opts.custom_metadata = meta;
		up->opts.custom_metadata_len = strlen(meta);
	}
	SpGetInt64(0, SpColumn("received"), &up->received);
	up->tail = DatumGetByteaPCopy(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
												SpColumn("tail"), &isnull));
	up->chunk_size = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
												 SpColumn("chunk_size"), &isnull));
}

/* Record progress: bytes received, the new tail and the activity time. Inside SPI. */
static void
BlobSaveProgress(const BlobUpload *up, int64 received, const char *tail, int tail_len,
				 int64 now)
{
	SpArgs		args;
	bytea	   *t = palloc(VARHDRSZ + tail_len);

	SET_VARSIZE(t, VARHDRSZ + tail_len);
	memcpy(VARDATA(t), tail, tail_len);
	SpArgsInit(&args);
	SpArgText(&args, up->upload_id);
	SpArgInt64(&args, received);
	SpArgDatum(&args, PointerGetDatum(t));
	SpArgInt64(&args, now);
	SpExec(&upload_progress, &args, false, 0);
}

/*
 * blob_upload_begin(blob_key text, options json, now_ms bigint) -> text: open
 * an upload and return its id. Options are those of blob_put.
 */
Datum
blob_upload_begin(PG_FUNCTION_ARGS)
{
	char	   *key = BlobCheckKeyArg(fcinfo, 0);
	BlobOptions opts;
	int64		now;
	MemoryContext outer = CurrentMemoryContext;
	MemoryContext spi;
	SpArgs		args;
	text	   *id;

	BlobReadOptions(fcinfo, 1, &opts);
	now = SpNowMs(fcinfo, 2);
	SPI_connect();
	SpArgsInit(&args);
	SpArgText(&args, key);
	SpArgText(&args, opts.content_type);
	if (opts.custom_metadata != NULL)
		SpArgTextLen(&args, opts.custom_metadata, opts.custom_metadata_len);
	else
		SpArgNull(&args);
	SpArgDatum(&args, Int32GetDatum(sp_blob_chunk_size));
	SpArgInt64(&args, now);
	SpExec(&upload_insert, &args, false, 1);
	spi = MemoryContextSwitchTo(outer);
	id = cstring_to_text(SpGetText(0, 1));
	MemoryContextSwitchTo(spi);
	SPI_finish();
	PG_RETURN_TEXT_P(id);
}

/*
 * blob_upload_append(upload_id text, at_offset bigint, bytes bytea, now_ms
 * bigint) -> json {received}. at_offset must equal the bytes received so far,
 * so a retried piece can never be stored twice.
 */
Datum
blob_upload_append(PG_FUNCTION_ARGS)
{
	char	   *upload_id = BlobUploadIdArg(fcinfo, 0);
	int64		at_offset;
	bytea	   *piece;
	int64		now;
	BlobUpload	up;
	int			tail_len;
	int			piece_len;
	int64		total;
	char	   *buf;
	int64		full;
	StringInfoData result;

	SpCheckArgNotNull(fcinfo, 1, "at_offset", NULL, SP_CHECK_PLAIN);
	SpCheckArgNotNull(fcinfo, 2, "bytes", NULL, SP_CHECK_PLAIN);
	at_offset = PG_GETARG_INT64(1);
	piece = PG_GETARG_BYTEA_PP(2);
	piece_len = VARSIZE_ANY_EXHDR(piece);
	/* tail + piece must fit one allocation; refuse before anything is read or staged */
	if (piece_len > BLOB_PIECE_MAX_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("blob upload piece is larger than the maximum of %d bytes",
						BLOB_PIECE_MAX_BYTES),
				 errdetail("A piece of %d bytes was sent; nothing was staged.", piece_len),
				 errhint("Send the body as several pieces of at most %d bytes each.",
						 BLOB_PIECE_MAX_BYTES)));
	now = SpNowMs(fcinfo, 3);
	BlobRequireCodecSchema("blob_upload_append");

	SPI_connect();
	BlobLockUpload(upload_id, &up);
	if (at_offset != up.received)
		sp_error(SP_BLOB_UPLOAD_OFFSET_MISMATCH,
				 ("blob upload offset mismatch"),
				 "Upload \"%s\" has received " INT64_FORMAT " bytes; a piece at offset "
				 INT64_FORMAT " cannot be appended.", upload_id, up.received, at_offset);
	tail_len = VARSIZE_ANY_EXHDR(up.tail);
	total = (int64) tail_len + piece_len;
	buf = palloc(Max(total, 1));
	memcpy(buf, VARDATA_ANY(up.tail), tail_len);
	memcpy(buf + tail_len, VARDATA_ANY(piece), piece_len);
	/* cut whole chunks now; the remainder waits for the next piece */
	full = total - total % up.chunk_size;
	BlobWriteChunks(up.version, up.received - tail_len, buf, full, up.chunk_size);
	BlobSaveProgress(&up, up.received + piece_len, buf + full, (int) (total - full), now);
	SPI_finish();

	initStringInfo(&result);
	appendStringInfo(&result, "{\"received\":" INT64_FORMAT "}", up.received + piece_len);
	PG_RETURN_DATUM(SpJsonResult(&result));
}

/*
 * blob_upload_commit(upload_id text, now_ms bigint) -> json: publish the
 * staged bytes atomically as the object (createdAt kept on overwrite, new
 * etag, options replaced) and return its BlobRecord. A content-addressed key
 * is verified by reading the staged bytes back once (SP301 on mismatch).
 * Uploads always stay chunked; the commit also clears an inline object it
 * replaces.
 */
Datum
blob_upload_commit(PG_FUNCTION_ARGS)
{
	char	   *upload_id;
	int64		now;
	MemoryContext outer = CurrentMemoryContext;
	BlobUpload	up;
	SpArgs		args;
	Datum		record = (Datum) 0;
	bool		found = false;
	int			tail_len;

	SpRequireSchema(BLOB_LAYOUT_SINCE, "blob_upload_commit");
	BlobRequireCodecSchema("blob_upload_commit");
	upload_id = BlobUploadIdArg(fcinfo, 0);
	now = SpNowMs(fcinfo, 1);
	SPI_connect();
	BlobLockUpload(upload_id, &up);
	tail_len = VARSIZE_ANY_EXHDR(up.tail);
	BlobWriteChunks(up.version, up.received - tail_len, VARDATA_ANY(up.tail), tail_len,
					up.chunk_size);
	if (BlobIsContentAddressed(up.key))
	{
		pg_cryptohash_ctx *hash = BlobHashStart();

		BlobReadRange(up.version, 0, up.received, NULL, hash, false);
		BlobHashCheck(hash, up.key);
		/* same content already stored: keep it, drop the staged copy */
		record = BlobTouch(up.key, &up.opts, now, outer, &found);
		if (found)
			BlobDeleteVersion(up.version);
	}
	if (!found)
		record = BlobPublish(up.key, up.version, up.received, &up.opts, now, outer);
	SpArgsInit(&args);
	SpArgText(&args, upload_id);
	SpExec(&upload_remove, &args, false, 0);
	SPI_finish();
	PG_RETURN_DATUM(record);
}

/*
 * blob_upload_abort(upload_id text) -> boolean: drop the upload and its staged
 * chunks; an existing object under the key is untouched.
 */
Datum
blob_upload_abort(PG_FUNCTION_ARGS)
{
	char	   *upload_id = BlobUploadIdArg(fcinfo, 0);
	SpArgs		args;
	int64		version;

	SPI_connect();
	SpArgsInit(&args);
	SpArgText(&args, upload_id);
	if (SpExec(&upload_remove, &args, false, 0) != 1)
		BlobUploadNotFound(upload_id);
	if (SpGetInt64(0, 1, &version))
		BlobDeleteVersion(version);
	SPI_finish();
	PG_RETURN_BOOL(true);
}
