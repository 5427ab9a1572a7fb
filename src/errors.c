/*
 * errors.c
 *
 * The error table of docs/contract/README.md §4.2: every contract error code,
 * its SQLSTATE in the implementation-defined class SP, and its name. Defined
 * in full from the first version so later stores only use it. No locking.
 */
#include "postgres.h"

#include "lib/stringinfo.h"

#include "errors.h"

typedef struct SpErrorEntry
{
	const char *sqlstate;
	const char *name;
} SpErrorEntry;

/* Indexed by SpErrorCode; the order must match errors.h. */
static const SpErrorEntry sp_errors[SP_ERROR_CODE_COUNT] = {
	{"SP001", "SANDBOX_SNAPSHOT_STALE_HEAD"},
	{"SP002", "SANDBOX_SNAPSHOT_PARENT_MISMATCH"},
	{"SP003", "SANDBOX_SNAPSHOT_DUPLICATE_ID"},
	{"SP004", "SANDBOX_SNAPSHOT_NOT_HEAD"},
	{"SP005", "SANDBOX_SNAPSHOT_WRITER_CONFLICT"},
	{"SP006", "SANDBOX_SNAPSHOT_WRITER_LOST"},
	{"SP007", "SANDBOX_SNAPSHOT_INVALID_ID"},
	{"SP008", "SANDBOX_SNAPSHOT_INVALID_ENTRY"},
	{"SP009", "SANDBOX_SNAPSHOT_FORK_SOURCE_NOT_FOUND"},
	{"SP010", "SANDBOX_SNAPSHOT_FORK_SOURCE_THREAD_MISMATCH"},
	{"SP011", "SANDBOX_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY"},
	{"SP012", "SANDBOX_SNAPSHOT_CHECKPOINT_NOT_FOUND"},
	{"SP013", "SANDBOX_SNAPSHOT_ATOMIC_FORK_REQUIRED"},
	{"SP014", "SANDBOX_THREAD_MOVING"},
	{"SP015", "SANDBOX_SNAPSHOT_FORK_BLOB_MISSING"},
	{"SP101", "INTERRUPT_BATCH_DUPLICATE_ID"},
	{"SP102", "INTERRUPT_BATCH_MISSING_ID"},
	{"SP103", "INTERRUPT_BATCH_NON_PENDING_ID"},
	{"SP201", "RUN_EPOCH_NOT_INCREASING"},
	{"SP301", "BLOB_CONTENT_HASH_MISMATCH"},
	{"SP302", "BLOB_UPLOAD_NOT_FOUND"},
	{"SP303", "BLOB_UPLOAD_OFFSET_MISMATCH"},
	{"SP401", "EVENT_LOG_NOT_FOUND"},
	{"SP402", "EVENT_LOG_OFFSET_OUT_OF_RANGE"},
	{"SP403", "EVENT_LOG_PRODUCER_SEQ_CONFLICT"},
	{"SP404", "EVENT_LOG_FENCE_STALE"},
	{"SP901", "CLIENT_CLOCK_NOT_ALLOWED"},
	{"SP902", "TEST_RESET_NOT_ALLOWED"},
};

/* SQLSTATE of a contract code, encoded for errcode(). */
int
SpSqlState(SpErrorCode code)
{
	const char *s = sp_errors[code].sqlstate;

	return MAKE_SQLSTATE(s[0], s[1], s[2], s[3], s[4]);
}

/* errcode() for a contract code. */
int
errcode_sp(SpErrorCode code)
{
	return errcode(SpSqlState(code));
}

/* errdetail() whose text is "<CODE_NAME>: <sentence>". */
int
errdetail_sp(SpErrorCode code, const char *fmt,...)
{
	StringInfoData buf;
	va_list		args;

	initStringInfo(&buf);
	appendStringInfo(&buf, "%s: ", sp_errors[code].name);
	for (;;)
	{
		int			needed;

		va_start(args, fmt);
		needed = appendStringInfoVA(&buf, fmt, args);
		va_end(args);
		if (needed == 0)
			break;
		enlargeStringInfo(&buf, needed);
	}
	return errdetail_internal("%s", buf.data);
}
