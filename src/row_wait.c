/*
 * row_wait.c
 *
 * The bound on row-lock waits of the calls that must not wait
 * (docs/contract/locks.md §5, checkpoint-store.md §9): lock_acquire,
 * lock_renew, lock_renew_many, checkpoint_acquire_writer and
 * checkpoint_renew_writer. Each takes its lease row inside one short
 * statement, so a competitor normally holds that row for milliseconds; only a
 * transaction left open after calling a lock or checkpoint function holds it
 * longer, and without a bound every later call on that key or thread would
 * wait for it until the caller's lock_timeout, or forever.
 *
 * Locking: none of its own. SpExecRowWait runs one statement with
 * lock_timeout lowered to sandbox_persist.lease_row_wait (never raised above
 * the caller's own lock_timeout), and turns the lock timeout into
 * LEASE_ROW_BUSY (SP501), a retryable error that changed nothing. The
 * setting is restored when the statement ends, and by the transaction's
 * abort when it fails, exactly as a function's SET clause is.
 */
#include "postgres.h"

#include "storage/proc.h"
#include "utils/guc.h"

#include "sandbox_persist.h"

/*
 * Raise LEASE_ROW_BUSY for `what` (for instance: lock "k") when the error
 * being handled is the lock timeout this module set; re-throw anything else.
 * Called in a PG_CATCH block, in the caller's memory context.
 */
static void
RowWaitRethrow(MemoryContext cxt, bool ours, const char *what, int bound_ms)
{
	ErrorData  *edata;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	if (!ours || edata->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE)
	{
		FreeErrorData(edata);
		PG_RE_THROW();
	}
	FlushErrorState();
	ereport(ERROR,
			(errcode_sp(SP_LEASE_ROW_BUSY),
			 errmsg("the row of %s is locked by another transaction", what),
			 errdetail_sp(SP_LEASE_ROW_BUSY,
						  "Another transaction held the row of %s for longer than"
						  " sandbox_persist.lease_row_wait (%d ms); nothing was changed and the call"
						  " can be retried.", what, bound_ms),
			 errhint("A transaction that called a lock or checkpoint function and was left open"
					 " holds that row until it ends: end it, and set"
					 " idle_in_transaction_session_timeout for the application's role.")));
}

/*
 * SpExec(q, args, false, tcount) with its row-lock waits bounded by
 * sandbox_persist.lease_row_wait: a wait that long ends in LEASE_ROW_BUSY
 * naming `what`. A shorter lock_timeout of the caller stays in force and
 * still raises its own 55P03; lease_row_wait = 0 leaves waits unbounded.
 */
int
SpExecRowWait(SpQuery *q, SpArgs *args, long tcount, const char *what)
{
	MemoryContext cxt = CurrentMemoryContext;
	int			bound_ms = sp_lease_row_wait_ms;
	/* volatile: read again in PG_CATCH, after a longjmp */
	volatile bool ours = bound_ms > 0 && (LockTimeout <= 0 || LockTimeout > bound_ms);
	volatile int nest = 0;
	volatile int n = 0;

	if (ours)
	{
		char		value[32];

		nest = NewGUCNestLevel();
		snprintf(value, sizeof(value), "%dms", bound_ms);
		(void) set_config_option("lock_timeout", value, PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
	}
	PG_TRY();
	{
		n = SpExec(q, args, false, tcount);
	}
	PG_CATCH();
	{
		RowWaitRethrow(cxt, ours, what, bound_ms);
	}
	PG_END_TRY();
	if (ours)
		AtEOXact_GUC(true, nest);
	return n;
}
