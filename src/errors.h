/*
 * errors.h
 *
 * The error table: one SQLSTATE per contract error code, all in class SP.
 * errdetail of every SP error starts with the code name and a colon, so the
 * Node adapter can map it back to the contract's error class and .code.
 */
#ifndef SANDBOX_PERSIST_ERRORS_H
#define SANDBOX_PERSIST_ERRORS_H

/*
 * The error table, the one home of the contract's error codes in C
 * (docs/contract/README.md §4.2): X(enum id, SQLSTATE, code name), one row per
 * code. The enum below and the table in errors.c are both expanded from it,
 * so they cannot drift apart; test/scripts/vocabulary.sh checks the Node
 * adapter, README.md and docs/contract/ against it.
 */
#define SP_ERROR_TABLE(X) \
	X(SP_SNAPSHOT_STALE_HEAD, "SP001", "SANDBOX_SNAPSHOT_STALE_HEAD") \
	X(SP_SNAPSHOT_PARENT_MISMATCH, "SP002", "SANDBOX_SNAPSHOT_PARENT_MISMATCH") \
	X(SP_SNAPSHOT_DUPLICATE_ID, "SP003", "SANDBOX_SNAPSHOT_DUPLICATE_ID") \
	X(SP_SNAPSHOT_NOT_HEAD, "SP004", "SANDBOX_SNAPSHOT_NOT_HEAD") \
	X(SP_SNAPSHOT_WRITER_CONFLICT, "SP005", "SANDBOX_SNAPSHOT_WRITER_CONFLICT") \
	X(SP_SNAPSHOT_WRITER_LOST, "SP006", "SANDBOX_SNAPSHOT_WRITER_LOST") \
	X(SP_SNAPSHOT_INVALID_ID, "SP007", "SANDBOX_SNAPSHOT_INVALID_ID") \
	X(SP_SNAPSHOT_INVALID_ENTRY, "SP008", "SANDBOX_SNAPSHOT_INVALID_ENTRY") \
	X(SP_SNAPSHOT_FORK_SOURCE_NOT_FOUND, "SP009", "SANDBOX_SNAPSHOT_FORK_SOURCE_NOT_FOUND") \
	X(SP_SNAPSHOT_FORK_SOURCE_THREAD_MISMATCH, "SP010", "SANDBOX_SNAPSHOT_FORK_SOURCE_THREAD_MISMATCH") \
	X(SP_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY, "SP011", "SANDBOX_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY") \
	X(SP_SNAPSHOT_CHECKPOINT_NOT_FOUND, "SP012", "SANDBOX_SNAPSHOT_CHECKPOINT_NOT_FOUND") \
	X(SP_SNAPSHOT_ATOMIC_FORK_REQUIRED, "SP013", "SANDBOX_SNAPSHOT_ATOMIC_FORK_REQUIRED") \
	X(SP_THREAD_MOVING, "SP014", "SANDBOX_THREAD_MOVING") /* ours: the thread is moving to another shard */ \
	X(SP_SNAPSHOT_FORK_BLOB_MISSING, "SP015", "SANDBOX_SNAPSHOT_FORK_BLOB_MISSING") /* ours: an import names a blob the shard lacks */ \
	X(SP_SNAPSHOT_PREFIX_MISMATCH, "SP016", "SANDBOX_SNAPSHOT_PREFIX_MISMATCH") /* ours: a delta append's claim is not the parent's conversation */ \
	X(SP_INTERRUPT_BATCH_DUPLICATE_ID, "SP101", "INTERRUPT_BATCH_DUPLICATE_ID") \
	X(SP_INTERRUPT_BATCH_MISSING_ID, "SP102", "INTERRUPT_BATCH_MISSING_ID") \
	X(SP_INTERRUPT_BATCH_NON_PENDING_ID, "SP103", "INTERRUPT_BATCH_NON_PENDING_ID") \
	X(SP_RUN_EPOCH_NOT_INCREASING, "SP201", "RUN_EPOCH_NOT_INCREASING") \
	X(SP_BLOB_CONTENT_HASH_MISMATCH, "SP301", "BLOB_CONTENT_HASH_MISMATCH") \
	X(SP_BLOB_UPLOAD_NOT_FOUND, "SP302", "BLOB_UPLOAD_NOT_FOUND") \
	X(SP_BLOB_UPLOAD_OFFSET_MISMATCH, "SP303", "BLOB_UPLOAD_OFFSET_MISMATCH") \
	X(SP_EVENT_LOG_NOT_FOUND, "SP401", "EVENT_LOG_NOT_FOUND") \
	X(SP_EVENT_LOG_OFFSET_OUT_OF_RANGE, "SP402", "EVENT_LOG_OFFSET_OUT_OF_RANGE") \
	X(SP_EVENT_LOG_PRODUCER_SEQ_CONFLICT, "SP403", "EVENT_LOG_PRODUCER_SEQ_CONFLICT") \
	X(SP_EVENT_LOG_FENCE_STALE, "SP404", "EVENT_LOG_FENCE_STALE") \
	X(SP_EVENT_LOG_OFFSET_DIVERGED, "SP405", "EVENT_LOG_OFFSET_DIVERGED") /* ours: a resume token the log cannot vouch for */ \
	X(SP_LEASE_ROW_BUSY, "SP501", "LEASE_ROW_BUSY") /* ours: a lease row stayed locked past lease_row_wait; retry */ \
	X(SP_CLIENT_CLOCK_NOT_ALLOWED, "SP901", "CLIENT_CLOCK_NOT_ALLOWED") \
	X(SP_TEST_RESET_NOT_ALLOWED, "SP902", "TEST_RESET_NOT_ALLOWED")

#define SP_ERROR_ENUM_ID(id, sqlstate, name) id,

typedef enum SpErrorCode
{
	SP_ERROR_TABLE(SP_ERROR_ENUM_ID)
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
