/*
 * instances.c
 *
 * The sandbox instance store (checkpoints.md section 1): compound key ->
 * provider sandbox to resume. upsert is a full replace, so an optional field
 * that is absent or JSON null clears the stored value. Locking: per-row
 * atomicity of INSERT ... ON CONFLICT only; callers serialise read-modify-write
 * cycles with their own sandbox:<key> lock.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "sandbox_persist.h"

PG_FUNCTION_INFO_V1(instance_get);
PG_FUNCTION_INFO_V1(instance_upsert);
PG_FUNCTION_INFO_V1(instance_delete);

static SpQuery instance_select = {
	"SELECT instance_key, provider, provider_sandbox_id, latest_snapshot_id, thread_id,"
	" latest_run_id, updated_at FROM sandbox_persist.instances WHERE instance_key = $1",
	1, {TEXTOID}
};

static SpQuery instance_upsert_stmt = {
	"INSERT INTO sandbox_persist.instances AS i (instance_key, provider, provider_sandbox_id,"
	" latest_snapshot_id, thread_id, latest_run_id, updated_at)"
	" VALUES ($1, $2, $3, $4, $5, $6, $7)"
	" ON CONFLICT (instance_key) DO UPDATE SET provider = EXCLUDED.provider,"
	" provider_sandbox_id = EXCLUDED.provider_sandbox_id,"
	" latest_snapshot_id = EXCLUDED.latest_snapshot_id, thread_id = EXCLUDED.thread_id,"
	" latest_run_id = EXCLUDED.latest_run_id, updated_at = EXCLUDED.updated_at",
	7, {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT8OID}
};

static SpQuery instance_delete_stmt = {
	"DELETE FROM sandbox_persist.instances WHERE instance_key = $1",
	1, {TEXTOID}
};

/* instance_get(instance_key text) -> json: the record, or NULL when missing. */
Datum
instance_get(PG_FUNCTION_ARGS)
{
	char	   *key = CheckIdArg(fcinfo, 0, "instance_key", SP_ID_MAX_BYTES);
	MemoryContext outer = CurrentMemoryContext;
	StringInfoData buf;
	SpArgs		args;
	bool		found;

	SPI_connect();
	SpArgsInit(&args);
	SpArgText(&args, key);
	found = SpExec(&instance_select, &args, true, 1) == 1;
	if (found)
	{
		MemoryContext spi = MemoryContextSwitchTo(outer);
		bool		first = true;
		char	   *snapshot = SpGetText(0, 4);
		char	   *run = SpGetText(0, 6);
		int64		updated = 0;

		initStringInfo(&buf);
		appendStringInfoChar(&buf, '{');
		SpAppendKey(&buf, &first, "key");
		SpAppendString(&buf, SpGetText(0, 1));
		SpAppendKey(&buf, &first, "provider");
		SpAppendString(&buf, SpGetText(0, 2));
		SpAppendKey(&buf, &first, "providerSandboxId");
		SpAppendString(&buf, SpGetText(0, 3));
		if (snapshot != NULL)
		{
			SpAppendKey(&buf, &first, "latestSnapshotId");
			SpAppendString(&buf, snapshot);
		}
		SpAppendKey(&buf, &first, "threadId");
		SpAppendString(&buf, SpGetText(0, 5));
		if (run != NULL)
		{
			SpAppendKey(&buf, &first, "latestRunId");
			SpAppendString(&buf, run);
		}
		SpGetInt64(0, 7, &updated);
		SpAppendKey(&buf, &first, "updatedAt");
		SpAppendInt64(&buf, updated);
		appendStringInfoChar(&buf, '}');
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();
	if (!found)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(SpJsonResult(&buf));
}

/* instance_upsert(record json): insert or fully replace the row for record.key. */
Datum
instance_upsert(PG_FUNCTION_ARGS)
{
	static const char *const names[] = {
		"key", "provider", "providerSandboxId", "latestSnapshotId", "threadId",
		"latestRunId", "updatedAt"
	};
	SpJson	   *rec = CheckJsonObjectArg(fcinfo, 0, "record");
	SpJson	   *f[lengthof(names)];
	SpArgs		args;

	SpJsonMembers(rec, names, lengthof(names), f, "a sandbox instance record", false,
				  ERRCODE_INVALID_PARAMETER_VALUE, -1);
	SpArgsInit(&args);
	SpArgText(&args, CheckIdJson(f[0], "key", SP_ID_MAX_BYTES));
	SpArgText(&args, CheckStringJson(f[1], "provider"));
	SpArgText(&args, CheckStringJson(f[2], "providerSandboxId"));
	SpArgText(&args, CheckOptStringJson(f[3], "latestSnapshotId"));
	SpArgText(&args, CheckIdJson(f[4], "threadId", SP_ID_MAX_BYTES));
	SpArgText(&args, CheckOptStringJson(f[5], "latestRunId"));
	SpArgInt64(&args, CheckIntJson(f[6], "updatedAt", -SP_MAX_SAFE_INTEGER));

	SPI_connect();
	SpExec(&instance_upsert_stmt, &args, false, 0);
	SPI_finish();
	PG_RETURN_VOID();
}

/* instance_delete(instance_key text) -> boolean: true when a row was removed. */
Datum
instance_delete(PG_FUNCTION_ARGS)
{
	char	   *key = CheckIdArg(fcinfo, 0, "instance_key", SP_ID_MAX_BYTES);
	SpArgs		args;
	int			n;

	SPI_connect();
	SpArgsInit(&args);
	SpArgText(&args, key);
	n = SpExec(&instance_delete_stmt, &args, false, 0);
	SPI_finish();
	PG_RETURN_BOOL(n > 0);
}
