/*
 * generation_runs.c
 *
 * The generation run store (docs/contract/chat-stores.md §3): createOrResume
 * that ignores every input field once the run exists, key-presence-aware
 * patches in which `result: null` is a stored value (clearing goes through
 * the separate `clear` list), get, and findLatestForThread over every status.
 *
 * Locking: createOrResume is insert-if-absent, then a fresh read, so two
 * concurrent callers both return the winner's row. update is one UPDATE
 * statement (per-row atomicity; last writer wins, as the contract has no
 * compare-and-swap).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "sandbox_persist.h"

PG_FUNCTION_INFO_V1(generation_run_create_or_resume);
PG_FUNCTION_INFO_V1(generation_run_update);
PG_FUNCTION_INFO_V1(generation_run_get);
PG_FUNCTION_INFO_V1(generation_run_find_latest_for_thread);

/* The columns gen_run_fields reads (by name: their order is free). */
#define GENERATION_RUN_COLUMNS \
	"run_id, thread_id, activity, provider, model, status, started_at, finished_at," \
	" error::text, result::text, artifacts::text, usage::text"

/* The patch keys, in the bit order of generation_run_patch. */
static const char *const gen_run_patch_keys[] = {
	"status", "finishedAt", "error", "result", "artifacts", "usage"
};

static SpQuery generation_run_insert = {
	"INSERT INTO sandbox_persist.generation_runs (run_id, thread_id, activity, provider,"
	" model, status, started_at) VALUES ($1, $2, $3, $4, $5, $6, $7)"
	" ON CONFLICT (run_id) DO NOTHING",
	7, {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT8OID}
};

static SpQuery generation_run_select = {
	"SELECT " GENERATION_RUN_COLUMNS " FROM sandbox_persist.generation_runs WHERE run_id = $1",
	1, {TEXTOID}
};

static SpQuery generation_run_exists = {
	"SELECT 1 FROM sandbox_persist.generation_runs WHERE run_id = $1",
	1, {TEXTOID}
};

/*
 * One fixed statement serves every patch: bit i of $2 says whether field i
 * is written; a written field with a NULL value clears the column.
 */
static SpQuery generation_run_patch = {
	"UPDATE sandbox_persist.generation_runs SET"
	" status = CASE WHEN $2 & 1 <> 0 THEN $3 ELSE status END,"
	" finished_at = CASE WHEN $2 & 2 <> 0 THEN $4 ELSE finished_at END,"
	" error = CASE WHEN $2 & 4 <> 0 THEN $5 ELSE error END,"
	" result = CASE WHEN $2 & 8 <> 0 THEN $6 ELSE result END,"
	" artifacts = CASE WHEN $2 & 16 <> 0 THEN $7 ELSE artifacts END,"
	" usage = CASE WHEN $2 & 32 <> 0 THEN $8 ELSE usage END"
	" WHERE run_id = $1",
	8, {TEXTOID, INT4OID, TEXTOID, INT8OID, JSONOID, JSONOID, JSONOID, JSONOID}
};

static SpQuery generation_run_latest = {
	"SELECT " GENERATION_RUN_COLUMNS " FROM sandbox_persist.generation_runs"
	" WHERE thread_id = $1 ORDER BY started_at DESC, seq ASC LIMIT 1",
	1, {TEXTOID}
};

/*
 * The GenerationRunRecord, read by column name; unset optionals are omitted.
 * Stored JSON is spliced verbatim; a stored JSON null result reads back as null.
 */
static const SpField gen_run_fields[] = {
	{"runId", "run_id", SPF_STRING},
	{"threadId", "thread_id", SPF_STRING},
	{"activity", "activity", SPF_STRING},
	{"provider", "provider", SPF_STRING},
	{"model", "model", SPF_STRING},
	{"status", "status", SPF_STRING},
	{"startedAt", "started_at", SPF_INT64},
	{"finishedAt", "finished_at", SPF_INT64},
	{"error", "error", SPF_JSON},
	{"result", "result", SPF_JSON},
	{"artifacts", "artifacts", SPF_JSON},
	{"usage", "usage", SPF_JSON}
};
static const SpRecord gen_run_record = SP_RECORD(gen_run_fields);

/* Append the GenerationRunRecord of SPI result row `row`. */
static void
GenRunAppendRecord(StringInfo buf, int row)
{
	SpAppendRecord(buf, row, &gen_run_record);
}

/*
 * Read the optional `clear` argument (a JSON array of patch key names) into a
 * bitmask over gen_run_patch_keys. status cannot be cleared (22004); any
 * other name outside the patch keys is 22023.
 */
static int32
GenRunClearMask(FunctionCallInfo fcinfo, int argno)
{
	SpJson	   *clear;
	int32		mask = 0;

	if (PG_ARGISNULL(argno))
		return 0;
	clear = SpCheckJsonKindArg(fcinfo, argno, "clear", SPJ_ARRAY, "a JSON array", SP_CHECK_PLAIN);
	for (int i = 0; i < clear->count; i++)
	{
		const SpJson *item = clear->items[i];
		char	   *name;
		int			found = -1;

		if (item->kind != SPJ_STRING)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("clear must list key names as strings"),
					 errdetail("Element %d is a JSON %s.", i, SpJsonKindName(item->kind))));
		name = SpCheckStringJson(item, "clear", true, -1, SP_CHECK_PLAIN);
		for (int j = 0; j < lengthof(gen_run_patch_keys); j++)
			if (strcmp(name, gen_run_patch_keys[j]) == 0)
				found = j;
		if (found == 0)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("status cannot be cleared"),
					 errdetail("A generation run always has a status; leave it out of clear.")));
		if (found < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown key \"%s\" in clear", name),
					 errdetail("The clear list may name finishedAt, error, result, artifacts and usage.")));
		mask |= 1 << found;
	}
	return mask;
}

/*
 * generation_run_create_or_resume(input json) -> json: insert {runId,
 * threadId, activity, provider, model, startedAt, status ?? 'running'} unless
 * the run exists; always return the stored record, never the input.
 */
Datum
generation_run_create_or_resume(PG_FUNCTION_ARGS)
{
	static const char *const names[] = {
		"runId", "threadId", "activity", "provider", "model", "startedAt", "status"
	};
	SpJson	   *in = SpCheckJsonKindArg(fcinfo, 0, "input", SPJ_OBJECT, "a JSON object", SP_CHECK_PLAIN);
	SpJson	   *f[lengthof(names)];
	char	   *run_id;
	SpArgs		args;

	SpJsonMembers(in, names, lengthof(names), f, "a generation run createOrResume input",
				  false, ERRCODE_INVALID_PARAMETER_VALUE, -1);
	run_id = SpCheckIdJson(f[0], "runId", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	SpArgsInit(&args);
	SpArgText(&args, run_id);
	SpArgText(&args, SpCheckIdJson(f[1], "threadId", SP_ID_MAX_BYTES, SP_CHECK_PLAIN));
	SpArgText(&args, SpCheckStringJson(f[2], "activity", true, -1, SP_CHECK_PLAIN));
	SpArgText(&args, SpCheckStringJson(f[3], "provider", true, -1, SP_CHECK_PLAIN));
	SpArgText(&args, SpCheckStringJson(f[4], "model", true, -1, SP_CHECK_PLAIN));
	SpArgText(&args, f[6] == NULL ? SP_RUN_RUNNING : SpCheckRunStatusJson(f[6], "status"));
	SpArgInt64(&args, SpCheckIntJson(f[5], "startedAt", -SP_MAX_SAFE_INTEGER));

	return SpCreateOrResume(fcinfo, &generation_run_insert, &args, &generation_run_select,
							run_id, GenRunAppendRecord);
}

/*
 * generation_run_update(run_id text, patch json, clear json) -> boolean:
 * apply a key-presence-aware patch (result: null is stored as null) and clear
 * the keys named in `clear`; false (and nothing written) for an unknown run.
 */
Datum
generation_run_update(PG_FUNCTION_ARGS)
{
	char	   *run_id = SpCheckIdArg(fcinfo, 0, "run_id", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	SpJson	   *patch = SpCheckJsonKindArg(fcinfo, 1, "patch", SPJ_OBJECT, "a JSON object", SP_CHECK_PLAIN);
	SpJson	   *f[lengthof(gen_run_patch_keys)];
	int32		set_mask = 0;
	int32		clear_mask;
	SpArgs		args;
	int			n;

	SpJsonMembers(patch, gen_run_patch_keys, lengthof(gen_run_patch_keys), f,
				  "a generation run patch", false, ERRCODE_INVALID_PARAMETER_VALUE, -1);
	for (int i = 0; i < lengthof(gen_run_patch_keys); i++)
		if (f[i] != NULL)
			set_mask |= 1 << i;
	clear_mask = GenRunClearMask(fcinfo, 2);
	for (int i = 0; i < lengthof(gen_run_patch_keys); i++)
		if ((set_mask & clear_mask) & (1 << i))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s is both set and cleared", gen_run_patch_keys[i]),
					 errdetail("A key may appear in the patch or in clear, not in both.")));

	SpArgsInit(&args);
	SpArgText(&args, run_id);
	SpArgDatum(&args, Int32GetDatum(set_mask | clear_mask));
	PatchArgStatus(&args, f[0], "generation run");
	PatchArgInt(&args, f[1], "finishedAt", -SP_MAX_SAFE_INTEGER);
	PatchArgJson(&args, f[2], "error", SpCheckRunErrorJson);
	/* result: any JSON, and JSON null is a stored value (clear goes through `clear`) */
	if (f[3] == NULL)
		SpArgNull(&args);
	else
		SpArgTextLen(&args, f[3]->raw, f[3]->rawlen);
	/* artifacts (an opaque array) and usage (never summed): replaced whole */
	PatchArgJson(&args, f[4], "artifacts", SpCheckArrayJson);
	PatchArgJson(&args, f[5], "usage", SpCheckObjectJson);

	SPI_connect();
	if ((set_mask | clear_mask) == 0)
	{
		SpArgs		key;

		SpArgsInit(&key);
		SpArgText(&key, run_id);
		n = SpExec(&generation_run_exists, &key, false, 1);
	}
	else
		n = SpExec(&generation_run_patch, &args, false, 0);
	SPI_finish();
	PG_RETURN_BOOL(n > 0);
}

/* generation_run_get(run_id text) -> json: the record, or NULL. */
Datum
generation_run_get(PG_FUNCTION_ARGS)
{
	return SpLookupJson(fcinfo, &generation_run_select, "run_id", GenRunAppendRecord, true);
}

/*
 * generation_run_find_latest_for_thread(thread_id text) -> json: the run with
 * the greatest startedAt whatever its status, earliest inserted on ties; NULL
 * when the thread has none.
 */
Datum
generation_run_find_latest_for_thread(PG_FUNCTION_ARGS)
{
	return SpLookupJson(fcinfo, &generation_run_latest, "thread_id", GenRunAppendRecord, true);
}
