/*
 * errors.h
 *
 * The error table: one SQLSTATE per contract error code, all in class SP.
 * errdetail of every SP error starts with the code name and a colon, so the
 * Node adapter can map it back to the contract's error class and .code.
 */
#ifndef SANDBOX_PERSIST_ERRORS_H
#define SANDBOX_PERSIST_ERRORS_H

typedef enum SpErrorCode
{
	SP_SNAPSHOT_STALE_HEAD,
	SP_SNAPSHOT_PARENT_MISMATCH,
	SP_SNAPSHOT_DUPLICATE_ID,
	SP_SNAPSHOT_NOT_HEAD,
	SP_SNAPSHOT_WRITER_CONFLICT,
	SP_SNAPSHOT_WRITER_LOST,
	SP_SNAPSHOT_INVALID_ID,
	SP_SNAPSHOT_INVALID_ENTRY,
	SP_SNAPSHOT_FORK_SOURCE_NOT_FOUND,
	SP_SNAPSHOT_FORK_SOURCE_THREAD_MISMATCH,
	SP_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY,
	SP_SNAPSHOT_CHECKPOINT_NOT_FOUND,
	SP_SNAPSHOT_ATOMIC_FORK_REQUIRED,
	SP_THREAD_MOVING,			/* ours: the thread is moving to another shard */
	SP_SNAPSHOT_FORK_BLOB_MISSING,	/* ours: an import names a blob the shard lacks */
	SP_INTERRUPT_BATCH_DUPLICATE_ID,
	SP_INTERRUPT_BATCH_MISSING_ID,
	SP_INTERRUPT_BATCH_NON_PENDING_ID,
	SP_RUN_EPOCH_NOT_INCREASING,
	SP_BLOB_CONTENT_HASH_MISMATCH,
	SP_BLOB_UPLOAD_NOT_FOUND,
	SP_BLOB_UPLOAD_OFFSET_MISMATCH,
	SP_EVENT_LOG_NOT_FOUND,
	SP_EVENT_LOG_OFFSET_OUT_OF_RANGE,
	SP_EVENT_LOG_PRODUCER_SEQ_CONFLICT,
	SP_EVENT_LOG_FENCE_STALE,
	SP_CLIENT_CLOCK_NOT_ALLOWED,
	SP_TEST_RESET_NOT_ALLOWED,
	SP_ERROR_CODE_COUNT
} SpErrorCode;

/* SQLSTATE of a contract code, for errcode(). */
extern int	SpSqlState(SpErrorCode code);

/* errcode() for a contract code; use inside ereport(). */
extern int	errcode_sp(SpErrorCode code);

/* errdetail() that starts with the code name; use inside ereport(). */
extern int	errdetail_sp(SpErrorCode code, const char *fmt,...) pg_attribute_printf(2, 3);

/* Raise a contract error with a message and a detail sentence. */
#define sp_error(code, msg, ...) \
	ereport(ERROR, (errcode_sp(code), errmsg msg, errdetail_sp(code, __VA_ARGS__)))

#endif							/* SANDBOX_PERSIST_ERRORS_H */
