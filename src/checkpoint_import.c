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

/* The root's conversation: the exact text of each message of a JSON array. */
static void
ImportConversation(const SpJson *conv, ConvMessages *out)
{
	if (conv == NULL || conv->kind != SPJ_ARRAY)
		sp_error(SP_SNAPSHOT_INVALID_ENTRY,
				 ("invalid checkpoint conversation"),
				 "The source checkpoint's conversation must be a JSON array.");
	out->n = conv->count;
	out->raw = palloc(sizeof(char *) * Max(conv->count, 1));
	out->rawlen = palloc(sizeof(int) * Max(conv->count, 1));
	for (int i = 0; i < conv->count; i++)
	{
		out->raw[i] = conv->items[i]->raw;
		out->rawlen[i] = conv->items[i]->rawlen;
	}
}

/* The log ranges [from, to) as an int8multirange datum. Inside SPI. */
static SpQuery import_block_ranges = {
	"SELECT pg_catalog.int8multirange(pg_catalog.int8range($1, $2))",
	2, {INT8OID, INT8OID}
};

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
	static const char *const doc_names[] = {
		"checkpoint", "referencesComplete", "absentBlobKeys", "blobKeys", "destinationIdTaken"
	};
	static const char *const ckpt_names[] = {"id", "threadId", "files", "artifacts", "conversation"};
	SpJson	   *d[lengthof(doc_names)];
	SpJson	   *c[lengthof(ckpt_names)];
	SpJson	   *doc = NULL;
	MemoryContext outer = CurrentMemoryContext;
	ForkInput	in;
	ForkSource	src = {0};
	ConvMessages msgs;
	ConvStored	stored = {0};
	char	   *stored_id;
	char	   *stored_thread;
	char	   *missing;
	int			nkeys;
	int			len;
	bool		isnull;
	CkptThread	thread;
	CkptEntries entries = {0};
	Datum		absent;
	Datum		keys;
	Datum		record;
	int64		now;
	SpArgs		args;

	/* 1-4. the input exactly as the local fork reads it */
	ForkReadInput(fcinfo, 2, &in);

	/* 5, 6. the source, given as data: present, this id, this thread */
	if (!PG_ARGISNULL(1))
		doc = SpJsonParseText(PG_GETARG_TEXT_PP(1));
	if (doc == NULL || doc->kind == SPJ_NULL)
		ImportSourceNotFound(in.source_id, "the source shard has no such checkpoint");
	if (doc->kind != SPJ_OBJECT)
		sp_error(SP_SNAPSHOT_INVALID_ENTRY,
				 ("invalid fork source document"),
				 "The source document must be an object, not %s.", SpJsonKindName(doc->kind));
	SpJsonMembers(doc, doc_names, lengthof(doc_names), d, "fork source document", false, 0,
				  SP_SNAPSHOT_INVALID_ENTRY);
	if (d[0] == NULL || d[0]->kind == SPJ_NULL)
		ImportSourceNotFound(in.source_id, "the source shard has no such checkpoint");
	if (d[0]->kind != SPJ_OBJECT)
		sp_error(SP_SNAPSHOT_INVALID_ENTRY,
				 ("invalid fork source document"),
				 "checkpoint must be an object, not %s.", SpJsonKindName(d[0]->kind));
	/* the whole checkpoint as get returns it: other members are not read */
	SpJsonMembers(d[0], ckpt_names, lengthof(ckpt_names), c, "fork source checkpoint", true, 0,
				  SP_SNAPSHOT_INVALID_ENTRY);
	if (c[0] == NULL || c[0]->kind != SPJ_STRING ||
		SpJsonDecodeString(c[0]->raw, c[0]->rawlen, &stored_id, &len) != SPS_OK ||
		strcmp(stored_id, in.source_id) != 0)
		ImportSourceNotFound(in.source_id, "the source document holds another checkpoint");
	if (c[1] == NULL || c[1]->kind != SPJ_STRING ||
		SpJsonDecodeString(c[1]->raw, c[1]->rawlen, &stored_thread, &len) != SPS_OK)
		sp_error(SP_SNAPSHOT_INVALID_ENTRY,
				 ("invalid fork source document"),
				 "The source checkpoint's threadId must be a string.");
	ForkCheckSourceThread(&in, stored_thread);

	SPI_connect();
	CkptLockThread(in.dest_thread, &thread);

	/* 7, 8. the writer's lease; an empty destination, an id unused on every shard */
	now = ForkCheckDestination(fcinfo, 2, &in, &thread,
							   d[4] != NULL && d[4]->kind == SPJ_BOOL && d[4]->raw[0] == 't');

	/* 9. the fork root's entries, validated as the local fork re-validates */
	CkptValidateFiles(c[2], &entries);
	CkptValidateArtifacts(c[3], &entries);
	ImportConversation(c[4], &msgs);

	/* 10. the source's reference rows covered every key (read on its shard) */
	if (d[1] == NULL || d[1]->kind != SPJ_BOOL || d[1]->raw[0] != 't')
		sp_error(SP_SNAPSHOT_INVALID_ENTRY,
				 ("fork source references are inconsistent"),
				 "Checkpoint \"%s\" lacks reference rows for some of its blob keys.", in.source_id);

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
				 in.source_id, missing);

	/* 11, 12. the conversation as a block of the destination's log, then the local fork's publish */
	ConvAppend(in.dest_thread, NULL, &msgs, &stored);
	SpArgsInit(&args);
	SpArgInt64(&args, stored.block_from);
	SpArgInt64(&args, stored.block_to);
	SpExec(&import_block_ranges, &args, false, 1);
	src.thread_id = in.dest_thread;
	src.conversation = PointerGetDatum(PG_DETOAST_DATUM_COPY(
		SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)));
	src.len = stored.len;
	src.digest = stored.digest;
	src.own_block = true;
	src.block_from = stored.block_from;
	src.block_to = stored.block_to;
	record = ForkPublish(&in, &entries, &src, keys, now, outer);
	SPI_finish();
	PG_RETURN_DATUM(ForkResult(record));
}
