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
 * thread row, then checkpoint rows. The root gets its own copy of the
 * conversation in the destination's log, written under the destination's
 * row lock like every append.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "sandbox_persist.h"
#include "checkpoints.h"

PG_FUNCTION_INFO_V1(checkpoint_fork_from_checkpoint);

/* Columns of fork_source_log, in their order. */
#define FORK_SRC_THREAD_ID		1
#define FORK_SRC_FILES			2
#define FORK_SRC_ARTIFACTS		3
#define FORK_SRC_CONVERSATION	4	/* log ranges of the source thread */
#define FORK_SRC_CONV_LEN		5
#define FORK_SRC_CONV_DIGEST	6

static SpQuery fork_source_log = {
	"SELECT thread_id, files::text, artifacts::text, conv_ranges, conv_len, conv_digest"
	" FROM sandbox_persist.checkpoints WHERE checkpoint_id = $1 FOR KEY SHARE",
	1, {TEXTOID}
};

/* Columns of fork_destination_state. */
#define FORK_DEST_STATE		1
#define FORK_DEST_ID_USED	2

/* Destination persisted state: the registry view, or the id used anywhere. */
static SpQuery fork_destination_state = {
	"SELECT (SELECT string_agg(DISTINCT source, ', ')"
	"          FROM sandbox_persist.thread_owned_state WHERE thread_id = $1),"
	"       EXISTS (SELECT 1 FROM sandbox_persist.checkpoints WHERE checkpoint_id = $2)",
	2, {TEXTOID, TEXTOID}
};

/* How many of the source's distinct keys have a reference row (integrity); one column. */
#define FORK_REFS_COVERED	1

static SpQuery fork_source_refs = {
	"SELECT count(*) FROM sandbox_persist.checkpoint_blob_refs"
	" WHERE checkpoint_id = $1 AND blob_key = ANY ($2::text[])",
	2, {TEXTOID, TEXTARRAYOID}
};

/*
 * The source's conversation ($2, ranges of thread $4's log). The transcript
 * is insert-if-absent: a concurrent save surfaces as NOT_EMPTY.
 */
static SpQuery fork_transcript_log = {
	"INSERT INTO sandbox_persist.messages (thread_id, transcript, updated_at)"
	" SELECT $1, ('[' || coalesce(" CONV_BODIES_SQL("c") ", '') || ']')::json, $3"
	"   FROM (SELECT $2::int8multirange AS conv_ranges, $4::text AS thread_id) c"
	" ON CONFLICT (thread_id) DO NOTHING",
	4, {TEXTOID, INT8MULTIRANGEOID, INT8OID, TEXTOID}
};

/* The root's conversation is its own block [$6, $7) of the destination's log. */
static SpQuery fork_insert_log = {
	"INSERT INTO sandbox_persist.checkpoints (checkpoint_id, thread_id, parent_id, created_at,"
	" reason, files, artifacts, conv_ranges, conv_block, conv_len, conv_digest)"
	" VALUES ($1, $2, NULL, $3, 'fork-root', $4, $5,"
	"  pg_catalog.int8multirange(pg_catalog.int8range($6, $7)), pg_catalog.int8range($6, $7), $8, $9)"
	" ON CONFLICT (checkpoint_id) DO NOTHING",
	9, {TEXTOID, TEXTOID, FLOAT8OID, JSONOID, JSONOID, INT8OID, INT8OID, INT4OID, BYTEAOID}
};

static SpQuery fork_set_head_log = {
	"UPDATE sandbox_persist.checkpoint_threads SET head_id = $2, conv_log_end = $3"
	" WHERE thread_id = $1",
	3, {TEXTOID, TEXTOID, INT8OID}
};

/* Raise FORK_DESTINATION_NOT_EMPTY. */
static void
ForkNotEmpty(const char *thread_id, const char *why)
{
	sp_error(SP_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY,
			 ("fork destination is not empty"),
			 "Destination thread \"%s\" %s.", thread_id, why);
}

/* A detoasted copy of column col of the current SPI row 0 (it must not be NULL). */
static Datum
ForkColumnCopy(int col)
{
	bool		isnull;

	return PointerGetDatum(PG_DETOAST_DATUM_COPY(
		SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col, &isnull)));
}

/*
 * Steps 1-4 of the check order, shared with the cross-shard import: every
 * field read once, identifiers first, then createdAt and the writer; a thread
 * cannot fork into itself. Before SPI.
 */
void
ForkReadInput(FunctionCallInfo fcinfo, int now_argno, ForkInput *in)
{
	static const char *const names[] = {
		"sourceThreadId", "sourceCheckpointId", "destinationThreadId",
		"destinationCheckpointId", "createdAt", "writer"
	};
	SpJson	   *input = SpCheckJsonKindArg(fcinfo, 0, "input", SPJ_OBJECT, "an object", SP_CHECK_CKPT_ID);
	SpJson	   *m[lengthof(names)];

	CkptLookup(input, names, lengthof(names), m);
	in->source_thread = SpCheckIdJson(m[0], "sourceThreadId", SP_ID_MAX_BYTES, SP_CHECK_CKPT_ID);
	in->source_id = SpCheckIdJson(m[1], "sourceCheckpointId", SP_ID_MAX_BYTES, SP_CHECK_CKPT_ID);
	in->dest_thread = SpCheckIdJson(m[2], "destinationThreadId", SP_ID_MAX_BYTES, SP_CHECK_CKPT_ID);
	in->dest_id = SpCheckIdJson(m[3], "destinationCheckpointId", SP_ID_MAX_BYTES, SP_CHECK_CKPT_ID);
	in->writer_thread = CkptReadWriterThread(m[5]);
	CkptMembers(input, names, lengthof(names), m, "checkpoint fork input");
	in->created_at = SpCheckNumberJson(m[4], "createdAt", SP_CHECK_CKPT_ENTRY);
	CkptReadWriterLease(m[5], &in->writer);
	(void) SpNowMs(fcinfo, now_argno);	/* refuse a disallowed clock before locking */

	if (strcmp(in->source_thread, in->dest_thread) == 0)
		sp_error(SP_SNAPSHOT_FORK_SOURCE_THREAD_MISMATCH,
				 ("fork source and destination are the same thread"),
				 "Thread \"%s\" cannot be forked into itself.", in->source_thread);
}

/* Raise FORK_SOURCE_THREAD_MISMATCH unless the source lives in the named thread. */
void
ForkCheckSourceThread(const ForkInput *in, const char *stored_thread)
{
	if (strcmp(stored_thread, in->source_thread) != 0)
		sp_error(SP_SNAPSHOT_FORK_SOURCE_THREAD_MISMATCH,
				 ("fork source checkpoint belongs to another thread"),
				 "Checkpoint \"%s\" belongs to thread \"%s\", not \"%s\".",
				 in->source_id, stored_thread, in->source_thread);
}

/*
 * Steps 7 and 8: the writer holds the destination's current lease; the
 * destination has no persisted state and the destination id no owner (here,
 * or elsewhere when id_taken says so). Returns the lease clock. Inside SPI,
 * the destination thread row held.
 */
int64
ForkCheckDestination(FunctionCallInfo fcinfo, int now_argno, const ForkInput *in,
					 const CkptThread *thread, bool id_taken)
{
	int64		now;
	char	   *state;
	bool		isnull;
	SpArgs		args;

	if (strcmp(in->writer_thread, in->dest_thread) != 0)
		sp_error(SP_SNAPSHOT_WRITER_LOST,
				 ("checkpoint writer lease lost"),
				 "The writer belongs to thread \"%s\", not the destination \"%s\".",
				 in->writer_thread, in->dest_thread);
	now = CkptRequireLease(fcinfo, now_argno, thread, &in->writer, in->dest_thread);

	SpArgsInit(&args);
	SpArgText(&args, in->dest_thread);
	SpArgText(&args, in->dest_id);
	SpExec(&fork_destination_state, &args, false, 1);
	state = SpGetText(0, FORK_DEST_STATE);
	if (state != NULL)
		ForkNotEmpty(in->dest_thread, psprintf("already has persisted state (%s)", state));
	if (id_taken ||
		DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, FORK_DEST_ID_USED,
								   &isnull)))
		ForkNotEmpty(in->dest_thread,
					 psprintf("cannot take checkpoint id \"%s\": it is already used", in->dest_id));
	return now;
}

/*
 * Steps 11 and 12: publish the fork root in the caller's transaction (the
 * destination transcript, the root with its conversation, one reference per
 * distinct key, the head) and return it as get would, built in `outer`.
 * Shared by the local fork and the cross-shard import, so both write alike.
 * The root's conversation is a block of the destination's own log: copied from the source thread's log (local fork), or already
 * appended there by the import (src->own_block). Inside SPI, every check done.
 */
Datum
ForkPublish(const ForkInput *in, const CkptEntries *entries, const ForkSource *src, Datum keys,
			int64 now, MemoryContext outer)
{
	ConvStored	block = {0};
	SpArgs		args;
	bool		found;

	SpArgsInit(&args);
	SpArgText(&args, in->dest_thread);
	SpArgDatum(&args, src->conversation);
	SpArgInt64(&args, now);
	SpArgText(&args, src->thread_id);
	if (SpExec(&fork_transcript_log, &args, false, 0) != 1)
		ForkNotEmpty(in->dest_thread, "gained a transcript during the fork");
	if (src->own_block)
	{
		block.block_from = src->block_from;
		block.block_to = src->block_to;
	}
	else
		ConvCopy(src->thread_id, src->conversation, in->dest_thread, &block);

	SpArgsInit(&args);
	SpArgText(&args, in->dest_id);
	SpArgText(&args, in->dest_thread);
	SpArgFloat8(&args, in->created_at);
	SpArgTextLen(&args, entries->files.data, entries->files.len);
	SpArgTextLen(&args, entries->artifacts.data, entries->artifacts.len);
	SpArgInt64(&args, block.block_from);
	SpArgInt64(&args, block.block_to);
	SpArgDatum(&args, Int32GetDatum((int32) src->len));
	SpArgDatum(&args, src->digest);
	if (SpExec(&fork_insert_log, &args, false, 0) != 1)
		ForkNotEmpty(in->dest_thread,
					 psprintf("cannot take checkpoint id \"%s\": it is already used", in->dest_id));
	CkptInsertRefs(in->dest_id, keys);
	SpArgsInit(&args);
	SpArgText(&args, in->dest_thread);
	SpArgText(&args, in->dest_id);
	SpArgInt64(&args, block.block_to);
	SpExec(&fork_set_head_log, &args, false, 0);
	return CkptRecordById(in->dest_id, false, outer, &found);
}

/* The result of a fork, {checkpoint}, from the root's record text. After SPI. */
Datum
ForkResult(Datum record)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "{\"checkpoint\":");
	appendStringInfoString(&buf, text_to_cstring(DatumGetTextPP(record)));
	appendStringInfoChar(&buf, '}');
	return SpJsonResult(&buf);
}

/*
 * checkpoint_fork_from_checkpoint(input json, now_ms bigint) -> json
 * {checkpoint}. input = {sourceThreadId, sourceCheckpointId,
 * destinationThreadId, destinationCheckpointId, createdAt, writer}.
 */
Datum
checkpoint_fork_from_checkpoint(PG_FUNCTION_ARGS)
{
	MemoryContext outer = CurrentMemoryContext;
	ForkInput	in;
	ForkSource	src = {0};
	char	   *files;
	char	   *artifacts;
	int			nkeys;
	CkptThread	thread;
	CkptEntries entries = {0};
	Datum		keys;
	Datum		record;
	int64		now;
	int64		covered = 0;
	SpArgs		args;

	SpRequireSchema(CKPT_LAYOUT_SINCE, "checkpoint_fork_from_checkpoint");
	/* 1-4. the input */
	ForkReadInput(fcinfo, 1, &in);

	SPI_connect();
	CkptLockThread(in.dest_thread, &thread);

	/* 5, 6. the source checkpoint, held against a concurrent deleteHead */
	SpArgsInit(&args);
	SpArgText(&args, in.source_id);
	if (SpExec(&fork_source_log, &args, false, 1) != 1)
		sp_error(SP_SNAPSHOT_FORK_SOURCE_NOT_FOUND,
				 ("fork source checkpoint not found"),
				 "No checkpoint has id \"%s\".", in.source_id);
	ForkCheckSourceThread(&in, SpGetText(0, FORK_SRC_THREAD_ID));
	files = SpGetText(0, FORK_SRC_FILES);
	artifacts = SpGetText(0, FORK_SRC_ARTIFACTS);
	src.thread_id = in.source_thread;
	src.conversation = ForkColumnCopy(FORK_SRC_CONVERSATION);
	SpGetInt64(0, FORK_SRC_CONV_LEN, &src.len);
	src.digest = ForkColumnCopy(FORK_SRC_CONV_DIGEST);

	/* 7, 8. the writer's lease; an empty destination, an unused id */
	now = ForkCheckDestination(fcinfo, 1, &in, &thread, false);

	/* 9. the stored entries are re-validated; only corrupt data can fail */
	CkptValidateFiles(SpJsonParse(files, strlen(files)), &entries);
	CkptValidateArtifacts(SpJsonParse(artifacts, strlen(artifacts)), &entries);

	/* 10. every distinct key of the source must carry a reference row */
	keys = CkptDistinctKeys(&entries, &nkeys);
	SpArgsInit(&args);
	SpArgText(&args, in.source_id);
	SpArgDatum(&args, keys);
	SpExec(&fork_source_refs, &args, false, 1);
	SpGetInt64(0, FORK_REFS_COVERED, &covered);
	if (covered != nkeys)
		sp_error(SP_SNAPSHOT_INVALID_ENTRY,
				 ("fork source references are inconsistent"),
				 "Checkpoint \"%s\" lacks reference rows for some of its blob keys.", in.source_id);

	/* 11, 12. publish, and the fork root as get would return it */
	record = ForkPublish(&in, &entries, &src, keys, now, outer);
	SPI_finish();
	PG_RETURN_DATUM(ForkResult(record));
}
