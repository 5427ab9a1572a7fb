/*
 * blob_codec.c
 *
 * Per-chunk compression. A chunk (or an inline object) is compressed with the
 * codec sandbox_persist.blob_codec names at write time, zstd or lz4, and
 * stored raw when that does not make it smaller; the codec is recorded with
 * the chunk, so objects written under different settings read back alike.
 * Every decode is capped at the stored raw length and any mismatch is
 * reported as corruption (XX001).
 *
 * zstd keeps one compression and one decompression context per backend,
 * created on first use with malloc and reused forever: nothing is allocated
 * per call, so an error that unwinds a call cannot leak a context. lz4 needs
 * no context. No locking.
 */
#include "postgres.h"

#include <lz4.h>
#include <zstd.h>


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

/* Compress src into dst (room for bound bytes) with zstd; 0 when it does not fit or fails. */
static size_t
BlobCompressZstd(const char *src, int len, char *dst, size_t bound)
{
	size_t		n;

	if (blob_cctx == NULL && (blob_cctx = ZSTD_createCCtx()) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("could not create a zstd compression context")));
	n = ZSTD_compressCCtx(blob_cctx, dst, bound, src, len, sp_zstd_level);
	return ZSTD_isError(n) ? 0 : n;
}

/*
 * Refuse, for the writer `function`, to write lz4 into a schema older than
 * BLOB_LZ4_SINCE, whose CHECK constraints would reject the recorded codec.
 */
void
BlobRequireCodecSchema(const char *function)
{
	if (sp_blob_codec == BLOB_CODEC_LZ4)
		SpRequireSchema(BLOB_LZ4_SINCE, function);
}

/*
 * Compress one chunk straight into a bytea ready to bind, with `codec` (zstd
 * or lz4). Returns the codec stored; *out is a palloc'd bytea holding the
 * compressed bytes, or a copy of src (BLOB_CODEC_RAW) when compression does
 * not make it smaller. Compressing into the bytea's own buffer spares a
 * second allocation and a copy of the compressed bytes per chunk.
 */
int
BlobEncodeChunk(int codec, const char *src, int len, bytea **out)
{
	size_t		bound = codec == BLOB_CODEC_LZ4 ? (size_t) LZ4_compressBound(len)
		: ZSTD_compressBound(len);
	bytea	   *b = palloc(VARHDRSZ + Max(bound, (size_t) len));
	size_t		n;

	if (codec == BLOB_CODEC_LZ4)
	{
		int			lz4_len = LZ4_compress_default(src, VARDATA(b), len, (int) bound);

		n = lz4_len > 0 ? lz4_len : 0;
	}
	else
		n = BlobCompressZstd(src, len, VARDATA(b), bound);
	if (n == 0 || n >= (size_t) len)
	{
		memcpy(VARDATA(b), src, len);
		n = len;
		codec = BLOB_CODEC_RAW;
	}
	SET_VARSIZE(b, VARHDRSZ + n);
	*out = b;
	return codec;
}

/*
 * Decode one compressed chunk of the given codec into *dst, which has room
 * for raw_length bytes, or, when *dst is NULL, into a buffer allocated here
 * once the codec and the length are known to be possible (a corrupt length
 * is reported, never allocated). Returns NULL when it decodes to exactly
 * raw_length bytes, else what is wrong with it (palloc'd). Raw chunks never
 * come here: the reader slices them where they are stored.
 */
const char *
BlobDecodeProblem(int codec, const char *src, int srclen, int raw_length, char **dst)
{
	if (codec != BLOB_CODEC_ZSTD && codec != BLOB_CODEC_LZ4)
		return psprintf("Unknown codec %d", codec);
	/* no chunk or inline object is larger than the largest chunk size */
	if (raw_length < 0 || raw_length > BLOB_CHUNK_SIZE_MAX)
		return psprintf("Raw length %d is outside the allowed range", raw_length);
	if (*dst == NULL)
		*dst = palloc(Max(raw_length, 1));
	if (codec == BLOB_CODEC_ZSTD)
	{
		size_t		n;

		if (blob_dctx == NULL && (blob_dctx = ZSTD_createDCtx()) == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("could not create a zstd decompression context")));
		n = ZSTD_decompressDCtx(blob_dctx, *dst, raw_length, src, srclen);
		if (ZSTD_isError(n))
			return psprintf("zstd could not decode it: %s", ZSTD_getErrorName(n));
		if (n != (size_t) raw_length)
			return psprintf("It decodes to %zu bytes, not %d", n, raw_length);
	}
	else
	{
		/* decompress_safe never writes past raw_length; a bad stream is negative or short */
		int			n = LZ4_decompress_safe(src, *dst, srclen, raw_length);

		if (n < 0)
			return "lz4 could not decode it";
		if (n != raw_length)
			return psprintf("It decodes to %d bytes, not %d", n, raw_length);
	}
	return NULL;
}

/*
 * Decode one compressed chunk like BlobDecodeProblem, into dst or (dst NULL)
 * a buffer allocated here; returns the bytes and raises XX001 when it cannot.
 */
char *
BlobDecodeChunk(int codec, const char *src, int srclen, int raw_length, char *dst)
{
	const char *problem = BlobDecodeProblem(codec, src, srclen, raw_length, &dst);

	if (problem != NULL)
		BlobCorrupt(problem);
	return dst;
}
