/*
 * row_counts.c
 *
 * The counters the overview reads instead of counting tables (0.5.0,
 * docs/monitoring.md "What a scrape costs"): runs by status, blob objects,
 * their raw bytes and the bytes they take in storage. _row_count_trigger is
 * the row trigger that keeps them; RowCountsFold is maintenance's part.
 *
 * Locking: a change is added to the row (counter, MyProcPid) only, and a
 * backend runs one transaction at a time, so no two transactions ever wait on
 * one counter row; the row is held until the writer's transaction ends, and a
 * change that rolls back is not counted. maintain() folds the rows of backends
 * that have exited into backend_pid 0 (RowCountsFold); a live backend's row is
 * left alone, so the fold never waits on application traffic either.
 *
 * The trigger writes its rows with the heap and index calls themselves
 * (RowCountApply), not an SPI statement: started for every row of every
 * write, the statement's executor was a quarter of a small blob put. The one
 * other writer of a live backend's row is a fold that took its pid for an
 * exited one's (a reused pid): an update that finds the row deleted or
 * replaced under it looks the row up again.
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/heapam.h"
#include "access/stratnum.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_trigger.h"
#include "commands/trigger.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "key_scans.h"
#include "sandbox_persist.h"

PG_FUNCTION_INFO_V1(_row_count_trigger);

/* The most counters one trigger call may change: its specs, each for OLD and NEW. */
#define ROW_COUNT_MAX_SPECS 8

/*
 * Moves the rows of backends that no longer exist into backend_pid 0. A pid
 * reused by a new backend keeps its row (its deltas are as good as any).
 */
static SpQuery row_count_fold = {
	"WITH gone AS (DELETE FROM sandbox_persist.row_counts c"
	"  WHERE c.backend_pid <> 0"
	"    AND c.backend_pid NOT IN (SELECT a.pid FROM pg_catalog.pg_stat_get_activity(NULL) a"
	"                              WHERE a.pid IS NOT NULL)"
	"  RETURNING c.counter, c.value),"
	" sums AS (SELECT counter, sum(value)::bigint AS value FROM gone GROUP BY counter)"
	" INSERT INTO sandbox_persist.row_counts AS c (counter, backend_pid, value)"
	" SELECT counter, 0, value FROM sums"
	" ON CONFLICT (counter, backend_pid) DO UPDATE SET value = c.value + EXCLUDED.value",
	0, {InvalidOid}
};

/* One counter spec parsed: NAME[{GROUP}][+SUM | #STORED]. */
typedef struct RowCountSpec
{
	char	   *prefix;			/* the name before {GROUP}, or the whole name */
	char	   *suffix;			/* the name after {GROUP} ("" when none) */
	char	   *group;			/* column whose value completes the name, or NULL */
	char	   *measure;		/* column summed, or NULL to count rows */
	bool		stored;			/* sum the column's stored size, not its value */
} RowCountSpec;

/* The changes one trigger call makes, merged by counter name. */
typedef struct RowCountDeltas
{
	int			n;
	char	   *names[ROW_COUNT_MAX_SPECS * 2];
	int64		deltas[ROW_COUNT_MAX_SPECS * 2];
} RowCountDeltas;

/* Parse one trigger argument; a malformed one is a definition error of ours. */
static void
RowCountParseSpec(const char *arg, RowCountSpec *spec)
{
	char	   *text = pstrdup(arg);
	char	   *op = strpbrk(text, "+#");
	char	   *open;

	spec->stored = op != NULL && *op == '#';
	spec->measure = NULL;
	if (op != NULL)
	{
		*op = '\0';
		spec->measure = op + 1;
	}
	spec->prefix = text;
	spec->suffix = "";
	spec->group = NULL;
	open = strchr(text, '{');
	if (open != NULL)
	{
		char	   *close = strchr(open, '}');

		if (close == NULL)
			elog(ERROR, "row count spec \"%s\" has an unclosed {", arg);
		*open = '\0';
		*close = '\0';
		spec->group = open + 1;
		spec->suffix = close + 1;
	}
}

/* The attribute number of column `name` of the trigger's table. */
static int
RowCountAttnum(TupleDesc desc, const char *name)
{
	int			attnum = SPI_fnumber(desc, name);

	if (attnum <= 0)
		elog(ERROR, "row count spec names no column \"%s\"", name);
	return attnum;
}

/* Add delta to the counter `name`, merging it with an earlier change of it. */
static void
RowCountAdd(RowCountDeltas *out, char *name, int64 delta)
{
	for (int i = 0; i < out->n; i++)
	{
		if (strcmp(out->names[i], name) == 0)
		{
			out->deltas[i] += delta;
			return;
		}
	}
	if (out->n == lengthof(out->names))
		elog(ERROR, "one row write changes more than %d counters", (int) lengthof(out->names));
	out->names[out->n] = name;
	out->deltas[out->n] = delta;
	out->n++;
}

/* What one row contributes to one spec, times sign (-1 for the old row). */
static void
RowCountRow(RowCountDeltas *out, const RowCountSpec *spec, HeapTuple row, TupleDesc desc, int sign)
{
	char	   *name = spec->prefix;
	int64		amount = 1;

	if (spec->group != NULL)
	{
		char	   *value = SPI_getvalue(row, desc, RowCountAttnum(desc, spec->group));

		name = psprintf("%s%s%s", spec->prefix, value == NULL ? "null" : value, spec->suffix);
	}
	if (spec->measure != NULL)
	{
		bool		isnull;
		int			attnum = RowCountAttnum(desc, spec->measure);
		Datum		d = SPI_getbinval(row, desc, attnum, &isnull);

		if (isnull)
			amount = 0;
		else if (spec->stored)
			amount = (int64) toast_datum_size(d);
		else
			amount = DatumGetInt64(d);
	}
	RowCountAdd(out, name, sign * amount);
}

/* row_counts and its primary key (counter, backend_pid), opened together. */
typedef struct RowCountTable
{
	Relation	rel;
	Relation	pkey;
	IndexInfo  *pkey_info;
	AttrNumber	counter_att;
	AttrNumber	pid_att;
	AttrNumber	value_att;
} RowCountTable;

/*
 * The newest version of this backend's row of `counter`, with its value, or
 * false when there is none. SnapshotSelf sees committed rows and this
 * transaction's own writes, those of the current command included.
 */
static bool
RowCountFind(RowCountTable *t, text *counter, ItemPointer tid, int64 *value)
{
	TupleTableSlot *slot = table_slot_create(t->rel, NULL);
	ScanKeyData keys[2];
	IndexScanDesc scan;
	bool		found;

	SpTextScanKey(&keys[0], 1, t->pkey, counter);
	ScanKeyInit(&keys[1], 2, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(MyProcPid));
	scan = SpBeginIndexScan(t->rel, t->pkey, SnapshotSelf, keys, 2);
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	if (found)
	{
		bool		isnull;

		*tid = slot->tts_tid;
		*value = DatumGetInt64(slot_getattr(slot, t->value_att, &isnull));
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	return found;
}

/* Index the row version `tuple` under (counter, MyProcPid). */
static void
RowCountIndex(RowCountTable *t, text *counter, HeapTuple tuple)
{
	Datum		keys[2] = {PointerGetDatum(counter), Int32GetDatum(MyProcPid)};
	bool		nulls[2] = {false, false};

	index_insert(t->pkey, keys, nulls, &tuple->t_self, t->rel, UNIQUE_CHECK_YES, false,
				 t->pkey_info);
}

/*
 * Add `delta` to this backend's row of `counter`: update the row, or insert
 * it when there is none. A row deleted or replaced by a committed fold while
 * we waited for it is looked up again.
 */
static void
RowCountAddOne(RowCountTable *t, const char *name, int64 delta)
{
	text	   *counter = cstring_to_text(name);
	int			natts = RelationGetDescr(t->rel)->natts;
	Datum	   *values = palloc0(sizeof(Datum) * natts);
	bool	   *nulls = palloc(sizeof(bool) * natts);

	memset(nulls, true, sizeof(bool) * natts);
	values[t->counter_att - 1] = PointerGetDatum(counter);
	nulls[t->counter_att - 1] = false;
	values[t->pid_att - 1] = Int32GetDatum(MyProcPid);
	nulls[t->pid_att - 1] = false;
	nulls[t->value_att - 1] = false;
	for (;;)
	{
		ItemPointerData tid;
		int64		value = 0;
		bool		found = RowCountFind(t, counter, &tid, &value);
		HeapTuple	tuple;
		TM_Result	result;
		TM_FailureData tmfd;
		LockTupleMode lockmode;
		bool		index_it;

		values[t->value_att - 1] = Int64GetDatum(value + delta);
		tuple = heap_form_tuple(RelationGetDescr(t->rel), values, nulls);
		if (!found)
		{
			heap_insert(t->rel, tuple, GetCurrentCommandId(true), 0, NULL);
			RowCountIndex(t, counter, tuple);
			return;
		}
#if PG_VERSION_NUM >= 160000
		{
			TU_UpdateIndexes update_indexes;

			result = heap_update(t->rel, &tid, tuple, GetCurrentCommandId(true), InvalidSnapshot,
								 true, &tmfd, &lockmode, &update_indexes);
			index_it = update_indexes != TU_None;
		}
#else
		result = heap_update(t->rel, &tid, tuple, GetCurrentCommandId(true), InvalidSnapshot,
							 true, &tmfd, &lockmode);
		index_it = !HeapTupleIsHeapOnly(tuple);
#endif
		if (result == TM_Ok)
		{
			if (index_it)
				RowCountIndex(t, counter, tuple);
			return;
		}
		if (result != TM_Updated && result != TM_Deleted)
			elog(ERROR, "could not update counter \"%s\" of row_counts (result %d)", name, (int) result);
		heap_freetuple(tuple);
	}
}

/* Add every non-zero delta to this backend's counter rows. */
static void
RowCountApply(const RowCountDeltas *deltas)
{
	RowCountTable t;
	bool		any = false;

	for (int i = 0; i < deltas->n; i++)
		any |= deltas->deltas[i] != 0;
	if (!any)
		return;
	/* see the writes of earlier commands, and let ours be seen by later ones */
	CommandCounterIncrement();
	t.rel = SpOpenTable("row_counts", RowExclusiveLock);
	t.pkey = SpOpenIndex("row_counts_pkey", RowExclusiveLock);
	/* the rows are written here, not by the executor: every index must be this one */
	if (list_length(RelationGetIndexList(t.rel)) != 1)
		elog(ERROR, "row_counts must have exactly one index, its primary key");
	t.pkey_info = BuildIndexInfo(t.pkey);
	t.counter_att = get_attnum(RelationGetRelid(t.rel), "counter");
	t.pid_att = get_attnum(RelationGetRelid(t.rel), "backend_pid");
	t.value_att = get_attnum(RelationGetRelid(t.rel), "value");
	for (int i = 0; i < deltas->n; i++)
		if (deltas->deltas[i] != 0)
			RowCountAddOne(&t, deltas->names[i], deltas->deltas[i]);
	index_close(t.pkey, NoLock);
	table_close(t.rel, NoLock);
}

/*
 * Add what the write of one row does to the counter specs of trigger trig:
 * the old row's share (NULL for an insert) taken off, the new row's (NULL
 * for a delete) added.
 */
static void
RowCountTriggerDeltas(const Trigger *trig, TupleDesc desc, HeapTuple oldrow, HeapTuple newrow,
					  RowCountDeltas *out)
{
	if (trig->tgnargs > ROW_COUNT_MAX_SPECS)
		elog(ERROR, "_row_count_trigger takes at most %d counter specs", ROW_COUNT_MAX_SPECS);
	for (int i = 0; i < trig->tgnargs; i++)
	{
		RowCountSpec spec;

		RowCountParseSpec(trig->tgargs[i], &spec);
		if (oldrow != NULL)
			RowCountRow(out, &spec, oldrow, desc, -1);
		if (newrow != NULL)
			RowCountRow(out, &spec, newrow, desc, 1);
	}
}

/*
 * _row_count_trigger(): AFTER row trigger. Each argument is one counter spec
 * (see the function's COMMENT); the old row's share is taken off and the new
 * row's added (RowCountApply).
 */
Datum
_row_count_trigger(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	HeapTuple	oldrow = NULL;
	HeapTuple	newrow = NULL;
	RowCountDeltas deltas = {0};

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) ||
		!TRIGGER_FIRED_AFTER(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("_row_count_trigger() must be called as an AFTER ... FOR EACH ROW trigger"),
				 errdetail("It keeps the counters of row_counts for the table it is a trigger of.")));
	if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
		newrow = trigdata->tg_trigtuple;
	else
	{
		oldrow = trigdata->tg_trigtuple;
		if (TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
			newrow = trigdata->tg_newtuple;
	}
	RowCountTriggerDeltas(trigdata->tg_trigger, RelationGetDescr(trigdata->tg_relation),
						  oldrow, newrow, &deltas);
	RowCountApply(&deltas);
	return PointerGetDatum(NULL);
}

/* True for an AFTER ROW trigger that runs _row_count_trigger of our schema. */
static bool
RowCountIsCounterTrigger(const Trigger *trig)
{
	char	   *name;

	if (!TRIGGER_FOR_ROW(trig->tgtype) || !TRIGGER_FOR_AFTER(trig->tgtype) ||
		OidIsValid(trig->tgconstraint))
		return false;
	name = get_func_name(trig->tgfoid);
	return name != NULL && strcmp(name, "_row_count_trigger") == 0 &&
		get_func_namespace(trig->tgfoid) == get_namespace_oid("sandbox_persist", false);
}

/*
 * True when every trigger of rel is a counter trigger that fires in this
 * session (enabled, and the session not in replica mode): then a path that
 * writes rel's rows itself may apply them with RowCountsOfWrite.
 */
bool
RowCountsAreAllTriggers(Relation rel)
{
	TriggerDesc *td = rel->trigdesc;

	if (td == NULL)
		return true;
	if (SessionReplicationRole != SESSION_REPLICATION_ROLE_ORIGIN)
		return false;
	for (int i = 0; i < td->numtriggers; i++)
	{
		const Trigger *trig = &td->triggers[i];

		if ((trig->tgenabled != TRIGGER_FIRES_ON_ORIGIN && trig->tgenabled != TRIGGER_FIRES_ALWAYS) ||
			!RowCountIsCounterTrigger(trig))
			return false;
	}
	return true;
}

/*
 * What rel's counter triggers would do for the write of one row, for a path
 * that writes it without the executor (RowCountsAreAllTriggers must hold):
 * oldrow NULL for an insert, else an update. Both rows as stored (a TOAST
 * pointer counts its stored size). A trigger's WHEN clause and column list
 * are not evaluated: in this schema they only skip updates that change no
 * counted column, whose deltas are zero.
 */
void
RowCountsOfWrite(Relation rel, HeapTuple oldrow, HeapTuple newrow)
{
	TriggerDesc *td = rel->trigdesc;
	RowCountDeltas deltas = {0};

	for (int i = 0; td != NULL && i < td->numtriggers; i++)
	{
		const Trigger *trig = &td->triggers[i];

		if (oldrow == NULL ? TRIGGER_FOR_INSERT(trig->tgtype) : TRIGGER_FOR_UPDATE(trig->tgtype))
			RowCountTriggerDeltas(trig, RelationGetDescr(rel), oldrow, newrow, &deltas);
	}
	RowCountApply(&deltas);
}

/* maintain(): fold the counter rows of exited backends into row 0. Inside SPI. */
void
RowCountsFold(void)
{
	SpArgs		args;

	SpArgsInit(&args);
	SpExec(&row_count_fold, &args, false, 0);
}
