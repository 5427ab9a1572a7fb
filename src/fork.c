/*
 * fork.c
 *
 * forkFromCheckpoint (docs/contract/checkpoint-store.md §7): copy a source
 * checkpoint into a new root checkpoint of an empty destination thread, make
 * its conversation the destination's transcript, set the destination head and
 * count one reference per distinct blob key, all in the caller's one
 * transaction.
 *
 * Locking: the destination thread row FOR UPDATE first (so two forks into
 * one destination serialise and the second sees the first's state), then
 * the source checkpoint FOR KEY SHARE (so a concurrent deleteHead of the
 * source either waits for the fork or has already removed it: the fork then
 * reports FORK_SOURCE_NOT_FOUND). Same order as append and deleteHead:
 * thread row, then checkpoint rows.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "sandbox_persist.h"
#include "checkpoints.h"

PG_FUNCTION_INFO_V1(checkpoint_fork_from_checkpoint);

static SpQuery fork_source = {
	"SELECT thread_id, files::text, artifacts::text, conversation"
	" FROM sandbox_persist.checkpoints WHERE checkpoint_id = $1 FOR KEY SHARE",
	1, {TEXTOID}
};

/* Destination persisted state: the registry view, or the id used anywhere. */
static SpQuery fork_destination_state = {
	"SELECT (SELECT string_agg(DISTINCT source, ', ')"
	"          FROM sandbox_persist.thread_owned_state WHERE thread_id = $1),"
	"       EXISTS (SELECT 1 FROM sandbox_persist.checkpoints WHERE checkpoint_id = $2)",
	2, {TEXTOID, TEXTOID}
};

/* How many of the source's distinct keys have a reference row (integrity). */
static SpQuery fork_source_refs = {
	"SELECT count(*) FROM sandbox_persist.checkpoint_blob_refs"
	" WHERE checkpoint_id = $1 AND blob_key = ANY ($2::text[])",
	2, {TEXTOID, TEXTARRAYOID}
};

/* The transcript is insert-if-absent: a concurrent save surfaces as NOT_EMPTY. */
static SpQuery fork_transcript = {
	"INSERT INTO sandbox_persist.messages (thread_id, transcript, updated_at)"
	" SELECT $1, ('[' || coalesce(string_agg(m.body, ',' ORDER BY u.ord), '') || ']')::json, $3"
	"   FROM unnest($2::bigint[]) WITH ORDINALITY AS u(id, ord)"
	"   JOIN sandbox_persist.conversation_messages m ON m.message_id = u.id"
	" ON CONFLICT (thread_id) DO NOTHING",
	3, {TEXTOID, INT8ARRAYOID, INT8OID}
};

static SpQuery fork_insert = {
	"INSERT INTO sandbox_persist.checkpoints (checkpoint_id, thread_id, parent_id, created_at,"
	" reason, files, artifacts, conversation)"
	" VALUES ($1, $2, NULL, $3, 'fork-root', $4, $5, $6)"
	" ON CONFLICT (checkpoint_id) DO NOTHING",
	6, {TEXTOID, TEXTOID, FLOAT8OID, JSONOID, JSONOID, INT8ARRAYOID}
};

static SpQuery fork_set_head = {
	"UPDATE sandbox_persist.checkpoint_threads SET head_id = $2 WHERE thread_id = $1",
	2, {TEXTOID, TEXTOID}
};

/* Raise FORK_DESTINATION_NOT_EMPTY. */
static void
ForkNotEmpty(const char *thread_id, const char *why)
{
	sp_error(SP_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY,
			 ("fork destination is not empty"),
			 "Destination thread \"%s\" %s.", thread_id, why);
}

/*
 * Publish a fork root in the caller's transaction: the destination transcript
 * (the messages `message_ids` names, in order), the root checkpoint, one
 * reference per distinct key, the head. Shared by the local fork and the
 * cross-shard import (checkpoint_import.c), so both publish identically. The
 * caller holds the destination thread row and has run every check. Returns
 * the fork root as get would return it, built in `outer`. Inside SPI.
 */
Datum
ForkPublish(const char *dest_thread, const char *dest_id, double created_at,
			const CkptEntries *entries, Datum message_ids, Datum keys, int64 now,
			MemoryContext outer)
{
	SpArgs		args;
	bool		found;

	SpArgsInit(&args);
	SpArgText(&args, dest_thread);
	SpArgDatum(&args, message_ids);
	SpArgInt64(&args, now);
	if (SpExec(&fork_transcript, &args, false, 0) != 1)
		ForkNotEmpty(dest_thread, "gained a transcript during the fork");
	SpArgsInit(&args);
	SpArgText(&args, dest_id);
	SpArgText(&args, dest_thread);
	SpArgFloat8(&args, created_at);
	SpArgTextLen(&args, entries->files.data, entries->files.len);
	SpArgTextLen(&args, entries->artifacts.data, entries->artifacts.len);
	SpArgDatum(&args, message_ids);
	if (SpExec(&fork_insert, &args, false, 0) != 1)
		ForkNotEmpty(dest_thread,
					 psprintf("cannot take checkpoint id \"%s\": it is already used", dest_id));
	CkptInsertRefs(dest_id, keys);
	SpArgsInit(&args);
	SpArgText(&args, dest_thread);
	SpArgText(&args, dest_id);
	SpExec(&fork_set_head, &args, false, 0);
	return CkptRecordById(dest_id, false, outer, &found);
}

/*
 * checkpoint_fork_from_checkpoint(input json, now_ms bigint) -> json
 * {checkpoint}. input = {sourceThreadId, sourceCheckpointId,
 * destinationThreadId, destinationCheckpointId, createdAt, writer}.
 */
Datum
checkpoint_fork_from_checkpoint(PG_FUNCTION_ARGS)
{
	static const char *const names[] = {
		"sourceThreadId", "sourceCheckpointId", "destinationThreadId",
		"destinationCheckpointId", "createdAt", "writer"
	};
	SpJson	   *input = CkptInputArg(fcinfo, 0, "input");
	SpJson	   *m[lengthof(names)];
	MemoryContext outer = CurrentMemoryContext;
	char	   *source_thread;
	char	   *source_id;
	char	   *dest_thread;
	char	   *dest_id;
	char	   *writer_thread;
	char	   *stored_thread;
	char	   *state;
	char	   *files;
	char	   *artifacts;
	int			nkeys;
	double		created_at;
	CkptWriter	writer;
	CkptThread	thread;
	CkptEntries entries = {0};
	Datum		conversation;
	Datum		keys;
	Datum		record;
	bool		isnull;
	int64		now;
	int64		covered = 0;
	SpArgs		args;
	StringInfoData buf;

	/* 1-3. read every field once; identifiers, then createdAt */
	CkptLookup(input, names, lengthof(names), m);
	source_thread = CkptCheckId(m[0], "sourceThreadId");
	source_id = CkptCheckId(m[1], "sourceCheckpointId");
	dest_thread = CkptCheckId(m[2], "destinationThreadId");
	dest_id = CkptCheckId(m[3], "destinationCheckpointId");
	writer_thread = CkptReadWriterThread(m[5]);
	CkptMembers(input, names, lengthof(names), m, "checkpoint fork input");
	created_at = CkptCheckCreatedAt(m[4], "createdAt");
	CkptReadWriterLease(m[5], &writer);
	(void) SpNowMs(fcinfo, 1);	/* refuse a disallowed clock before locking */

	/* 4. a thread cannot fork into itself (before any emptiness probe) */
	if (strcmp(source_thread, dest_thread) == 0)
		sp_error(SP_SNAPSHOT_FORK_SOURCE_THREAD_MISMATCH,
				 ("fork source and destination are the same thread"),
				 "Thread \"%s\" cannot be forked into itself.", source_thread);

	SPI_connect();
	CkptLockThread(dest_thread, &thread);

	/* 5, 6. the source checkpoint, held against a concurrent deleteHead */
	SpArgsInit(&args);
	SpArgText(&args, source_id);
	if (SpExec(&fork_source, &args, false, 1) != 1)
		sp_error(SP_SNAPSHOT_FORK_SOURCE_NOT_FOUND,
				 ("fork source checkpoint not found"),
				 "No checkpoint has id \"%s\".", source_id);
	stored_thread = SpGetText(0, 1);
	if (strcmp(stored_thread, source_thread) != 0)
		sp_error(SP_SNAPSHOT_FORK_SOURCE_THREAD_MISMATCH,
				 ("fork source checkpoint belongs to another thread"),
				 "Checkpoint \"%s\" belongs to thread \"%s\", not \"%s\".",
				 source_id, stored_thread, source_thread);
	files = SpGetText(0, 2);
	artifacts = SpGetText(0, 3);
	conversation = PointerGetDatum(PG_DETOAST_DATUM_COPY(
		SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &isnull)));

	/* 7. the caller must hold the destination's current lease */
	if (strcmp(writer_thread, dest_thread) != 0)
		sp_error(SP_SNAPSHOT_WRITER_LOST,
				 ("checkpoint writer lease lost"),
				 "The writer belongs to thread \"%s\", not the destination \"%s\".",
				 writer_thread, dest_thread);
	now = CkptRequireLease(fcinfo, 1, &thread, &writer, dest_thread);

	/* 8. the destination must have no persisted state, the id no owner */
	SpArgsInit(&args);
	SpArgText(&args, dest_thread);
	SpArgText(&args, dest_id);
	SpExec(&fork_destination_state, &args, false, 1);
	state = SpGetText(0, 1);
	if (state != NULL)
		ForkNotEmpty(dest_thread, psprintf("already has persisted state (%s)", state));
	if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull)))
		ForkNotEmpty(dest_thread,
					 psprintf("cannot take checkpoint id \"%s\": it is already used", dest_id));

	/* 9. the stored entries are re-validated; only corrupt data can fail */
	CkptValidateFiles(SpJsonParse(files, strlen(files)), &entries);
	CkptValidateArtifacts(SpJsonParse(artifacts, strlen(artifacts)), &entries);

	/* 10. every distinct key of the source must carry a reference row */
	keys = CkptDistinctKeys(&entries, &nkeys);
	SpArgsInit(&args);
	SpArgText(&args, source_id);
	SpArgDatum(&args, keys);
	SpExec(&fork_source_refs, &args, false, 1);
	SpGetInt64(0, 1, &covered);
	if (covered != nkeys)
		sp_error(SP_SNAPSHOT_INVALID_ENTRY,
				 ("fork source references are inconsistent"),
				 "Checkpoint \"%s\" lacks reference rows for some of its blob keys.", source_id);

	/* 11, 12. publish, and the fork root as get would return it */
	record = ForkPublish(dest_thread, dest_id, created_at, &entries, conversation, keys, now,
						 outer);
	SPI_finish();
	initStringInfo(&buf);
	appendStringInfoString(&buf, "{\"checkpoint\":");
	appendStringInfoString(&buf, text_to_cstring(DatumGetTextPP(record)));
	appendStringInfoChar(&buf, '}');
	PG_RETURN_DATUM(SpJsonResult(&buf));
}
