/*
 * conversations.c
 *
 * Checkpoint conversations (docs/contract/checkpoint-store.md §6). Every
 * thread has a log of message positions, handed out from
 * checkpoint_threads.conv_log_end and never reused; the messages an append
 * (or a fork) adds are one block of it, a single conversation_blocks row
 * holding their JSON text joined by commas, compressed. A checkpoint's
 * conversation is a set of ranges of the log made of whole blocks (its
 * parent's plus its own), so it reads in as many rows as it has blocks. An
 * append whose transcript extends the parent's (same digest over the
 * parent's length) stores only the new tail; any other keeps the parent's
 * leading blocks it repeats exactly and stores the rest as a block of its
 * own. A delta append (checkpoint_append_delta) ships only the
 * tail with a claim (length, digest) about the parent's conversation: the
 * claim is checked against the parent's stored conv_len and conv_digest, and
 * the digest is a chain over the message hashes so the new one costs the
 * tail. deleteHead queues the block its checkpoint appended, which no other
 * checkpoint's ranges reach; maintain() (A11) deletes queued blocks.
 *
 * Locking: appends, deleteHeads and forks write a thread's blocks only while
 * holding its checkpoint_threads row FOR UPDATE, so positions are handed out
 * serially. Collection takes the thread row FOR KEY SHARE SKIP LOCKED (and
 * its queue rows FOR UPDATE SKIP LOCKED) before deleting: it skips a thread
 * whose writer is in flight. Lease updates (FOR NO KEY UPDATE) never wait
 * for it.
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/toast_compression.h"
#include "access/toast_internals.h"
#include "catalog/pg_type.h"
#include "common/cryptohash.h"
#include "common/sha2.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/memutils.h"

#include "sandbox_persist.h"
#include "checkpoints.h"

/*
 * Nesting (the array itself counted) from which ConvSplit lets
 * SpJsonCheckNesting decide, as the JSON walker does (its SP_JSON_DEEP).
 */
#define CONV_DEEP 64

/*
 * How a block's text is compressed when that saves space: lz4 where the
 * server was built with it (Debian's is), else the server's pglz.
 */
#ifdef USE_LZ4
#define CONV_COMPRESSION TOAST_LZ4_COMPRESSION
#else
#define CONV_COMPRESSION TOAST_PGLZ_COMPRESSION
#endif

/* Columns of conv_state. */
#define CONV_STATE_LOG_END		1
#define CONV_STATE_PARENT_LEN	2
#define CONV_STATE_PARENT_DIGEST 3
#define CONV_STATE_PARENT_RANGES 4

/* The thread's next log position and, when $2 names one of its checkpoints, that one's conversation. */
static SpQuery conv_state = {
	"SELECT t.conv_log_end, c.conv_len::bigint, c.conv_digest, c.conv_ranges"
	" FROM sandbox_persist.checkpoint_threads t"
	" LEFT JOIN sandbox_persist.checkpoints c ON c.checkpoint_id = $2 AND c.thread_id = t.thread_id"
	" WHERE t.thread_id = $1",
	2, {TEXTOID, TEXTOID}
};

/*
 * One block: $3 messages (their text joined by commas, $4) at positions $2..
 * of thread $1. Always a generic plan: a custom plan makes each argument a
 * constant, and a constant is stored decompressed (makeConst detoasts).
 */
static SpQuery conv_store = {
	"INSERT INTO sandbox_persist.conversation_blocks (thread_id, first_pos, message_count, bodies)"
	" VALUES ($1, $2, $3, $4)",
	4, {TEXTOID, INT8OID, INT4OID, TEXTOID}, NULL, CURSOR_OPT_GENERIC_PLAN
};

/* Columns of conv_bodies. */
#define CONV_BODIES_COUNT	1
#define CONV_BODIES_TEXT	2

/* The blocks of ranges $1 of thread $2 in position order: how many messages each holds, its text. */
static SpQuery conv_bodies = {
	"SELECT b.message_count, b.bodies FROM" CONV_BLOCKS_IN("$2", "$1::int8multirange") " ORDER BY b.first_pos",
	2, {INT8MULTIRANGEOID, TEXTOID}
};

/* Columns of conv_parent_blocks. */
#define CONV_PARENT_COUNT	1
#define CONV_PARENT_BODIES	2
#define CONV_PARENT_UPTO	3

/* The blocks of ranges $1 of thread $2 in log order, each with the ranges of it and those before. */
static SpQuery conv_parent_blocks = {
	"SELECT b.message_count, b.bodies, pg_catalog.range_agg(pg_catalog.int8range(b.first_pos,"
	"  b.first_pos + b.message_count)) OVER (ORDER BY b.first_pos)"
	" FROM" CONV_BLOCKS_IN("$2", "$1::int8multirange")
	" ORDER BY b.first_pos",
	2, {INT8MULTIRANGEOID, TEXTOID}
};

/* The one column of conv_log_end. */
#define CONV_LOG_END_COL	1

static SpQuery conv_log_end = {
	"SELECT conv_log_end FROM sandbox_persist.checkpoint_threads WHERE thread_id = $1",
	1, {TEXTOID}
};

/*
 * A11 in one statement: up to $1 queued blocks, each with its thread row
 * key-share locked (a block or thread some other transaction holds is
 * skipped), leave the queue with the block rows they name. Returns the
 * messages deleted. A queued block is the one its deleted checkpoint
 * appended, so no remaining checkpoint's ranges reach it.
 */
static SpQuery conv_gc = {
	"WITH c AS (SELECT g.thread_id, g.block FROM sandbox_persist.conversation_garbage g"
	"  JOIN sandbox_persist.checkpoint_threads t ON t.thread_id = g.thread_id"
	"  ORDER BY g.thread_id, g.block LIMIT $1"
	"  FOR UPDATE OF g SKIP LOCKED FOR KEY SHARE OF t SKIP LOCKED),"
	" q AS (DELETE FROM sandbox_persist.conversation_garbage g USING c"
	"       WHERE g.thread_id = c.thread_id AND g.block = c.block RETURNING g.thread_id, g.block),"
	" d AS (DELETE FROM sandbox_persist.conversation_blocks b USING q"
	"       WHERE b.thread_id = q.thread_id AND b.first_pos >= pg_catalog.lower(q.block)"
	"         AND b.first_pos < pg_catalog.upper(q.block) RETURNING b.message_count)"
	" SELECT coalesce(sum(message_count), 0)::int8 FROM d",
	1, {INT8OID}
};

/* The one column of conv_gc: messages deleted. */
#define CONV_GC_MESSAGES	1

/* Raise INVALID_ENTRY for a conversation that is not an array. */
static void
ConvNotArray(const char *what)
{
	sp_error(SP_SNAPSHOT_INVALID_ENTRY,
			 ("invalid checkpoint conversation"),
			 "conversation must be a JSON array, not %s.", what);
}

/* True for the four JSON whitespace bytes. */
static inline bool
ConvSpace(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/*
 * The closing quote of a JSON string whose text starts at p (after the
 * opening quote). memchr finds quote candidates at memory speed; one is
 * escaped when an odd run of backslashes precedes it. A byte loop here was
 * most of an append's CPU time: messages are mostly string bytes.
 */
static const char *
ConvSkipString(const char *p, const char *end)
{
	for (;;)
	{
		const char *q = memchr(p, '"', end - p);
		const char *b;

		if (q == NULL)
			return end;
		for (b = q; b > p && b[-1] == '\\'; b--)
			;
		if (((q - b) & 1) == 0)
			return q;
		p = q + 1;
	}
}

/*
 * Split JSON array elements starting at p (after the '[' or at the start of a
 * block's text) up to end or a closing ']' into *out, with one shallow scan:
 * only top-level commas and brackets matter, strings are skipped whole. The
 * elements are opaque payloads, so no tree is built for their insides.
 * Returns the deepest nesting seen.
 */
static int
ConvSplitElements(const char *p, const char *end, ConvMessages *out)
{
	int			cap = 16;
	int			deepest = 0;

	out->n = 0;
	out->raw = palloc(sizeof(char *) * cap);
	out->rawlen = palloc(sizeof(int) * cap);
	while (p < end && ConvSpace(*p))
		p++;
	if (p < end && *p == ']')
		return 0;
	while (p < end)
	{
		const char *start;
		const char *e;
		int			depth = 0;

		while (p < end && ConvSpace(*p))
			p++;
		start = p;
		for (; p < end; p++)
		{
			char		c = *p;

			if (c == '"')
				p = ConvSkipString(p + 1, end);
			else if (c == '[' || c == '{')
			{
				depth++;
				deepest = Max(deepest, depth);
			}
			else if (c == ']' || c == '}')
			{
				if (depth == 0)
					break;
				depth--;
			}
			else if (c == ',' && depth == 0)
				break;
		}
		e = p;
		while (e > start && ConvSpace(e[-1]))
			e--;
		if (out->n == cap)
		{
			cap *= 2;
			out->raw = repalloc(out->raw, sizeof(char *) * cap);
			out->rawlen = repalloc(out->rawlen, sizeof(int) * cap);
		}
		out->raw[out->n] = start;
		out->rawlen[out->n] = e - start;
		out->n++;
		if (p >= end || *p != ',')
			break;
		p++;
	}
	return deepest;
}

/*
 * Split a conversation (a json argument, so already valid JSON) into the
 * exact text of each element.
 */
void
ConvSplit(FunctionCallInfo fcinfo, int argno, ConvMessages *out)
{
	text	   *t;
	const char *p;
	const char *end;

	if (PG_ARGISNULL(argno))
		ConvNotArray("SQL NULL");
	t = PG_GETARG_TEXT_PP(argno);
	p = VARDATA_ANY(t);
	end = p + VARSIZE_ANY_EXHDR(t);
	while (p < end && ConvSpace(*p))
		p++;
	if (p == end || *p != '[')
		ConvNotArray(SpJsonKindName(SpJsonParseText(t)->kind));
	/* stored without being walked: refuse nesting the core parser would refuse */
	if (ConvSplitElements(p + 1, end, out) + 1 >= CONV_DEEP)
		SpJsonCheckNesting(t);
}

/*
 * Messages from..n-1 as one block's text: joined by commas (the inside of a
 * JSON array, as reads concatenate blocks) and compressed here, since rows
 * under the TOAST threshold (2 kB) are never compressed by the server and a
 * turn of a chat is often that small. The datum is stored as it is: the
 * server decompresses it wherever the text is read.
 */
static Datum
ConvPack(const char *text_data, int len)
{
	text	   *t = cstring_to_text_with_len(text_data, len);
	Datum		packed = toast_compress_datum(PointerGetDatum(t), CONV_COMPRESSION);

	return DatumGetPointer(packed) != NULL ? packed : PointerGetDatum(t);
}

/* Insert block [first_pos, first_pos + count) of thread_id holding text (len bytes). Inside SPI. */
static void
ConvInsertBlock(const char *thread_id, int64 first_pos, int64 count, const char *text_data, int len)
{
	SpArgs		args;

	SpArgsInit(&args);
	SpArgText(&args, thread_id);
	SpArgInt64(&args, first_pos);
	SpArgDatum(&args, Int32GetDatum((int32) count));
	SpArgDatum(&args, ConvPack(text_data, len));
	SpExec(&conv_store, &args, false, 0);
}

/* Start a SHA-256 context. */
static pg_cryptohash_ctx *
ConvHashStart(void)
{
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);

	if (ctx == NULL || pg_cryptohash_init(ctx) < 0)
		elog(ERROR, "could not start a SHA-256 hash");
	return ctx;
}

/* Finish a SHA-256 context into out (PG_SHA256_DIGEST_LENGTH bytes) and free it. */
static void
ConvHashFinish(pg_cryptohash_ctx *ctx, uint8 *out)
{
	if (pg_cryptohash_final(ctx, out, PG_SHA256_DIGEST_LENGTH) < 0)
		elog(ERROR, "could not finish a SHA-256 hash");
	pg_cryptohash_free(ctx);
}

/*
 * One step of a conversation digest: chain = sha256(chain || h). The digest
 * of messages m1..mN is d0 = sha256('') and di = sha256(d(i-1) || sha256(mi)),
 * so a checkpoint's digest extends its parent's in time proportional to the
 * tail (checkpoint_append_delta verifies a prefix claim and digests only the
 * new messages).
 */
static void
ConvChainStep(pg_cryptohash_ctx *ctx, uint8 *chain, const uint8 *h)
{
	if (pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, chain, PG_SHA256_DIGEST_LENGTH) < 0 ||
		pg_cryptohash_update(ctx, h, PG_SHA256_DIGEST_LENGTH) < 0 ||
		pg_cryptohash_final(ctx, chain, PG_SHA256_DIGEST_LENGTH) < 0)
		elog(ERROR, "could not chain a conversation digest");
}

/* The digest of no messages, sha256(''), into out. */
static void
ConvEmptyDigest(uint8 *out)
{
	ConvHashFinish(ConvHashStart(), out);
}

/*
 * Hash messages from..n-1 and chain them onto *chain (the digest of
 * messages 0..from-1, updated in place); when from <= prefix_len <= n, also
 * the digest of the first prefix_len messages into prefix. One pass over the
 * bytes: the chain only sees the 32-byte message hashes.
 */
static void
ConvHashAll(const ConvMessages *msgs, int from, int prefix_len, uint8 *prefix,
			uint8 *chain)
{
	pg_cryptohash_ctx *one = pg_cryptohash_create(PG_SHA256);

	if (one == NULL)
		elog(ERROR, "could not start a SHA-256 hash");
	if (prefix_len == from)
		memcpy(prefix, chain, PG_SHA256_DIGEST_LENGTH);
	for (int i = from; i < msgs->n; i++)
	{
		uint8		h[PG_SHA256_DIGEST_LENGTH];

		if (pg_cryptohash_init(one) < 0 ||
			pg_cryptohash_update(one, (const uint8 *) msgs->raw[i], msgs->rawlen[i]) < 0 ||
			pg_cryptohash_final(one, h, PG_SHA256_DIGEST_LENGTH) < 0)
			elog(ERROR, "could not hash a conversation message");
		ConvChainStep(one, chain, h);
		if (i + 1 == prefix_len)
			memcpy(prefix, chain, PG_SHA256_DIGEST_LENGTH);
	}
	pg_cryptohash_free(one);
}

/* A bytea datum holding len bytes. */
static Datum
ConvBytea(const uint8 *data, int len)
{
	bytea	   *b = palloc(VARHDRSZ + len);

	SET_VARSIZE(b, VARHDRSZ + len);
	memcpy(VARDATA(b), data, len);
	return PointerGetDatum(b);
}

/*
 * Store messages from..n-1 of msgs as one block at positions log_end.. of
 * thread_id (nothing when there are none). Inside SPI, thread row held.
 */
static void
ConvStoreTail(const char *thread_id, int64 log_end, const ConvMessages *msgs, int from)
{
	StringInfoData buf;

	if (msgs->n <= from)
		return;
	initStringInfo(&buf);
	for (int i = from; i < msgs->n; i++)
	{
		if (i > from)
			appendStringInfoChar(&buf, ',');
		appendBinaryStringInfo(&buf, msgs->raw[i], msgs->rawlen[i]);
	}
	ConvInsertBlock(thread_id, log_end, msgs->n - from, buf.data, buf.len);
}

/*
 * The parent's blocks, from the first, whose messages equal the first ones
 * of msgs message for message and byte for byte: returns how many messages
 * they hold and, when there are any, keeps their ranges as out's base. So a
 * conversation that edits or drops its parent's last messages stores only
 * what follows the last whole block it shares. Inside SPI.
 */
static int
ConvSharedBlocks(const char *thread_id, Datum parent_ranges, const ConvMessages *msgs,
				 ConvStored *out)
{
	SpArgs		args;
	int			shared = 0;
	uint64		rows;

	SpArgsInit(&args);
	SpArgDatum(&args, parent_ranges);
	SpArgText(&args, thread_id);
	rows = SpExec(&conv_parent_blocks, &args, true, 0);
	for (uint64 r = 0; r < rows; r++)
	{
		HeapTuple	tuple = SPI_tuptable->vals[r];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		int			count = DatumGetInt32(SPI_getbinval(tuple, desc, CONV_PARENT_COUNT, &isnull));
		text	   *bodies;
		ConvMessages block;

		if (count > msgs->n - shared)
			break;
		bodies = DatumGetTextPP(SPI_getbinval(tuple, desc, CONV_PARENT_BODIES, &isnull));
		ConvSplitElements(VARDATA_ANY(bodies), VARDATA_ANY(bodies) + VARSIZE_ANY_EXHDR(bodies),
						  &block);
		if (block.n != count)
			break;
		for (int i = 0; i < count; i++)
			if (block.rawlen[i] != msgs->rawlen[shared + i] ||
				memcmp(block.raw[i], msgs->raw[shared + i], block.rawlen[i]) != 0)
				return shared;
		shared += count;
		out->base = PointerGetDatum(PG_DETOAST_DATUM_COPY(SPI_getbinval(tuple, desc,
																		CONV_PARENT_UPTO,
																		&isnull)));
		out->base_null = false;
	}
	return shared;
}

/*
 * Store the conversation of a new checkpoint of thread_id whose parent is
 * parent_id (NULL for a root). When the parent's conversation is a prefix of
 * msgs (equal digest over the parent's length) the new checkpoint keeps the
 * parent's ranges and only the tail is stored; otherwise it keeps the
 * parent's leading blocks it repeats exactly (ConvSharedBlocks) and stores
 * the rest as a block of its own. The caller holds the thread row FOR
 * UPDATE, inserts the checkpoint from *out and moves conv_log_end to
 * out->block_to. Inside SPI.
 */
void
ConvAppend(const char *thread_id, const char *parent_id, const ConvMessages *msgs,
		   ConvStored *out)
{
	uint8		prefix[PG_SHA256_DIGEST_LENGTH];
	uint8		all[PG_SHA256_DIGEST_LENGTH];
	int64		log_end = 0;
	int64		parent_len = -1;
	bool		extends = false;
	int			from = 0;
	SpArgs		args;

	SpArgsInit(&args);
	SpArgText(&args, thread_id);
	SpArgText(&args, parent_id);
	if (SpExec(&conv_state, &args, false, 1) != 1)
		elog(ERROR, "checkpoint thread \"%s\" has no row", thread_id);
	SpGetInt64(0, CONV_STATE_LOG_END, &log_end);
	if (!SpGetInt64(0, CONV_STATE_PARENT_LEN, &parent_len))
		parent_len = -1;

	ConvEmptyDigest(all);
	ConvHashAll(msgs, 0, (int) Min(parent_len, (int64) msgs->n + 1), prefix, all);
	out->base_null = true;
	out->base = (Datum) 0;
	if (parent_len > 0)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
									  CONV_STATE_PARENT_DIGEST, &isnull);
		bytea	   *digest = isnull ? NULL : DatumGetByteaPP(d);
		Datum		parent_ranges;

		extends = parent_len <= msgs->n && digest != NULL &&
			VARSIZE_ANY_EXHDR(digest) == PG_SHA256_DIGEST_LENGTH &&
			memcmp(VARDATA_ANY(digest), prefix, PG_SHA256_DIGEST_LENGTH) == 0;
		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
						  CONV_STATE_PARENT_RANGES, &isnull);
		parent_ranges = PointerGetDatum(PG_DETOAST_DATUM_COPY(d));
		if (extends)
		{
			out->base = parent_ranges;
			out->base_null = false;
			from = (int) parent_len;
		}
		else
			from = ConvSharedBlocks(thread_id, parent_ranges, msgs, out);
	}

	ConvStoreTail(thread_id, log_end, msgs, from);
	out->block_from = log_end;
	out->block_to = log_end + (msgs->n - from);
	out->len = msgs->n;
	out->digest = ConvBytea(all, PG_SHA256_DIGEST_LENGTH);
}

/*
 * Store the conversation of a new checkpoint of thread_id given as a claim
 * about its parent's (the first claim_len messages, with digest
 * claim_digest) and the messages after them (tail). A claim that is not the
 * parent's stored length and digest (a root's: 0 and the empty digest) is
 * refused with PREFIX_MISMATCH before anything is written; a true one keeps
 * the parent's ranges, logs the tail and extends the parent's digest by the
 * tail only, so the result is the one ConvAppend stores for the whole
 * conversation. Same caller duties as ConvAppend. Inside SPI.
 */
void
ConvAppendTail(const char *thread_id, const char *parent_id, int64 claim_len,
			   const uint8 *claim_digest, int claim_digest_len, const ConvMessages *tail,
			   ConvStored *out)
{
	uint8		chain[PG_SHA256_DIGEST_LENGTH];
	uint8		unused[PG_SHA256_DIGEST_LENGTH];
	int64		log_end = 0;
	int64		parent_len = 0;
	Datum		ranges = (Datum) 0;
	bool		has_ranges = false;
	SpArgs		args;

	SpArgsInit(&args);
	SpArgText(&args, thread_id);
	SpArgText(&args, parent_id);
	if (SpExec(&conv_state, &args, false, 1) != 1)
		elog(ERROR, "checkpoint thread \"%s\" has no row", thread_id);
	SpGetInt64(0, CONV_STATE_LOG_END, &log_end);
	ConvEmptyDigest(chain);
	if (parent_id != NULL)
	{
		bool		isnull;
		Datum		d;

		if (!SpGetInt64(0, CONV_STATE_PARENT_LEN, &parent_len))
			elog(ERROR, "checkpoint \"%s\" has no conversation length", parent_id);
		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
						  CONV_STATE_PARENT_DIGEST, &isnull);
		if (!isnull)
		{
			bytea	   *digest = DatumGetByteaPP(d);

			if (VARSIZE_ANY_EXHDR(digest) == PG_SHA256_DIGEST_LENGTH)
				memcpy(chain, VARDATA_ANY(digest), PG_SHA256_DIGEST_LENGTH);
			else
				memset(chain, 0, PG_SHA256_DIGEST_LENGTH);
		}
		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
						  CONV_STATE_PARENT_RANGES, &isnull);
		if (!isnull)
		{
			ranges = PointerGetDatum(PG_DETOAST_DATUM_COPY(d));
			has_ranges = true;
		}
	}
	if (claim_len != parent_len)
		sp_error(SP_SNAPSHOT_PREFIX_MISMATCH,
				 ("conversation prefix claim does not match the parent"),
				 "The claim names %lld messages but the parent %s has %lld.",
				 (long long) claim_len, parent_id ? psprintf("\"%s\"", parent_id) : "(none)",
				 (long long) parent_len);
	if (claim_digest_len != PG_SHA256_DIGEST_LENGTH ||
		memcmp(claim_digest, chain, PG_SHA256_DIGEST_LENGTH) != 0)
		sp_error(SP_SNAPSHOT_PREFIX_MISMATCH,
				 ("conversation prefix claim does not match the parent"),
				 "The claimed digest is not the digest of the parent's %lld messages.",
				 (long long) parent_len);
	if (parent_len + tail->n > PG_INT32_MAX)
		sp_error(SP_SNAPSHOT_INVALID_ENTRY,
				 ("invalid checkpoint conversation"),
				 "A conversation holds at most %d messages.", PG_INT32_MAX);

	ConvHashAll(tail, 0, -1, unused, chain);
	ConvStoreTail(thread_id, log_end, tail, 0);
	out->base_null = !has_ranges;
	out->base = ranges;
	out->block_from = log_end;
	out->block_to = log_end + tail->n;
	out->len = (int32) (parent_len + tail->n);
	out->digest = ConvBytea(chain, PG_SHA256_DIGEST_LENGTH);
}

/*
 * Append the messages at ranges (an int8multirange) of thread_id to buf,
 * joined by commas as between a JSON array's brackets; returns how many.
 * Each block is decompressed on its own and copied once into buf, sized up
 * front from the blocks' raw sizes: a long conversation is megabytes, and
 * gathering it in SQL (string_agg in a subquery) copied and zeroed it five
 * times over in fresh memory. read_only as for SPI_execute: the caller's,
 * so the blocks are read in the snapshot its checkpoint row was. Inside SPI;
 * the caller's SPI result (SPI_tuptable, SPI_processed) and memory context
 * are left as they were.
 */
int64
ConvAppendText(StringInfo buf, const char *thread_id, Datum ranges, bool read_only)
{
	SPITupleTable *caller = SPI_tuptable;
	uint64		caller_rows = SPI_processed;
	MemoryContext caller_cxt = CurrentMemoryContext;
	int64		messages = 0;
	Size		total = 0;
	uint64		rows;
	SpArgs		args;

	SpArgsInit(&args);
	SpArgDatum(&args, ranges);
	SpArgText(&args, thread_id);
	rows = SpExec(&conv_bodies, &args, read_only, 0);
	MemoryContextSwitchTo(caller_cxt);	/* SPI_execute leaves SPI's own context current */
	for (uint64 r = 0; r < rows; r++)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc,
									  CONV_BODIES_TEXT, &isnull);

		total += toast_raw_datum_size(d) - VARHDRSZ + 1;
	}
	/* past MaxAllocSize this raises the error the appends would */
	enlargeStringInfo(buf, (int) Min(total, (Size) MaxAllocSize));
	for (uint64 r = 0; r < rows; r++)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc,
									  CONV_BODIES_TEXT, &isnull);
		text	   *body = DatumGetTextPP(d);

		messages += DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc,
												CONV_BODIES_COUNT, &isnull));
		if (r > 0)
			appendStringInfoChar(buf, ',');
		appendBinaryStringInfo(buf, VARDATA_ANY(body), VARSIZE_ANY_EXHDR(body));
		if ((Pointer) body != DatumGetPointer(d))
			pfree(body);
	}
	SPI_freetuptable(SPI_tuptable);
	SPI_tuptable = caller;
	SPI_processed = caller_rows;
	return messages;
}

/*
 * A reader of the messages at ranges of thread_id a block at a time, for a
 * value-per-call set-returning function: a cursor in this transaction, whose
 * snapshot is the one current now, fetched a batch at a time into a context
 * reset per batch, so memory stays at a batch whatever the conversation's
 * length. Allocated in the current memory context, which must outlive the
 * reads (the function's multi-call context). Inside SPI (read-only).
 */
ConvParts *
ConvPartsOpen(const char *thread_id, Datum ranges)
{
	ConvParts  *parts = palloc0(sizeof(ConvParts));
	SpArgs		args;

	parts->batch_cxt = AllocSetContextCreate(CurrentMemoryContext, "conversation parts",
											 ALLOCSET_DEFAULT_SIZES);
	parts->batch = palloc(sizeof(Datum) * CONV_PARTS_BATCH);
	SpArgsInit(&args);
	SpArgDatum(&args, ranges);
	SpArgText(&args, thread_id);
	parts->portal = SpOpenCursor(&conv_bodies, &args, true);
	return parts;
}

/* Close the cursor of parts, if still open. Also an expression context shutdown callback. */
void
ConvPartsClose(Datum arg)
{
	ConvParts  *parts = (ConvParts *) DatumGetPointer(arg);

	if (parts->portal != NULL)
		SPI_cursor_close(parts->portal);
	parts->portal = NULL;
}

/* Fetch the next batch of parts' blocks, compressed as stored; none when the cursor is done. */
static void
ConvPartsFetch(ConvParts *parts)
{
	MemoryContext caller_cxt = CurrentMemoryContext;

	MemoryContextReset(parts->batch_cxt);
	parts->count = 0;
	parts->next = 0;
	if (parts->portal == NULL)
		return;
	SPI_connect();
	SPI_cursor_fetch(parts->portal, true, CONV_PARTS_BATCH);
	MemoryContextSwitchTo(parts->batch_cxt);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool		isnull;

		parts->batch[r] = datumCopy(SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc,
												  CONV_BODIES_TEXT, &isnull), false, -1);
	}
	parts->count = (int) SPI_processed;
	MemoryContextSwitchTo(caller_cxt);
	if (parts->count == 0)
		ConvPartsClose(PointerGetDatum(parts));
	SPI_finish();
}

/*
 * The next block of parts as a JSON array of its messages, allocated in the
 * current memory context; NULL after the last.
 */
text *
ConvPartsNext(ConvParts *parts)
{
	text	   *body;
	text	   *part;
	int			len;

	if (parts->next == parts->count)
		ConvPartsFetch(parts);
	if (parts->next == parts->count)
		return NULL;
	body = DatumGetTextPP(parts->batch[parts->next++]);
	len = VARSIZE_ANY_EXHDR(body);
	part = palloc(VARHDRSZ + len + 2);
	SET_VARSIZE(part, VARHDRSZ + len + 2);
	VARDATA(part)[0] = '[';
	memcpy(VARDATA(part) + 1, VARDATA_ANY(body), len);
	VARDATA(part)[len + 1] = ']';
	return part;
}

/*
 * Give a fork root of dest_thread its own copy of the conversation at
 * source_ranges of source_thread: one block at the end of the destination's
 * log. The caller holds the destination's thread row FOR UPDATE and sets len
 * and digest (the source's). Inside SPI.
 */
void
ConvCopy(const char *source_thread, Datum source_ranges, const char *dest_thread,
		 ConvStored *out)
{
	StringInfoData bodies;
	int64		log_end = 0;
	int64		n;
	SpArgs		args;

	SpArgsInit(&args);
	SpArgText(&args, dest_thread);
	if (SpExec(&conv_log_end, &args, false, 1) != 1)
		elog(ERROR, "checkpoint thread \"%s\" has no row", dest_thread);
	SpGetInt64(0, CONV_LOG_END_COL, &log_end);
	initStringInfo(&bodies);
	n = ConvAppendText(&bodies, source_thread, source_ranges, false);
	if (n > 0)
		ConvInsertBlock(dest_thread, log_end, n, bodies.data, bodies.len);
	out->base_null = true;
	out->base = (Datum) 0;
	out->block_from = log_end;
	out->block_to = log_end + n;
}

/*
 * A11: delete the blocks deleteHead queued, at most max_rows blocks per
 * call. Returns the messages they held. Inside SPI.
 */
int64
ConvCollect(int64 max_rows)
{
	SpArgs		args;
	int64		messages = 0;

	SpArgsInit(&args);
	SpArgInt64(&args, max_rows);
	SpExec(&conv_gc, &args, false, 1);
	SpGetInt64(0, CONV_GC_MESSAGES, &messages);
	return messages;
}
