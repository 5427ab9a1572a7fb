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
 */
#include "postgres.h"

#include "access/detoast.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "sandbox_persist.h"

PG_FUNCTION_INFO_V1(_row_count_trigger);

/* The most counters one trigger call may change: its specs, each for OLD and NEW. */
#define ROW_COUNT_MAX_SPECS 8

/* Adds each (counter, delta) of the arrays $1, $2 to this backend's row ($3). */
static SpQuery row_count_add = {
	"INSERT INTO sandbox_persist.row_counts AS c (counter, backend_pid, value)"
	" SELECT u.counter, $3, u.delta FROM unnest($1::text[], $2::bigint[]) AS u(counter, delta)"
	" ON CONFLICT (counter, backend_pid) DO UPDATE SET value = c.value + EXCLUDED.value",
	3, {TEXTARRAYOID, INT8ARRAYOID, INT8OID}
};

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

/*
 * _row_count_trigger(): AFTER row trigger. Each argument is one counter spec
 * (see the function's COMMENT); the old row's share is taken off and the new
 * row's added, in one statement for all of them.
 */
Datum
_row_count_trigger(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	TupleDesc	desc;
	RowCountDeltas deltas = {0};
	Datum	   *names;
	Datum	   *values;
	int			kept = 0;
	SpArgs		args;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) ||
		!TRIGGER_FIRED_AFTER(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("_row_count_trigger() must be called as an AFTER ... FOR EACH ROW trigger"),
				 errdetail("It keeps the counters of row_counts for the table it is a trigger of.")));
	if (trigdata->tg_trigger->tgnargs > ROW_COUNT_MAX_SPECS)
		elog(ERROR, "_row_count_trigger takes at most %d counter specs", ROW_COUNT_MAX_SPECS);
	desc = RelationGetDescr(trigdata->tg_relation);
	for (int i = 0; i < trigdata->tg_trigger->tgnargs; i++)
	{
		RowCountSpec spec;

		RowCountParseSpec(trigdata->tg_trigger->tgargs[i], &spec);
		if (!TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
			RowCountRow(&deltas, &spec, trigdata->tg_trigtuple, desc, -1);
		if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
			RowCountRow(&deltas, &spec, trigdata->tg_trigtuple, desc, 1);
		else if (TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
			RowCountRow(&deltas, &spec, trigdata->tg_newtuple, desc, 1);
	}

	names = palloc(sizeof(Datum) * deltas.n);
	values = palloc(sizeof(Datum) * deltas.n);
	for (int i = 0; i < deltas.n; i++)
	{
		if (deltas.deltas[i] == 0)
			continue;
		names[kept] = CStringGetTextDatum(deltas.names[i]);
		values[kept] = Int64GetDatum(deltas.deltas[i]);
		kept++;
	}
	if (kept > 0)
	{
		SPI_connect();
		SpArgsInit(&args);
		SpArgDatum(&args, PointerGetDatum(construct_array(names, kept, TEXTOID, -1, false,
														  TYPALIGN_INT)));
		SpArgDatum(&args, PointerGetDatum(construct_array(values, kept, INT8OID, sizeof(int64),
														  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE)));
		SpArgInt64(&args, MyProcPid);
		SpExec(&row_count_add, &args, false, 0);
		SPI_finish();
	}
	return PointerGetDatum(NULL);
}

/* maintain(): fold the counter rows of exited backends into row 0. Inside SPI. */
void
RowCountsFold(void)
{
	SpArgs		args;

	SpArgsInit(&args);
	SpExec(&row_count_fold, &args, false, 0);
}
