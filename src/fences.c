/*
 * fences.c
 *
 * The fence epoch (docs/contract/failover.md §1): the high part of every
 * fence the extension grants, checkpoint writer fences, durable-lock fences
 * and run-claim epochs alike. A fence is epoch * 2^40 + counter, where the
 * epoch is the PostgreSQL timeline the server writes WAL on, minus one.
 * Promotion of a standby (a failover) and a point-in-time recovery both
 * start a new, higher timeline, so every fence granted after them exceeds
 * every fence the old timeline could have granted, including grants whose
 * commits were lost with an asynchronous standby. A cluster that never
 * changed timeline (timeline 1) has epoch 0: its fences are the plain
 * counters of 0.3.0.
 *
 * The fence stays at most 2^53 - 1, the largest integer a JSON number
 * carries exactly to a JavaScript client (SpJsonGetInt refuses larger ones),
 * which bounds the epoch to 8191 (timeline 8192) and the counter of one epoch
 * to 2^40 - 1 per thread or lock grant.
 *
 * sandbox_persist.test_timeline (superuser, tests only) replaces the real
 * timeline, so `make test` simulates a failover without a standby.
 *
 * Locking: none here; the timeline is read from shared memory without a lock.
 */
#include "postgres.h"

#include "access/xlog.h"

#include "sandbox_persist.h"

/* The highest epoch whose fences all stay <= 2^53 - 1. */
#define SP_FENCE_EPOCH_MAX ((INT64CONST(1) << (53 - SP_FENCE_EPOCH_SHIFT)) - 1)

/* The timeline the extension sees: the test setting, else the server's (25006 on a standby). */
static int64
SpTimeline(void)
{
	if (sp_test_timeline > 0)
		return sp_test_timeline;
	/* a standby grants nothing: its writes would fail anyway */
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot grant a fence during recovery"),
				 errdetail("Fences are granted by the primary only.")));
	return (int64) GetWALInsertionTimeLine();
}

/*
 * The current epoch, timeline - 1, without the fence range's bound: the
 * epoch of an event log entry appended now is at least this
 * (docs/contract/streams.md §1), and an append never fails for a high
 * timeline.
 */
int64
SpTimelineEpoch(void)
{
	return SpTimeline() - 1;
}

/*
 * The floor of the current epoch: every fence granted now is greater than
 * it, and it is greater than every fence of an earlier timeline.
 */
int64
SpFenceFloor(void)
{
	int64		timeline = SpTimeline();

	if (timeline - 1 > SP_FENCE_EPOCH_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("timeline %lld is beyond the fence epochs", (long long) timeline),
				 errdetail("Fences carry the timeline minus one in their top 13 bits, so timelines above %lld cannot grant fences.",
						   (long long) SP_FENCE_EPOCH_MAX + 1)));
	return (timeline - 1) << SP_FENCE_EPOCH_SHIFT;
}

/* Refuse a granted fence above 2^53 - 1 (the grant rolls back with the call). */
void
SpCheckFence(int64 fence)
{
	if (fence > SP_MAX_SAFE_INTEGER)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("fence " INT64_FORMAT " is beyond 2^53 - 1", fence),
				 errdetail("One epoch grants at most 2^40 - 1 fences per thread or lock sequence.")));
}
