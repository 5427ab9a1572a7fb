/*
 * claims.c
 *
 * run_claim (docs/contract/runs.md §5): the claim step of withRunClaim as
 * one statement, for applications that supply their own claim function. It
 * must still be called under the run-driver:<runId> lock.
 *
 * Locking: the UPDATE locks the run row, so two claimers serialise and get
 * consecutive epochs; a terminal or unknown run is left untouched.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "sandbox_persist.h"

PG_FUNCTION_INFO_V1(run_claim);

static SpQuery claim_bump = {
	"UPDATE sandbox_persist.runs SET driver_epoch = coalesce(driver_epoch, 0) + 1, changed_at = $2"
	" WHERE run_id = $1 AND status IN " SP_SQL_RUN_UNFINISHED
	" RETURNING driver_epoch, thread_id",
	2, {TEXTOID, INT8OID}
};

static SpQuery claim_exists = {
	"SELECT 1 FROM sandbox_persist.runs WHERE run_id = $1",
	1, {TEXTOID}
};

/*
 * run_claim(run_id text) -> json: {outcome:'claimed', epoch, threadId} after
 * bumping driverEpoch, or {outcome:'unknown'} / {outcome:'terminal'} with
 * nothing changed.
 */
Datum
run_claim(PG_FUNCTION_ARGS)
{
	char	   *run_id = SpCheckIdArg(fcinfo, 0, "run_id", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	MemoryContext outer = CurrentMemoryContext;
	MemoryContext spi;
	StringInfoData buf;
	SpArgs		args;

	SPI_connect();
	SpArgsInit(&args);
	SpArgText(&args, run_id);
	SpArgInt64(&args, SpNowMs(fcinfo, -1));
	spi = CurrentMemoryContext;
	if (SpExec(&claim_bump, &args, false, 0) == 1)
	{
		int64		epoch = 0;

		SpGetInt64(0, SpColumn("driver_epoch"), &epoch);
		MemoryContextSwitchTo(outer);
		initStringInfo(&buf);
		appendStringInfo(&buf, "{\"outcome\":\"claimed\",\"epoch\":" INT64_FORMAT ",\"threadId\":",
						 epoch);
		SpAppendString(&buf, SpGetText(0, SpColumn("thread_id")));
		appendStringInfoChar(&buf, '}');
		MemoryContextSwitchTo(spi);
	}
	else
	{
		bool		exists;

		SpArgsInit(&args);
		SpArgText(&args, run_id);
		exists = SpExec(&claim_exists, &args, false, 1) == 1;
		MemoryContextSwitchTo(outer);
		initStringInfo(&buf);
		appendStringInfo(&buf, "{\"outcome\":\"%s\"}", exists ? "terminal" : "unknown");
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();
	PG_RETURN_DATUM(SpJsonResult(&buf));
}
