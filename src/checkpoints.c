/*
 * checkpoints.c
 *
 * The checkpoint store (docs/contract/checkpoint-store.md §1-§6): append with
 * the contract's exact check order, deleteHead, get, list, getHead and
 * listBlobReferences, plus the helpers the lease and fork modules share.
 *
 * Locking: append and deleteHead lock the thread's checkpoint_threads row
 * FOR UPDATE first; it is the thread's only lock point, so two appends
 * serialise and the loser sees the new head. Reference counts are rows per
 * (checkpoint, distinct key), inserted and deleted with their checkpoint, so
 * threads that share blob keys never wait for each other. Conversation
 * messages are stored once per thread (conversation_messages) and inserted
 * with ON CONFLICT DO NOTHING under the thread row's lock, so only appends of
 * the same thread, already serialised, ever meet on a message. Blob
 * rows the new checkpoint references are key-share locked after the
 * checkpoint row (thread row, checkpoint rows, blob rows in key order).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/int.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "sandbox_persist.h"
#include "checkpoints.h"

PG_FUNCTION_INFO_V1(checkpoint_append);
PG_FUNCTION_INFO_V1(checkpoint_delete_head);
PG_FUNCTION_INFO_V1(checkpoint_get);
PG_FUNCTION_INFO_V1(checkpoint_list);
PG_FUNCTION_INFO_V1(checkpoint_get_head);
PG_FUNCTION_INFO_V1(checkpoint_list_blob_references);

/* Columns CkptAppendRecord reads, in its order; the conversation is reassembled. */
#define CKPT_COLUMNS \
	"c.checkpoint_id, c.thread_id, c.parent_id, c.created_at, c.reason, c.label," \
	" c.source_run_id, c.files::text, c.artifacts::text," \
	" (SELECT string_agg(m.body, ',' ORDER BY u.ord)" \
	"    FROM unnest(c.conversation) WITH ORDINALITY AS u(id, ord)" \
	"    JOIN sandbox_persist.conversation_messages m ON m.message_id = u.id)"

static SpQuery ckpt_lock_thread = {
	"SELECT fence, owner_token::text, lease_expires_at, head_id"
	" FROM sandbox_persist.checkpoint_threads WHERE thread_id = $1 FOR UPDATE",
	1, {TEXTOID}
};

static SpQuery ckpt_exists = {
	"SELECT 1 FROM sandbox_persist.checkpoints WHERE checkpoint_id = $1",
	1, {TEXTOID}
};

static SpQuery ckpt_store_messages = {
	"INSERT INTO sandbox_persist.conversation_messages (thread_id, hash, body)"
	" SELECT DISTINCT ON (h) $2, h, b FROM"
	"  (SELECT pg_catalog.sha256(pg_catalog.convert_to(b, 'UTF8')) AS h, b"
	"     FROM unnest($1::text[]) AS b) s"
	" ON CONFLICT (thread_id, hash) DO NOTHING",
	2, {TEXTARRAYOID, TEXTOID}
};

static SpQuery ckpt_message_ids = {
	"SELECT coalesce(array_agg(m.message_id ORDER BY t.ord), '{}')"
	" FROM unnest($1::text[]) WITH ORDINALITY AS t(b, ord)"
	" JOIN sandbox_persist.conversation_messages m"
	"   ON m.thread_id = $2 AND m.hash = pg_catalog.sha256(pg_catalog.convert_to(t.b, 'UTF8'))",
	2, {TEXTARRAYOID, TEXTOID}
};

static SpQuery ckpt_insert = {
	"INSERT INTO sandbox_persist.checkpoints (checkpoint_id, thread_id, parent_id, created_at,"
	" reason, label, source_run_id, files, artifacts, conversation)"
	" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
	" ON CONFLICT (checkpoint_id) DO NOTHING",
	10, {TEXTOID, TEXTOID, TEXTOID, FLOAT8OID, TEXTOID, TEXTOID, TEXTOID, JSONOID, JSONOID,
	INT8ARRAYOID}
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

static SpQuery ckpt_delete = {
	"DELETE FROM sandbox_persist.checkpoints WHERE checkpoint_id = $1 RETURNING parent_id",
	1, {TEXTOID}
};

static SpQuery ckpt_select = {
	"SELECT " CKPT_COLUMNS " FROM sandbox_persist.checkpoints c WHERE c.checkpoint_id = $1",
	1, {TEXTOID}
};

static SpQuery ckpt_select_thread = {
	"SELECT " CKPT_COLUMNS " FROM sandbox_persist.checkpoints c WHERE c.thread_id = $1"
	" ORDER BY c.created_at, c.checkpoint_id",
	1, {TEXTOID}
};

static SpQuery ckpt_head = {
	"SELECT head_id FROM sandbox_persist.checkpoint_threads WHERE thread_id = $1",
	1, {TEXTOID}
};

static SpQuery ckpt_refs = {
	"SELECT blob_key, count(*) FROM sandbox_persist.checkpoint_blob_refs"
	" GROUP BY blob_key ORDER BY blob_key",
	0, {InvalidOid}
};

/* Raise INVALID_ID for an identifier field. */
static void
CkptInvalidId(const char *field, const char *problem)
{
	sp_error(SP_SNAPSHOT_INVALID_ID,
			 ("invalid checkpoint identifier %s", field),
			 "%s %s.", field, problem);
}

/* Apply the identifier rules to decoded bytes. */
static void
CkptCheckIdBytes(const char *field, int len)
{
	if (len == 0)
		CkptInvalidId(field, "must not be empty");
	if (len > SP_ID_MAX_BYTES)
		CkptInvalidId(field, psprintf("has %d UTF-8 bytes; the limit is %d", len, SP_ID_MAX_BYTES));
}

/* Read an identifier field of checkpoint input; every problem is INVALID_ID. */
char *
CkptCheckId(const SpJson *node, const char *field)
{
	char	   *s;
	int			len;
	SpStringStatus st;

	if (node == NULL || node->kind != SPJ_STRING)
		CkptInvalidId(field, psprintf("must be a string, not %s",
									  node == NULL ? "absent" : SpJsonKindName(node->kind)));
	st = SpJsonDecodeString(node->raw, node->rawlen, &s, &len);
	if (st != SPS_OK)
		CkptInvalidId(field, st == SPS_NUL ? "contains U+0000" : "contains an unpaired surrogate");
	CkptCheckIdBytes(field, len);
	return s;
}

/* Read an identifier argument of type text; SQL NULL is INVALID_ID too. */
char *
CkptCheckIdArg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	text	   *t;

	if (PG_ARGISNULL(argno))
		CkptInvalidId(name, "must not be null");
	t = PG_GETARG_TEXT_PP(argno);
	CkptCheckIdBytes(name, VARSIZE_ANY_EXHDR(t));
	return text_to_cstring(t);
}

/* Read a json input argument; SQL NULL or a non-object has no identifiers. */
SpJson *
CkptInputArg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	SpJson	   *node;

	if (PG_ARGISNULL(argno))
		CkptInvalidId(name, "must not be null");
	node = SpJsonParseText(PG_GETARG_TEXT_PP(argno));
	if (node->kind != SPJ_OBJECT)
		CkptInvalidId(name, psprintf("must be an object, not %s", SpJsonKindName(node->kind)));
	return node;
}

/*
 * Member lookup that ignores unknown keys: identifiers are checked before
 * entries, so an unknown key is reported only later, by CkptMembers. A
 * repeated key is INVALID_ENTRY at once: no later check could make it valid.
 */
void
CkptLookup(const SpJson *obj, const char *const *names, int nnames, SpJson **out)
{
	SpJsonMembers(obj, names, nnames, out, "checkpoint input", true, 0,
				  SP_SNAPSHOT_INVALID_ENTRY);
}

/* Strict member lookup for checkpoint input: unknown keys are INVALID_ENTRY. */
void
CkptMembers(const SpJson *obj, const char *const *names, int nnames, SpJson **out,
			const char *what)
{
	SpJsonMembers(obj, names, nnames, out, what, false, 0, SP_SNAPSHOT_INVALID_ENTRY);
}

/* The writer's threadId, checked as an identifier. */
char *
CkptReadWriterThread(const SpJson *writer)
{
	static const char *const names[] = {"threadId"};
	SpJson	   *m[1];

	if (writer == NULL || writer->kind != SPJ_OBJECT)
		CkptInvalidId("writer.threadId", "is missing: writer must be an object");
	SpJsonMembers(writer, names, 1, m, "writer", true, 0, SP_SNAPSHOT_INVALID_ENTRY);
	return CkptCheckId(m[0], "writer.threadId");
}

/*
 * The writer's ownerToken and fence. A malformed value is not an error: such
 * a writer is simply never current (WRITER_LOST).
 */
void
CkptReadWriterLease(const SpJson *writer, CkptWriter *out)
{
	static const char *const names[] = {"ownerToken", "fence"};
	SpJson	   *m[2];
	int			len;

	SpJsonMembers(writer, names, 2, m, "writer", true, 0, SP_SNAPSHOT_INVALID_ENTRY);
	out->owner_token = NULL;
	if (m[0] != NULL && m[0]->kind == SPJ_STRING &&
		SpJsonDecodeString(m[0]->raw, m[0]->rawlen, &out->owner_token, &len) != SPS_OK)
		out->owner_token = NULL;
	out->fence_ok = m[1] != NULL && m[1]->kind == SPJ_NUMBER &&
		SpJsonGetInt(m[1], &out->fence) == SPI_OK;
}

/* Lock the thread's row (FOR UPDATE) and read its lease and head. Inside SPI. */
void
CkptLockThread(const char *thread_id, CkptThread *out)
{
	SpArgs		args;

	SpArgsInit(&args);
	SpArgText(&args, thread_id);
	memset(out, 0, sizeof(CkptThread));
	if (SpExec(&ckpt_lock_thread, &args, false, 1) != 1)
		return;
	out->exists = true;
	SpGetInt64(0, 1, &out->fence);
	out->owner_token = SpGetText(0, 2);
	out->has_expiry = SpGetInt64(0, 3, &out->expires_at);
	out->head_id = SpGetText(0, 4);
}

/* A lease is current iff token and fence match and now < expiresAt. */
bool
CkptLeaseCurrent(const CkptThread *thread, const CkptWriter *writer, int64 now)
{
	return thread->exists && thread->owner_token != NULL && thread->has_expiry &&
		writer->owner_token != NULL && writer->fence_ok &&
		strcmp(thread->owner_token, writer->owner_token) == 0 &&
		thread->fence == writer->fence && now < thread->expires_at;
}

/*
 * Raise WRITER_LOST unless the writer holds the thread's current lease, judged
 * by the clock read here, after the thread row lock: a call that waited for
 * the row past expiresAt must not be accepted. Returns that clock reading.
 */
int64
CkptRequireLease(FunctionCallInfo fcinfo, int now_argno, const CkptThread *thread,
				 const CkptWriter *writer, const char *thread_id)
{
	int64		now = SpNowMs(fcinfo, now_argno);

	if (!CkptLeaseCurrent(thread, writer, now))
		sp_error(SP_SNAPSHOT_WRITER_LOST,
				 ("checkpoint writer lease lost"),
				 "The writer does not hold a current lease on thread \"%s\".", thread_id);
	return now;
}

/* Read a createdAt that must be a finite JSON number (else INVALID_ENTRY). */
double
CkptCheckCreatedAt(const SpJson *node, const char *field)
{
	double		v;

	if (node == NULL || node->kind != SPJ_NUMBER || !SpJsonGetDouble(node, &v))
		sp_error(SP_SNAPSHOT_INVALID_ENTRY,
				 ("invalid checkpoint %s", field),
				 "%s must be a finite number.", field);
	return v;
}

/* Read an optional text field of the header: NULL when absent or JSON null. */
static char *
CkptEntryText(const SpJson *node, const char *field)
{
	char	   *s;
	int			len;

	if (node == NULL || node->kind == SPJ_NULL)
		return NULL;
	if (node->kind != SPJ_STRING)
		sp_error(SP_SNAPSHOT_INVALID_ENTRY,
				 ("invalid checkpoint %s", field),
				 "%s must be a string, not %s.", field, SpJsonKindName(node->kind));
	if (SpJsonDecodeString(node->raw, node->rawlen, &s, &len) != SPS_OK)
		sp_error(SP_SNAPSHOT_INVALID_ENTRY,
				 ("invalid checkpoint %s", field),
				 "%s contains U+0000 or an unpaired surrogate.", field);
	return s;
}

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

/* Build a text[] datum from C strings. */
static Datum
CkptTextArray(char **items, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		d[i] = CStringGetTextDatum(items[i]);
	return PointerGetDatum(construct_array(d, n, TEXTOID, -1, false, TYPALIGN_INT));
}

/* The distinct blob keys of validated entries, as a text[] datum. */
Datum
CkptDistinctKeys(const CkptEntries *entries, int *nkeys)
{
	char	  **keys = palloc(sizeof(char *) * Max(entries->nkeys, 1));
	int			n = 0;

	if (entries->nkeys > 0)
	{
		memcpy(keys, entries->keys, sizeof(char *) * entries->nkeys);
		qsort(keys, entries->nkeys, sizeof(char *), pg_qsort_strcmp);
		for (int i = 0; i < entries->nkeys; i++)
			if (n == 0 || strcmp(keys[n - 1], keys[i]) != 0)
				keys[n++] = keys[i];
	}
	*nkeys = n;
	return CkptTextArray(keys, n);
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

/*
 * Store each message of a conversation (a text[] of exact message texts) once
 * for the thread and return the ordered bigint[] of their ids. The caller
 * holds the thread row's lock. Inside SPI.
 */
Datum
CkptStoreConversation(const char *thread_id, Datum messages)
{
	SpArgs		args;
	bool		isnull;

	SpArgsInit(&args);
	SpArgDatum(&args, messages);
	SpArgText(&args, thread_id);
	SpExec(&ckpt_store_messages, &args, false, 0);
	SpExec(&ckpt_message_ids, &args, false, 1);
	return SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
}

/* Append the SandboxCheckpoint of SPI result row `row`. */
static void
CkptAppendRecord(StringInfo buf, int row)
{
	bool		first = true;
	char	   *s;
	double		created = 0;

	appendStringInfoChar(buf, '{');
	SpAppendKey(buf, &first, "id");
	SpAppendString(buf, SpGetText(row, 1));
	SpAppendKey(buf, &first, "threadId");
	SpAppendString(buf, SpGetText(row, 2));
	SpAppendKey(buf, &first, "parentCheckpointId");
	if ((s = SpGetText(row, 3)) != NULL)
		SpAppendString(buf, s);
	else
		appendStringInfoString(buf, "null");
	SpGetFloat8(row, 4, &created);
	SpAppendKey(buf, &first, "createdAt");
	SpAppendDouble(buf, created);
	SpAppendKey(buf, &first, "reason");
	SpAppendString(buf, SpGetText(row, 5));
	if ((s = SpGetText(row, 6)) != NULL)
	{
		SpAppendKey(buf, &first, "label");
		SpAppendString(buf, s);
	}
	if ((s = SpGetText(row, 7)) != NULL)
	{
		SpAppendKey(buf, &first, "sourceRunId");
		SpAppendString(buf, s);
	}
	SpAppendKey(buf, &first, "files");
	appendStringInfoString(buf, SpGetText(row, 8));
	SpAppendKey(buf, &first, "conversation");
	appendStringInfoChar(buf, '[');
	if ((s = SpGetText(row, 10)) != NULL)
		appendStringInfoString(buf, s);
	appendStringInfoChar(buf, ']');
	SpAppendKey(buf, &first, "artifacts");
	appendStringInfoString(buf, SpGetText(row, 9));
	appendStringInfoChar(buf, '}');
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
	result = SpRowsJson(&ckpt_select, &args, read_only, CkptAppendRecord, true, outer, &isnull);
	*found = !isnull;
	return result;
}

/* Split a conversation (a JSON array) into the exact text of each message. */
static Datum
CkptConversationArray(FunctionCallInfo fcinfo, int argno)
{
	SpJson	   *conv;
	char	  **msgs;

	if (PG_ARGISNULL(argno))
		sp_error(SP_SNAPSHOT_INVALID_ENTRY,
				 ("invalid checkpoint conversation"),
				 "conversation must be a JSON array, not SQL NULL.");
	conv = SpJsonParseText(PG_GETARG_TEXT_PP(argno));
	if (conv->kind != SPJ_ARRAY)
		sp_error(SP_SNAPSHOT_INVALID_ENTRY,
				 ("invalid checkpoint conversation"),
				 "conversation must be a JSON array, not %s.", SpJsonKindName(conv->kind));
	msgs = palloc(sizeof(char *) * Max(conv->count, 1));
	for (int i = 0; i < conv->count; i++)
		msgs[i] = pnstrdup(conv->items[i]->raw, conv->items[i]->rawlen);
	return CkptTextArray(msgs, conv->count);
}

/*
 * checkpoint_append(input json, conversation json, now_ms bigint) -> json
 * {headId}. input = {checkpoint, expectedHeadId, writer}. Checks run in the
 * contract's order: identifiers, writer thread, entries, lease, duplicate id,
 * stale head, parent mismatch; then the checkpoint is published atomically.
 */
Datum
checkpoint_append(PG_FUNCTION_ARGS)
{
	static const char *const top_names[] = {"checkpoint", "expectedHeadId", "writer"};
	static const char *const names[] = {
		"id", "threadId", "parentCheckpointId", "createdAt", "reason", "label",
		"sourceRunId", "files", "artifacts"
	};
	SpJson	   *input = CkptInputArg(fcinfo, 0, "input");
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
	Datum		conversation;
	Datum		message_ids;
	int			nkeys;
	SpArgs		args;
	StringInfoData result;

	CkptLookup(input, top_names, lengthof(top_names), top);
	/* A checkpoint that is not an object has no identifiers to read. */
	CkptLookup(top[0] && top[0]->kind == SPJ_OBJECT ? top[0] : &empty,
			   names, lengthof(names), c);

	/* 1. identifiers */
	thread_id = CkptCheckId(c[1], "checkpoint.threadId");
	writer_thread = CkptReadWriterThread(top[2]);
	checkpoint_id = CkptCheckId(c[0], "checkpoint.id");
	if (top[1] == NULL || top[1]->kind != SPJ_NULL)
		expected_head = CkptCheckId(top[1], "expectedHeadId");
	if (c[2] != NULL && c[2]->kind != SPJ_NULL)
		parent_id = CkptCheckId(c[2], "checkpoint.parentCheckpointId");

	/* 2. the writer must belong to the checkpoint's thread */
	if (strcmp(writer_thread, thread_id) != 0)
		sp_error(SP_SNAPSHOT_WRITER_LOST,
				 ("checkpoint writer lease lost"),
				 "The writer belongs to thread \"%s\", not \"%s\".", writer_thread, thread_id);

	/* 3. entries: unknown keys first, then each field */
	CkptMembers(input, top_names, lengthof(top_names), top, "checkpoint append input");
	if (top[0] == NULL || top[0]->kind != SPJ_OBJECT)
		sp_error(SP_SNAPSHOT_INVALID_ENTRY,
				 ("invalid checkpoint"),
				 "checkpoint must be an object.");
	CkptMembers(top[0], names, lengthof(names), c, "a checkpoint");
	created_at = CkptCheckCreatedAt(c[3], "createdAt");
	if (c[4] == NULL || c[4]->kind != SPJ_STRING)
		sp_error(SP_SNAPSHOT_INVALID_ENTRY,
				 ("invalid checkpoint reason"),
				 "reason must be a string.");
	reason = CkptEntryText(c[4], "reason");
	label = CkptEntryText(c[5], "label");
	source_run = CkptEntryText(c[6], "sourceRunId");
	CkptValidateFiles(c[7], &entries);
	CkptValidateArtifacts(c[8], &entries);
	conversation = CkptConversationArray(fcinfo, 1);
	(void) SpNowMs(fcinfo, 2);	/* refuse a disallowed clock before locking */
	CkptReadWriterLease(top[2], &writer);

	SPI_connect();
	/* 4. the lease (the thread row is this thread's lock point) */
	CkptLockThread(thread_id, &thread);
	CkptRequireLease(fcinfo, 2, &thread, &writer, thread_id);

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

	/* publish: messages once each, the checkpoint, its references, the head */
	message_ids = CkptStoreConversation(thread_id, conversation);

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
	SpArgDatum(&args, message_ids);
	if (SpExec(&ckpt_insert, &args, false, 0) == 0)
		CkptDuplicateId(checkpoint_id); /* lost a race with another thread */
	CkptInsertRefs(checkpoint_id, CkptDistinctKeys(&entries, &nkeys));
	SpArgsInit(&args);
	SpArgText(&args, thread_id);
	SpArgText(&args, checkpoint_id);
	SpExec(&ckpt_set_head, &args, false, 0);
	SPI_finish();

	initStringInfo(&result);
	appendStringInfoString(&result, "{\"headId\":");
	SpAppendString(&result, checkpoint_id);
	appendStringInfoChar(&result, '}');
	PG_RETURN_DATUM(SpJsonResult(&result));
}

/*
 * checkpoint_delete_head(input json, now_ms bigint): input = {threadId,
 * checkpointId, writer}. Removes the head checkpoint (its references go with
 * it) and moves the head to its parent. Blob bytes are untouched.
 */
Datum
checkpoint_delete_head(PG_FUNCTION_ARGS)
{
	static const char *const names[] = {"threadId", "checkpointId", "writer"};
	SpJson	   *input = CkptInputArg(fcinfo, 0, "input");
	SpJson	   *m[lengthof(names)];
	char	   *thread_id;
	char	   *checkpoint_id;
	char	   *writer_thread;
	CkptWriter	writer;
	CkptThread	thread;
	SpArgs		args;
	char	   *parent_id;

	CkptLookup(input, names, lengthof(names), m);
	thread_id = CkptCheckId(m[0], "threadId");
	checkpoint_id = CkptCheckId(m[1], "checkpointId");
	writer_thread = CkptReadWriterThread(m[2]);
	if (strcmp(writer_thread, thread_id) != 0)
		sp_error(SP_SNAPSHOT_WRITER_LOST,
				 ("checkpoint writer lease lost"),
				 "The writer belongs to thread \"%s\", not \"%s\".", writer_thread, thread_id);
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
	if (SpExec(&ckpt_delete, &args, false, 0) != 1)
		sp_error(SP_SNAPSHOT_NOT_HEAD,
				 ("checkpoint is not the head"),
				 "The head record \"%s\" of thread \"%s\" is missing.", checkpoint_id, thread_id);
	parent_id = SpGetText(0, 1);
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
	char	   *checkpoint_id = CkptCheckIdArg(fcinfo, 0, "checkpoint_id");
	MemoryContext outer = CurrentMemoryContext;
	Datum		result;
	bool		found;

	SPI_connect();
	result = CkptRecordById(checkpoint_id, true, outer, &found);
	SPI_finish();
	if (!found)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(result);
}

/* checkpoint_list(thread_id text) -> json: every checkpoint, createdAt then id bytes. */
Datum
checkpoint_list(PG_FUNCTION_ARGS)
{
	char	   *thread_id = CkptCheckIdArg(fcinfo, 0, "thread_id");
	SpArgs		args;

	SpArgsInit(&args);
	SpArgText(&args, thread_id);
	return SpReadJson(fcinfo, &ckpt_select_thread, &args, CkptAppendRecord, false);
}

/* checkpoint_get_head(thread_id text) -> text: the head id, or NULL. */
Datum
checkpoint_get_head(PG_FUNCTION_ARGS)
{
	char	   *thread_id = CkptCheckIdArg(fcinfo, 0, "thread_id");
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

	SpGetInt64(row, 2, &count);
	appendStringInfoChar(buf, '{');
	SpAppendKey(buf, &first, "key");
	SpAppendString(buf, SpGetText(row, 1));
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
