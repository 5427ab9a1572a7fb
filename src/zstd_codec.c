/*
 * zstd_codec.c
 *
 * Per-chunk compression with libzstd. A chunk is stored zstd-compressed when
 * that makes it smaller, raw otherwise. Every decode is capped at the stored
 * raw length and any mismatch is reported as corruption (XX001).
 *
 * One compression and one decompression context per backend, created on
 * first use with malloc and reused forever: nothing is allocated per call, so
 * an error that unwinds a call cannot leak a context. No locking.
 */
#include "postgres.h"

#include <zstd.h>

#include "utils/memutils.h"

#include "blobs.h"

static ZSTD_CCtx *blob_cctx = NULL;
static ZSTD_DCtx *blob_dctx = NULL;

/* Raise XX001 for a chunk that cannot be what its row says. */
static void
BlobCorrupt(const char *problem)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("stored blob chunk is corrupt"),
			 errdetail("%s.", problem)));
}

/*
 * Compress one chunk straight into a bytea ready to bind. Returns the codec;
 * *out is a palloc'd bytea holding the zstd frame, or a copy of src when raw
 * is smaller or equal. Compressing into the bytea's own buffer spares a
 * second allocation and a copy of the compressed bytes per chunk.
 */
int
BlobEncodeChunk(const char *src, int len, bytea **out)
{
	size_t		bound = ZSTD_compressBound(len);
	bytea	   *b;
	size_t		n;

	if (blob_cctx == NULL && (blob_cctx = ZSTD_createCCtx()) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("could not create a zstd compression context")));
	b = palloc(VARHDRSZ + Max(bound, (size_t) len));
	n = ZSTD_compressCCtx(blob_cctx, VARDATA(b), bound, src, len, sp_zstd_level);
	if (ZSTD_isError(n) || n >= (size_t) len)
	{
		memcpy(VARDATA(b), src, len);
		SET_VARSIZE(b, VARHDRSZ + len);
		*out = b;
		return BLOB_CODEC_RAW;
	}
	SET_VARSIZE(b, VARHDRSZ + n);
	*out = b;
	return BLOB_CODEC_ZSTD;
}

/*
 * Decode one zstd chunk into dst, which has room for raw_length bytes. Raw
 * chunks never come here: the reader slices them where they are stored.
 */
void
BlobDecodeZstd(const char *src, int srclen, int raw_length, char *dst)
{
	size_t		n;

	if (raw_length < 0 || raw_length > MaxAllocSize)
		BlobCorrupt(psprintf("Raw length %d is outside the allowed range", raw_length));
	if (blob_dctx == NULL && (blob_dctx = ZSTD_createDCtx()) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("could not create a zstd decompression context")));
	n = ZSTD_decompressDCtx(blob_dctx, dst, raw_length, src, srclen);
	if (ZSTD_isError(n))
		BlobCorrupt(psprintf("zstd could not decode it: %s", ZSTD_getErrorName(n)));
	if (n != (size_t) raw_length)
		BlobCorrupt(psprintf("It decodes to %zu bytes, not %d", n, raw_length));
}
