/*
 * conversations.c
 *
 * Checkpoint conversations in the 0.3.0 layout (docs/contract/
 * checkpoint-store.md §6): every thread has an append-only log of message ids
 * (conversation_log, positions handed out from checkpoint_threads.conv_log_end
 * and never reused), each distinct message of a thread is stored once
 * (conversation_messages, keyed by its SHA-256), and a checkpoint's
 * conversation is a set of ranges of its thread's log. An append whose
 * transcript extends the parent's (same digest over the parent's length)
 * hashes and logs only the new tail; any other transcript gets a block of its
 * own. A delta append (checkpoint_append_delta) ships only the tail with a
 * claim (length, digest) about the parent's conversation: the claim is
 * checked against the parent's stored conv_len and conv_digest, and the
 * digest is a chain over the message hashes so the new one costs the tail. deleteHead queues the block its checkpoint appended; maintain() (A11)
 * collects queued positions, then messages no position refers to any more.
 *
 * Locking: appends, deleteHeads and forks write a thread's log and messages
 * only while holding its checkpoint_threads row FOR UPDATE, so positions are
 * handed out serially and no two writers meet on a message. Collection takes
 * the thread row FOR KEY SHARE SKIP LOCKED (and its queue rows FOR UPDATE SKIP
 * LOCKED) before deleting: it skips a thread whose writer is in flight, and a
 * writer arriving later waits for it and then sees the deletions, so a
 * message an append is about to reuse is never deleted under it. Lease
 * updates (FOR NO KEY UPDATE) never wait for it.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/cryptohash.h"
#include "common/sha2.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "sandbox_persist.h"
#include "checkpoints.h"

/*
 * Nesting (the array itself counted) from which ConvSplit lets
 * SpJsonCheckNesting decide, as the JSON walker does (its SP_JSON_DEEP).
 */
#define CONV_DEEP 64

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
 * Log messages ($1 hashes, $2 bodies) at positions $4.. of thread $3. Only
 * messages the thread does not have yet are inserted, so an identity value
 * is drawn per new message, not per message passed.
 */
static SpQuery conv_store = {
	"WITH t AS (SELECT u.h, u.b, u.ord FROM unnest($1::bytea[], $2::text[]) WITH ORDINALITY AS u(h, b, ord)),"
	" n AS (INSERT INTO sandbox_persist.conversation_messages (thread_id, hash, body)"
	"       SELECT DISTINCT ON (t.h) $3, t.h, t.b FROM t"
	"        WHERE NOT EXISTS (SELECT 1 FROM sandbox_persist.conversation_messages m"
	"                           WHERE m.thread_id = $3 AND m.hash = t.h)"
	"       RETURNING hash, message_id)"
	" INSERT INTO sandbox_persist.conversation_log (thread_id, pos, message_id)"
	" SELECT $3, $4 + t.ord - 1, coalesce(n.message_id, m.message_id)"
	"   FROM t LEFT JOIN n ON n.hash = t.h"
	"   LEFT JOIN sandbox_persist.conversation_messages m ON m.thread_id = $3 AND m.hash = t.h",
	4, {BYTEAARRAYOID, TEXTARRAYOID, TEXTOID, INT8OID}
};

/* The one column of conv_log_end. */
#define CONV_LOG_END_COL	1

static SpQuery conv_log_end = {
	"SELECT conv_log_end FROM sandbox_persist.checkpoint_threads WHERE thread_id = $1",
	1, {TEXTOID}
};

/* Copy the messages at ranges $1 of thread $2 into thread $3's log from position $4. */
static SpQuery conv_copy = {
	"WITH s AS (SELECT row_number() OVER (ORDER BY l.pos) AS ord, m.hash, m.body"
	"             FROM unnest($1::int8multirange) AS r(rg)"
	"             JOIN sandbox_persist.conversation_log l ON l.thread_id = $2"
	"              AND l.pos >= lower(r.rg) AND l.pos < upper(r.rg)"
	"             JOIN sandbox_persist.conversation_messages m ON m.message_id = l.message_id),"
	" n AS (INSERT INTO sandbox_persist.conversation_messages (thread_id, hash, body)"
	"       SELECT DISTINCT ON (s.hash) $3, s.hash, s.body FROM s"
	"        WHERE NOT EXISTS (SELECT 1 FROM sandbox_persist.conversation_messages m"
	"                           WHERE m.thread_id = $3 AND m.hash = s.hash)"
	"       RETURNING hash, message_id)"
	" INSERT INTO sandbox_persist.conversation_log (thread_id, pos, message_id)"
	" SELECT $3, $4 + s.ord - 1, coalesce(n.message_id, m.message_id)"
	"   FROM s LEFT JOIN n ON n.hash = s.hash"
	"   LEFT JOIN sandbox_persist.conversation_messages m ON m.thread_id = $3 AND m.hash = s.hash",
	4, {INT8MULTIRANGEOID, TEXTOID, TEXTOID, INT8OID}
};

/*
 * A11, step 1: up to $1 queued blocks, each with its thread row key-share
 * locked; a block or thread some other transaction holds is skipped.
 */
/* Columns of conv_gc_blocks: the threads and their blocks, index for index. */
#define CONV_GC_THREADS		1
#define CONV_GC_BLOCKS		2

static SpQuery conv_gc_blocks = {
	"WITH c AS (SELECT g.thread_id, g.block FROM sandbox_persist.conversation_garbage g"
	"  JOIN sandbox_persist.checkpoint_threads t ON t.thread_id = g.thread_id"
	"  ORDER BY g.thread_id, g.block LIMIT $1"
	"  FOR UPDATE OF g SKIP LOCKED FOR KEY SHARE OF t SKIP LOCKED)"
	" SELECT coalesce(array_agg(thread_id), '{}'), coalesce(array_agg(block), '{}') FROM c",
	1, {INT8OID}
};

/* Step 2: at most $3 log positions of those blocks; returns the messages they named. */
/* Columns of conv_gc_positions: positions deleted, the messages they named. */
#define CONV_GC_POSITIONS	1
#define CONV_GC_MESSAGE_IDS	2

static SpQuery conv_gc_positions = {
	"WITH b AS (SELECT * FROM unnest($1::text[], $2::int8range[]) AS b(thread_id, block)),"
	" r AS (SELECT l.thread_id, l.pos FROM b JOIN sandbox_persist.conversation_log l"
	"        ON l.thread_id = b.thread_id AND l.pos >= lower(b.block) AND l.pos < upper(b.block)"
	"       ORDER BY l.thread_id, l.pos LIMIT $3),"
	" d AS (DELETE FROM sandbox_persist.conversation_log l USING r"
	"       WHERE l.thread_id = r.thread_id AND l.pos = r.pos RETURNING l.message_id)"
	" SELECT count(*), coalesce(array_agg(DISTINCT message_id), '{}') FROM d",
	3, {TEXTARRAYOID, INT8RANGEARRAYOID, INT8OID}
};

/* Step 3 (a new snapshot, so step 2's deletions count): messages no position names. */
/* The one column of conv_gc_messages: messages deleted. */
#define CONV_GC_MESSAGES	1

static SpQuery conv_gc_messages = {
	"WITH d AS (DELETE FROM sandbox_persist.conversation_messages m WHERE m.message_id = ANY ($1)"
	"   AND NOT EXISTS (SELECT 1 FROM sandbox_persist.conversation_log l"
	"                    WHERE l.thread_id = m.thread_id AND l.message_id = m.message_id)"
	"   RETURNING 1)"
	" SELECT count(*) FROM d",
	1, {INT8ARRAYOID}
};

/* Step 4: the queued blocks whose positions are all gone. */
static SpQuery conv_gc_done = {
	"DELETE FROM sandbox_persist.conversation_garbage g"
	" USING unnest($1::text[], $2::int8range[]) AS b(thread_id, block)"
	" WHERE g.thread_id = b.thread_id AND g.block = b.block"
	"   AND NOT EXISTS (SELECT 1 FROM sandbox_persist.conversation_log l"
	"                    WHERE l.thread_id = b.thread_id"
	"                      AND l.pos >= lower(b.block) AND l.pos < upper(b.block))",
	2, {TEXTARRAYOID, INT8RANGEARRAYOID}
};

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
 * Split a conversation (a json argument, so already valid JSON) into the
 * exact text of each element with one shallow scan: only top-level commas
 * and brackets matter, strings are skipped whole. The elements are opaque
 * payloads, so no tree is built for their insides.
 */
void
ConvSplit(FunctionCallInfo fcinfo, int argno, ConvMessages *out)
{
	text	   *t;
	const char *p;
	const char *end;
	int			cap = 16;
	int			deepest = 0;

	if (PG_ARGISNULL(argno))
		ConvNotArray("SQL NULL");
	t = PG_GETARG_TEXT_PP(argno);
	p = VARDATA_ANY(t);
	end = p + VARSIZE_ANY_EXHDR(t);
	while (p < end && ConvSpace(*p))
		p++;
	if (p == end || *p != '[')
		ConvNotArray(SpJsonKindName(SpJsonParseText(t)->kind));
	p++;
	out->n = 0;
	out->raw = palloc(sizeof(char *) * cap);
	out->rawlen = palloc(sizeof(int) * cap);
	while (p < end && ConvSpace(*p))
		p++;
	if (p < end && *p == ']')
		return;
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
	/* stored without being walked: refuse nesting the core parser would refuse */
	if (deepest + 1 >= CONV_DEEP)
		SpJsonCheckNesting(t);
}

/* Messages from..n-1 as a text[] datum. */
Datum
ConvTextArray(const ConvMessages *msgs, int from)
{
	int			k = msgs->n - from;
	Datum	   *d = palloc(sizeof(Datum) * Max(k, 1));

	for (int i = 0; i < k; i++)
		d[i] = PointerGetDatum(cstring_to_text_with_len(msgs->raw[from + i],
														msgs->rawlen[from + i]));
	return PointerGetDatum(construct_array(d, k, TEXTOID, -1, false, TYPALIGN_INT));
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
 * Hash messages from..n-1 (hashes: n * 32 bytes, indexed like msgs) and
 * chain them onto *chain (the digest of messages 0..from-1, updated in
 * place); when from <= prefix_len <= n, also the digest of the first
 * prefix_len messages into prefix. One pass over the bytes: the chain only
 * sees the 32-byte message hashes.
 */
static void
ConvHashAll(const ConvMessages *msgs, int from, uint8 *hashes, int prefix_len, uint8 *prefix,
			uint8 *chain)
{
	pg_cryptohash_ctx *one = pg_cryptohash_create(PG_SHA256);

	if (one == NULL)
		elog(ERROR, "could not start a SHA-256 hash");
	if (prefix_len == from)
		memcpy(prefix, chain, PG_SHA256_DIGEST_LENGTH);
	for (int i = from; i < msgs->n; i++)
	{
		uint8	   *h = hashes + i * PG_SHA256_DIGEST_LENGTH;

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
 * Log messages from..n-1 of msgs (their hashes in hashes, indexed like msgs)
 * at positions log_end.. of thread_id. Inside SPI, thread row held.
 */
static void
ConvStoreTail(const char *thread_id, int64 log_end, const ConvMessages *msgs, int from,
			  const uint8 *hashes)
{
	SpArgs		args;

	if (msgs->n > from)
	{
		Datum	   *h = palloc(sizeof(Datum) * (msgs->n - from));

		for (int i = from; i < msgs->n; i++)
			h[i - from] = ConvBytea(hashes + i * PG_SHA256_DIGEST_LENGTH, PG_SHA256_DIGEST_LENGTH);
		SpArgsInit(&args);
		SpArgDatum(&args, PointerGetDatum(construct_array(h, msgs->n - from, BYTEAOID, -1, false,
														  TYPALIGN_INT)));
		SpArgDatum(&args, ConvTextArray(msgs, from));
		SpArgText(&args, thread_id);
		SpArgInt64(&args, log_end);
		SpExec(&conv_store, &args, false, 0);
	}
}

/*
 * Store the conversation of a new checkpoint of thread_id whose parent is
 * parent_id (NULL for a root). When the parent's conversation is a prefix of
 * msgs (equal digest over the parent's length) the new checkpoint keeps the
 * parent's ranges and only the tail is logged; otherwise every message is
 * logged in a block of its own. The caller holds the thread row FOR UPDATE,
 * inserts the checkpoint from *out and moves conv_log_end to out->block_to.
 * Inside SPI.
 */
void
ConvAppend(const char *thread_id, const char *parent_id, const ConvMessages *msgs,
		   ConvStored *out)
{
	uint8	   *hashes = palloc(PG_SHA256_DIGEST_LENGTH * Max(msgs->n, 1));
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
	ConvHashAll(msgs, 0, hashes, (int) Min(parent_len, (int64) msgs->n + 1), prefix, all);
	out->base_null = true;
	out->base = (Datum) 0;
	if (parent_len >= 0 && parent_len <= msgs->n)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
									  CONV_STATE_PARENT_DIGEST, &isnull);
		bytea	   *digest = isnull ? NULL : DatumGetByteaPP(d);

		extends = digest != NULL && VARSIZE_ANY_EXHDR(digest) == PG_SHA256_DIGEST_LENGTH &&
			memcmp(VARDATA_ANY(digest), prefix, PG_SHA256_DIGEST_LENGTH) == 0;
		if (extends)
		{
			d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
							  CONV_STATE_PARENT_RANGES, &isnull);
			out->base = PointerGetDatum(PG_DETOAST_DATUM_COPY(d));
			out->base_null = false;
			from = (int) parent_len;
		}
	}

	ConvStoreTail(thread_id, log_end, msgs, from, hashes);
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
	uint8	   *hashes = palloc(PG_SHA256_DIGEST_LENGTH * Max(tail->n, 1));
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

	ConvHashAll(tail, 0, hashes, -1, unused, chain);
	ConvStoreTail(thread_id, log_end, tail, 0, hashes);
	out->base_null = !has_ranges;
	out->base = ranges;
	out->block_from = log_end;
	out->block_to = log_end + tail->n;
	out->len = (int32) (parent_len + tail->n);
	out->digest = ConvBytea(chain, PG_SHA256_DIGEST_LENGTH);
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
	int64		log_end = 0;
	SpArgs		args;
	int			n;

	SpArgsInit(&args);
	SpArgText(&args, dest_thread);
	if (SpExec(&conv_log_end, &args, false, 1) != 1)
		elog(ERROR, "checkpoint thread \"%s\" has no row", dest_thread);
	SpGetInt64(0, CONV_LOG_END_COL, &log_end);
	SpArgsInit(&args);
	SpArgDatum(&args, source_ranges);
	SpArgText(&args, source_thread);
	SpArgText(&args, dest_thread);
	SpArgInt64(&args, log_end);
	n = SpExec(&conv_copy, &args, false, 0);
	out->base_null = true;
	out->base = (Datum) 0;
	out->block_from = log_end;
	out->block_to = log_end + n;
}

/*
 * A11: collect the log blocks deleteHead queued, at most max_rows positions
 * per call, then the messages no position refers to any more. Returns both
 * counts. Inside SPI.
 */
void
ConvCollect(int64 max_rows, int64 *positions, int64 *messages)
{
	SpArgs		args;
	Datum		threads;
	Datum		blocks;
	Datum		ids;
	bool		isnull;

	*positions = 0;
	*messages = 0;
	SpArgsInit(&args);
	SpArgInt64(&args, max_rows);
	SpExec(&conv_gc_blocks, &args, false, 1);
	threads = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, CONV_GC_THREADS, &isnull);
	blocks = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, CONV_GC_BLOCKS, &isnull);
	if (ArrayGetNItems(ARR_NDIM(DatumGetArrayTypeP(threads)),
					   ARR_DIMS(DatumGetArrayTypeP(threads))) == 0)
		return;

	SpArgsInit(&args);
	SpArgDatum(&args, threads);
	SpArgDatum(&args, blocks);
	SpArgInt64(&args, max_rows);
	SpExec(&conv_gc_positions, &args, false, 1);
	SpGetInt64(0, CONV_GC_POSITIONS, positions);
	ids = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, CONV_GC_MESSAGE_IDS, &isnull);

	SpArgsInit(&args);
	SpArgDatum(&args, ids);
	SpExec(&conv_gc_messages, &args, false, 1);
	SpGetInt64(0, CONV_GC_MESSAGES, messages);

	SpArgsInit(&args);
	SpArgDatum(&args, threads);
	SpArgDatum(&args, blocks);
	SpExec(&conv_gc_done, &args, false, 0);
}
