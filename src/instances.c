/*
 * instances.c
 *
 * The sandbox instance store (docs/contract/instances.md): compound key ->
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
PG_FUNCTION_INFO_V1(instance_gc_candidates);

/* max_rows of instance_gc_candidates when left out or NULL: the SQL signature's DEFAULT. */
#define INSTANCE_GC_DEFAULT_ROWS 100

/* The columns instance_fields reads (by name: their order is free). */
#define INSTANCE_COLUMNS \
	"i.instance_key, i.provider, i.provider_sandbox_id, i.latest_snapshot_id, i.thread_id," \
	" i.latest_run_id, i.updated_at"

static SpQuery instance_select = {
	"SELECT " INSTANCE_COLUMNS " FROM sandbox_persist.instances i WHERE i.instance_key = $1",
	1, {TEXTOID}
};

/*
 * Rows past the retention that no non-terminal run references (by
 * sandboxKey or as latestRunId) and whose sandbox:<key> lock is not held.
 */
static SpQuery instance_candidates = {
	"SELECT " INSTANCE_COLUMNS " FROM sandbox_persist.instances i"
	" WHERE i.updated_at < $1"
	"   AND NOT EXISTS (SELECT 1 FROM sandbox_persist.runs r"
	"                   WHERE r.status IN " SP_SQL_RUN_UNFINISHED
	"                     AND (r.sandbox_key = i.instance_key OR r.run_id = i.latest_run_id))"
	"   AND NOT EXISTS (SELECT 1 FROM sandbox_persist.locks l"
	"                   WHERE l.lock_key = " SP_SQL_Q(SP_LOCK_SANDBOX_PREFIX) " || i.instance_key"
	"                     AND l.expires_at > $2)"
	" ORDER BY i.updated_at, i.instance_key LIMIT $3",
	3, {INT8OID, INT8OID, INT8OID}
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

/*
 * The SandboxInstanceRecord: only the seven record keys, read by column name.
 * upsert takes the same keys, so the field names also index its input.
 */
typedef enum InstanceField
{
	INSTANCE_KEY,
	INSTANCE_PROVIDER,
	INSTANCE_PROVIDER_SANDBOX_ID,
	INSTANCE_LATEST_SNAPSHOT_ID,
	INSTANCE_THREAD_ID,
	INSTANCE_LATEST_RUN_ID,
	INSTANCE_UPDATED_AT,
	INSTANCE_NFIELDS
} InstanceField;

static const SpField instance_fields[INSTANCE_NFIELDS] = {
	[INSTANCE_KEY] = {"key", "instance_key", SPF_STRING},
	[INSTANCE_PROVIDER] = {"provider", "provider", SPF_STRING},
	[INSTANCE_PROVIDER_SANDBOX_ID] = {"providerSandboxId", "provider_sandbox_id", SPF_STRING},
	[INSTANCE_LATEST_SNAPSHOT_ID] = {"latestSnapshotId", "latest_snapshot_id", SPF_STRING},
	[INSTANCE_THREAD_ID] = {"threadId", "thread_id", SPF_STRING},
	[INSTANCE_LATEST_RUN_ID] = {"latestRunId", "latest_run_id", SPF_STRING},
	[INSTANCE_UPDATED_AT] = {"updatedAt", "updated_at", SPF_INT64}
};
static const SpRecord instance_record = SP_RECORD(instance_fields);

/* Append the SandboxInstanceRecord of SPI row `row`. */
static void
InstanceAppendRecord(StringInfo buf, int row)
{
	SpAppendRecord(buf, row, &instance_record);
}

/* instance_get(instance_key text) -> json: the record, or NULL when missing. */
Datum
instance_get(PG_FUNCTION_ARGS)
{
	return SpLookupJson(fcinfo, &instance_select, "instance_key", InstanceAppendRecord, true);
}

/* instance_upsert(record json): insert or fully replace the row for record.key. */
Datum
instance_upsert(PG_FUNCTION_ARGS)
{
	SpJson	   *rec = SpCheckJsonKindArg(fcinfo, 0, "record", SPJ_OBJECT, "a JSON object", SP_CHECK_PLAIN);
	SpJson	   *f[INSTANCE_NFIELDS];
	SpArgs		args;

	SpCheckRecordMembers(rec, &instance_record, f, "a sandbox instance record");
	SpArgsInit(&args);
	SpArgText(&args, SpCheckIdJson(f[INSTANCE_KEY], "key", SP_ID_MAX_BYTES, SP_CHECK_PLAIN));
	SpArgText(&args, SpCheckStringJson(f[INSTANCE_PROVIDER], "provider", true, -1, SP_CHECK_PLAIN));
	SpArgText(&args, SpCheckStringJson(f[INSTANCE_PROVIDER_SANDBOX_ID], "providerSandboxId", true, -1, SP_CHECK_PLAIN));
	SpArgText(&args, SpCheckStringJson(f[INSTANCE_LATEST_SNAPSHOT_ID], "latestSnapshotId", false, -1, SP_CHECK_PLAIN));
	SpArgText(&args, SpCheckIdJson(f[INSTANCE_THREAD_ID], "threadId", SP_ID_MAX_BYTES, SP_CHECK_PLAIN));
	SpArgText(&args, SpCheckStringJson(f[INSTANCE_LATEST_RUN_ID], "latestRunId", false, SP_ID_MAX_BYTES, SP_CHECK_PLAIN));
	SpArgInt64(&args, SpCheckIntJson(f[INSTANCE_UPDATED_AT], "updatedAt", -SP_MAX_SAFE_INTEGER));

	SPI_connect();
	SpExec(&instance_upsert_stmt, &args, false, 0);
	SPI_finish();
	PG_RETURN_VOID();
}

/* instance_delete(instance_key text) -> boolean: true when a row was removed. */
Datum
instance_delete(PG_FUNCTION_ARGS)
{
	char	   *key = SpCheckIdArg(fcinfo, 0, "instance_key", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	SpArgs		args;
	int			n;

	SPI_connect();
	SpArgsInit(&args);
	SpArgText(&args, key);
	n = SpExec(&instance_delete_stmt, &args, false, 0);
	SPI_finish();
	PG_RETURN_BOOL(n > 0);
}

/*
 * instance_gc_candidates(retention_ms bigint, max_rows integer, now_ms bigint)
 * -> json: instance records the application may destroy and then delete.
 * Deletes nothing: a row is the only pointer to a live sandbox.
 */
Datum
instance_gc_candidates(PG_FUNCTION_ARGS)
{
	int64		now = SpNowMs(fcinfo, 2);
	SpArgs		args;
	int64		retention;
	int64		max_rows;

	SpCheckArgNotNull(fcinfo, 0, "retention_ms", NULL, SP_CHECK_PLAIN);
	retention = PG_GETARG_INT64(0);
	if (retention < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("retention_ms must not be negative"),
				 errdetail("A value of " INT64_FORMAT " was given.", retention)));
	max_rows = SpCheckRowLimitArg(fcinfo, 1, "max_rows", INSTANCE_GC_DEFAULT_ROWS);
	SpArgsInit(&args);
	SpArgInt64(&args, SpTimeBefore(now, retention));
	SpArgInt64(&args, now);
	SpArgInt64(&args, max_rows);
	return SpReadJson(fcinfo, &instance_candidates, &args, InstanceAppendRecord, false);
}
