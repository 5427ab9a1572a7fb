/*
 * checkpoint_import.c
 *
 * The destination half of a cross-shard fork (docs/contract/checkpoint-store.md
 * §7, docs/architecture.md "Cross-shard fork and thread moves"): the router
 * reads the source checkpoint on its shard (_checkpoint_export_fork), copies the
 * blobs it references, and calls _checkpoint_import_fork on the destination's
 * shard with the source given as data. The import runs the local fork's checks
 * in the local fork's order, with the source lookup replaced by the data, then
 * requires every referenced blob on this shard and publishes through the local
 * fork's own publish step (ForkPublish), so both forks write identically.
 *
 * Locking: as the local fork, the destination thread row FOR UPDATE first;
 * there is no source row on this shard to hold (the source checkpoint is
 * immutable, so the data cannot go stale). Then the blob rows the root
 * references FOR KEY SHARE in key order, as append does, so maintenance
 * cannot collect a blob between the presence check and the references.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "sandbox_persist.h"
#include "checkpoints.h"

PG_FUNCTION_INFO_V1(_checkpoint_import_fork);

/* Destination persisted state: the registry view, or the id used anywhere. */
static SpQuery import_destination_state = {
	"SELECT (SELECT string_agg(DISTINCT source, ', ')"
	"          FROM sandbox_persist.thread_owned_state WHERE thread_id = $1),"
	"       EXISTS (SELECT 1 FROM sandbox_persist.checkpoints WHERE checkpoint_id = $2)",
	2, {TEXTOID, TEXTOID}
};

/*
 * The referenced keys this shard lacks, after key-share locking the ones it
 * has (key order, after the thread row: the store's lock order). Keys the
 * source itself never stored ($2) are allowed absent, as a local fork allows.
 */
static SpQuery import_lock_blobs = {
	"SELECT 1 FROM sandbox_persist.blobs WHERE blob_key = ANY ($1::text[])"
	" ORDER BY blob_key FOR KEY SHARE",
	1, {TEXTARRAYOID}
};
static SpQuery import_missing_blobs = {
	"SELECT string_agg(k, ', ' ORDER BY k) FROM unnest($1::text[]) AS k"
	" WHERE k <> ALL ($2::text[])"
	"   AND NOT EXISTS (SELECT 1 FROM sandbox_persist.blobs b WHERE b.blob_key = k)",
	2, {TEXTARRAYOID, TEXTARRAYOID}
};

/* Raise FORK_DESTINATION_NOT_EMPTY (same text as the local fork). */
static void
ImportNotEmpty(const char *thread_id, const char *why)
{
	sp_error(SP_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY,
			 ("fork destination is not empty"),
			 "Destination thread \"%s\" %s.", thread_id, why);
}

/* Raise FORK_SOURCE_NOT_FOUND for a source document that does not hold it. */
static void
ImportSourceNotFound(const char *source_id, const char *why)
{
	sp_error(SP_SNAPSHOT_FORK_SOURCE_NOT_FOUND,
			 ("fork source checkpoint not found"),
			 "No checkpoint has id \"%s\" (%s).", source_id, why);
}

/* Build a text[] datum from the string members of a JSON array (NULL: none). */
static Datum
ImportKeyArray(const SpJson *array, const char *field)
{
	Datum	   *items;
	int			n = 0;

	if (array != NULL && array->kind != SPJ_ARRAY && array->kind != SPJ_NULL)
		sp_error(SP_SNAPSHOT_INVALID_ENTRY,
				 ("invalid fork source document"),
				 "%s must be an array of blob keys.", field);
	items = palloc(sizeof(Datum) * Max(array && array->kind == SPJ_ARRAY ? array->count : 0, 1));
	for (int i = 0; array != NULL && array->kind == SPJ_ARRAY && i < array->count; i++)
	{
		char	   *key;
		int			len;

		if (array->items[i]->kind != SPJ_STRING ||
			SpJsonDecodeString(array->items[i]->raw, array->items[i]->rawlen, &key, &len) != SPS_OK)
			sp_error(SP_SNAPSHOT_INVALID_ENTRY,
					 ("invalid fork source document"),
					 "%s must be an array of blob keys.", field);
		items[n++] = PointerGetDatum(cstring_to_text_with_len(key, len));
	}
	return PointerGetDatum(construct_array(items, n, TEXTOID, -1, false, TYPALIGN_INT));
}

/* The exact text of each message of a conversation array, as a text[] datum. */
static Datum
ImportConversation(const SpJson *conv)
{
	Datum	   *items;

	if (conv == NULL || conv->kind != SPJ_ARRAY)
		sp_error(SP_SNAPSHOT_INVALID_ENTRY,
				 ("invalid checkpoint conversation"),
				 "The source checkpoint's conversation must be a JSON array.");
	items = palloc(sizeof(Datum) * Max(conv->count, 1));
	for (int i = 0; i < conv->count; i++)
		items[i] = PointerGetDatum(cstring_to_text_with_len(conv->items[i]->raw,
															conv->items[i]->rawlen));
	return PointerGetDatum(construct_array(items, conv->count, TEXTOID, -1, false, TYPALIGN_INT));
}

/*
 * _checkpoint_import_fork(input json, source json, now_ms bigint) -> json
 * {checkpoint}. input is the local fork's input; source is the row
 * _checkpoint_export_fork returned on the source's shard as one object
 * {checkpoint, referencesComplete, blobKeys, absentBlobKeys} (blobKeys is
 * what the router copies; the import derives the keys from the entries),
 * plus destinationIdTaken when the router found the destination checkpoint
 * id on another shard (ids are unique across all threads, §7.1 step 7), or
 * SQL NULL when the source does not
 * exist. Check order of §7.1, the source read from `source`; then SP015 when
 * a referenced blob (other than one the source never stored) is not on this
 * shard; nothing is written before every check passed.
 */
Datum
_checkpoint_import_fork(PG_FUNCTION_ARGS)
{
	static const char *const names[] = {
		"sourceThreadId", "sourceCheckpointId", "destinationThreadId",
		"destinationCheckpointId", "createdAt", "writer"
	};
	static const char *const doc_names[] = {
		"checkpoint", "referencesComplete", "absentBlobKeys", "blobKeys", "destinationIdTaken"
	};
	static const char *const ckpt_names[] = {"id", "threadId", "files", "artifacts", "conversation"};
	SpJson	   *input = CkptInputArg(fcinfo, 0, "input");
	SpJson	   *m[lengthof(names)];
	SpJson	   *d[lengthof(doc_names)];
	SpJson	   *c[lengthof(ckpt_names)];
	SpJson	   *doc = NULL;
	MemoryContext outer = CurrentMemoryContext;
	char	   *source_thread;
	char	   *source_id;
	char	   *dest_thread;
	char	   *dest_id;
	char	   *writer_thread;
	char	   *stored_id;
	char	   *stored_thread;
	char	   *state;
	char	   *missing;
	int			nkeys;
	int			len;
	double		created_at;
	CkptWriter	writer;
	CkptThread	thread;
	CkptEntries entries = {0};
	Datum		conversation;
	Datum		absent;
	Datum		keys;
	Datum		record;
	bool		isnull;
	int64		now;
	SpArgs		args;
	StringInfoData buf;

	/* 1-3. the input exactly as the local fork reads it */
	CkptLookup(input, names, lengthof(names), m);
	source_thread = CkptCheckId(m[0], "sourceThreadId");
	source_id = CkptCheckId(m[1], "sourceCheckpointId");
	dest_thread = CkptCheckId(m[2], "destinationThreadId");
	dest_id = CkptCheckId(m[3], "destinationCheckpointId");
	writer_thread = CkptReadWriterThread(m[5]);
	CkptMembers(input, names, lengthof(names), m, "checkpoint fork input");
	created_at = CkptCheckCreatedAt(m[4], "createdAt");
	CkptReadWriterLease(m[5], &writer);
	(void) SpNowMs(fcinfo, 2);	/* refuse a disallowed clock before locking */

	/* 4. a thread cannot fork into itself (before any emptiness probe) */
	if (strcmp(source_thread, dest_thread) == 0)
		sp_error(SP_SNAPSHOT_FORK_SOURCE_THREAD_MISMATCH,
				 ("fork source and destination are the same thread"),
				 "Thread \"%s\" cannot be forked into itself.", source_thread);

	/* 5, 6. the source, given as data: present, this id, this thread */
	if (!PG_ARGISNULL(1))
		doc = SpJsonParseText(PG_GETARG_TEXT_PP(1));
	if (doc == NULL || doc->kind == SPJ_NULL)
		ImportSourceNotFound(source_id, "the source shard has no such checkpoint");
	if (doc->kind != SPJ_OBJECT)
		sp_error(SP_SNAPSHOT_INVALID_ENTRY,
				 ("invalid fork source document"),
				 "The source document must be an object, not %s.", SpJsonKindName(doc->kind));
	SpJsonMembers(doc, doc_names, lengthof(doc_names), d, "fork source document", false, 0,
				  SP_SNAPSHOT_INVALID_ENTRY);
	if (d[0] == NULL || d[0]->kind == SPJ_NULL)
		ImportSourceNotFound(source_id, "the source shard has no such checkpoint");
	if (d[0]->kind != SPJ_OBJECT)
		sp_error(SP_SNAPSHOT_INVALID_ENTRY,
				 ("invalid fork source document"),
				 "checkpoint must be an object, not %s.", SpJsonKindName(d[0]->kind));
	/* the whole checkpoint as get returns it: other members are not read */
	SpJsonMembers(d[0], ckpt_names, lengthof(ckpt_names), c, "fork source checkpoint", true, 0,
				  SP_SNAPSHOT_INVALID_ENTRY);
	if (c[0] == NULL || c[0]->kind != SPJ_STRING ||
		SpJsonDecodeString(c[0]->raw, c[0]->rawlen, &stored_id, &len) != SPS_OK ||
		strcmp(stored_id, source_id) != 0)
		ImportSourceNotFound(source_id, "the source document holds another checkpoint");
	if (c[1] == NULL || c[1]->kind != SPJ_STRING ||
		SpJsonDecodeString(c[1]->raw, c[1]->rawlen, &stored_thread, &len) != SPS_OK)
		sp_error(SP_SNAPSHOT_INVALID_ENTRY,
				 ("invalid fork source document"),
				 "The source checkpoint's threadId must be a string.");
	if (strcmp(stored_thread, source_thread) != 0)
		sp_error(SP_SNAPSHOT_FORK_SOURCE_THREAD_MISMATCH,
				 ("fork source checkpoint belongs to another thread"),
				 "Checkpoint \"%s\" belongs to thread \"%s\", not \"%s\".",
				 source_id, stored_thread, source_thread);

	SPI_connect();
	CkptLockThread(dest_thread, &thread);

	/* 7. the caller must hold the destination's current lease */
	if (strcmp(writer_thread, dest_thread) != 0)
		sp_error(SP_SNAPSHOT_WRITER_LOST,
				 ("checkpoint writer lease lost"),
				 "The writer belongs to thread \"%s\", not the destination \"%s\".",
				 writer_thread, dest_thread);
	now = CkptRequireLease(fcinfo, 2, &thread, &writer, dest_thread);

	/* 8. the destination must have no persisted state, the id no owner */
	SpArgsInit(&args);
	SpArgText(&args, dest_thread);
	SpArgText(&args, dest_id);
	SpExec(&import_destination_state, &args, false, 1);
	state = SpGetText(0, 1);
	if (state != NULL)
		ImportNotEmpty(dest_thread, psprintf("already has persisted state (%s)", state));
	if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull)) ||
		(d[4] != NULL && d[4]->kind == SPJ_BOOL && d[4]->raw[0] == 't'))
		ImportNotEmpty(dest_thread,
					   psprintf("cannot take checkpoint id \"%s\": it is already used", dest_id));

	/* 9. the fork root's entries, validated as the local fork re-validates */
	CkptValidateFiles(c[2], &entries);
	CkptValidateArtifacts(c[3], &entries);
	conversation = ImportConversation(c[4]);

	/* 10. the source's reference rows covered every key (read on its shard) */
	if (d[1] == NULL || d[1]->kind != SPJ_BOOL || d[1]->raw[0] != 't')
		sp_error(SP_SNAPSHOT_INVALID_ENTRY,
				 ("fork source references are inconsistent"),
				 "Checkpoint \"%s\" lacks reference rows for some of its blob keys.", source_id);

	/* ours: every key the source stored must be stored here, held for the refs */
	keys = CkptDistinctKeys(&entries, &nkeys);
	absent = ImportKeyArray(d[2], "absentBlobKeys");
	SpArgsInit(&args);
	SpArgDatum(&args, keys);
	SpExec(&import_lock_blobs, &args, false, 0);
	SpArgsInit(&args);
	SpArgDatum(&args, keys);
	SpArgDatum(&args, absent);
	SpExec(&import_missing_blobs, &args, false, 1);
	missing = SpGetText(0, 1);
	if (missing != NULL)
		sp_error(SP_SNAPSHOT_FORK_BLOB_MISSING,
				 ("fork source blob missing on the destination shard"),
				 "Checkpoint \"%s\" references blobs this shard does not hold: %s.",
				 source_id, missing);

	/* 11, 12. publish exactly as the local fork does */
	record = ForkPublish(dest_thread, dest_id, created_at, &entries,
						 CkptStoreConversation(dest_thread, conversation), keys, now, outer);
	SPI_finish();
	initStringInfo(&buf);
	appendStringInfoString(&buf, "{\"checkpoint\":");
	appendStringInfoString(&buf, text_to_cstring(DatumGetTextPP(record)));
	appendStringInfoChar(&buf, '}');
	PG_RETURN_DATUM(SpJsonResult(&buf));
}
