/*
 * checkpoints.c
 *
 * The checkpoint store (docs/contract/checkpoint-store.md §1-§6): append with
 * the contract's exact check order (whole, or as a delta: the new messages
 * and a claim about the parent's, §3.1), deleteHead, get, list, getHead and
 * listBlobReferences, and the checkpoint record every reader builds. The
 * functions that touch a conversation serve the per-thread log of 0.3.0
 * (conversations.c) and refuse an older schema (CKPT_LAYOUT_SINCE).
 *
 * Locking: append and deleteHead lock the thread's checkpoint_threads row
 * FOR UPDATE first; it is the thread's only lock point, so two appends
 * serialise and the loser sees the new head, and a thread's conversation
 * rows are only ever written under it. Reference counts are rows per
 * (checkpoint, distinct key), inserted and deleted with their checkpoint, so
 * threads that share blob keys never wait for each other. Blob rows the new
 * checkpoint references are key-share locked after the checkpoint row
 * (thread row, checkpoint rows, blob rows in key order).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "sandbox_persist.h"
#include "checkpoints.h"

PG_FUNCTION_INFO_V1(checkpoint_append);
PG_FUNCTION_INFO_V1(checkpoint_append_delta);
PG_FUNCTION_INFO_V1(checkpoint_delete_head);
PG_FUNCTION_INFO_V1(checkpoint_get);
PG_FUNCTION_INFO_V1(checkpoint_get_parts);
PG_FUNCTION_INFO_V1(checkpoint_list);
PG_FUNCTION_INFO_V1(checkpoint_get_head);
PG_FUNCTION_INFO_V1(checkpoint_list_blob_references);

/* Columns of a checkpoint record (CKPT_COLUMNS_*), in their order. */
#define CKPT_COL_ID				1
#define CKPT_COL_THREAD_ID		2
#define CKPT_COL_PARENT_ID		3
#define CKPT_COL_CREATED_AT		4
#define CKPT_COL_REASON			5
#define CKPT_COL_LABEL			6
#define CKPT_COL_SOURCE_RUN_ID	7
#define CKPT_COL_FILES			8
#define CKPT_COL_ARTIFACTS		9
#define CKPT_COL_CONV_RANGES	10	/* the conversation: ranges of the thread's log (conversations.c) */

#define CKPT_HEADER_COLUMNS \
	"c.checkpoint_id, c.thread_id, c.parent_id, c.created_at, c.reason, c.label," \
	" c.source_run_id, c.files::text, c.artifacts::text, "

/* The conversation is a set of ranges of the thread's log, read by ConvAppendText. */
#define CKPT_COLUMNS_LOG CKPT_HEADER_COLUMNS "c.conv_ranges"

static SpQuery ckpt_exists = {
	"SELECT 1 FROM sandbox_persist.checkpoints WHERE checkpoint_id = $1",
	1, {TEXTOID}
};

/* $10 the parent's ranges kept (or NULL), [$11, $12) the block appended. */
static SpQuery ckpt_insert_log = {
	"INSERT INTO sandbox_persist.checkpoints (checkpoint_id, thread_id, parent_id, created_at,"
	" reason, label, source_run_id, files, artifacts, conv_ranges, conv_block, conv_len,"
	" conv_digest)"
	" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9,"
	"  coalesce($10, '{}'::int8multirange) + pg_catalog.int8multirange(pg_catalog.int8range($11, $12)),"
	"  pg_catalog.int8range($11, $12), $13, $14)"
	" ON CONFLICT (checkpoint_id) DO NOTHING",
	14, {TEXTOID, TEXTOID, TEXTOID, FLOAT8OID, TEXTOID, TEXTOID, TEXTOID, JSONOID, JSONOID,
	INT8MULTIRANGEOID, INT8OID, INT8OID, INT4OID, BYTEAOID}
};

static SpQuery ckpt_insert_refs = {
	"INSERT INTO sandbox_persist.checkpoint_blob_refs (checkpoint_id, blob_key)"
	" SELECT $1, k FROM unnest($2::text[]) AS k",
	2, {TEXTOID, TEXTARRAYOID}
};

static SpQuery ckpt_lock_blobs = {
	"SELECT 1 FROM sandbox_persist.blobs WHERE blob_key = ANY ($1::text[])"
	" ORDER BY blob_key FOR KEY SHARE",
	1, {TEXTARRAYOID}
};

static SpQuery ckpt_set_head = {
	"UPDATE sandbox_persist.checkpoint_threads SET head_id = $2 WHERE thread_id = $1",
	2, {TEXTOID, TEXTOID}
};

/* The head and the next free log position move together (append). */
static SpQuery ckpt_set_head_log = {
	"UPDATE sandbox_persist.checkpoint_threads SET head_id = $2, conv_log_end = $3"
	" WHERE thread_id = $1",
	3, {TEXTOID, TEXTOID, INT8OID}
};

/* Column of ckpt_delete_log's result. */
#define CKPT_DELETED_PARENT_ID	1

/*
 * The log block the checkpoint appended is queued for A11. No
 * other checkpoint refers to it: only descendants extend it, and a head has
 * none (deleteHead takes heads only).
 */
static SpQuery ckpt_delete_log = {
	"WITH d AS (DELETE FROM sandbox_persist.checkpoints WHERE checkpoint_id = $1"
	"           RETURNING parent_id, thread_id, conv_block),"
	" g AS (INSERT INTO sandbox_persist.conversation_garbage (thread_id, block)"
	"       SELECT thread_id, conv_block FROM d WHERE NOT pg_catalog.isempty(conv_block))"
	" SELECT parent_id FROM d",
	1, {TEXTOID}
};

static SpQuery ckpt_select_log = {
	"SELECT " CKPT_COLUMNS_LOG " FROM sandbox_persist.checkpoints c WHERE c.checkpoint_id = $1",
	1, {TEXTOID}
};

static SpQuery ckpt_select_thread_log = {
	"SELECT " CKPT_COLUMNS_LOG " FROM sandbox_persist.checkpoints c WHERE c.thread_id = $1"
	" ORDER BY c.created_at, c.checkpoint_id",
	1, {TEXTOID}
};

static SpQuery ckpt_head = {
	"SELECT head_id FROM sandbox_persist.checkpoint_threads WHERE thread_id = $1",
	1, {TEXTOID}
};

/* Columns of ckpt_refs. */
#define CKPT_REF_KEY	1
#define CKPT_REF_COUNT	2

static SpQuery ckpt_refs = {
	"SELECT blob_key, count(*) FROM sandbox_persist.checkpoint_blob_refs"
	" GROUP BY blob_key ORDER BY blob_key",
	0, {InvalidOid}
};

/* True when two optional ids are equal (both NULL counts as equal). */
static bool
CkptSameId(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

/* An optional id for a message: "id" in quotes, or none. */
static const char *
CkptQuoted(const char *id)
{
	return id ? psprintf("\"%s\"", id) : "none";
}

/* Raise DUPLICATE_ID. */
static void
CkptDuplicateId(const char *checkpoint_id)
{
	sp_error(SP_SNAPSHOT_DUPLICATE_ID,
			 ("duplicate checkpoint id"),
			 "A checkpoint with id \"%s\" already exists.", checkpoint_id);
}

/*
 * Record one reference per distinct key for a new checkpoint. The blob rows
 * that exist are first key-share locked in key order, so maintenance (which
 * takes candidates FOR UPDATE SKIP LOCKED and re-checks references) either
 * skips them or has already deleted them; absent blobs are allowed. Inside SPI.
 */
void
CkptInsertRefs(const char *checkpoint_id, Datum keys)
{
	SpArgs		args;

	SpArgsInit(&args);
	SpArgDatum(&args, keys);
	SpExec(&ckpt_lock_blobs, &args, false, 0);
	SpArgsInit(&args);
	SpArgText(&args, checkpoint_id);
	SpArgDatum(&args, keys);
	SpExec(&ckpt_insert_refs, &args, false, 0);
}

/* How CkptWriteRecord fills in a record's conversation. */
typedef enum CkptConversation
{
	CKPT_CONV_READ,				/* read, as the row was: read-only */
	CKPT_CONV_READ_OWN,			/* read after this call's own writes (a fork reads back its root) */
	CKPT_CONV_EMPTY				/* [], the caller sends the messages apart (checkpoint_get_parts) */
} CkptConversation;

/* Append the SandboxCheckpoint of SPI result row `row`, its conversation as `how` says. */
static void
CkptWriteRecord(StringInfo buf, int row, CkptConversation how)
{
	bool		first = true;
	char	   *s;
	double		created = 0;
	bool		isnull;

	appendStringInfoChar(buf, '{');
	SpAppendKey(buf, &first, "id");
	SpAppendString(buf, SpGetText(row, CKPT_COL_ID));
	SpAppendKey(buf, &first, "threadId");
	SpAppendString(buf, SpGetText(row, CKPT_COL_THREAD_ID));
	SpAppendKey(buf, &first, "parentCheckpointId");
	if ((s = SpGetText(row, CKPT_COL_PARENT_ID)) != NULL)
		SpAppendString(buf, s);
	else
		appendStringInfoString(buf, "null");
	SpGetFloat8(row, CKPT_COL_CREATED_AT, &created);
	SpAppendKey(buf, &first, "createdAt");
	SpAppendDouble(buf, created);
	SpAppendKey(buf, &first, "reason");
	SpAppendString(buf, SpGetText(row, CKPT_COL_REASON));
	if ((s = SpGetText(row, CKPT_COL_LABEL)) != NULL)
	{
		SpAppendKey(buf, &first, "label");
		SpAppendString(buf, s);
	}
	if ((s = SpGetText(row, CKPT_COL_SOURCE_RUN_ID)) != NULL)
	{
		SpAppendKey(buf, &first, "sourceRunId");
		SpAppendString(buf, s);
	}
	SpAppendKey(buf, &first, "files");
	appendStringInfoString(buf, SpGetText(row, CKPT_COL_FILES));
	SpAppendKey(buf, &first, "conversation");
	appendStringInfoChar(buf, '[');
	if (how != CKPT_CONV_EMPTY)
		ConvAppendText(buf, SpGetText(row, CKPT_COL_THREAD_ID),
					   SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc,
									 CKPT_COL_CONV_RANGES, &isnull), how == CKPT_CONV_READ);
	appendStringInfoChar(buf, ']');
	SpAppendKey(buf, &first, "artifacts");
	appendStringInfoString(buf, SpGetText(row, CKPT_COL_ARTIFACTS));
	appendStringInfoChar(buf, '}');
}

/* CkptWriteRecord of a row read read-only. */
static void
CkptAppendRecord(StringInfo buf, int row)
{
	CkptWriteRecord(buf, row, CKPT_CONV_READ);
}

/* CkptWriteRecord of a row read after this call's own writes. */
static void
CkptAppendOwnRecord(StringInfo buf, int row)
{
	CkptWriteRecord(buf, row, CKPT_CONV_READ_OWN);
}

/* The checkpoint with this id as a json datum built in `outer`. Inside SPI. */
Datum
CkptRecordById(const char *checkpoint_id, bool read_only, MemoryContext outer, bool *found)
{
	SpArgs		args;
	bool		isnull;
	Datum		result;

	SpArgsInit(&args);
	SpArgText(&args, checkpoint_id);
	result = SpRowsJson(&ckpt_select_log, &args, read_only,
						read_only ? CkptAppendRecord : CkptAppendOwnRecord, true, outer,
						&isnull);
	*found = !isnull;
	return result;
}

/* Raise WRITER_LOST unless the writer belongs to the thread the call writes. */
static void
CkptRequireWriterThread(const char *writer_thread, const char *thread_id)
{
	if (strcmp(writer_thread, thread_id) != 0)
		sp_error(SP_SNAPSHOT_WRITER_LOST,
				 ("checkpoint writer lease lost"),
				 "The writer belongs to thread \"%s\", not \"%s\".", writer_thread, thread_id);
}

/* Arguments of checkpoint_append_delta after input and tail. */
#define CKPT_DELTA_ARG_PREFIX_LEN		2
#define CKPT_DELTA_ARG_PREFIX_DIGEST	3
#define CKPT_DELTA_ARG_NOW				4
#define CKPT_WHOLE_ARG_NOW				2

/*
 * checkpoint_append(input json, conversation json, now_ms bigint) -> json
 * {headId}. input = {checkpoint, expectedHeadId, writer}. Checks run in the
 * contract's order: identifiers, writer thread, entries, lease, duplicate id,
 * stale head, parent mismatch; then the checkpoint is published atomically:
 * only what extends the parent's conversation is stored. With delta, the
 * call is checkpoint_append_delta(input, tail, prefix_len, prefix_digest,
 * now_ms): the conversation is the parent's first prefix_len messages (a
 * claim, checked last: PREFIX_MISMATCH) followed by tail.
 */
static Datum
CkptAppend(FunctionCallInfo fcinfo, bool delta)
{
	static const char *const top_names[] = {"checkpoint", "expectedHeadId", "writer"};
	static const char *const names[] = {
		"id", "threadId", "parentCheckpointId", "createdAt", "reason", "label",
		"sourceRunId", "files", "artifacts"
	};
	SpJson	   *input = SpCheckJsonKindArg(fcinfo, 0, "input", SPJ_OBJECT, "an object", SP_CHECK_CKPT_ID);
	SpJson	   *top[lengthof(top_names)];
	SpJson	   *c[lengthof(names)];
	SpJson		empty = {SPJ_OBJECT};
	char	   *thread_id;
	char	   *writer_thread;
	char	   *checkpoint_id;
	char	   *expected_head = NULL;
	char	   *parent_id = NULL;
	char	   *reason;
	char	   *label;
	char	   *source_run;
	double		created_at;
	CkptEntries entries = {0};
	CkptWriter	writer;
	CkptThread	thread;
	ConvMessages msgs;
	ConvStored	stored = {0};
	int			nkeys;
	int			now_arg = delta ? CKPT_DELTA_ARG_NOW : CKPT_WHOLE_ARG_NOW;
	int64		claim_len = 0;
	bytea	   *claim_digest = NULL;
	SpArgs		args;
	StringInfoData result;

	SpRequireSchema(CKPT_LAYOUT_SINCE, delta ? "checkpoint_append_delta" : "checkpoint_append");
	CkptLookup(input, top_names, lengthof(top_names), top);
	/* A checkpoint that is not an object has no identifiers to read. */
	CkptLookup(top[0] && top[0]->kind == SPJ_OBJECT ? top[0] : &empty,
			   names, lengthof(names), c);

	/* 1. identifiers */
	thread_id = SpCheckIdJson(c[1], "checkpoint.threadId", SP_ID_MAX_BYTES, SP_CHECK_CKPT_ID);
	writer_thread = CkptReadWriterThread(top[2]);
	checkpoint_id = SpCheckIdJson(c[0], "checkpoint.id", SP_ID_MAX_BYTES, SP_CHECK_CKPT_ID);
	if (top[1] == NULL || top[1]->kind != SPJ_NULL)
		expected_head = SpCheckIdJson(top[1], "expectedHeadId", SP_ID_MAX_BYTES, SP_CHECK_CKPT_ID);
	if (c[2] != NULL && c[2]->kind != SPJ_NULL)
		parent_id = SpCheckIdJson(c[2], "checkpoint.parentCheckpointId", SP_ID_MAX_BYTES, SP_CHECK_CKPT_ID);

	/* 2. the writer must belong to the checkpoint's thread */
	CkptRequireWriterThread(writer_thread, thread_id);

	/* 3. entries: unknown keys first, then each field */
	CkptMembers(input, top_names, lengthof(top_names), top, "checkpoint append input");
	if (top[0] == NULL || top[0]->kind != SPJ_OBJECT)
		sp_error(SP_SNAPSHOT_INVALID_ENTRY,
				 ("invalid checkpoint"),
				 "checkpoint must be an object.");
	CkptMembers(top[0], names, lengthof(names), c, "a checkpoint");
	created_at = SpCheckNumberJson(c[3], "createdAt", SP_CHECK_CKPT_ENTRY);
	reason = SpCheckStringJson(c[4], "reason", true, -1, SP_CHECK_CKPT_ENTRY);
	label = SpCheckStringJson(c[5], "label", false, -1, SP_CHECK_CKPT_ENTRY);
	source_run = SpCheckStringJson(c[6], "sourceRunId", false, -1, SP_CHECK_CKPT_ENTRY);
	CkptValidateFiles(c[7], &entries);
	CkptValidateArtifacts(c[8], &entries);
	ConvSplit(fcinfo, 1, &msgs);
	if (delta)
	{
		if (PG_ARGISNULL(CKPT_DELTA_ARG_PREFIX_LEN) ||
			(claim_len = PG_GETARG_INT64(CKPT_DELTA_ARG_PREFIX_LEN)) < 0)
			sp_error(SP_SNAPSHOT_INVALID_ENTRY,
					 ("invalid conversation prefix claim"),
					 "prefix_len must be a number of messages, zero or more.");
		if (PG_ARGISNULL(CKPT_DELTA_ARG_PREFIX_DIGEST))
			sp_error(SP_SNAPSHOT_INVALID_ENTRY,
					 ("invalid conversation prefix claim"),
					 "prefix_digest must be the 32-byte digest of the parent's conversation.");
		claim_digest = PG_GETARG_BYTEA_PP(CKPT_DELTA_ARG_PREFIX_DIGEST);
	}
	(void) SpNowMs(fcinfo, now_arg);	/* refuse a disallowed clock before locking */
	CkptReadWriterLease(top[2], &writer);

	SPI_connect();
	/* 4. the lease (the thread row is this thread's lock point) */
	CkptLockThread(thread_id, &thread);
	CkptRequireLease(fcinfo, now_arg, &thread, &writer, thread_id);

	/* 5. checkpoint ids are unique across every thread */
	SpArgsInit(&args);
	SpArgText(&args, checkpoint_id);
	if (SpExec(&ckpt_exists, &args, false, 1) > 0)
		CkptDuplicateId(checkpoint_id);

	/* 6, 7. compare-and-set on the head */
	if (!CkptSameId(thread.head_id, expected_head))
		sp_error(SP_SNAPSHOT_STALE_HEAD,
				 ("stale checkpoint head"),
				 "Expected head %s but thread \"%s\" is at %s.",
				 CkptQuoted(expected_head), thread_id, CkptQuoted(thread.head_id));
	if (!CkptSameId(parent_id, expected_head))
		sp_error(SP_SNAPSHOT_PARENT_MISMATCH,
				 ("checkpoint parent does not match the expected head"),
				 "parentCheckpointId is %s but the expected head is %s.",
				 CkptQuoted(parent_id), CkptQuoted(expected_head));

	/*
	 * 8 (delta only): the prefix claim, checked by ConvAppendTail before it
	 * writes; then publish: the conversation, the checkpoint, its
	 * references, the head
	 */
	if (delta)
		ConvAppendTail(thread_id, parent_id, claim_len, (const uint8 *) VARDATA_ANY(claim_digest),
					   VARSIZE_ANY_EXHDR(claim_digest), &msgs, &stored);
	else
		ConvAppend(thread_id, parent_id, &msgs, &stored);

	SpArgsInit(&args);
	SpArgText(&args, checkpoint_id);
	SpArgText(&args, thread_id);
	SpArgText(&args, parent_id);
	SpArgFloat8(&args, created_at);
	SpArgText(&args, reason);
	SpArgText(&args, label);
	SpArgText(&args, source_run);
	SpArgTextLen(&args, entries.files.data, entries.files.len);
	SpArgTextLen(&args, entries.artifacts.data, entries.artifacts.len);
	if (stored.base_null)
		SpArgNull(&args);
	else
		SpArgDatum(&args, stored.base);
	SpArgInt64(&args, stored.block_from);
	SpArgInt64(&args, stored.block_to);
	SpArgDatum(&args, Int32GetDatum(stored.len));
	SpArgDatum(&args, stored.digest);
	if (SpExec(&ckpt_insert_log, &args, false, 0) == 0)
		CkptDuplicateId(checkpoint_id); /* lost a race with another thread */
	CkptInsertRefs(checkpoint_id, CkptDistinctKeys(&entries, &nkeys));
	SpArgsInit(&args);
	SpArgText(&args, thread_id);
	SpArgText(&args, checkpoint_id);
	SpArgInt64(&args, stored.block_to);
	SpExec(&ckpt_set_head_log, &args, false, 0);
	SPI_finish();

	initStringInfo(&result);
	appendStringInfoString(&result, "{\"headId\":");
	SpAppendString(&result, checkpoint_id);
	appendStringInfoChar(&result, '}');
	PG_RETURN_DATUM(SpJsonResult(&result));
}

/* checkpoint_append(input json, conversation json, now_ms bigint) -> json {headId}. */
Datum
checkpoint_append(PG_FUNCTION_ARGS)
{
	return CkptAppend(fcinfo, false);
}

/*
 * checkpoint_append_delta(input json, tail json, prefix_len bigint,
 * prefix_digest bytea, now_ms bigint) -> json {headId}: checkpoint_append
 * with the conversation given as a claim about the parent's plus the new
 * messages (0.4.0).
 */
Datum
checkpoint_append_delta(PG_FUNCTION_ARGS)
{
	return CkptAppend(fcinfo, true);
}

/*
 * checkpoint_delete_head(input json, now_ms bigint): input = {threadId,
 * checkpointId, writer}. Removes the head checkpoint (its references go with
 * it) and moves the head to its parent. Blob bytes are untouched; the log
 * block it appended is queued for maintain() (A11).
 */
Datum
checkpoint_delete_head(PG_FUNCTION_ARGS)
{
	static const char *const names[] = {"threadId", "checkpointId", "writer"};
	SpJson	   *input = SpCheckJsonKindArg(fcinfo, 0, "input", SPJ_OBJECT, "an object", SP_CHECK_CKPT_ID);
	SpJson	   *m[lengthof(names)];
	char	   *thread_id;
	char	   *checkpoint_id;
	char	   *writer_thread;
	CkptWriter	writer;
	CkptThread	thread;
	SpArgs		args;
	char	   *parent_id;

	SpRequireSchema(CKPT_LAYOUT_SINCE, "checkpoint_delete_head");
	CkptLookup(input, names, lengthof(names), m);
	thread_id = SpCheckIdJson(m[0], "threadId", SP_ID_MAX_BYTES, SP_CHECK_CKPT_ID);
	checkpoint_id = SpCheckIdJson(m[1], "checkpointId", SP_ID_MAX_BYTES, SP_CHECK_CKPT_ID);
	writer_thread = CkptReadWriterThread(m[2]);
	CkptRequireWriterThread(writer_thread, thread_id);
	CkptMembers(input, names, lengthof(names), m, "checkpoint deleteHead input");
	CkptReadWriterLease(m[2], &writer);
	(void) SpNowMs(fcinfo, 1);	/* refuse a disallowed clock before locking */

	SPI_connect();
	CkptLockThread(thread_id, &thread);
	CkptRequireLease(fcinfo, 1, &thread, &writer, thread_id);
	if (!CkptSameId(thread.head_id, checkpoint_id))
		sp_error(SP_SNAPSHOT_NOT_HEAD,
				 ("checkpoint is not the head"),
				 "Thread \"%s\" is at %s, not \"%s\".",
				 thread_id, CkptQuoted(thread.head_id), checkpoint_id);
	SpArgsInit(&args);
	SpArgText(&args, checkpoint_id);
	if (SpExec(&ckpt_delete_log, &args, false, 0) != 1)
		sp_error(SP_SNAPSHOT_NOT_HEAD,
				 ("checkpoint is not the head"),
				 "The head record \"%s\" of thread \"%s\" is missing.", checkpoint_id, thread_id);
	parent_id = SpGetText(0, CKPT_DELETED_PARENT_ID);
	SpArgsInit(&args);
	SpArgText(&args, thread_id);
	SpArgText(&args, parent_id);
	SpExec(&ckpt_set_head, &args, false, 0);
	SPI_finish();
	PG_RETURN_VOID();
}

/* checkpoint_get(checkpoint_id text) -> json: the checkpoint, or NULL. */
Datum
checkpoint_get(PG_FUNCTION_ARGS)
{
	char	   *checkpoint_id;
	MemoryContext outer = CurrentMemoryContext;
	Datum		result;
	bool		found;

	SpRequireSchema(CKPT_LAYOUT_SINCE, "checkpoint_get");
	checkpoint_id = SpCheckIdArg(fcinfo, 0, "checkpoint_id", SP_ID_MAX_BYTES, SP_CHECK_CKPT_ID);
	SPI_connect();
	result = CkptRecordById(checkpoint_id, true, outer, &found);
	SPI_finish();
	if (!found)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(result);
}

/* What checkpoint_get_parts keeps between calls. */
typedef struct CkptParts
{
	Datum		record;			/* the first row, NULL once returned */
	ConvParts  *conversation;	/* the rows after it */
	ExprContext *econtext;		/* where ConvPartsClose is registered, or NULL */
} CkptParts;

/*
 * checkpoint_get_parts(checkpoint_id text) -> SETOF json: checkpoint_get for
 * a client that reads long conversations. The record comes first with
 * "conversation":[], then the messages as JSON arrays in order, a row per
 * stored block; no rows when there is no such checkpoint. A 2 000-message
 * conversation is a 2 MB value through checkpoint_get, and a value that
 * large costs more in fresh memory on both ends than the rows do; called in
 * a select list, the rows are made as the client reads them.
 */
Datum
checkpoint_get_parts(PG_FUNCTION_ARGS)
{
	FuncCallContext *funcctx;
	CkptParts  *state;
	text	   *part;

	if (SRF_IS_FIRSTCALL())
	{
		ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
		char	   *checkpoint_id;
		MemoryContext outer;
		SpArgs		args;

		SpRequireSchema(CKPT_LAYOUT_SINCE, "checkpoint_get_parts");
		checkpoint_id = SpCheckIdArg(fcinfo, 0, "checkpoint_id", SP_ID_MAX_BYTES, SP_CHECK_CKPT_ID);
		funcctx = SRF_FIRSTCALL_INIT();
		outer = MemoryContextSwitchTo(funcctx->multi_call_memory_ctx);
		SPI_connect();
		SpArgsInit(&args);
		SpArgText(&args, checkpoint_id);
		if (SpExec(&ckpt_select_log, &args, true, 1) == 1)
		{
			StringInfoData record;
			bool		isnull;

			MemoryContextSwitchTo(funcctx->multi_call_memory_ctx);
			state = palloc(sizeof(CkptParts));
			initStringInfo(&record);
			CkptWriteRecord(&record, 0, CKPT_CONV_EMPTY);
			state->record = SpJsonResult(&record);
			state->conversation = ConvPartsOpen(SpGetText(0, CKPT_COL_THREAD_ID),
												SPI_getbinval(SPI_tuptable->vals[0],
															  SPI_tuptable->tupdesc,
															  CKPT_COL_CONV_RANGES, &isnull));
			MemoryContextSwitchTo(funcctx->multi_call_memory_ctx);
			/* a caller that stops early (LIMIT) closes the cursor here */
			state->econtext = NULL;
			if (rsinfo != NULL && IsA(rsinfo, ReturnSetInfo))
			{
				state->econtext = rsinfo->econtext;
				RegisterExprContextCallback(state->econtext, ConvPartsClose,
											PointerGetDatum(state->conversation));
			}
			funcctx->user_fctx = state;
		}
		SPI_finish();
		MemoryContextSwitchTo(outer);
	}
	funcctx = SRF_PERCALL_SETUP();
	state = (CkptParts *) funcctx->user_fctx;
	if (state == NULL)
		SRF_RETURN_DONE(funcctx);
	if (state->record != (Datum) 0)
	{
		Datum		record = state->record;

		state->record = (Datum) 0;
		SRF_RETURN_NEXT(funcctx, record);
	}
	if ((part = ConvPartsNext(state->conversation)) != NULL)
		SRF_RETURN_NEXT(funcctx, PointerGetDatum(part));
	/* SRF_RETURN_DONE frees the multi-call context the callback's argument is in */
	if (state->econtext != NULL)
		UnregisterExprContextCallback(state->econtext, ConvPartsClose,
									  PointerGetDatum(state->conversation));
	ConvPartsClose(PointerGetDatum(state->conversation));
	SRF_RETURN_DONE(funcctx);
}

/* checkpoint_list(thread_id text) -> json: every checkpoint, createdAt then id bytes. */
Datum
checkpoint_list(PG_FUNCTION_ARGS)
{
	char	   *thread_id;
	SpArgs		args;

	SpRequireSchema(CKPT_LAYOUT_SINCE, "checkpoint_list");
	thread_id = SpCheckIdArg(fcinfo, 0, "thread_id", SP_ID_MAX_BYTES, SP_CHECK_CKPT_ID);
	SpArgsInit(&args);
	SpArgText(&args, thread_id);
	return SpReadJson(fcinfo, &ckpt_select_thread_log, &args, CkptAppendRecord, false);
}

/* checkpoint_get_head(thread_id text) -> text: the head id, or NULL. */
Datum
checkpoint_get_head(PG_FUNCTION_ARGS)
{
	char	   *thread_id = SpCheckIdArg(fcinfo, 0, "thread_id", SP_ID_MAX_BYTES, SP_CHECK_CKPT_ID);
	MemoryContext outer = CurrentMemoryContext;
	char	   *head = NULL;
	SpArgs		args;

	SPI_connect();
	SpArgsInit(&args);
	SpArgText(&args, thread_id);
	if (SpExec(&ckpt_head, &args, true, 1) == 1 && !SpIsNull(0, 1))
	{
		MemoryContext spi = MemoryContextSwitchTo(outer);

		head = SpGetText(0, 1);
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();
	if (head == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(head));
}

/* Append {key, references} for SPI row `row` of the reference count query. */
static void
CkptAppendReference(StringInfo buf, int row)
{
	int64		count = 0;
	bool		first = true;

	SpGetInt64(row, CKPT_REF_COUNT, &count);
	appendStringInfoChar(buf, '{');
	SpAppendKey(buf, &first, "key");
	SpAppendString(buf, SpGetText(row, CKPT_REF_KEY));
	SpAppendKey(buf, &first, "references");
	SpAppendInt64(buf, count);
	appendStringInfoChar(buf, '}');
}

/* checkpoint_list_blob_references() -> json: [{key, references}] by key bytes. */
Datum
checkpoint_list_blob_references(PG_FUNCTION_ARGS)
{
	SpArgs		args;

	SpArgsInit(&args);
	return SpReadJson(fcinfo, &ckpt_refs, &args, CkptAppendReference, false);
}
