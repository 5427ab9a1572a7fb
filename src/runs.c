/*
 * runs.c
 *
 * The run store (docs/contract/runs.md): createOrResume that never
 * resurrects, key-presence-aware patches over every optional field including
 * the four durable ones, and the thread and reclaim queries.
 *
 * Locking: createOrResume is insert-if-absent, then a fresh read, so two
 * concurrent callers both return the winner's row. run_update first tries one
 * UPDATE whose WHERE clause carries the driverEpoch check (the row lock it
 * takes makes a concurrent writer re-check against the committed epoch);
 * when that changes nothing it locks the row FOR UPDATE, so the check and the
 * write see the same epoch, and tells a missing run from a refused epoch.
 *
 * Since 0.3.0 runs.status_changed_at (the clock of the last status change)
 * keys the partial indexes that changed_at keyed before, so a patch that
 * leaves status, detachedSince and sandboxKey alone touches no indexed column
 * and can be a HOT update. The same library serves a database still at 0.2.0
 * (no such column): RunsHaveStatusClock() picks the statement for the schema
 * at hand.
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "sandbox_persist.h"

PG_FUNCTION_INFO_V1(run_create_or_resume);
PG_FUNCTION_INFO_V1(run_update);
PG_FUNCTION_INFO_V1(run_get);
PG_FUNCTION_INFO_V1(run_find_active_run);
PG_FUNCTION_INFO_V1(run_list_by_thread);
PG_FUNCTION_INFO_V1(run_list_reclaimable);

/* The columns run_fields reads (by name: their order is free). */
#define RUN_COLUMNS \
	"run_id, thread_id, status, started_at, finished_at, error::text, usage::text," \
	" sandbox_key, detached_since, cancel_requested, driver_epoch"

static SpQuery run_insert = {
	"INSERT INTO sandbox_persist.runs (run_id, thread_id, status, started_at, changed_at)"
	" VALUES ($1, $2, $3, $4, $5) ON CONFLICT (run_id) DO NOTHING",
	5, {TEXTOID, TEXTOID, TEXTOID, INT8OID, INT8OID}
};

/* The same, for a 0.3.0 schema: creation is the first status change. */
static SpQuery run_insert_status_clock = {
	"INSERT INTO sandbox_persist.runs"
	" (run_id, thread_id, status, started_at, changed_at, status_changed_at)"
	" VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT (run_id) DO NOTHING",
	5, {TEXTOID, TEXTOID, TEXTOID, INT8OID, INT8OID}
};

static SpQuery run_select = {
	"SELECT " RUN_COLUMNS " FROM sandbox_persist.runs WHERE run_id = $1",
	1, {TEXTOID}
};

static SpQuery run_lock = {
	"SELECT driver_epoch FROM sandbox_persist.runs WHERE run_id = $1 FOR UPDATE",
	1, {TEXTOID}
};

/*
 * The patch statements, one per set of present fields, built and kept on
 * first use (a handful of sets occur in practice). Field i of the patch is
 * column run_patch_columns[i], parameter $(i + 3); a present field with a
 * NULL value clears its column. $1 is the run id, $11 the clock; $2 (the
 * set, as a bit mask) is not referenced. Only the present columns are
 * assigned, so the executor builds and evaluates nothing for the others, and
 * an indexed column nobody patched is left alone and the update can be HOT.
 * A present driverEpoch ($10) applies only above the stored one; a patch
 * the statement refuses (or a missing run) is sorted out under the row lock
 * (run_update).
 */
static const char *const run_patch_columns[] = {
	"status", "finished_at", "error", "usage", "sandbox_key", "detached_since",
	"cancel_requested", "driver_epoch"
};

#define RUN_PATCH_FIELDS lengthof(run_patch_columns)
#define RUN_PATCH_EPOCH_BIT (1 << 7)

/*
 * The kept patch statement for `mask`; status_clock: the 0.3.0 schema, where
 * a status that changes also sets status_changed_at.
 */
static SpQuery *
RunPatchQuery(int32 mask, bool status_clock)
{
	static SpQuery *kept[2][1 << RUN_PATCH_FIELDS];
	static const Oid argtypes[] = {
		TEXTOID, INT4OID, TEXTOID, INT8OID, JSONOID, JSONOID, TEXTOID, INT8OID,
		BOOLOID, INT8OID, INT8OID
	};
	SpQuery    *q = kept[status_clock][mask];

	if (q == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
		StringInfoData sql;

		initStringInfo(&sql);
		appendStringInfoString(&sql, "UPDATE sandbox_persist.runs SET changed_at = $11");
		for (int i = 0; i < RUN_PATCH_FIELDS; i++)
			if (mask & (1 << i))
				appendStringInfo(&sql, ", %s = $%d", run_patch_columns[i], i + 3);
		if (status_clock && (mask & 1))
			appendStringInfoString(&sql, ", status_changed_at = CASE WHEN status IS DISTINCT FROM $3"
								   " THEN $11 ELSE status_changed_at END");
		appendStringInfoString(&sql, " WHERE run_id = $1");
		if (mask & RUN_PATCH_EPOCH_BIT)
			appendStringInfoString(&sql, " AND ($10 IS NULL OR driver_epoch IS NULL OR driver_epoch < $10)");
		q = palloc0(sizeof(SpQuery));
		q->sql = sql.data;
		q->nargs = lengthof(argtypes);
		memcpy(q->argtypes, argtypes, sizeof(argtypes));
		MemoryContextSwitchTo(old);
		kept[status_clock][mask] = q;
	}
	return q;
}

static SpQuery run_active = {
	"SELECT " RUN_COLUMNS " FROM sandbox_persist.runs"
	" WHERE thread_id = $1 AND status = " SP_SQL_RUN_RUNNING
	" ORDER BY started_at DESC, seq ASC LIMIT 1",
	1, {TEXTOID}
};

static SpQuery run_by_thread = {
	"SELECT " RUN_COLUMNS " FROM sandbox_persist.runs"
	" WHERE thread_id = $1 ORDER BY started_at, seq",
	1, {TEXTOID}
};

static SpQuery run_reclaimable = {
	"SELECT " RUN_COLUMNS " FROM sandbox_persist.runs"
	" WHERE status = " SP_SQL_RUN_RUNNING " AND detached_since IS NOT NULL AND detached_since <= $1"
	" ORDER BY detached_since, seq LIMIT $2",
	2, {INT8OID, INT8OID}
};

/* The RunRecord, read by column name; unset optionals are omitted. */
static const SpField run_fields[] = {
	{"runId", "run_id", SPF_STRING},
	{"threadId", "thread_id", SPF_STRING},
	{"status", "status", SPF_STRING},
	{"startedAt", "started_at", SPF_INT64},
	{"finishedAt", "finished_at", SPF_INT64},
	{"error", "error", SPF_JSON},
	{"usage", "usage", SPF_JSON},
	{"sandboxKey", "sandbox_key", SPF_STRING},
	{"detachedSince", "detached_since", SPF_INT64},
	{"cancelRequested", "cancel_requested", SPF_BOOL},
	{"driverEpoch", "driver_epoch", SPF_INT64}
};
static const SpRecord run_record = SP_RECORD(run_fields);

/* Append the RunRecord of SPI result row `row`. */
static void
RunAppendRecord(StringInfo buf, int row)
{
	SpAppendRecord(buf, row, &run_record);
}

/*
 * Whether sandbox_persist.runs has status_changed_at (0.3.0 and later): -1
 * unknown, else the answer, forgotten on any relcache invalidation of that
 * table (ALTER EXTENSION ... UPDATE adds the column; DROP EXTENSION drops
 * the table) or of every relation, so a database updated while this backend
 * runs is seen at its next call.
 */
static int	runs_status_clock = -1;
static Oid	runs_relid = InvalidOid;

/* Relcache invalidation callback: forget the answer when runs may have changed. */
static void
RunsForgetStatusClock(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == runs_relid)
		runs_status_clock = -1;
}

/* Whether the runs table has the 0.3.0 status clock (cached, see above). */
bool
RunsHaveStatusClock(void)
{
	static bool registered = false;

	if (runs_status_clock < 0)
	{
		Oid			nsp = get_namespace_oid("sandbox_persist", true);

		if (!registered)
		{
			CacheRegisterRelcacheCallback(RunsForgetStatusClock, (Datum) 0);
			registered = true;
		}
		runs_relid = OidIsValid(nsp) ? get_relname_relid("runs", nsp) : InvalidOid;
		runs_status_clock = OidIsValid(runs_relid) &&
			get_attnum(runs_relid, "status_changed_at") != InvalidAttrNumber;
	}
	return runs_status_clock == 1;
}

/*
 * run_create_or_resume(input json) -> json: insert {runId, threadId, startedAt,
 * status ?? 'running'} unless the run exists; always return the stored record,
 * never the input.
 */
Datum
run_create_or_resume(PG_FUNCTION_ARGS)
{
	static const char *const names[] = {"runId", "threadId", "startedAt", "status"};
	SpJson	   *in = SpCheckJsonKindArg(fcinfo, 0, "input", SPJ_OBJECT, "a JSON object", SP_CHECK_PLAIN);
	SpJson	   *f[lengthof(names)];
	char	   *run_id;
	SpArgs		args;

	SpJsonMembers(in, names, lengthof(names), f, "a run createOrResume input", false,
				  ERRCODE_INVALID_PARAMETER_VALUE, -1);
	run_id = SpCheckIdJson(f[0], "runId", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	SpArgsInit(&args);
	SpArgText(&args, run_id);
	SpArgText(&args, SpCheckIdJson(f[1], "threadId", SP_ID_MAX_BYTES, SP_CHECK_PLAIN));
	SpArgText(&args, f[3] == NULL ? SP_RUN_RUNNING : SpCheckRunStatusJson(f[3], "status"));
	SpArgInt64(&args, SpCheckIntJson(f[2], "startedAt", -SP_MAX_SAFE_INTEGER));
	SpArgInt64(&args, SpNowMs(fcinfo, -1));

	return SpCreateOrResume(fcinfo, RunsHaveStatusClock() ? &run_insert_status_clock : &run_insert,
							&args, &run_select, run_id, RunAppendRecord);
}

/*
 * run_update(run_id text, patch json) -> boolean: apply a key-presence-aware
 * patch; false (and nothing written) when the run does not exist.
 */
Datum
run_update(PG_FUNCTION_ARGS)
{
	static const char *const names[] = {
		"status", "finishedAt", "error", "usage", "sandboxKey", "detachedSince",
		"cancelRequested", "driverEpoch"
	};
	char	   *run_id = SpCheckIdArg(fcinfo, 0, "run_id", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	SpJson	   *patch = SpCheckJsonKindArg(fcinfo, 1, "patch", SPJ_OBJECT, "a JSON object", SP_CHECK_PLAIN);
	SpJson	   *f[lengthof(names)];
	int32		mask = 0;
	bool		has_epoch = false;
	int64		new_epoch = 0;
	int64		old_epoch;
	SpArgs		args;
	SpQuery    *patch_q;
	bool		exists;

	SpJsonMembers(patch, names, lengthof(names), f, "a run patch", false,
				  ERRCODE_INVALID_PARAMETER_VALUE, -1);
	for (int i = 0; i < lengthof(names); i++)
		if (f[i] != NULL)
			mask |= 1 << i;

	SpArgsInit(&args);
	SpArgText(&args, run_id);
	SpArgDatum(&args, Int32GetDatum(mask));
	PatchArgStatus(&args, f[0], "run");
	PatchArgInt(&args, f[1], "finishedAt", -SP_MAX_SAFE_INTEGER);
	/* error and usage: shape-checked, stored verbatim, replaced whole */
	PatchArgJson(&args, f[2], "error", SpCheckRunErrorJson);
	PatchArgJson(&args, f[3], "usage", SpCheckObjectJson);
	/* an instance key, so the instance key limit */
	SpArgText(&args, SpCheckStringJson(f[4], "sandboxKey", false, SP_ID_MAX_BYTES, SP_CHECK_PLAIN));
	PatchArgInt(&args, f[5], "detachedSince", -SP_MAX_SAFE_INTEGER);
	if (f[6] == NULL || f[6]->kind == SPJ_NULL)
		SpArgNull(&args);
	else if (f[6]->kind != SPJ_BOOL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cancelRequested must be a boolean"),
				 errdetail("A JSON %s was given.", SpJsonKindName(f[6]->kind))));
	else
		SpArgBool(&args, f[6]->boolval);
	if (f[7] == NULL || f[7]->kind == SPJ_NULL)
		SpArgNull(&args);
	else
	{
		has_epoch = true;
		new_epoch = SpCheckIntJson(f[7], "driverEpoch", 0);
		SpArgInt64(&args, new_epoch);
	}
	SpArgInt64(&args, SpNowMs(fcinfo, -1));

	patch_q = mask == 0 ? NULL : RunPatchQuery(mask, RunsHaveStatusClock());

	SPI_connect();
	/* the common case, one statement: the run exists and the epoch (if any) rises */
	if (mask != 0 && SpExec(patch_q, &args, false, 0) == 1)
	{
		SPI_finish();
		PG_RETURN_BOOL(true);
	}
	/* nothing applied: under the row lock, a missing run or a refused epoch? */
	{
		SpArgs		key;

		SpArgsInit(&key);
		SpArgText(&key, run_id);
		exists = SpExec(&run_lock, &key, false, 1) == 1;
	}
	if (exists && has_epoch && SpGetInt64(0, SpColumn("driver_epoch"), &old_epoch) && new_epoch <= old_epoch)
		sp_error(SP_RUN_EPOCH_NOT_INCREASING,
				 ("driverEpoch must increase"),
				 "Run \"%s\" is at driverEpoch " INT64_FORMAT "; " INT64_FORMAT " is not greater.",
				 run_id, old_epoch, new_epoch);
	/* a concurrent write let the check pass after all: apply, under the lock */
	if (exists && mask != 0)
		SpExec(patch_q, &args, false, 0);
	SPI_finish();
	PG_RETURN_BOOL(exists);
}

/* run_get(run_id text) -> json: the record, or NULL. */
Datum
run_get(PG_FUNCTION_ARGS)
{
	return SpLookupJson(fcinfo, &run_select, "run_id", RunAppendRecord, true);
}

/* run_find_active_run(thread_id text) -> json: newest running run, earliest inserted on ties. */
Datum
run_find_active_run(PG_FUNCTION_ARGS)
{
	return SpLookupJson(fcinfo, &run_active, "thread_id", RunAppendRecord, true);
}

/* run_list_by_thread(thread_id text) -> json: every run, startedAt ascending, insertion order on ties. */
Datum
run_list_by_thread(PG_FUNCTION_ARGS)
{
	return SpLookupJson(fcinfo, &run_by_thread, "thread_id", RunAppendRecord, false);
}

/*
 * run_list_reclaimable(caller_now_ms, ttl_ms [, max_rows]) -> json: running
 * runs detached at or before caller_now_ms - ttl_ms, oldest detachment first,
 * all of them or the first max_rows (NULL: all). The caller's clock is the
 * contract's argument, so it is never gated.
 */
Datum
run_list_reclaimable(PG_FUNCTION_ARGS)
{
	int64		cutoff;
	SpArgs		args;

	SpCheckArgNotNull(fcinfo, 0, "caller_now_ms", NULL, SP_CHECK_PLAIN);
	SpCheckArgNotNull(fcinfo, 1, "ttl_ms", NULL, SP_CHECK_PLAIN);
	if (pg_sub_s64_overflow(PG_GETARG_INT64(0), PG_GETARG_INT64(1), &cutoff))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("caller_now_ms - ttl_ms is out of range"),
				 errdetail("The cutoff " INT64_FORMAT " - " INT64_FORMAT " overflows bigint.",
						   PG_GETARG_INT64(0), PG_GETARG_INT64(1))));
	SpArgsInit(&args);
	SpArgInt64(&args, cutoff);
	if (PG_NARGS() > 2 && !PG_ARGISNULL(2))
		SpArgInt64(&args, SpCheckRowLimitArg(fcinfo, 2, "max_rows", 0));
	else
		SpArgNull(&args);
	return SpReadJson(fcinfo, &run_reclaimable, &args, RunAppendRecord, false);
}
