/*
 * interrupts.c
 *
 * The interrupt store (docs/contract/chat-stores.md §1): insert-if-absent
 * create that never clobbers an existing record, resolve and cancel that
 * never check the current status, the atomic commitBatch, get, and the four
 * lists (requestedAt ascending, insertion order on ties).
 *
 * Locking: create is INSERT ... ON CONFLICT DO NOTHING, so a concurrent
 * create of the same id waits for the first inserter and then does nothing.
 * resolve and cancel are single-row UPDATEs. commitBatch locks every row it
 * references FOR UPDATE in sorted id order before it validates anything, so
 * two overlapping batches serialise (the second sees the first's statuses)
 * and cannot deadlock with each other.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "sandbox_persist.h"

PG_FUNCTION_INFO_V1(interrupt_create);
PG_FUNCTION_INFO_V1(interrupt_resolve);
PG_FUNCTION_INFO_V1(interrupt_cancel);
PG_FUNCTION_INFO_V1(interrupt_commit_batch);
PG_FUNCTION_INFO_V1(interrupt_get);
PG_FUNCTION_INFO_V1(interrupt_list);
PG_FUNCTION_INFO_V1(interrupt_list_pending);
PG_FUNCTION_INFO_V1(interrupt_list_by_run);
PG_FUNCTION_INFO_V1(interrupt_list_pending_by_run);

/* The columns interrupt_fields reads (by name: their order is free). */
#define INTERRUPT_COLUMNS \
	"interrupt_id, run_id, thread_id, status, requested_at, resolved_at," \
	" payload::text, response::text"

static SpQuery interrupt_insert = {
	"INSERT INTO sandbox_persist.interrupts (interrupt_id, run_id, thread_id, status,"
	" requested_at, payload, response)"
	" VALUES ($1, $2, $3, " SP_SQL_INTERRUPT_PENDING ", $4, $5, $6) ON CONFLICT (interrupt_id) DO NOTHING",
	6, {TEXTOID, TEXTOID, TEXTOID, INT8OID, JSONOID, JSONOID}
};

/* resolve: a SQL NULL response clears the stored one. */
static SpQuery interrupt_resolve_stmt = {
	"UPDATE sandbox_persist.interrupts SET status = " SP_SQL_INTERRUPT_RESOLVED ", resolved_at = $2,"
	" response = $3 WHERE interrupt_id = $1",
	3, {TEXTOID, INT8OID, JSONOID}
};

/* cancel: the stored response is left alone. */
static SpQuery interrupt_cancel_stmt = {
	"UPDATE sandbox_persist.interrupts SET status = " SP_SQL_INTERRUPT_CANCELLED ", resolved_at = $2"
	" WHERE interrupt_id = $1",
	2, {TEXTOID, INT8OID}
};

/* ORDER BY before FOR UPDATE: the rows are locked in sorted id order. */
static SpQuery interrupt_lock_batch = {
	"SELECT interrupt_id, status FROM sandbox_persist.interrupts"
	" WHERE interrupt_id = ANY ($1) ORDER BY interrupt_id FOR UPDATE",
	1, {TEXTARRAYOID}
};

static SpQuery interrupt_select = {
	"SELECT " INTERRUPT_COLUMNS " FROM sandbox_persist.interrupts WHERE interrupt_id = $1",
	1, {TEXTOID}
};

static SpQuery interrupt_by_thread = {
	"SELECT " INTERRUPT_COLUMNS " FROM sandbox_persist.interrupts"
	" WHERE thread_id = $1 ORDER BY requested_at, seq",
	1, {TEXTOID}
};

static SpQuery interrupt_pending_by_thread = {
	"SELECT " INTERRUPT_COLUMNS " FROM sandbox_persist.interrupts"
	" WHERE thread_id = $1 AND status = " SP_SQL_INTERRUPT_PENDING " ORDER BY requested_at, seq",
	1, {TEXTOID}
};

static SpQuery interrupt_by_run = {
	"SELECT " INTERRUPT_COLUMNS " FROM sandbox_persist.interrupts"
	" WHERE run_id = $1 ORDER BY requested_at, seq",
	1, {TEXTOID}
};

static SpQuery interrupt_pending_by_run = {
	"SELECT " INTERRUPT_COLUMNS " FROM sandbox_persist.interrupts"
	" WHERE run_id = $1 AND status = " SP_SQL_INTERRUPT_PENDING " ORDER BY requested_at, seq",
	1, {TEXTOID}
};

/* One validated commitBatch entry. */
typedef struct InterruptBatchEntry
{
	char	   *id;
	bool		resolved;		/* false: cancelled */
	const SpJson *response;		/* NULL when absent (clears on resolve) */
	int			index;			/* position in the batch */
	bool		duplicate;		/* the id appeared earlier in the batch */
} InterruptBatchEntry;

/* A row locked by commitBatch: its id and current status. */
typedef struct InterruptLockedRow
{
	char	   *id;
	char	   *status;
} InterruptLockedRow;

/*
 * The InterruptRecord, read by column name; unset optionals are omitted. A
 * stored JSON null response is a value ("response": null).
 */
static const SpField interrupt_fields[] = {
	{"interruptId", "interrupt_id", SPF_STRING},
	{"runId", "run_id", SPF_STRING},
	{"threadId", "thread_id", SPF_STRING},
	{"status", "status", SPF_STRING},
	{"requestedAt", "requested_at", SPF_INT64},
	{"resolvedAt", "resolved_at", SPF_INT64},
	{"payload", "payload", SPF_JSON},
	{"response", "response", SPF_JSON}
};
static const SpRecord interrupt_record = SP_RECORD(interrupt_fields);

/* Append the InterruptRecord of SPI result row `row`. */
static void
InterruptAppendRecord(StringInfo buf, int row)
{
	SpAppendRecord(buf, row, &interrupt_record);
}

/* qsort comparator: batch entries by id bytes, then by position. */
static int
InterruptCompareEntries(const void *a, const void *b)
{
	const InterruptBatchEntry *x = *(const InterruptBatchEntry *const *) a;
	const InterruptBatchEntry *y = *(const InterruptBatchEntry *const *) b;
	int			c = strcmp(x->id, y->id);

	if (c != 0)
		return c;
	return x->index < y->index ? -1 : x->index > y->index ? 1 : 0;
}

/* qsort/bsearch comparator: locked rows by id bytes. */
static int
InterruptCompareRows(const void *a, const void *b)
{
	return strcmp(((const InterruptLockedRow *) a)->id, ((const InterruptLockedRow *) b)->id);
}

/*
 * Check the shape of every commitBatch entry (22023 / 22004 / 22021) and mark
 * the entries whose id already appeared earlier in the batch.
 */
static InterruptBatchEntry *
InterruptParseBatch(const SpJson *entries)
{
	static const char *const names[] = {"interruptId", "status", "response"};
	InterruptBatchEntry *out = palloc0(sizeof(InterruptBatchEntry) * entries->count);
	InterruptBatchEntry **sorted = palloc(sizeof(InterruptBatchEntry *) * entries->count);

	for (int i = 0; i < entries->count; i++)
	{
		const SpJson *e = entries->items[i];
		SpJson	   *f[lengthof(names)];
		char	   *status;

		if (e->kind != SPJ_OBJECT)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("interrupt batch entry %d must be a JSON object", i),
					 errdetail("A JSON %s was given.", SpJsonKindName(e->kind))));
		SpJsonMembers(e, names, lengthof(names), f, "an interrupt batch entry", false,
					  ERRCODE_INVALID_PARAMETER_VALUE, -1);
		out[i].id = SpCheckIdJson(f[0], "interruptId", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
		status = SpCheckStringJson(f[1], "status", true, -1, SP_CHECK_PLAIN);
		if (strcmp(status, SP_INTERRUPT_RESOLVED) == 0)
			out[i].resolved = true;
		else if (strcmp(status, SP_INTERRUPT_CANCELLED) == 0)
			out[i].resolved = false;
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown interrupt batch entry status \"%s\"", status),
					 errdetail("A batch entry status is " SP_INTERRUPT_RESOLVED " or " SP_INTERRUPT_CANCELLED ".")));
		if (!out[i].resolved && f[2] != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("a cancelled interrupt batch entry cannot carry a response"),
					 errdetail("Entry %d cancels \"%s\" and gives a response; cancel keeps the stored response.",
							   i, out[i].id)));
		out[i].response = f[2];
		out[i].index = i;
		sorted[i] = &out[i];
	}
	/* After sorting by (id, position), every entry equal to its predecessor is a repeat. */
	qsort(sorted, entries->count, sizeof(InterruptBatchEntry *), InterruptCompareEntries);
	for (int i = 1; i < entries->count; i++)
		if (strcmp(sorted[i]->id, sorted[i - 1]->id) == 0)
			sorted[i]->duplicate = true;
	pfree(sorted);
	return out;
}

/*
 * interrupt_create(record json) -> boolean: insert a pending interrupt unless
 * the id exists (then nothing changes, even when it is resolved); true when
 * inserted.
 */
Datum
interrupt_create(PG_FUNCTION_ARGS)
{
	static const char *const names[] = {
		"interruptId", "runId", "threadId", "requestedAt", "payload", "response",
		"status", "resolvedAt"
	};
	SpJson	   *rec = SpCheckJsonKindArg(fcinfo, 0, "record", SPJ_OBJECT, "a JSON object", SP_CHECK_PLAIN);
	SpJson	   *f[lengthof(names)];
	SpArgs		args;
	int			n;

	SpJsonMembers(rec, names, lengthof(names), f, "an interrupt record", false,
				  ERRCODE_INVALID_PARAMETER_VALUE, -1);
	/* a born-resolved interrupt must be impossible */
	for (int i = 6; i < lengthof(names); i++)
		if (f[i] != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s cannot be given when creating an interrupt", names[i]),
					 errdetail("An interrupt is created pending; resolve or cancel it to change its status.")));
	SpArgsInit(&args);
	SpArgText(&args, SpCheckIdJson(f[0], "interruptId", SP_ID_MAX_BYTES, SP_CHECK_PLAIN));
	SpArgText(&args, SpCheckIdJson(f[1], "runId", SP_ID_MAX_BYTES, SP_CHECK_PLAIN));
	SpArgText(&args, SpCheckIdJson(f[2], "threadId", SP_ID_MAX_BYTES, SP_CHECK_PLAIN));
	SpArgInt64(&args, SpCheckIntJson(f[3], "requestedAt", -SP_MAX_SAFE_INTEGER));
	SpCheckRequiredJson(f[4], "payload", "a value", SP_CHECK_PLAIN);
	SpCheckObjectJson(f[4], "payload");
	SpArgTextLen(&args, f[4]->raw, f[4]->rawlen);
	/* response: absent -> none; JSON null is a stored value */
	if (f[5] == NULL)
		SpArgNull(&args);
	else
		SpArgTextLen(&args, f[5]->raw, f[5]->rawlen);

	SPI_connect();
	n = SpExec(&interrupt_insert, &args, false, 0);
	SPI_finish();
	PG_RETURN_BOOL(n == 1);
}

/*
 * interrupt_resolve(interrupt_id text, response json, now_ms bigint) ->
 * boolean: mark resolved, stamp resolvedAt and set the response (SQL NULL
 * clears it). No status check; false for an unknown id.
 */
Datum
interrupt_resolve(PG_FUNCTION_ARGS)
{
	char	   *id = SpCheckIdArg(fcinfo, 0, "interrupt_id", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	int64		now = SpNowMs(fcinfo, 2);
	SpArgs		args;
	int			n;

	SpArgsInit(&args);
	SpArgText(&args, id);
	SpArgInt64(&args, now);
	if (PG_ARGISNULL(1))
		SpArgNull(&args);
	else
	{
		text	   *response = PG_GETARG_TEXT_PP(1);

		/* stored as sent, so never walked: refuse what json_in would refuse */
		SpJsonCheckNesting(response);
		SpArgDatum(&args, PointerGetDatum(response));
	}

	SPI_connect();
	n = SpExec(&interrupt_resolve_stmt, &args, false, 0);
	SPI_finish();
	PG_RETURN_BOOL(n > 0);
}

/*
 * interrupt_cancel(interrupt_id text, now_ms bigint) -> boolean: mark
 * cancelled and stamp resolvedAt, keeping any response. No status check;
 * false for an unknown id.
 */
Datum
interrupt_cancel(PG_FUNCTION_ARGS)
{
	char	   *id = SpCheckIdArg(fcinfo, 0, "interrupt_id", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	int64		now = SpNowMs(fcinfo, 1);
	SpArgs		args;
	int			n;

	SpArgsInit(&args);
	SpArgText(&args, id);
	SpArgInt64(&args, now);

	SPI_connect();
	n = SpExec(&interrupt_cancel_stmt, &args, false, 0);
	SPI_finish();
	PG_RETURN_BOOL(n > 0);
}

/*
 * interrupt_commit_batch(entries json, now_ms bigint): resolve or cancel
 * every entry with one shared resolvedAt, all or nothing. The referenced rows
 * are locked in sorted id order, then the entries are checked in array order
 * (duplicate, missing, non-pending) before anything is written.
 */
Datum
interrupt_commit_batch(PG_FUNCTION_ARGS)
{
	SpJson	   *entries = SpCheckJsonKindArg(fcinfo, 0, "entries", SPJ_ARRAY, "a JSON array", SP_CHECK_PLAIN);
	int64		now = SpNowMs(fcinfo, 1);
	int			n = entries->count;
	InterruptBatchEntry *batch;
	InterruptLockedRow *rows;
	Datum	   *ids;
	int			nrows;
	SpArgs		args;

	batch = InterruptParseBatch(entries);
	if (n == 0)
		PG_RETURN_VOID();

	ids = palloc(sizeof(Datum) * n);
	for (int i = 0; i < n; i++)
		ids[i] = CStringGetTextDatum(batch[i].id);

	SPI_connect();
	SpArgsInit(&args);
	SpArgDatum(&args, PointerGetDatum(construct_array(ids, n, TEXTOID, -1, false,
													  TYPALIGN_INT)));
	nrows = SpExec(&interrupt_lock_batch, &args, false, 0);
	rows = palloc(sizeof(InterruptLockedRow) * Max(nrows, 1));
	for (int i = 0; i < nrows; i++)
	{
		rows[i].id = SpGetText(i, SpColumn("interrupt_id"));
		rows[i].status = SpGetText(i, SpColumn("status"));
	}
	qsort(rows, nrows, sizeof(InterruptLockedRow), InterruptCompareRows);

	/* validate in array order; the first failing entry decides the error */
	for (int i = 0; i < n; i++)
	{
		InterruptLockedRow key = {batch[i].id, NULL};
		InterruptLockedRow *row;

		if (batch[i].duplicate)
			sp_error(SP_INTERRUPT_BATCH_DUPLICATE_ID,
					 ("interrupt batch contains a duplicate id"),
					 "Interrupt batch contains duplicate id: %s.", batch[i].id);
		row = bsearch(&key, rows, nrows, sizeof(InterruptLockedRow), InterruptCompareRows);
		if (row == NULL)
			sp_error(SP_INTERRUPT_BATCH_MISSING_ID,
					 ("interrupt batch references a missing id"),
					 "Interrupt batch references missing id: %s.", batch[i].id);
		if (strcmp(row->status, SP_INTERRUPT_PENDING) != 0)
			sp_error(SP_INTERRUPT_BATCH_NON_PENDING_ID,
					 ("interrupt batch references a non-pending id"),
					 "Interrupt batch references non-pending id: %s.", batch[i].id);
	}

	/* apply: one shared resolvedAt */
	for (int i = 0; i < n; i++)
	{
		SpArgsInit(&args);
		SpArgText(&args, batch[i].id);
		SpArgInt64(&args, now);
		if (batch[i].resolved)
		{
			if (batch[i].response == NULL)
				SpArgNull(&args);
			else
				SpArgTextLen(&args, batch[i].response->raw, batch[i].response->rawlen);
			SpExec(&interrupt_resolve_stmt, &args, false, 0);
		}
		else
			SpExec(&interrupt_cancel_stmt, &args, false, 0);
	}
	SPI_finish();
	PG_RETURN_VOID();
}

/* interrupt_get(interrupt_id text) -> json: the record, or NULL. */
Datum
interrupt_get(PG_FUNCTION_ARGS)
{
	return SpLookupJson(fcinfo, &interrupt_select, "interrupt_id", InterruptAppendRecord, true);
}

/* interrupt_list(thread_id text) -> json: every interrupt of the thread, in request order. */
Datum
interrupt_list(PG_FUNCTION_ARGS)
{
	return SpLookupJson(fcinfo, &interrupt_by_thread, "thread_id", InterruptAppendRecord, false);
}

/* interrupt_list_pending(thread_id text) -> json: the thread's pending interrupts, in request order. */
Datum
interrupt_list_pending(PG_FUNCTION_ARGS)
{
	return SpLookupJson(fcinfo, &interrupt_pending_by_thread, "thread_id", InterruptAppendRecord, false);
}

/* interrupt_list_by_run(run_id text) -> json: every interrupt of the run, in request order. */
Datum
interrupt_list_by_run(PG_FUNCTION_ARGS)
{
	return SpLookupJson(fcinfo, &interrupt_by_run, "run_id", InterruptAppendRecord, false);
}

/* interrupt_list_pending_by_run(run_id text) -> json: the run's pending interrupts, in request order. */
Datum
interrupt_list_pending_by_run(PG_FUNCTION_ARGS)
{
	return SpLookupJson(fcinfo, &interrupt_pending_by_run, "run_id", InterruptAppendRecord, false);
}
