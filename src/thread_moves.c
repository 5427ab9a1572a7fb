/*
 * thread_moves.c
 *
 * The write guard of a thread moving to another shard (docs/architecture.md
 * "Cross-shard fork and thread moves"): a row trigger on every table a thread
 * owns refuses a write to a thread marked in thread_moves as 'moving' (its
 * export is under way) or 'moved' (a tombstone: the thread lives on another
 * shard now) with SP014. The move steps themselves are SQL functions of the
 * 0.2.0--0.3.0 script.
 *
 * Locking: before reading the mark, every guarded write takes a shared
 * transaction-level advisory lock on its thread's bucket (class 5316, key
 * hashtext(thread_id) & 255); _thread_move_begin takes the same lock
 * exclusively before it marks the thread, so it waits for the writes already
 * past this check, and every later write sees the mark (each SPI statement
 * takes a new snapshot). Buckets, not threads: a transaction that writes rows
 * of many threads (a bulk load, a migration) holds at most 256 such locks, so
 * it cannot exhaust the lock table; a move waits for the writes of 1/256 of
 * the threads. C rather than PL/pgSQL: the guard runs once per written row of
 * the hottest paths (transcript saves, event log appends), where a PL/pgSQL
 * call cost a measurable share of the write.
 */
#include "postgres.h"

#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"

#include "sandbox_persist.h"

PG_FUNCTION_INFO_V1(_thread_write_guard);

/* The advisory lock class and bucket mask shared with _thread_move_begin. */
#define THREAD_MOVE_GUARD_CLASS 5316
#define THREAD_MOVE_GUARD_BUCKETS 256

static SpQuery guard_mark = {
	"SELECT state, peer_shard::text FROM sandbox_persist.thread_moves"
	" WHERE thread_id = $1 AND state IN ('moving', 'moved')",
	1, {TEXTOID}
};

static SpQuery guard_run_thread = {
	"SELECT thread_id FROM sandbox_persist.runs WHERE run_id = $1",
	1, {TEXTOID}
};

/* Refuse the write when the thread is moving or has moved. Inside SPI. */
static void
ThreadMoveCheck(const char *thread_id)
{
	SpArgs		args;
	int32		key;
	char	   *state;
	char	   *peer;

	/* hashtext hashes the bytes under any deterministic collation, as SQL's does */
	key = DatumGetInt32(DirectFunctionCall1Coll(hashtext, C_COLLATION_OID,
												CStringGetTextDatum(thread_id)));
	DirectFunctionCall2(pg_advisory_xact_lock_shared_int4,
						Int32GetDatum(THREAD_MOVE_GUARD_CLASS),
						Int32GetDatum(key & (THREAD_MOVE_GUARD_BUCKETS - 1)));
	SpArgsInit(&args);
	SpArgText(&args, thread_id);
	if (SpExec(&guard_mark, &args, false, 1) == 0)
		return;
	state = SpGetText(0, SpColumn("state"));
	peer = SpGetText(0, SpColumn("peer_shard"));
	ereport(ERROR,
			(errcode_sp(SP_THREAD_MOVING),
			 errmsg("thread is moving to another shard"),
			 errdetail_sp(SP_THREAD_MOVING,
						  "Thread \"%s\" is %s shard %s; writes to it are refused here.",
						  thread_id, strcmp(state, "moving") == 0 ? "moving to" : "now on", peer),
			 errhint("Retry through the router once the move has finished.")));
}

/*
 * _thread_write_guard() trigger: BEFORE INSERT/UPDATE/DELETE FOR EACH ROW.
 * Without arguments the row's thread_id column names the thread. With the
 * argument 'run' (event_logs) the row's run_id does, through the run record
 * here; a log without one belongs to no thread, and a change of closed_at (a
 * close, which maintenance makes) always passes.
 */
Datum
_thread_write_guard(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;
	TupleDesc	desc;
	HeapTuple	row;
	HeapTuple	result;
	bool		by_run;
	char	   *thread_id;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_BEFORE(td->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(td->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_TRIGGERED_ACTION_EXCEPTION),
				 errmsg("_thread_write_guard must be a BEFORE ROW trigger"),
				 errdetail("It was called in another way.")));
	desc = td->tg_relation->rd_att;
	by_run = td->tg_trigger->tgnargs > 0 && strcmp(td->tg_trigger->tgargs[0], "run") == 0;
	if (TRIGGER_FIRED_BY_UPDATE(td->tg_event))
		row = result = td->tg_newtuple;
	else
	{
		row = result = td->tg_trigtuple;
	}

	if (by_run && TRIGGER_FIRED_BY_UPDATE(td->tg_event))
	{
		int			col = SPI_fnumber(desc, "closed_at");
		bool		old_null;
		bool		new_null;
		Datum		old_v = heap_getattr(td->tg_trigtuple, col, desc, &old_null);
		Datum		new_v = heap_getattr(td->tg_newtuple, col, desc, &new_null);

		if (old_null != new_null ||
			(!old_null && DatumGetInt64(old_v) != DatumGetInt64(new_v)))
			return PointerGetDatum(result);
	}

	thread_id = SPI_getvalue(row, desc, SPI_fnumber(desc, by_run ? "run_id" : "thread_id"));
	if (thread_id == NULL)
		return PointerGetDatum(result);
	SPI_connect();
	if (by_run)
	{
		SpArgs		args;

		SpArgsInit(&args);
		SpArgText(&args, thread_id);
		thread_id = SpExec(&guard_run_thread, &args, false, 1) == 0 ? NULL : SpGetText(0, 1);
	}
	if (thread_id != NULL)
		ThreadMoveCheck(thread_id);
	SPI_finish();
	return PointerGetDatum(result);
}
