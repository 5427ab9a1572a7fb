/*
 * blobs.h
 *
 * Shared by the blob store modules: the chunk codec, chunk writing and
 * reading, content addressing and the BlobRecord builder.
 *
 * An object is a row in blobs plus chunk rows keyed by a version id. A write
 * stages chunks under a fresh version and publishes it by pointing the blobs
 * row at it (the row lock serialises writers of one key); the replaced
 * version's chunks are deleted in the same transaction. Since 0.3.0 a put of
 * at most one chunk keeps the bytes, compressed like a chunk, in the blobs
 * row itself (inline_codec, inline_data) and has no chunk rows.
 */
#ifndef SANDBOX_PERSIST_BLOBS_H
#define SANDBOX_PERSIST_BLOBS_H

#include "sandbox_persist.h"

#include "common/cryptohash.h"
#include "executor/tuptable.h"

/*
 * The codec of a stored chunk or inline object, recorded in its row
 * (blob_chunks.codec, blobs.inline_codec). sandbox_persist.blob_codec takes
 * the value of ZSTD or LZ4 for new writes; RAW is kept where neither shrinks.
 */
#define BLOB_CODEC_RAW 0
#define BLOB_CODEC_ZSTD 1
#define BLOB_CODEC_LZ4 2

/* Largest value of sandbox_persist.blob_chunk_size (a chunk, and an upload's tail). */
#define BLOB_CHUNK_SIZE_MAX (16 * 1024 * 1024)

/*
 * Largest piece one blob_upload_append accepts: 256 MiB. An append joins the
 * upload's tail (shorter than one chunk) and the piece in one buffer, which
 * must stay below MaxAllocSize (1 GiB - 1); with this limit it is at most
 * 272 MiB whatever the chunk size. Larger bodies are sent as more pieces.
 */
#define BLOB_PIECE_MAX_BYTES (256 * 1024 * 1024)

/*
 * Largest value of sandbox_persist.blob_max_read: 511 MiB (535822336 bytes).
 * A whole read of N bytes is sent as bytea hex text of 2N + 2 bytes inside
 * one DataRow message, and both must stay below MaxAllocSize (1073741823):
 * N <= 536870907 at most; 511 MiB leaves 2 MiB for the row's BlobRecord.
 */
#define BLOB_MAX_READ_LIMIT (511 * 1024 * 1024)

/* settings (sandbox_persist.c) */
extern int	sp_blob_chunk_size;
extern int	sp_blob_inline_max;
extern int	sp_zstd_level;
extern int	sp_blob_codec;
extern bool sp_blob_recompress;
extern int	sp_blob_max_read;
extern int	sp_blob_gc_grace_s;

/* Options of a put or an upload: {contentType?, customMetadata?, expectedLength?}. */
typedef struct BlobOptions
{
	char	   *content_type;	/* NULL when absent or "" */
	const char *custom_metadata;	/* raw JSON object text, or NULL */
	int			custom_metadata_len;
} BlobOptions;

/*
 * An object's blobs row: the BlobRecord fields, the version holding its
 * chunks, and for an inline object its codec and stored bytes.
 */
typedef struct BlobRow
{
	char	   *key;
	int64		version;
	int64		size;
	char	   *etag;
	char	   *content_type;	/* NULL when none */
	char	   *custom_metadata;	/* JSON object text, or NULL */
	int64		created_at;
	int64		updated_at;
	bool		is_inline;		/* inline_codec and inline_data are set */
	int16		inline_codec;
	Datum		inline_data;	/* as stored: may be a TOAST pointer */
} BlobRow;

/* The columns of blobs (0.5.0), numbered for a table by BlobMapColumns. */
typedef enum BlobColumn
{
	BLOB_COL_KEY,
	BLOB_COL_VERSION,
	BLOB_COL_SIZE,
	BLOB_COL_ETAG,
	BLOB_COL_CONTENT_TYPE,
	BLOB_COL_CUSTOM_METADATA,
	BLOB_COL_CREATED_AT,
	BLOB_COL_UPDATED_AT,
	BLOB_COL_RELIED_ON_AT,
	BLOB_COL_REPLACED_VERSION,
	BLOB_COL_INLINE_CODEC,
	BLOB_COL_INLINE_DATA,
	BLOB_COL_GC_SETTLED,
	BLOB_NCOLUMNS
} BlobColumn;

/* blob_codec.c */
extern int	BlobEncodeChunk(int codec, const char *src, int len, bytea **out);
extern const char *BlobDecodeProblem(int codec, const char *src, int srclen, int raw_length,
									 char **dst);
extern char *BlobDecodeChunk(int codec, const char *src, int srclen, int raw_length, char *dst);
extern void BlobRequireCodecSchema(const char *function);

/* blob_recompress.c */
extern int64 BlobRecompress(int64 max_rows);

/* blob_storage.c */
extern char *BlobCheckKeyArg(FunctionCallInfo fcinfo, int argno);
extern bool BlobIsContentAddressed(const char *key);
extern void BlobReadOptions(FunctionCallInfo fcinfo, int argno, BlobOptions *out);
extern pg_cryptohash_ctx *BlobHashStart(void);
extern void BlobHashCheck(pg_cryptohash_ctx *ctx, const char *key);
extern void BlobWriteChunks(int64 version, int64 offset, const char *data, int64 len,
							int chunk_size);
extern void BlobDeleteVersion(int64 version);
extern void BlobReadRange(int64 version, int64 offset, int64 len, char *dst,
						  pg_cryptohash_ctx *hash, bool read_only);
extern Datum BlobPublish(const char *key, int64 version, int64 size, const BlobOptions *opts,
						 int64 now, MemoryContext outer);
extern Datum BlobPublishInline(const char *key, const char *data, int len,
							   const BlobOptions *opts, int64 now, MemoryContext outer);
extern void BlobSliceStored(int codec, Datum data, int32 raw_length, int64 start, int64 len,
							char *dst, pg_cryptohash_ctx *hash);
extern Datum BlobTouch(const char *key, const BlobOptions *opts, int64 now,
					   MemoryContext outer, bool *found);

/* blob_upsert.c */
extern bool BlobUpsertInline(const char *key, bool content_addressed, int64 size, int16 codec,
							 bytea *data, const BlobOptions *opts, int64 now, BlobRow *out,
							 int64 *chunked_version);

/* blob_rows.c */
extern bool BlobMapColumns(TupleDesc desc, AttrNumber *att);
extern void BlobRowFromSlot(TupleTableSlot *slot, const AttrNumber *att, BlobRow *out);
extern bool BlobReadRow(const char *key, BlobRow *out);
extern void BlobAppendRow(StringInfo buf, const BlobRow *row);
extern void BlobAppendRecord(StringInfo buf, int row, int first_col);

/* Columns BlobAppendRecord reads, starting at its first_col. */
#define BLOB_RECORD_COLUMNS \
	"blob_key, size, etag, content_type, custom_metadata::text, created_at, updated_at"
/* Offsets from first_col of the BLOB_RECORD_COLUMNS. */
#define BLOB_REC_KEY			0
#define BLOB_REC_SIZE			1
#define BLOB_REC_ETAG			2
#define BLOB_REC_CONTENT_TYPE	3
#define BLOB_REC_CUSTOM_METADATA 4
#define BLOB_REC_CREATED_AT		5
#define BLOB_REC_UPDATED_AT		6

/*
 * The storage layout blob_put, blob_get and blob_upload_commit need: small
 * objects inline in their blobs row (0.3.0). An older schema is refused
 * (SpRequireSchema, schema_version.c).
 */
#define BLOB_LAYOUT_SINCE	"0.3.0"

/* The first schema whose codec constraints admit BLOB_CODEC_LZ4. */
#define BLOB_LZ4_SINCE		"0.4.0"

#endif							/* SANDBOX_PERSIST_BLOBS_H */
