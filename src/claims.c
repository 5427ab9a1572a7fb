/*
 * claims.c
 *
 * run_claim (docs/contract/runs.md §5): the claim step of withRunClaim as
 * one statement, for applications that supply their own claim function. It
 * must still be called under the run-driver:<runId> lock.
 *
 * A claim epoch is a fence (docs/contract/failover.md §1): it carries the
 * timeline like writer and lock fences, max(epoch + 1, floor + 1) with the
 * floor of SpFenceFloor(), so an epoch claimed in a window an asynchronous
 * failover lost is never claimed again on the promoted standby.
 *
 * Locking: the UPDATE locks the run row, so two claimers serialise and get
 * consecutive epochs (the second re-evaluates the SET on the first's row,
 * also on a new timeline); a terminal or unknown run is left untouched.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "sandbox_persist.h"

PG_FUNCTION_INFO_V1(run_claim);

static SpQuery claim_bump = {
	"UPDATE sandbox_persist.runs"
	" SET driver_epoch = greatest(coalesce(driver_epoch, 0) + 1, $3 + 1), changed_at = $2"
	" WHERE run_id = $1 AND status IN " SP_SQL_RUN_UNFINISHED
	" RETURNING driver_epoch, thread_id",
	3, {TEXTOID, INT8OID, INT8OID}
};

static SpQuery claim_exists = {
	"SELECT 1 FROM sandbox_persist.runs WHERE run_id = $1",
	1, {TEXTOID}
};

/*
 * run_claim(run_id text) -> json: {outcome:'claimed', epoch, threadId} after
 * bumping driverEpoch past the timeline's floor, or {outcome:'unknown'} / {outcome:'terminal'} with
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
	int64		fence_floor = SpFenceFloor();	/* 25006 on a standby, 54000 past 8192 */

	SPI_connect();
	SpArgsInit(&args);
	SpArgText(&args, run_id);
	SpArgInt64(&args, SpNowMs(fcinfo, -1));
	SpArgInt64(&args, fence_floor);
	spi = CurrentMemoryContext;
	if (SpExec(&claim_bump, &args, false, 0) == 1)
	{
		int64		epoch = 0;

		SpGetInt64(0, SpColumn("driver_epoch"), &epoch);
		SpCheckFence(epoch);	/* past 2^53 - 1: 54000, the claim rolls back */
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
