/*
 * blob_recompress.c
 *
 * Maintenance action A12, on when sandbox_persist.blob_recompress is: rewrite
 * lz4 chunks and lz4 inline objects as zstd, so blobs written at lz4 speed
 * end at zstd's size. An object's bytes, size, etag and times never change;
 * only how its rows hold the bytes does. Bounded by maintain()'s max_rows and
 * by BLOB_RECOMPRESS_MAX_BYTES of raw bytes per call.
 *
 * Locking: candidates come from a FOR UPDATE SKIP LOCKED cursor, so a row
 * that a writer is replacing or deleting is skipped, and a writer that
 * reaches a row locked here waits only until maintain() commits (its DELETE
 * of a replaced version then removes the rewritten row). Each row is
 * rewritten by its key while locked. Readers see the old or the new row
 * version, which hold the same bytes.
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "blobs.h"

/*
 * Most raw bytes one call rewrites (at least one row): 64 MiB, about a
 * quarter of a second of zstd level 1 here, so a round stays short whatever
 * the chunk size.
 */
#define BLOB_RECOMPRESS_MAX_BYTES	(64 * 1024 * 1024)

/* The partial index 0.4.0 adds for the lz4 chunks; its absence means an older schema. */
#define BLOB_LZ4_CHUNK_INDEX "blob_chunks_lz4"

/* The codec literal matches the partial indexes' predicates, so the planner uses them. */
static SpQuery recompress_chunk_candidates = {
	"SELECT version, chunk_offset, raw_length, data FROM sandbox_persist.blob_chunks"
	" WHERE codec = " CppAsString2(BLOB_CODEC_LZ4)
	" ORDER BY version, chunk_offset FOR UPDATE SKIP LOCKED",
	0, {0}
};

static SpQuery recompress_chunk_rewrite = {
	"UPDATE sandbox_persist.blob_chunks SET codec = $3, data = $4"
	" WHERE version = $1 AND chunk_offset = $2",
	4, {INT8OID, INT8OID, INT2OID, BYTEAOID}
};

static SpQuery recompress_inline_candidates = {
	"SELECT blob_key, size, inline_data FROM sandbox_persist.blobs"
	" WHERE inline_codec = " CppAsString2(BLOB_CODEC_LZ4)
	" ORDER BY blob_key FOR UPDATE SKIP LOCKED",
	0, {0}
};

static SpQuery recompress_inline_rewrite = {
	"UPDATE sandbox_persist.blobs SET inline_codec = $2, inline_data = $3 WHERE blob_key = $1",
	3, {TEXTOID, INT2OID, BYTEAOID}
};

/* One lz4 row taken from a candidate cursor, copied out of the SPI result. */
typedef struct BlobLz4Row
{
	int64		version;		/* chunks: the row's key */
	int64		chunk_offset;
	char	   *blob_key;		/* inline objects: the row's key */
	int32		raw_length;
	bytea	   *stored;
} BlobLz4Row;

/* True when the schema has 0.4.0's lz4 index: only such a schema can hold lz4 rows. */
static bool
BlobRecompressSchemaHasLz4(void)
{
	Oid			ns = get_namespace_oid("sandbox_persist", true);

	return OidIsValid(ns) && OidIsValid(get_relname_relid(BLOB_LZ4_CHUNK_INDEX, ns));
}

/* Read the cursor's current row (chunk or inline layout) into row, in the current context. */
static void
BlobRecompressReadRow(bool is_inline, BlobLz4Row *row)
{
	bool		isnull;
	int64		size = 0;

	memset(row, 0, sizeof(BlobLz4Row));
	if (is_inline)
	{
		row->blob_key = SpGetText(0, SpColumn("blob_key"));
		SpGetInt64(0, SpColumn("size"), &size);
		/* an inline object is at most one chunk: a larger size is corrupt (-1) */
		row->raw_length = size > BLOB_CHUNK_SIZE_MAX ? -1 : (int32) size;
		row->stored = DatumGetByteaPCopy(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
													   SpColumn("inline_data"), &isnull));
	}
	else
	{
		SpGetInt64(0, SpColumn("version"), &row->version);
		SpGetInt64(0, SpColumn("chunk_offset"), &row->chunk_offset);
		row->raw_length = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
													  SpColumn("raw_length"), &isnull));
		row->stored = DatumGetByteaPCopy(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
													   SpColumn("data"), &isnull));
	}
}

/*
 * Rewrite as zstd (or raw, where zstd does not shrink it) each row one
 * candidate query yields, while *rows_left and *bytes_left last. A row whose
 * lz4 bytes do not decode is left as it is, with a WARNING (XX001): readers
 * report it, and maintenance must not stop over it. Returns the rows
 * rewritten. Inside SPI.
 */
static int64
BlobRecompressRows(SpQuery *candidates, SpQuery *rewrite, bool is_inline, int64 *rows_left,
				   int64 *bytes_left)
{
	MemoryContext row_cxt = AllocSetContextCreate(CurrentMemoryContext, "blob recompress row",
												  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old;
	SpArgs		args;
	Portal		portal;
	int64		done = 0;

	SpArgsInit(&args);
	portal = SpOpenCursor(candidates, &args, false);
	while (*rows_left > 0 && *bytes_left > 0)
	{
		BlobLz4Row row;
		char	   *raw = NULL;
		const char *problem;
		bytea	   *zstd;
		int			codec;

		SPI_cursor_fetch(portal, true, 1);
		if (SPI_processed == 0)
			break;
		old = MemoryContextSwitchTo(row_cxt);
		BlobRecompressReadRow(is_inline, &row);
		SPI_freetuptable(SPI_tuptable);
		problem = BlobDecodeProblem(BLOB_CODEC_LZ4, VARDATA_ANY(row.stored),
									VARSIZE_ANY_EXHDR(row.stored), row.raw_length, &raw);
		if (problem != NULL)
		{
			if (is_inline)
				ereport(WARNING,
						(errcode(ERRCODE_DATA_CORRUPTED),
						 errmsg("blob \"%s\" is corrupt and was not recompressed", row.blob_key),
						 errdetail("%s.", problem)));
			else
				ereport(WARNING,
						(errcode(ERRCODE_DATA_CORRUPTED),
						 errmsg("blob chunk at offset " INT64_FORMAT " of version " INT64_FORMAT
								" is corrupt and was not recompressed", row.chunk_offset, row.version),
						 errdetail("%s.", problem)));
		}
		else
		{
			codec = BlobEncodeChunk(BLOB_CODEC_ZSTD, raw, row.raw_length, &zstd);
			SpArgsInit(&args);
			if (is_inline)
				SpArgText(&args, row.blob_key);
			else
			{
				SpArgInt64(&args, row.version);
				SpArgInt64(&args, row.chunk_offset);
			}
			SpArgDatum(&args, Int16GetDatum(codec));
			SpArgDatum(&args, PointerGetDatum(zstd));
			SpExec(rewrite, &args, false, 0);
			done++;
			*bytes_left -= row.raw_length;
		}
		(*rows_left)--;
		MemoryContextSwitchTo(old);
		MemoryContextReset(row_cxt);
	}
	SPI_cursor_close(portal);
	MemoryContextDelete(row_cxt);
	return done;
}

/*
 * A12: rewrite at most max_rows lz4 chunks and inline objects (chunks first)
 * as zstd; returns how many were rewritten. 0 on a schema before 0.4.0,
 * which holds no lz4. Inside SPI.
 */
int64
BlobRecompress(int64 max_rows)
{
	int64		rows_left = max_rows;
	int64		bytes_left = BLOB_RECOMPRESS_MAX_BYTES;
	int64		done;

	if (!BlobRecompressSchemaHasLz4())
		return 0;
	done = BlobRecompressRows(&recompress_chunk_candidates, &recompress_chunk_rewrite, false,
							  &rows_left, &bytes_left);
	done += BlobRecompressRows(&recompress_inline_candidates, &recompress_inline_rewrite, true,
							   &rows_left, &bytes_left);
	return done;
}
