/*
 * spi_util.c
 *
 * Thin SPI helpers: each statement is a static SpQuery whose plan is prepared
 * on first use and kept for the life of the backend (SPI_keepplan), plus
 * argument builders, typed accessors for the current SPI result (columns are
 * found by name, SpColumn) and the record writers and read patterns built on
 * them (SpAppendRecord, SpRowsJson, SpReadJson, SpCreateOrResume). Callers
 * own SPI_connect/SPI_finish and copy what they need out of SPI_tuptable
 * before finishing. Nothing here validates input (validate.c does, and calls
 * the argument builders; never the other way round). Locking is whatever the
 * statement itself says.
 *
 * The kept statements are planned with sequential scans disabled (see
 * SpPlanner): a backend lives for days, and a plan made while statistics say
 * a table is empty must not turn every later key lookup into a full scan.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "jit/jit.h"
#include "optimizer/cost.h"
#include "optimizer/planner.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/plancache.h"

#include "sandbox_persist.h"

/* Start an empty argument list. */
void
SpArgsInit(SpArgs *args)
{
	args->n = 0;
}

/* Append one argument slot. */
static void
SpArgPush(SpArgs *args, Datum d, bool isnull)
{
	if (args->n >= SP_MAX_ARGS)
		elog(ERROR, "too many SPI arguments");
	args->values[args->n] = d;
	args->nulls[args->n] = isnull ? 'n' : ' ';
	args->n++;
}

/* Append a text argument (NULL pointer = SQL NULL). */
void
SpArgText(SpArgs *args, const char *s)
{
	if (s == NULL)
		SpArgPush(args, (Datum) 0, true);
	else
		SpArgPush(args, CStringGetTextDatum(s), false);
}

/* Append a text (or json) argument from a byte span. */
void
SpArgTextLen(SpArgs *args, const char *s, int len)
{
	SpArgPush(args, PointerGetDatum(cstring_to_text_with_len(s, len)), false);
}

/* Append a bigint argument. */
void
SpArgInt64(SpArgs *args, int64 v)
{
	SpArgPush(args, Int64GetDatum(v), false);
}

/* Append a double precision argument. */
void
SpArgFloat8(SpArgs *args, double v)
{
	SpArgPush(args, Float8GetDatum(v), false);
}

/* Append a boolean argument. */
void
SpArgBool(SpArgs *args, bool v)
{
	SpArgPush(args, BoolGetDatum(v), false);
}

/* Append a SQL NULL argument. */
void
SpArgNull(SpArgs *args)
{
	SpArgPush(args, (Datum) 0, true);
}

/* Append a ready-made datum. */
void
SpArgDatum(SpArgs *args, Datum d)
{
	SpArgPush(args, d, false);
}

/*
 * Kept plans and "empty" statistics. After a VACUUM or ANALYZE of an empty
 * table, pg_class says it has no rows, and the planner believes it (it
 * assumes ten pages only for a table never vacuumed). A kept plan made then
 * reads the table by sequential scan, and keeps doing so while the table
 * grows, until something invalidates the plan: a bulk load through the API
 * in one long statement or transaction never gets there (20 000 blob_put
 * calls went 17x slower). Every statement here reads or writes through a
 * key an index serves, so each is planned with enable_seqscan off: a
 * sequential scan remains where no index applies, and is otherwise never
 * chosen, whatever the statistics say. The setting holds while the planner
 * runs for one of our kept statements only (custom or generic plan, and
 * every re-plan after an invalidation); the planner hook recognises them by
 * their plan sources' query strings, which stay allocated, unchanged, for
 * the life of the backend. Statements of other code, and whatever our
 * statements run at execution time, are planned as usual.
 */
static HTAB *sp_kept_sources = NULL;	/* keys: query_string pointers */
static planner_hook_type sp_prev_planner = NULL;

/* Remember the plan sources of a statement just kept, for SpPlanner. */
static void
SpRememberKept(SPIPlanPtr plan)
{
	ListCell   *lc;

	if (sp_kept_sources == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(const char *);
		ctl.entrysize = sizeof(const char *);
		ctl.hcxt = TopMemoryContext;
		sp_kept_sources = hash_create("sandbox_persist kept statements", 256, &ctl,
									  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	foreach(lc, SPI_plan_get_plan_sources(plan))
	{
		CachedPlanSource *source = (CachedPlanSource *) lfirst(lc);

		hash_search(sp_kept_sources, &source->query_string, HASH_ENTER, NULL);
	}
}

/*
 * The planner hook: one of our kept statements is planned without sequential
 * scans, and without JIT: a scan that has no index (a small table such as
 * blob_uploads) is costed at the 10^10 penalty of a disabled plan node, far
 * past jit_above_cost, so every execution compiled the query (half a second
 * or more each time, which made maintain() take seconds on an empty database).
 */
static PlannedStmt *
SpPlanner(Query *parse, const char *query_string, int cursorOptions, ParamListInfo boundParams)
{
	bool		ours = sp_kept_sources != NULL && query_string != NULL &&
		hash_search(sp_kept_sources, &query_string, HASH_FIND, NULL) != NULL;
	bool		saved = enable_seqscan;
	bool		saved_jit = jit_enabled;
	PlannedStmt *result;

	if (!ours)
		return sp_prev_planner ? sp_prev_planner(parse, query_string, cursorOptions, boundParams)
			: standard_planner(parse, query_string, cursorOptions, boundParams);
	enable_seqscan = false;
	jit_enabled = false;
	PG_TRY();
	{
		result = sp_prev_planner ? sp_prev_planner(parse, query_string, cursorOptions, boundParams)
			: standard_planner(parse, query_string, cursorOptions, boundParams);
	}
	PG_FINALLY();
	{
		enable_seqscan = saved;
		jit_enabled = saved_jit;
	}
	PG_END_TRY();
	return result;
}

/* Install the planner hook (from _PG_init), after any already installed. */
void
SpPlannerInit(void)
{
	sp_prev_planner = planner_hook;
	planner_hook = SpPlanner;
}

/* Prepare and keep a statement's plan on first use. */
static void
SpPrepare(SpQuery *q, SpArgs *args)
{
	if (q->plan == NULL)
	{
		SPIPlanPtr	plan = SPI_prepare_cursor(q->sql, q->nargs, q->argtypes, q->cursor_options);

		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed for \"%s\": %s",
				 q->sql, SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "SPI_keepplan failed");
		SpRememberKept(plan);
		q->plan = plan;
	}
	if (args->n != q->nargs)
		elog(ERROR, "statement expects %d arguments, got %d", q->nargs, args->n);
}

/* Execute a cached statement; returns SPI_processed. Errors propagate. */
int
SpExec(SpQuery *q, SpArgs *args, bool read_only, long tcount)
{
	int			rc;

	SpPrepare(q, args);
	rc = SPI_execute_plan(q->plan, args->values, args->nulls, read_only, tcount);
	if (rc < 0)
		elog(ERROR, "SPI_execute_plan failed: %s", SPI_result_code_string(rc));
	return (int) SPI_processed;
}

/* Open a cursor over a cached statement, for results too large to materialise. */
Portal
SpOpenCursor(SpQuery *q, SpArgs *args, bool read_only)
{
	Portal		portal;

	SpPrepare(q, args);
	portal = SPI_cursor_open(NULL, q->plan, args->values, args->nulls, read_only);
	if (portal == NULL)
		elog(ERROR, "SPI_cursor_open failed: %s", SPI_result_code_string(SPI_result));
	return portal;
}

/* A text[] of n C strings (a statement's array parameter). */
Datum
SpTextArray(char *const *items, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		d[i] = CStringGetTextDatum(items[i]);
	return PointerGetDatum(construct_array(d, n, TEXTOID, -1, false, TYPALIGN_INT));
}

/* A bigint[] of n values (a statement's array parameter). */
Datum
SpInt64Array(const int64 *values, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		d[i] = Int64GetDatum(values[i]);
	return PointerGetDatum(construct_array(d, n, INT8OID, sizeof(int64), FLOAT8PASSBYVAL,
										   TYPALIGN_DOUBLE));
}

/* Binary datum of a result column; sets *isnull. */
Datum
SpGetDatum(int row, int col, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, isnull);
}

/* True when a result column is NULL. */
bool
SpIsNull(int row, int col)
{
	bool		isnull;

	SpGetDatum(row, col, &isnull);
	return isnull;
}

/*
 * The number of the column called `name` in the current SPI result. Readers
 * name their columns instead of counting them, so a statement can gain or
 * reorder columns without shifting what they read; a missing name is a bug
 * of ours, reported as such.
 */
int
SpColumn(const char *name)
{
	TupleDesc	desc = SPI_tuptable->tupdesc;
	int			col = SPI_fnumber(desc, name);

	if (col <= 0)
		elog(ERROR, "statement result has no column \"%s\"", name);
	return col;
}

/*
 * A text-like result column (text, json, uuid via ::text) as a C string in
 * the caller's memory context; NULL for SQL NULL. Copy it out before
 * SPI_finish by allocating with SPI_palloc or reading it in the upper context.
 */
char *
SpGetText(int row, int col)
{
	bool		isnull;
	Datum		d = SpGetDatum(row, col, &isnull);

	if (isnull)
		return NULL;
	return TextDatumGetCString(d);
}

/* A bigint result column; false for SQL NULL. */
bool
SpGetInt64(int row, int col, int64 *out)
{
	bool		isnull;
	Datum		d = SpGetDatum(row, col, &isnull);

	if (!isnull)
		*out = DatumGetInt64(d);
	return !isnull;
}

/* A double precision result column; false for SQL NULL. */
bool
SpGetFloat8(int row, int col, double *out)
{
	bool		isnull;
	Datum		d = SpGetDatum(row, col, &isnull);

	if (!isnull)
		*out = DatumGetFloat8(d);
	return !isnull;
}

/* A boolean result column; false for SQL NULL. */
bool
SpGetBool(int row, int col, bool *out)
{
	bool		isnull;
	Datum		d = SpGetDatum(row, col, &isnull);

	if (!isnull)
		*out = DatumGetBool(d);
	return !isnull;
}

/*
 * The column of `name` in the current result, trying `guess` first: record
 * column lists follow their descriptor, so one name comparison usually
 * settles it and the search by name (SpColumn) is the fallback.
 */
static int
SpColumnNear(const char *name, int guess)
{
	TupleDesc	desc = SPI_tuptable->tupdesc;

	if (guess >= 1 && guess <= desc->natts &&
		strcmp(NameStr(TupleDescAttr(desc, guess - 1)->attname), name) == 0)
		return guess;
	return SpColumn(name);
}

/* Append one field of a record from column col, unless it is SQL NULL (then its key is omitted). */
static void
SpAppendField(StringInfo buf, bool *first, const SpField *field, int row, int col)
{
	bool		isnull;
	Datum		d = SpGetDatum(row, col, &isnull);

	if (isnull)
		return;
	SpAppendKey(buf, first, field->key);
	switch (field->kind)
	{
		case SPF_STRING:
			SpAppendString(buf, TextDatumGetCString(d));
			break;
		case SPF_JSON:
			/* stored JSON is spliced verbatim; a stored JSON null is a value */
			appendStringInfoString(buf, TextDatumGetCString(d));
			break;
		case SPF_INT64:
			SpAppendInt64(buf, DatumGetInt64(d));
			break;
		case SPF_DOUBLE:
			SpAppendDouble(buf, DatumGetFloat8(d));
			break;
		case SPF_BOOL:
			appendStringInfoString(buf, DatumGetBool(d) ? "true" : "false");
			break;
	}
}

/*
 * Append the record of SPI result row `row` as a JSON object: the fields in
 * descriptor order, each read from its column by name; a SQL NULL column
 * omits its key (unset optionals are omitted, never null).
 */
void
SpAppendRecord(StringInfo buf, int row, const SpRecord *record)
{
	bool		first = true;
	int			col = 0;

	appendStringInfoChar(buf, '{');
	for (int i = 0; i < record->nfields; i++)
	{
		col = SpColumnNear(record->fields[i].column, col + 1);
		SpAppendField(buf, &first, &record->fields[i], row, col);
	}
	appendStringInfoChar(buf, '}');
}

/*
 * Run a statement whose rows are records and return them as JSON built in
 * `outer`: the first row as one record (*isnull when there is none) when
 * `single` is set, otherwise an array of every row. Inside SPI.
 */
Datum
SpRowsJson(SpQuery *q, SpArgs *args, bool read_only, SpRowWriter writer, bool single,
		   MemoryContext outer, bool *isnull)
{
	int			n = SpExec(q, args, read_only, single ? 1 : 0);
	MemoryContext spi;
	StringInfoData buf;
	Datum		result;

	*isnull = single && n == 0;
	if (*isnull)
		return (Datum) 0;
	spi = MemoryContextSwitchTo(outer);
	initStringInfo(&buf);
	if (single)
		writer(&buf, 0);
	else
	{
		appendStringInfoChar(&buf, '[');
		for (int i = 0; i < n; i++)
		{
			if (i > 0)
				appendStringInfoChar(&buf, ',');
			writer(&buf, i);
		}
		appendStringInfoChar(&buf, ']');
	}
	/* built in `outer`: SPI_finish frees everything allocated inside SPI */
	result = SpJsonResult(&buf);
	MemoryContextSwitchTo(spi);
	return result;
}

/*
 * A read-only statement in its own SPI session: the first row as a record
 * (SQL NULL when there is none) when `single` is set, else an array of rows.
 */
Datum
SpReadJson(FunctionCallInfo fcinfo, SpQuery *q, SpArgs *args, SpRowWriter writer, bool single)
{
	MemoryContext outer = CurrentMemoryContext;
	Datum		result;
	bool		isnull;

	SPI_connect();
	result = SpRowsJson(q, args, true, writer, single, outer, &isnull);
	SPI_finish();
	if (isnull)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(result);
}

/*
 * The createOrResume pattern: insert-if-absent, then read the row in a new
 * statement, which sees the winner of a concurrent insert; return the stored
 * record, never the input (SQL NULL only if it was deleted in between).
 */
Datum
SpCreateOrResume(FunctionCallInfo fcinfo, SpQuery *insert, SpArgs *insert_args, SpQuery *select,
				 const char *id, SpRowWriter writer)
{
	MemoryContext outer = CurrentMemoryContext;
	SpArgs		args;
	Datum		result;
	bool		isnull;

	SPI_connect();
	SpExec(insert, insert_args, false, 0);
	SpArgsInit(&args);
	SpArgText(&args, id);
	result = SpRowsJson(select, &args, false, writer, true, outer, &isnull);
	SPI_finish();
	if (isnull)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(result);
}
