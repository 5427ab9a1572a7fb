/*
 * blob_upsert.c
 *
 * The write of a small object's blobs row without SPI (BlobUpsertInline):
 * what the INSERT ... ON CONFLICT (blob_key) DO UPDATE of blob_publish_inline
 * (blob_storage.c) does, done with the executor's own parts. That one
 * statement was two fifths of a 4 KiB put's server time: executor start-up,
 * the table's CHECK constraints parsed from the catalog, the conflict probe
 * (docs/architecture.md, "Where SPI is left out"). Here the constraints
 * are checked in C (NOT NULL on whichever columns have it, and the three
 * CHECKs by name) and the row-count triggers applied directly
 * (RowCountsOfWrite), so this path is taken only for the table it knows
 * (BlobUpsertKnowsTable): the columns and CHECK constraints of the current
 * schema, no row-level security and no trigger but the counters. Anything
 * else (an older schema, a trigger, constraint, column or policy a DBA
 * added, a session in replica mode) goes through the statement. Indexes are
 * the executor's business and may be anything.
 *
 * Locking: that of the statement. RowExclusiveLock on blobs and its indexes.
 * A new row is inserted speculatively and backed out when a concurrent
 * insert of the same key wins, and the put starts over; an existing row is
 * locked (waiting for its writer) before it is replaced, and one replaced or
 * deleted meanwhile is looked up again. Under REPEATABLE READ or
 * SERIALIZABLE a row the snapshot cannot see is a serialization failure, as
 * for ON CONFLICT DO UPDATE.
 */
#include "postgres.h"

#include "access/tableam.h"
#include "access/xact.h"
#include "commands/sequence.h"
#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "blobs.h"
#include "key_scans.h"

/* The CHECK constraints of blobs, all of which BlobCheckRow enforces. */
static const char *const blob_checks[] = {
	"blobs_inline_codec", "blobs_inline_whole", "blobs_size_check"
};

/* The schema whose blobs table this file writes (gc_settled and the counters: 0.5.0). */
#define BLOB_UPSERT_SINCE	"0.5.0"

/* One put's write: the table, the executor state its indexes need, the new row. */
typedef struct BlobUpsert
{
	Relation	rel;
	AttrNumber	att[BLOB_NCOLUMNS];
	EState	   *estate;
	ResultRelInfo *rri;
	List	   *arbiter;		/* blobs_pkey */
	TupleTableSlot *row;		/* the row to insert, then the replacing version */
	TupleTableSlot *existing;	/* the locked row an update replaces */
	TupleTableSlot *stored;		/* the written row as stored, for the counters */
	CommandId	cid;
	bool		content_addressed;
} BlobUpsert;

/* True when every CHECK constraint of rel is one BlobCheckRow enforces. */
static bool
BlobUpsertKnowsChecks(Relation rel)
{
	TupleConstr *constr = RelationGetDescr(rel)->constr;

	if (constr == NULL || constr->has_generated_stored || constr->num_check != lengthof(blob_checks))
		return false;
	for (int i = 0; i < constr->num_check; i++)
	{
		int			j = 0;

		while (j < lengthof(blob_checks) && strcmp(constr->check[i].ccname, blob_checks[j]) != 0)
			j++;
		if (j == lengthof(blob_checks))
			return false;
	}
	return true;
}

/* True when this file may write rel's rows itself (see the file's comment). */
static bool
BlobUpsertKnowsTable(Relation rel, AttrNumber *att)
{
	return BlobMapColumns(RelationGetDescr(rel), att) && !rel->rd_rel->relrowsecurity &&
		BlobUpsertKnowsChecks(rel) && RowCountsAreAllTriggers(rel);
}

/* Raise 23514, as the executor would, for a row that breaks CHECK constraint `name` of rel. */
static void
BlobCheckFailed(Relation rel, const char *name)
{
	ereport(ERROR,
			(errcode(ERRCODE_CHECK_VIOLATION),
			 errmsg("new row for relation \"%s\" violates check constraint \"%s\"",
					RelationGetRelationName(rel), name),
			 errtableconstraint(rel, name)));
}

/* The NOT NULL and CHECK constraints of blobs, on the row in slot. */
static void
BlobCheckRow(BlobUpsert *u, TupleTableSlot *slot)
{
	TupleDesc	desc = slot->tts_tupleDescriptor;
	bool		codec_null;
	bool		data_null;
	bool		size_null;
	int16		codec;
	int64		size;

	slot_getallattrs(slot);
	for (int i = 0; i < desc->natts; i++)
		if (TupleDescAttr(desc, i)->attnotnull && slot->tts_isnull[i])
			ereport(ERROR,
					(errcode(ERRCODE_NOT_NULL_VIOLATION),
					 errmsg("null value in column \"%s\" of relation \"%s\" violates not-null constraint",
							NameStr(TupleDescAttr(desc, i)->attname), RelationGetRelationName(u->rel)),
					 errtablecol(u->rel, i + 1)));
	codec = DatumGetInt16(slot_getattr(slot, u->att[BLOB_COL_INLINE_CODEC], &codec_null));
	size = DatumGetInt64(slot_getattr(slot, u->att[BLOB_COL_SIZE], &size_null));
	(void) slot_getattr(slot, u->att[BLOB_COL_INLINE_DATA], &data_null);
	if (!codec_null && codec != BLOB_CODEC_RAW && codec != BLOB_CODEC_ZSTD && codec != BLOB_CODEC_LZ4)
		BlobCheckFailed(u->rel, "blobs_inline_codec");
	if (codec_null != data_null)
		BlobCheckFailed(u->rel, "blobs_inline_whole");
	if (!size_null && size < 0)
		BlobCheckFailed(u->rel, "blobs_size_check");
}

/* Store values/nulls as the contents of u->row, after the constraints. */
static void
BlobStoreRow(BlobUpsert *u, const Datum *values, const bool *nulls)
{
	TupleTableSlot *slot = u->row;
	int			natts = slot->tts_tupleDescriptor->natts;

	ExecClearTuple(slot);
	memcpy(slot->tts_values, values, natts * sizeof(Datum));
	memcpy(slot->tts_isnull, nulls, natts * sizeof(bool));
	ExecStoreVirtualTuple(slot);
	BlobCheckRow(u, slot);
}

/* Set column c of a row being built. */
static void
BlobSet(BlobUpsert *u, Datum *values, bool *nulls, BlobColumn c, Datum value, bool isnull)
{
	values[u->att[c] - 1] = value;
	nulls[u->att[c] - 1] = isnull;
}

/*
 * Count the row just written (oldrow NULL for an insert) with the counter
 * triggers, both versions as stored: the new one is read back by its tid,
 * since the inserted tuple handed in is not the one TOAST wrote.
 */
static void
BlobCountWrite(BlobUpsert *u, HeapTuple oldrow)
{
	if (!table_tuple_fetch_row_version(u->rel, &u->row->tts_tid, SnapshotAny, u->stored))
		elog(ERROR, "could not read back the blobs row just written");
	RowCountsOfWrite(u->rel, oldrow, ExecFetchSlotHeapTuple(u->stored, false, NULL));
}

/*
 * Insert the row's index entries, after a speculative insert (checking the
 * arbiter for a conflict) or a non-HOT update. The executor's "update" hint
 * (for bottom-up deletion of unchanged keys) is not given: it reads the
 * updated columns from a range table, which this path has none of.
 */
static void
BlobIndexRow(BlobUpsert *u, bool speculative, bool *conflict, bool only_summarizing)
{
#if PG_VERSION_NUM >= 160000
	(void) ExecInsertIndexTuples(u->rri, u->row, u->estate, false, speculative, conflict,
								 speculative ? u->arbiter : NIL, only_summarizing);
#else
	Assert(!only_summarizing);
	(void) ExecInsertIndexTuples(u->rri, u->row, u->estate, false, speculative, conflict,
								 speculative ? u->arbiter : NIL);
#endif
}

/* True, with the conflicting row's tid, when the put's key has a row (waiting for its inserter). */
static bool
BlobFindConflict(BlobUpsert *u, ItemPointer conflict)
{
#if PG_VERSION_NUM >= 180000
	return !ExecCheckIndexConstraints(u->rri, u->row, u->estate, conflict, NULL, u->arbiter);
#else
	return !ExecCheckIndexConstraints(u->rri, u->row, u->estate, conflict, u->arbiter);
#endif
}

/*
 * Insert the new row speculatively (values/nulls hold it): false, with
 * nothing left behind, when a concurrent insert of the key got its index
 * entry in first.
 */
static bool
BlobTryInsert(BlobUpsert *u)
{
	TransactionId xid = GetCurrentTransactionId();
	uint32		token = SpeculativeInsertionLockAcquire(xid);
	bool		conflict = false;

	table_tuple_insert_speculative(u->rel, u->row, u->cid, 0, NULL, token);
	BlobIndexRow(u, true, &conflict, false);
	table_tuple_complete_speculative(u->rel, u->row, token, !conflict);
	SpeculativeInsertionLockRelease(xid);
	if (!conflict)
		BlobCountWrite(u, NULL);
	return !conflict;
}

/* Raise 40001, as ON CONFLICT DO UPDATE does, for a row this snapshot may not replace. */
static void
BlobSerializationFailure(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not serialize access due to concurrent update")));
}

/*
 * Lock the row at tid for replacing it: false when it was replaced or
 * deleted meanwhile (the put looks the key up again).
 */
static bool
BlobLockExisting(BlobUpsert *u, ItemPointer tid)
{
	TM_FailureData tmfd;
	TM_Result	result = table_tuple_lock(u->rel, tid, GetActiveSnapshot(), u->existing, u->cid,
										  LockTupleNoKeyExclusive, LockWaitBlock, 0, &tmfd);

	switch (result)
	{
		case TM_Ok:
			break;
		case TM_Updated:
		case TM_Deleted:
			if (IsolationUsesXactSnapshot())
				BlobSerializationFailure();
			return false;
		default:
			elog(ERROR, "could not lock the blobs row of a put (result %d)", (int) result);
	}
	if (IsolationUsesXactSnapshot() &&
		!table_tuple_satisfies_snapshot(u->rel, u->existing, GetActiveSnapshot()))
	{
		bool		isnull;
		Datum		xmin = slot_getsysattr(u->existing, MinTransactionIdAttributeNumber, &isnull);

		if (!TransactionIdIsCurrentTransactionId(DatumGetTransactionId(xmin)))
			BlobSerializationFailure();
	}
	return true;
}

/*
 * Replace the locked row u->existing with the put (values/nulls hold the row
 * an insert would have written): every field but createdAt, or for a content
 * address only the options and times (its bytes are these bytes). Returns
 * the replaced version when its bytes were chunks, else 0.
 */
static int64
BlobReplace(BlobUpsert *u, Datum *values, bool *nulls)
{
	TupleTableSlot *old = u->existing;
	int64		old_version;
	bool		old_inline;
	TM_FailureData tmfd;
	LockTupleMode lockmode;
	TM_Result	result;
	bool		index_it;
	bool		only_summarizing = false;

	slot_getallattrs(old);
	old_version = DatumGetInt64(old->tts_values[u->att[BLOB_COL_VERSION] - 1]);
	old_inline = !old->tts_isnull[u->att[BLOB_COL_INLINE_DATA] - 1];
	BlobSet(u, values, nulls, BLOB_COL_CREATED_AT, old->tts_values[u->att[BLOB_COL_CREATED_AT] - 1], false);
	BlobSet(u, values, nulls, BLOB_COL_GC_SETTLED, old->tts_values[u->att[BLOB_COL_GC_SETTLED] - 1], false);
	BlobSet(u, values, nulls, BLOB_COL_REPLACED_VERSION, Int64GetDatum(old_version), false);
	if (u->content_addressed)
	{
		static const BlobColumn kept[] = {
			BLOB_COL_VERSION, BLOB_COL_SIZE, BLOB_COL_ETAG, BLOB_COL_INLINE_CODEC,
			BLOB_COL_INLINE_DATA, BLOB_COL_REPLACED_VERSION
		};

		for (int i = 0; i < lengthof(kept); i++)
			BlobSet(u, values, nulls, kept[i], old->tts_values[u->att[kept[i]] - 1],
					old->tts_isnull[u->att[kept[i]] - 1]);
	}
	BlobStoreRow(u, values, nulls);
#if PG_VERSION_NUM >= 160000
	{
		TU_UpdateIndexes update_indexes;

		result = table_tuple_update(u->rel, &old->tts_tid, u->row, u->cid, GetActiveSnapshot(),
									InvalidSnapshot, true, &tmfd, &lockmode, &update_indexes);
		index_it = update_indexes != TU_None;
		only_summarizing = update_indexes == TU_Summarizing;
	}
#else
	result = table_tuple_update(u->rel, &old->tts_tid, u->row, u->cid, GetActiveSnapshot(),
								InvalidSnapshot, true, &tmfd, &lockmode, &index_it);
#endif
	if (result != TM_Ok)
		elog(ERROR, "could not replace the locked blobs row of a put (result %d)", (int) result);
	if (index_it)
		BlobIndexRow(u, false, NULL, only_summarizing);
	BlobCountWrite(u, ExecFetchSlotHeapTuple(old, false, NULL));
	return u->content_addressed || old_inline ? 0 : old_version;
}

/* The row an insert of the put writes, in values/nulls. */
static void
BlobNewRow(BlobUpsert *u, const char *key, int64 size, int16 codec, bytea *data,
		   const BlobOptions *opts, int64 now, Datum *values, bool *nulls)
{
	int64		etag = nextval_internal(SpRelationOid("blob_etags"), false);

	memset(nulls, true, RelationGetDescr(u->rel)->natts * sizeof(bool));
	BlobSet(u, values, nulls, BLOB_COL_KEY, CStringGetTextDatum(key), false);
	BlobSet(u, values, nulls, BLOB_COL_VERSION,
			Int64GetDatum(nextval_internal(SpRelationOid("blob_versions"), false)), false);
	BlobSet(u, values, nulls, BLOB_COL_SIZE, Int64GetDatum(size), false);
	BlobSet(u, values, nulls, BLOB_COL_ETAG, CStringGetTextDatum(psprintf(INT64_FORMAT, etag)), false);
	if (opts->content_type != NULL)
		BlobSet(u, values, nulls, BLOB_COL_CONTENT_TYPE, CStringGetTextDatum(opts->content_type), false);
	if (opts->custom_metadata != NULL)
		BlobSet(u, values, nulls, BLOB_COL_CUSTOM_METADATA,
				PointerGetDatum(cstring_to_text_with_len(opts->custom_metadata, opts->custom_metadata_len)),
				false);
	BlobSet(u, values, nulls, BLOB_COL_CREATED_AT, Int64GetDatum(now), false);
	BlobSet(u, values, nulls, BLOB_COL_UPDATED_AT, Int64GetDatum(now), false);
	if (u->content_addressed)
		BlobSet(u, values, nulls, BLOB_COL_RELIED_ON_AT, Int64GetDatum(now), false);
	BlobSet(u, values, nulls, BLOB_COL_INLINE_CODEC, Int16GetDatum(codec), false);
	BlobSet(u, values, nulls, BLOB_COL_INLINE_DATA, PointerGetDatum(data), false);
	BlobSet(u, values, nulls, BLOB_COL_GC_SETTLED, BoolGetDatum(false), false);
}

/*
 * Write the blobs row of a small object (its encoded bytes `data`, of codec
 * `codec`; content_addressed for a content-address key) as
 * blob_publish_inline does, without SPI: false, having written nothing,
 * when the table is not the one this file knows (the caller then runs the
 * statement). On true, *out is the object's row as now stored (in the
 * caller's memory context) and *chunked_version the version whose chunks
 * the put replaced (0 when none).
 */
bool
BlobUpsertInline(const char *key, bool content_addressed, int64 size, int16 codec, bytea *data,
				 const BlobOptions *opts, int64 now, BlobRow *out, int64 *chunked_version)
{
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext cxt;
	BlobUpsert	u;
	Datum	   *values;
	bool	   *nulls;

	if (!SpSchemaIsAtLeast(BLOB_UPSERT_SINCE))
		return false;
	u.rel = SpOpenTable("blobs", RowExclusiveLock);
	if (!BlobUpsertKnowsTable(u.rel, u.att))
	{
		table_close(u.rel, NoLock);
		return false;
	}
	cxt = AllocSetContextCreate(caller, "blob upsert", ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(cxt);
	/* see what earlier commands of this transaction wrote, as a statement would */
	CommandCounterIncrement();
	u.cid = GetCurrentCommandId(true);
	u.content_addressed = content_addressed;
	u.estate = CreateExecutorState();
	u.rri = makeNode(ResultRelInfo);
	InitResultRelInfo(u.rri, u.rel, 1, NULL, 0);
	ExecOpenIndices(u.rri, true);
	u.arbiter = list_make1_oid(SpRelationOid("blobs_pkey"));
	u.row = table_slot_create(u.rel, NULL);
	u.existing = table_slot_create(u.rel, NULL);
	u.stored = table_slot_create(u.rel, NULL);
	values = palloc(RelationGetDescr(u.rel)->natts * sizeof(Datum));
	nulls = palloc(RelationGetDescr(u.rel)->natts * sizeof(bool));
	BlobNewRow(&u, key, size, codec, data, opts, now, values, nulls);
	*chunked_version = 0;
	for (;;)
	{
		ItemPointerData conflict;

		BlobStoreRow(&u, values, nulls);
		if (!BlobFindConflict(&u, &conflict))
		{
			if (BlobTryInsert(&u))
				break;
		}
		else if (BlobLockExisting(&u, &conflict))
		{
			*chunked_version = BlobReplace(&u, values, nulls);
			break;
		}
		ExecClearTuple(u.existing);
	}
	MemoryContextSwitchTo(caller);
	BlobRowFromSlot(u.row, u.att, out);
	MemoryContextSwitchTo(cxt);
	ExecDropSingleTupleTableSlot(u.row);
	ExecDropSingleTupleTableSlot(u.existing);
	ExecDropSingleTupleTableSlot(u.stored);
	ExecCloseIndices(u.rri);
	FreeExecutorState(u.estate);
	table_close(u.rel, NoLock);
	/* let later commands see the row, as after a statement */
	CommandCounterIncrement();
	MemoryContextSwitchTo(caller);
	MemoryContextDelete(cxt);
	return true;
}
