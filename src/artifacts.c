/*
 * artifacts.c
 *
 * The artifact store (docs/contract/chat-stores.md §4): save as insert or
 * full replace (an absent blobKey or sourceUrl becomes absent, and a re-save
 * may move the record to another run or thread), get, the run and thread
 * lists ordered by createdAt then artifactId bytes, delete and deleteForRun.
 * createdAt is any finite number (float8), written back in shortest
 * round-trip form.
 *
 * Locking: per-row atomicity of INSERT ... ON CONFLICT DO UPDATE (last writer
 * wins); deletes are plain DELETEs.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "sandbox_persist.h"

PG_FUNCTION_INFO_V1(artifact_save);
PG_FUNCTION_INFO_V1(artifact_get);
PG_FUNCTION_INFO_V1(artifact_list);
PG_FUNCTION_INFO_V1(artifact_list_for_thread);
PG_FUNCTION_INFO_V1(artifact_delete);
PG_FUNCTION_INFO_V1(artifact_delete_for_run);

/* The columns artifact_fields reads (by name: their order is free). */
#define ARTIFACT_COLUMNS \
	"artifact_id, run_id, thread_id, blob_key, name, mime_type, size, source_url, created_at"

/* Full replace: every column is written, so absent optionals become NULL. */
static SpQuery artifact_upsert = {
	"INSERT INTO sandbox_persist.artifacts (artifact_id, run_id, thread_id, blob_key, name,"
	" mime_type, size, source_url, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
	" ON CONFLICT (artifact_id) DO UPDATE SET run_id = EXCLUDED.run_id,"
	" thread_id = EXCLUDED.thread_id, blob_key = EXCLUDED.blob_key, name = EXCLUDED.name,"
	" mime_type = EXCLUDED.mime_type, size = EXCLUDED.size,"
	" source_url = EXCLUDED.source_url, created_at = EXCLUDED.created_at",
	9, {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT8OID, TEXTOID, FLOAT8OID}
};

static SpQuery artifact_select = {
	"SELECT " ARTIFACT_COLUMNS " FROM sandbox_persist.artifacts WHERE artifact_id = $1",
	1, {TEXTOID}
};

/* Served by artifacts_run_order (run_id, created_at, artifact_id): no sort step. */
static SpQuery artifact_by_run = {
	"SELECT " ARTIFACT_COLUMNS " FROM sandbox_persist.artifacts"
	" WHERE run_id = $1 ORDER BY created_at, artifact_id",
	1, {TEXTOID}
};

/* Served by artifacts_thread_order (thread_id, created_at, artifact_id): no sort step. */
static SpQuery artifact_by_thread = {
	"SELECT " ARTIFACT_COLUMNS " FROM sandbox_persist.artifacts"
	" WHERE thread_id = $1 ORDER BY created_at, artifact_id",
	1, {TEXTOID}
};

static SpQuery artifact_delete_stmt = {
	"DELETE FROM sandbox_persist.artifacts WHERE artifact_id = $1",
	1, {TEXTOID}
};

static SpQuery artifact_delete_run_stmt = {
	"DELETE FROM sandbox_persist.artifacts WHERE run_id = $1",
	1, {TEXTOID}
};

/*
 * The ArtifactRecord, read by column name; unset optionals are omitted. save
 * takes the same keys, so the field names also index its input.
 */
typedef enum ArtifactField
{
	ARTIFACT_ID,
	ARTIFACT_RUN_ID,
	ARTIFACT_THREAD_ID,
	ARTIFACT_BLOB_KEY,
	ARTIFACT_NAME,
	ARTIFACT_MIME_TYPE,
	ARTIFACT_SIZE,
	ARTIFACT_SOURCE_URL,
	ARTIFACT_CREATED_AT,
	ARTIFACT_NFIELDS
} ArtifactField;

static const SpField artifact_fields[ARTIFACT_NFIELDS] = {
	[ARTIFACT_ID] = {"artifactId", "artifact_id", SPF_STRING},
	[ARTIFACT_RUN_ID] = {"runId", "run_id", SPF_STRING},
	[ARTIFACT_THREAD_ID] = {"threadId", "thread_id", SPF_STRING},
	[ARTIFACT_BLOB_KEY] = {"blobKey", "blob_key", SPF_STRING},
	[ARTIFACT_NAME] = {"name", "name", SPF_STRING},
	[ARTIFACT_MIME_TYPE] = {"mimeType", "mime_type", SPF_STRING},
	[ARTIFACT_SIZE] = {"size", "size", SPF_INT64},
	[ARTIFACT_SOURCE_URL] = {"sourceUrl", "source_url", SPF_STRING},
	[ARTIFACT_CREATED_AT] = {"createdAt", "created_at", SPF_DOUBLE}
};
static const SpRecord artifact_record = SP_RECORD(artifact_fields);

/* Append the ArtifactRecord of SPI result row `row`. */
static void
ArtifactAppendRecord(StringInfo buf, int row)
{
	SpAppendRecord(buf, row, &artifact_record);
}

/* Run a DELETE keyed by one text argument and return the rows it removed. */
static int
ArtifactDelete(FunctionCallInfo fcinfo, SpQuery *q, const char *argname)
{
	char	   *key = SpCheckIdArg(fcinfo, 0, argname, SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	SpArgs		args;
	int			n;

	SPI_connect();
	SpArgsInit(&args);
	SpArgText(&args, key);
	n = SpExec(q, &args, false, 0);
	SPI_finish();
	return n;
}

/*
 * artifact_save(record json): insert the artifact or replace every field of
 * the stored one (absent blobKey / sourceUrl become absent).
 */
Datum
artifact_save(PG_FUNCTION_ARGS)
{
	SpJson	   *rec = SpCheckJsonKindArg(fcinfo, 0, "record", SPJ_OBJECT, "a JSON object", SP_CHECK_PLAIN);
	SpJson	   *f[ARTIFACT_NFIELDS];
	SpJson	   *key;
	SpArgs		args;

	SpCheckRecordMembers(rec, &artifact_record, f, "an artifact record");
	SpArgsInit(&args);
	SpArgText(&args, SpCheckIdJson(f[ARTIFACT_ID], "artifactId", SP_ID_MAX_BYTES, SP_CHECK_PLAIN));
	SpArgText(&args, SpCheckIdJson(f[ARTIFACT_RUN_ID], "runId", SP_ID_MAX_BYTES, SP_CHECK_PLAIN));
	SpArgText(&args, SpCheckIdJson(f[ARTIFACT_THREAD_ID], "threadId", SP_ID_MAX_BYTES, SP_CHECK_PLAIN));
	/* blobKey names a blob, so it follows the blob key rules when present */
	key = f[ARTIFACT_BLOB_KEY];
	if (key == NULL || key->kind == SPJ_NULL)
		SpArgNull(&args);
	else
		SpArgText(&args, SpCheckIdJson(key, "blobKey", SP_KEY_MAX_BYTES, SP_CHECK_PLAIN));
	SpArgText(&args, SpCheckStringJson(f[ARTIFACT_NAME], "name", true, -1, SP_CHECK_PLAIN));
	SpArgText(&args, SpCheckStringJson(f[ARTIFACT_MIME_TYPE], "mimeType", true, -1, SP_CHECK_PLAIN));
	SpArgInt64(&args, SpCheckIntJson(f[ARTIFACT_SIZE], "size", 0));
	SpArgText(&args, SpCheckStringJson(f[ARTIFACT_SOURCE_URL], "sourceUrl", false, -1, SP_CHECK_PLAIN));
	SpArgFloat8(&args, SpCheckNumberJson(f[ARTIFACT_CREATED_AT], "createdAt", SP_CHECK_PLAIN));

	SPI_connect();
	SpExec(&artifact_upsert, &args, false, 0);
	SPI_finish();
	PG_RETURN_VOID();
}

/* artifact_get(artifact_id text) -> json: the record, or NULL. */
Datum
artifact_get(PG_FUNCTION_ARGS)
{
	return SpLookupJson(fcinfo, &artifact_select, "artifact_id", ArtifactAppendRecord, true);
}

/* artifact_list(run_id text) -> json: the run's artifacts by createdAt, then artifactId bytes. */
Datum
artifact_list(PG_FUNCTION_ARGS)
{
	return SpLookupJson(fcinfo, &artifact_by_run, "run_id", ArtifactAppendRecord, false);
}

/* artifact_list_for_thread(thread_id text) -> json: the thread's whole artifact history, in list order. */
Datum
artifact_list_for_thread(PG_FUNCTION_ARGS)
{
	return SpLookupJson(fcinfo, &artifact_by_thread, "thread_id", ArtifactAppendRecord, false);
}

/* artifact_delete(artifact_id text) -> boolean: true when a record was removed. */
Datum
artifact_delete(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(ArtifactDelete(fcinfo, &artifact_delete_stmt, "artifact_id") > 0);
}

/* artifact_delete_for_run(run_id text) -> integer: how many of the run's records were removed. */
Datum
artifact_delete_for_run(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(ArtifactDelete(fcinfo, &artifact_delete_run_stmt, "run_id"));
}
