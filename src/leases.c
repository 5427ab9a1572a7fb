/*
 * leases.c
 *
 * Checkpoint writer leases (docs/contract/checkpoint-store.md §5): one per
 * thread, acquired without waiting, renewed only while current, released only
 * by the same owner token and fence. The fence lives on the thread's row and
 * grows on every acquisition, forever; release never resets it. It grows by
 * one within a fence epoch (fences.c) and jumps to the epoch's floor + 1 on
 * the thread's first acquisition after a timeline change, so a grant lost
 * with an asynchronous standby is never granted again.
 *
 * It also owns what the other checkpoint modules share about the writer: the
 * lease members of a writer object, the thread-row lock and the lease test.
 *
 * Locking: every function works on the thread's checkpoint_threads row only.
 * Acquire locks the row (when it exists) to see whether a holder is recorded,
 * then runs one INSERT ... ON CONFLICT DO UPDATE that takes over only a
 * missing or expired lease, so two acquirers serialise on the row and exactly
 * one wins; one granted over a recorded holder is a takeover and is counted
 * (takeovers.c). At now == expiresAt a lease is expired. Acquire and renew
 * wait for that row at most sandbox_persist.lease_row_wait (row_wait.c): a
 * transaction left open after an append or an acquire holds it, and past the
 * bound they fail with LEASE_ROW_BUSY instead of waiting for that transaction.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/int.h"
#include "utils/builtins.h"

#include "sandbox_persist.h"
#include "checkpoints.h"

PG_FUNCTION_INFO_V1(checkpoint_acquire_writer);
PG_FUNCTION_INFO_V1(checkpoint_renew_writer);
PG_FUNCTION_INFO_V1(checkpoint_release_writer);

/* Columns of ckpt_lock_thread, in its order. */
#define THREAD_COL_FENCE		1
#define THREAD_COL_OWNER_TOKEN	2
#define THREAD_COL_EXPIRES_AT	3
#define THREAD_COL_HEAD_ID		4

static SpQuery ckpt_lock_thread = {
	"SELECT fence, owner_token::text, lease_expires_at, head_id"
	" FROM sandbox_persist.checkpoint_threads WHERE thread_id = $1 FOR UPDATE",
	1, {TEXTOID}
};

/* Columns of lease_acquire's RETURNING list. */
#define LEASE_COL_FENCE			1
#define LEASE_COL_OWNER_TOKEN	2

static SpQuery lease_acquire = {
	"INSERT INTO sandbox_persist.checkpoint_threads AS t"
	" (thread_id, fence, owner_token, lease_expires_at)"
	" VALUES ($1, $4 + 1, pg_catalog.gen_random_uuid(), $3)"
	" ON CONFLICT (thread_id) DO UPDATE SET fence = pg_catalog.int8larger(t.fence + 1, $4 + 1),"
	" owner_token = EXCLUDED.owner_token, lease_expires_at = EXCLUDED.lease_expires_at"
	" WHERE t.owner_token IS NULL OR t.lease_expires_at <= $2"
	" RETURNING fence, owner_token::text",
	4, {TEXTOID, INT8OID, INT8OID, INT8OID}
};

static SpQuery lease_renew = {
	"UPDATE sandbox_persist.checkpoint_threads SET lease_expires_at = $2 WHERE thread_id = $1",
	2, {TEXTOID, INT8OID}
};

static SpQuery lease_release = {
	"UPDATE sandbox_persist.checkpoint_threads SET owner_token = NULL, lease_expires_at = NULL"
	" WHERE thread_id = $1 AND owner_token::text = $2 AND fence = $3",
	3, {TEXTOID, TEXTOID, INT8OID}
};

/* How LEASE_ROW_BUSY names a thread's lease row. */
static const char *
LeaseRowName(const char *thread_id)
{
	return psprintf("the writer lease of thread \"%s\"", thread_id);
}

/*
 * The writer's ownerToken and fence. A malformed value is not an error: such
 * a writer is simply never current (WRITER_LOST).
 */
void
CkptReadWriterLease(const SpJson *writer, CkptWriter *out)
{
	static const char *const names[] = {"ownerToken", "fence"};
	SpJson	   *m[2];
	int			len;

	SpJsonMembers(writer, names, 2, m, "writer", true, 0, SP_SNAPSHOT_INVALID_ENTRY);
	out->owner_token = NULL;
	if (m[0] != NULL && m[0]->kind == SPJ_STRING &&
		SpJsonDecodeString(m[0]->raw, m[0]->rawlen, &out->owner_token, &len) != SPS_OK)
		out->owner_token = NULL;
	out->fence_ok = m[1] != NULL && m[1]->kind == SPJ_NUMBER &&
		SpJsonGetInt(m[1], &out->fence) == SP_INT_OK;
}

/*
 * Lock the thread's row (FOR UPDATE) and read its lease and head; with
 * `bounded`, a wait for the row past lease_row_wait is LEASE_ROW_BUSY
 * (row_wait.c). Inside SPI.
 */
static void
LeaseLockThread(const char *thread_id, CkptThread *out, bool bounded)
{
	SpArgs		args;
	int			n;

	SpArgsInit(&args);
	SpArgText(&args, thread_id);
	memset(out, 0, sizeof(CkptThread));
	n = bounded ? SpExecRowWait(&ckpt_lock_thread, &args, 1, LeaseRowName(thread_id))
		: SpExec(&ckpt_lock_thread, &args, false, 1);
	if (n != 1)
		return;
	out->exists = true;
	SpGetInt64(0, THREAD_COL_FENCE, &out->fence);
	out->owner_token = SpGetText(0, THREAD_COL_OWNER_TOKEN);
	out->has_expiry = SpGetInt64(0, THREAD_COL_EXPIRES_AT, &out->expires_at);
	out->head_id = SpGetText(0, THREAD_COL_HEAD_ID);
}

/* Lock the thread's row (FOR UPDATE) and read its lease and head. Inside SPI. */
void
CkptLockThread(const char *thread_id, CkptThread *out)
{
	LeaseLockThread(thread_id, out, false);
}

/* A lease is current iff token and fence match and now < expiresAt. */
bool
CkptLeaseCurrent(const CkptThread *thread, const CkptWriter *writer, int64 now)
{
	return thread->exists && thread->owner_token != NULL && thread->has_expiry &&
		writer->owner_token != NULL && writer->fence_ok &&
		strcmp(thread->owner_token, writer->owner_token) == 0 &&
		thread->fence == writer->fence && now < thread->expires_at;
}

/*
 * Raise WRITER_LOST unless the writer holds the thread's current lease, judged
 * by the clock read here, after the thread row lock: a call that waited for
 * the row past expiresAt must not be accepted. Returns that clock reading.
 */
int64
CkptRequireLease(FunctionCallInfo fcinfo, int now_argno, const CkptThread *thread,
				 const CkptWriter *writer, const char *thread_id)
{
	int64		now = SpNowMs(fcinfo, now_argno);

	if (!CkptLeaseCurrent(thread, writer, now))
		sp_error(SP_SNAPSHOT_WRITER_LOST,
				 ("checkpoint writer lease lost"),
				 "The writer does not hold a current lease on thread \"%s\".", thread_id);
	return now;
}

/* The lease duration: argument argno, or the setting when NULL; must be > 0. */
int64
CkptLeaseMs(FunctionCallInfo fcinfo, int argno)
{
	int64		lease_ms;

	if (PG_ARGISNULL(argno))
		return sp_writer_lease_ms;
	lease_ms = PG_GETARG_INT64(argno);
	if (lease_ms <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease_ms must be greater than zero"),
				 errdetail("A lease of " INT64_FORMAT " ms was requested.", lease_ms)));
	return lease_ms;
}

/* now + lease_ms, refusing overflow. */
static int64
LeaseExpiry(int64 now, int64 lease_ms)
{
	int64		expires;

	if (pg_add_s64_overflow(now, lease_ms, &expires))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("lease expiry is out of range"),
				 errdetail("now + lease_ms overflows bigint.")));
	return expires;
}

/*
 * checkpoint_acquire_writer(thread_id text, lease_ms bigint, now_ms bigint)
 * -> json {threadId, ownerToken, fence, expiresAt}. Never waits: an unexpired
 * lease is WRITER_CONFLICT; an expired one is taken over.
 */
Datum
checkpoint_acquire_writer(PG_FUNCTION_ARGS)
{
	char	   *thread_id = SpCheckIdArg(fcinfo, 0, "thread_id", SP_ID_MAX_BYTES, SP_CHECK_CKPT_ID);
	int64		lease_ms = CkptLeaseMs(fcinfo, 1);
	int64		now = SpNowMs(fcinfo, 2);
	int64		expires = LeaseExpiry(now, lease_ms);
	int64		fence_floor = SpFenceFloor();
	MemoryContext outer = CurrentMemoryContext;
	MemoryContext spi;
	StringInfoData buf;
	SpArgs		args;
	int64		fence = 0;
	char	   *token = NULL;
	bool		first = true;
	bool		held;

	SPI_connect();
	/*
	 * Lock the row first to learn whether a holder is recorded: granted over
	 * one, the acquire is a takeover of an expired lease (counted). The
	 * acquire below would wait for this row lock anyway.
	 */
	SpArgsInit(&args);
	SpArgText(&args, thread_id);
	held = SpExecRowWait(&ckpt_lock_thread, &args, 0, LeaseRowName(thread_id)) == 1 &&
		!SpIsNull(0, THREAD_COL_OWNER_TOKEN);
	SpArgsInit(&args);
	SpArgText(&args, thread_id);
	SpArgInt64(&args, now);
	SpArgInt64(&args, expires);
	SpArgInt64(&args, fence_floor);
	if (SpExecRowWait(&lease_acquire, &args, 0, LeaseRowName(thread_id)) != 1)
		sp_error(SP_SNAPSHOT_WRITER_CONFLICT,
				 ("checkpoint writer lease is held"),
				 "Thread \"%s\" has an unexpired writer lease.", thread_id);
	/* the result outlives SPI_finish; read it before counting runs a statement */
	spi = MemoryContextSwitchTo(outer);
	SpGetInt64(0, LEASE_COL_FENCE, &fence);
	SpCheckFence(fence);
	token = SpGetText(0, LEASE_COL_OWNER_TOKEN);
	MemoryContextSwitchTo(spi);
	if (held)
		TakeoverCount(SP_TAKEOVER_CHECKPOINT_WRITER);
	spi = MemoryContextSwitchTo(outer);
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	SpAppendKey(&buf, &first, "threadId");
	SpAppendString(&buf, thread_id);
	SpAppendKey(&buf, &first, "ownerToken");
	SpAppendString(&buf, token);
	SpAppendKey(&buf, &first, "fence");
	SpAppendInt64(&buf, fence);
	SpAppendKey(&buf, &first, "expiresAt");
	SpAppendInt64(&buf, expires);
	appendStringInfoChar(&buf, '}');
	MemoryContextSwitchTo(spi);
	SPI_finish();
	PG_RETURN_DATUM(SpJsonResult(&buf));
}

/*
 * checkpoint_renew_writer(writer json, lease_ms bigint, now_ms bigint) ->
 * json {expiresAt}: extend a current lease to now + lease_ms; an expired
 * lease cannot be revived (WRITER_LOST).
 */
Datum
checkpoint_renew_writer(PG_FUNCTION_ARGS)
{
	SpJson	   *writer_json = SpCheckJsonKindArg(fcinfo, 0, "writer", SPJ_OBJECT, "an object", SP_CHECK_CKPT_ID);
	char	   *thread_id = CkptReadWriterThread(writer_json);
	int64		lease_ms = CkptLeaseMs(fcinfo, 1);
	int64		now;
	int64		expires;
	CkptWriter	writer;
	CkptThread	thread;
	SpArgs		args;
	StringInfoData buf;

	/* refuse a disallowed clock and an overflowing expiry before locking */
	(void) LeaseExpiry(SpNowMs(fcinfo, 2), lease_ms);
	CkptReadWriterLease(writer_json, &writer);
	SPI_connect();
	LeaseLockThread(thread_id, &thread, true);
	now = CkptRequireLease(fcinfo, 2, &thread, &writer, thread_id);
	expires = LeaseExpiry(now, lease_ms);
	SpArgsInit(&args);
	SpArgText(&args, thread_id);
	SpArgInt64(&args, expires);
	SpExec(&lease_renew, &args, false, 0);
	SPI_finish();

	initStringInfo(&buf);
	appendStringInfo(&buf, "{\"expiresAt\":" INT64_FORMAT "}", expires);
	PG_RETURN_DATUM(SpJsonResult(&buf));
}

/*
 * checkpoint_release_writer(writer json) -> boolean: clear the lease only if
 * token and fence both match; otherwise a silent no-op (false). Expiry is
 * ignored and the fence is never touched.
 */
Datum
checkpoint_release_writer(PG_FUNCTION_ARGS)
{
	SpJson	   *writer_json = SpCheckJsonKindArg(fcinfo, 0, "writer", SPJ_OBJECT, "an object", SP_CHECK_CKPT_ID);
	char	   *thread_id = CkptReadWriterThread(writer_json);
	CkptWriter	writer;
	SpArgs		args;
	int			n;

	CkptReadWriterLease(writer_json, &writer);
	if (writer.owner_token == NULL || !writer.fence_ok)
		PG_RETURN_BOOL(false);
	SPI_connect();
	SpArgsInit(&args);
	SpArgText(&args, thread_id);
	SpArgText(&args, writer.owner_token);
	SpArgInt64(&args, writer.fence);
	n = SpExec(&lease_release, &args, false, 0);
	SPI_finish();
	PG_RETURN_BOOL(n > 0);
}
