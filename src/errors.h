/*
 * errors.h
 *
 * The error table: one SQLSTATE per contract error code, all in class SP.
 * The SQLSTATE is the key a client maps back to the code (the Node adapter's
 * clients/node/src/error_codes.ts is generated from this table); errdetail is
 * a sentence for people, and errhint says what the caller can do.
 */
#ifndef SANDBOX_PERSIST_ERRORS_H
#define SANDBOX_PERSIST_ERRORS_H

/*
 * The error table, the one home of the contract's error codes
 * (docs/contract/README.md §4.2): X(enum id, SQLSTATE, code name, hint), one
 * row per code. The hint is what a caller can do about the error (NULL when
 * only the input can be fixed); errdetail_sp() attaches it, and a call site's
 * own errhint() after it overrides it. The enum below and the table in
 * errors.c are both expanded from it, so they cannot drift apart;
 * scripts/gen_error_codes.sh writes from it the Node adapter's table, code
 * unions and error classes, and the error tables of README.md and
 * docs/contract/README.md (test/scripts/vocabulary.sh fails when one of them
 * is not what the script makes).
 */
#define SP_ERROR_TABLE(X) \
	X(SP_SNAPSHOT_STALE_HEAD, "SP001", "SANDBOX_SNAPSHOT_STALE_HEAD", "Reload the thread's head checkpoint and append after it.") \
	X(SP_SNAPSHOT_PARENT_MISMATCH, "SP002", "SANDBOX_SNAPSHOT_PARENT_MISMATCH", "Set the checkpoint's parentCheckpointId to the head the append expects (expectedHeadId).") \
	X(SP_SNAPSHOT_DUPLICATE_ID, "SP003", "SANDBOX_SNAPSHOT_DUPLICATE_ID", "Give the checkpoint an id that no existing checkpoint of any thread has; the id of a deleted head may be used again.") \
	X(SP_SNAPSHOT_NOT_HEAD, "SP004", "SANDBOX_SNAPSHOT_NOT_HEAD", "Reload the thread's head: only the current head can be deleted.") \
	X(SP_SNAPSHOT_WRITER_CONFLICT, "SP005", "SANDBOX_SNAPSHOT_WRITER_CONFLICT", "Wait until the other writer releases its lease or the lease expires, then acquire the writer again.") \
	X(SP_SNAPSHOT_WRITER_LOST, "SP006", "SANDBOX_SNAPSHOT_WRITER_LOST", "Acquire the writer lease again and reload the thread's head before writing.") \
	X(SP_SNAPSHOT_INVALID_ID, "SP007", "SANDBOX_SNAPSHOT_INVALID_ID", NULL) \
	X(SP_SNAPSHOT_INVALID_ENTRY, "SP008", "SANDBOX_SNAPSHOT_INVALID_ENTRY", NULL) \
	X(SP_SNAPSHOT_FORK_SOURCE_NOT_FOUND, "SP009", "SANDBOX_SNAPSHOT_FORK_SOURCE_NOT_FOUND", "Fork from a checkpoint that exists: list the source thread's checkpoints.") \
	X(SP_SNAPSHOT_FORK_SOURCE_THREAD_MISMATCH, "SP010", "SANDBOX_SNAPSHOT_FORK_SOURCE_THREAD_MISMATCH", "Name the thread the source checkpoint belongs to.") \
	X(SP_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY, "SP011", "SANDBOX_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY", "Fork into a thread id that holds no checkpoints or sandbox state yet.") \
	X(SP_SNAPSHOT_CHECKPOINT_NOT_FOUND, "SP012", "SANDBOX_SNAPSHOT_CHECKPOINT_NOT_FOUND", NULL) \
	X(SP_SNAPSHOT_ATOMIC_FORK_REQUIRED, "SP013", "SANDBOX_SNAPSHOT_ATOMIC_FORK_REQUIRED", NULL) \
	X(SP_THREAD_MOVING, "SP014", "SANDBOX_THREAD_MOVING", "Retry through the router once the move has finished.") /* ours: the thread is moving to another shard */ \
	X(SP_SNAPSHOT_FORK_BLOB_MISSING, "SP015", "SANDBOX_SNAPSHOT_FORK_BLOB_MISSING", "Copy the missing blobs to this shard first, then import the thread again.") /* ours: an import names a blob the shard lacks */ \
	X(SP_SNAPSHOT_PREFIX_MISMATCH, "SP016", "SANDBOX_SNAPSHOT_PREFIX_MISMATCH", "Send the whole conversation: the claimed prefix is not the parent checkpoint's conversation.") /* ours: a delta append's claim is not the parent's conversation */ \
	X(SP_INTERRUPT_BATCH_DUPLICATE_ID, "SP101", "INTERRUPT_BATCH_DUPLICATE_ID", NULL) \
	X(SP_INTERRUPT_BATCH_MISSING_ID, "SP102", "INTERRUPT_BATCH_MISSING_ID", "Reload the pending interrupts and commit a batch of their ids.") \
	X(SP_INTERRUPT_BATCH_NON_PENDING_ID, "SP103", "INTERRUPT_BATCH_NON_PENDING_ID", "Reload the pending interrupts and commit a batch of their ids.") \
	X(SP_RUN_EPOCH_NOT_INCREASING, "SP201", "RUN_EPOCH_NOT_INCREASING", "Reload the run: another driver holds it with an equal or later driverEpoch.") \
	X(SP_BLOB_CONTENT_HASH_MISMATCH, "SP301", "BLOB_CONTENT_HASH_MISMATCH", "Name a content-addressed blob by the SHA-256 of its bytes.") \
	X(SP_BLOB_UPLOAD_NOT_FOUND, "SP302", "BLOB_UPLOAD_NOT_FOUND", "Begin a new upload: this one was committed, aborted or expired.") \
	X(SP_BLOB_UPLOAD_OFFSET_MISMATCH, "SP303", "BLOB_UPLOAD_OFFSET_MISMATCH", "Resume the upload at the offset it has received so far.") \
	X(SP_EVENT_LOG_NOT_FOUND, "SP401", "EVENT_LOG_NOT_FOUND", NULL) \
	X(SP_EVENT_LOG_OFFSET_OUT_OF_RANGE, "SP402", "EVENT_LOG_OFFSET_OUT_OF_RANGE", "Resume from an offset this log handed out, or from the start (after_seq 0 in SQL, offset -1 in the adapter).") \
	X(SP_EVENT_LOG_PRODUCER_SEQ_CONFLICT, "SP403", "EVENT_LOG_PRODUCER_SEQ_CONFLICT", "Send a new producerSeq for new chunks; a repeated producerSeq must repeat its chunks.") \
	X(SP_EVENT_LOG_FENCE_STALE, "SP404", "EVENT_LOG_FENCE_STALE", "A newer producer fenced this log: stop producing to it.") \
	X(SP_EVENT_LOG_OFFSET_DIVERGED, "SP405", "EVENT_LOG_OFFSET_DIVERGED", "Replay the stream from the start (after_seq 0 in SQL, offset -1 in the adapter), or report it as broken.") /* ours: a resume token the log cannot vouch for */ \
	X(SP_LEASE_ROW_BUSY, "SP501", "LEASE_ROW_BUSY", "Retry the call later; end the transaction that was left open holding the row.") /* ours: a lease row stayed locked past lease_row_wait; retry */ \
	X(SP_STREAM_NOT_FOUND, "SP701", "STREAM_NOT_FOUND", "Create the stream first (stream_create), or check its path.") /* ours: durable streams (docs/contract/streams.md §5) */ \
	X(SP_STREAM_GONE, "SP702", "STREAM_GONE", "Stop using this stream: it was deleted; its path stays taken while forks read through it.") \
	X(SP_STREAM_CONFLICT, "SP703", "STREAM_CONFLICT", "Use the stream's own content type and parameters, or another path.") \
	X(SP_STREAM_CLOSED, "SP704", "STREAM_CLOSED", "Stop appending: the stream is closed for good; read it to its end.") \
	X(SP_STREAM_SEQ_CONFLICT, "SP705", "STREAM_SEQ_CONFLICT", "Send a Stream-Seq that sorts (byte-wise) after the last one accepted.") \
	X(SP_STREAM_PRODUCER_EPOCH_STALE, "SP706", "STREAM_PRODUCER_EPOCH_STALE", "A producer with a newer epoch took over: stop producing, or restart at a higher epoch from seq 0.") \
	X(SP_STREAM_PRODUCER_SEQ_GAP, "SP707", "STREAM_PRODUCER_SEQ_GAP", "Resend the appends from the sequence number the stream expects (stream_head gives lastSeq).") \
	X(SP_STREAM_OFFSET_GONE, "SP708", "STREAM_OFFSET_GONE", "Read again from the start (-1) or from an offset this stream issued.") /* ours: an offset the stream did not issue, as after a failover */ \
	X(SP_SUBSCRIPTION_NOT_FOUND, "SP709", "SUBSCRIPTION_NOT_FOUND", "Create the subscription first (stream_subscription_put), or check its id.") \
	X(SP_SUBSCRIPTION_CONFLICT, "SP710", "SUBSCRIPTION_ALREADY_EXISTS", "Send the subscription's configuration as it was created, or delete it first, or use another id.") \
	X(SP_WEBHOOK_URL_REJECTED, "SP711", "WEBHOOK_URL_REJECTED", "Use an https URL of a public host (http only for localhost or 127.x.x.x in development).") \
	X(SP_SUBSCRIPTION_TOKEN_INVALID, "SP712", "TOKEN_INVALID", "Send the token of the current wake: the webhook's callback_token or the token the claim returned.") \
	X(SP_CLIENT_CLOCK_NOT_ALLOWED, "SP901", "CLIENT_CLOCK_NOT_ALLOWED", "Omit now_ms, or have a superuser turn on sandbox_persist.allow_client_clock (tests only).") \
	X(SP_TEST_RESET_NOT_ALLOWED, "SP902", "TEST_RESET_NOT_ALLOWED", "Have a superuser turn on sandbox_persist.allow_test_reset (tests only).")

/*
 * The HTTP status of a SQLSTATE, the one home of that mapping
 * (docs/contract/streams.md §5): X(SQLSTATE, status). error_codes() reports
 * it as httpStatus on the rows of the codes that have one, and
 * scripts/gen_error_codes.sh writes it into the Node adapter's HTTP_STATUS.
 */
#define SP_HTTP_STATUS_TABLE(X) \
	X("SP701", 404) \
	X("SP702", 410) \
	X("SP703", 409) \
	X("SP704", 409) \
	X("SP705", 409) \
	X("SP706", 403) \
	X("SP707", 409) \
	X("SP708", 410) \
	X("SP709", 404) \
	X("SP710", 409) \
	X("SP711", 400) \
	X("SP712", 401) \
	X("22023", 400) \
	X("22P02", 400) \
	X("22001", 400) \
	X("22021", 400) \
	X("54000", 413) \
	X("54001", 400)

#define SP_ERROR_ENUM_ID(id, sqlstate, name, hint) id,

typedef enum SpErrorCode
{
	SP_ERROR_TABLE(SP_ERROR_ENUM_ID)
	SP_ERROR_CODE_COUNT
} SpErrorCode;

/* SQLSTATE of a contract code, for errcode(). */
extern int	SpSqlState(SpErrorCode code);

/* errcode() for a contract code; use inside ereport(). */
extern int	errcode_sp(SpErrorCode code);

/*
 * errdetail() with a sentence for people, plus the table's errhint() for the
 * code when it has one; use inside ereport(), after errcode_sp().
 */
extern int	errdetail_sp(SpErrorCode code, const char *fmt,...) pg_attribute_printf(2, 3);

/* Raise a contract error with a message and a detail sentence. */
#define sp_error(code, msg, ...) \
	ereport(ERROR, (errcode_sp(code), errmsg msg, errdetail_sp(code, __VA_ARGS__)))

#endif							/* SANDBOX_PERSIST_ERRORS_H */
