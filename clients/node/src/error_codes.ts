/**
 * The SQLSTATE of every class-SP error of the extension, its contract code
 * name and what the caller can do (the server sends the same text as the
 * error's HINT), and the code unions built from them. Generated from
 * SP_ERROR_TABLE in src/errors.h by scripts/gen_error_codes.sh (make
 * error-codes): do not edit by hand; the vocabulary suite fails when this file
 * and the header differ.
 */
export const SP_ERRORS = {
  SP001: { code: 'SANDBOX_SNAPSHOT_STALE_HEAD', hint: 'Reload the thread\'s head checkpoint and append after it.' },
  SP002: { code: 'SANDBOX_SNAPSHOT_PARENT_MISMATCH', hint: 'Set the checkpoint\'s parentCheckpointId to the head the append expects (expectedHeadId).' },
  SP003: { code: 'SANDBOX_SNAPSHOT_DUPLICATE_ID', hint: 'Give the checkpoint an id that no existing checkpoint of any thread has; the id of a deleted head may be used again.' },
  SP004: { code: 'SANDBOX_SNAPSHOT_NOT_HEAD', hint: 'Reload the thread\'s head: only the current head can be deleted.' },
  SP005: { code: 'SANDBOX_SNAPSHOT_WRITER_CONFLICT', hint: 'Wait until the other writer releases its lease or the lease expires, then acquire the writer again.' },
  SP006: { code: 'SANDBOX_SNAPSHOT_WRITER_LOST', hint: 'Acquire the writer lease again and reload the thread\'s head before writing.' },
  SP007: { code: 'SANDBOX_SNAPSHOT_INVALID_ID', hint: undefined },
  SP008: { code: 'SANDBOX_SNAPSHOT_INVALID_ENTRY', hint: undefined },
  SP009: { code: 'SANDBOX_SNAPSHOT_FORK_SOURCE_NOT_FOUND', hint: 'Fork from a checkpoint that exists: list the source thread\'s checkpoints.' },
  SP010: { code: 'SANDBOX_SNAPSHOT_FORK_SOURCE_THREAD_MISMATCH', hint: 'Name the thread the source checkpoint belongs to.' },
  SP011: { code: 'SANDBOX_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY', hint: 'Fork into a thread id that holds no checkpoints or sandbox state yet.' },
  SP012: { code: 'SANDBOX_SNAPSHOT_CHECKPOINT_NOT_FOUND', hint: undefined },
  SP013: { code: 'SANDBOX_SNAPSHOT_ATOMIC_FORK_REQUIRED', hint: undefined },
  SP014: { code: 'SANDBOX_THREAD_MOVING', hint: 'Retry through the router once the move has finished.' },
  SP015: { code: 'SANDBOX_SNAPSHOT_FORK_BLOB_MISSING', hint: 'Copy the missing blobs to this shard first, then import the thread again.' },
  SP016: { code: 'SANDBOX_SNAPSHOT_PREFIX_MISMATCH', hint: 'Send the whole conversation: the claimed prefix is not the parent checkpoint\'s conversation.' },
  SP101: { code: 'INTERRUPT_BATCH_DUPLICATE_ID', hint: undefined },
  SP102: { code: 'INTERRUPT_BATCH_MISSING_ID', hint: 'Reload the pending interrupts and commit a batch of their ids.' },
  SP103: { code: 'INTERRUPT_BATCH_NON_PENDING_ID', hint: 'Reload the pending interrupts and commit a batch of their ids.' },
  SP201: { code: 'RUN_EPOCH_NOT_INCREASING', hint: 'Reload the run: another driver holds it with an equal or later driverEpoch.' },
  SP301: { code: 'BLOB_CONTENT_HASH_MISMATCH', hint: 'Name a content-addressed blob by the SHA-256 of its bytes.' },
  SP302: { code: 'BLOB_UPLOAD_NOT_FOUND', hint: 'Begin a new upload: this one was committed, aborted or expired.' },
  SP303: { code: 'BLOB_UPLOAD_OFFSET_MISMATCH', hint: 'Resume the upload at the offset it has received so far.' },
  SP401: { code: 'EVENT_LOG_NOT_FOUND', hint: undefined },
  SP402: { code: 'EVENT_LOG_OFFSET_OUT_OF_RANGE', hint: 'Resume from an offset this log handed out, or from the start (after_seq 0 in SQL, offset -1 in the adapter).' },
  SP403: { code: 'EVENT_LOG_PRODUCER_SEQ_CONFLICT', hint: 'Send a new producerSeq for new chunks; a repeated producerSeq must repeat its chunks.' },
  SP404: { code: 'EVENT_LOG_FENCE_STALE', hint: 'A newer producer fenced this log: stop producing to it.' },
  SP405: { code: 'EVENT_LOG_OFFSET_DIVERGED', hint: 'Replay the stream from the start (after_seq 0 in SQL, offset -1 in the adapter), or report it as broken.' },
  SP501: { code: 'LEASE_ROW_BUSY', hint: 'Retry the call later; end the transaction that was left open holding the row.' },
  SP701: { code: 'STREAM_NOT_FOUND', hint: 'Create the stream first (stream_create), or check its path.' },
  SP702: { code: 'STREAM_GONE', hint: 'Stop using this stream: it was deleted; its path stays taken while forks read through it.' },
  SP703: { code: 'STREAM_CONFLICT', hint: 'Use the stream\'s own content type and parameters, or another path.' },
  SP704: { code: 'STREAM_CLOSED', hint: 'Stop appending: the stream is closed for good; read it to its end.' },
  SP705: { code: 'STREAM_SEQ_CONFLICT', hint: 'Send a Stream-Seq that sorts (byte-wise) after the last one accepted.' },
  SP706: { code: 'STREAM_PRODUCER_EPOCH_STALE', hint: 'A producer with a newer epoch took over: stop producing, or restart at a higher epoch from seq 0.' },
  SP707: { code: 'STREAM_PRODUCER_SEQ_GAP', hint: 'Resend the appends from the sequence number the stream expects (stream_head gives lastSeq).' },
  SP708: { code: 'STREAM_OFFSET_GONE', hint: 'Read again from the start (-1) or from an offset this stream issued.' },
  SP709: { code: 'SUBSCRIPTION_NOT_FOUND', hint: 'Create the subscription first (stream_subscription_put), or check its id.' },
  SP710: { code: 'SUBSCRIPTION_ALREADY_EXISTS', hint: 'Send the subscription\'s configuration as it was created, or delete it first, or use another id.' },
  SP711: { code: 'WEBHOOK_URL_REJECTED', hint: 'Use an https URL of a public host (http only for localhost or 127.x.x.x in development).' },
  SP712: { code: 'TOKEN_INVALID', hint: 'Send the token of the current wake: the webhook\'s callback_token or the token the claim returned.' },
  SP901: { code: 'CLIENT_CLOCK_NOT_ALLOWED', hint: 'Omit now_ms, or have a superuser turn on sandbox_persist.allow_client_clock (tests only).' },
  SP902: { code: 'TEST_RESET_NOT_ALLOWED', hint: 'Have a superuser turn on sandbox_persist.allow_test_reset (tests only).' },
} as const satisfies Record<string, { code: string; hint: string | undefined }>

/** A class-SP SQLSTATE the extension raises. */
export type SpSqlState = keyof typeof SP_ERRORS

/** The contract code name of a class-SP error. */
export type SpCodeName = (typeof SP_ERRORS)[SpSqlState]['code']

/** Contract codes of the checkpoint store (`@tanstack/ai-sandbox`): the SANDBOX_SNAPSHOT_* codes. */
export type SandboxCheckpointErrorCode =
  /** SP001: Reload the thread's head checkpoint and append after it. */
  | 'SANDBOX_SNAPSHOT_STALE_HEAD'
  /** SP002: Set the checkpoint's parentCheckpointId to the head the append expects (expectedHeadId). */
  | 'SANDBOX_SNAPSHOT_PARENT_MISMATCH'
  /** SP003: Give the checkpoint an id that no existing checkpoint of any thread has; the id of a deleted head may be used again. */
  | 'SANDBOX_SNAPSHOT_DUPLICATE_ID'
  /** SP004: Reload the thread's head: only the current head can be deleted. */
  | 'SANDBOX_SNAPSHOT_NOT_HEAD'
  /** SP005: Wait until the other writer releases its lease or the lease expires, then acquire the writer again. */
  | 'SANDBOX_SNAPSHOT_WRITER_CONFLICT'
  /** SP006: Acquire the writer lease again and reload the thread's head before writing. */
  | 'SANDBOX_SNAPSHOT_WRITER_LOST'
  /** SP007 */
  | 'SANDBOX_SNAPSHOT_INVALID_ID'
  /** SP008 */
  | 'SANDBOX_SNAPSHOT_INVALID_ENTRY'
  /** SP009: Fork from a checkpoint that exists: list the source thread's checkpoints. */
  | 'SANDBOX_SNAPSHOT_FORK_SOURCE_NOT_FOUND'
  /** SP010: Name the thread the source checkpoint belongs to. */
  | 'SANDBOX_SNAPSHOT_FORK_SOURCE_THREAD_MISMATCH'
  /** SP011: Fork into a thread id that holds no checkpoints or sandbox state yet. */
  | 'SANDBOX_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY'
  /** SP012 */
  | 'SANDBOX_SNAPSHOT_CHECKPOINT_NOT_FOUND'
  /** SP013 */
  | 'SANDBOX_SNAPSHOT_ATOMIC_FORK_REQUIRED'
  /** SP015: Copy the missing blobs to this shard first, then import the thread again. */
  | 'SANDBOX_SNAPSHOT_FORK_BLOB_MISSING'
  /** SP016: Send the whole conversation: the claimed prefix is not the parent checkpoint's conversation. */
  | 'SANDBOX_SNAPSHOT_PREFIX_MISMATCH'

/** Every other class-SP code: the server's part of `SandboxPersistErrorCode` (errors.ts adds the adapter's own). */
export type SandboxPersistServerErrorCode =
  /** SP014: Retry through the router once the move has finished. */
  | 'SANDBOX_THREAD_MOVING'
  /** SP101 */
  | 'INTERRUPT_BATCH_DUPLICATE_ID'
  /** SP102: Reload the pending interrupts and commit a batch of their ids. */
  | 'INTERRUPT_BATCH_MISSING_ID'
  /** SP103: Reload the pending interrupts and commit a batch of their ids. */
  | 'INTERRUPT_BATCH_NON_PENDING_ID'
  /** SP201: Reload the run: another driver holds it with an equal or later driverEpoch. */
  | 'RUN_EPOCH_NOT_INCREASING'
  /** SP301: Name a content-addressed blob by the SHA-256 of its bytes. */
  | 'BLOB_CONTENT_HASH_MISMATCH'
  /** SP302: Begin a new upload: this one was committed, aborted or expired. */
  | 'BLOB_UPLOAD_NOT_FOUND'
  /** SP303: Resume the upload at the offset it has received so far. */
  | 'BLOB_UPLOAD_OFFSET_MISMATCH'
  /** SP401 */
  | 'EVENT_LOG_NOT_FOUND'
  /** SP402: Resume from an offset this log handed out, or from the start (after_seq 0 in SQL, offset -1 in the adapter). */
  | 'EVENT_LOG_OFFSET_OUT_OF_RANGE'
  /** SP403: Send a new producerSeq for new chunks; a repeated producerSeq must repeat its chunks. */
  | 'EVENT_LOG_PRODUCER_SEQ_CONFLICT'
  /** SP404: A newer producer fenced this log: stop producing to it. */
  | 'EVENT_LOG_FENCE_STALE'
  /** SP405: Replay the stream from the start (after_seq 0 in SQL, offset -1 in the adapter), or report it as broken. */
  | 'EVENT_LOG_OFFSET_DIVERGED'
  /** SP501: Retry the call later; end the transaction that was left open holding the row. */
  | 'LEASE_ROW_BUSY'
  /** SP701: Create the stream first (stream_create), or check its path. */
  | 'STREAM_NOT_FOUND'
  /** SP702: Stop using this stream: it was deleted; its path stays taken while forks read through it. */
  | 'STREAM_GONE'
  /** SP703: Use the stream's own content type and parameters, or another path. */
  | 'STREAM_CONFLICT'
  /** SP704: Stop appending: the stream is closed for good; read it to its end. */
  | 'STREAM_CLOSED'
  /** SP705: Send a Stream-Seq that sorts (byte-wise) after the last one accepted. */
  | 'STREAM_SEQ_CONFLICT'
  /** SP706: A producer with a newer epoch took over: stop producing, or restart at a higher epoch from seq 0. */
  | 'STREAM_PRODUCER_EPOCH_STALE'
  /** SP707: Resend the appends from the sequence number the stream expects (stream_head gives lastSeq). */
  | 'STREAM_PRODUCER_SEQ_GAP'
  /** SP708: Read again from the start (-1) or from an offset this stream issued. */
  | 'STREAM_OFFSET_GONE'
  /** SP709: Create the subscription first (stream_subscription_put), or check its id. */
  | 'SUBSCRIPTION_NOT_FOUND'
  /** SP710: Send the subscription's configuration as it was created, or delete it first, or use another id. */
  | 'SUBSCRIPTION_ALREADY_EXISTS'
  /** SP711: Use an https URL of a public host (http only for localhost or 127.x.x.x in development). */
  | 'WEBHOOK_URL_REJECTED'
  /** SP712: Send the token of the current wake: the webhook's callback_token or the token the claim returned. */
  | 'TOKEN_INVALID'
  /** SP901: Omit now_ms, or have a superuser turn on sandbox_persist.allow_client_clock (tests only). */
  | 'CLIENT_CLOCK_NOT_ALLOWED'
  /** SP902: Have a superuser turn on sandbox_persist.allow_test_reset (tests only). */
  | 'TEST_RESET_NOT_ALLOWED'

/**
 * The HTTP status the durable streams server answers for a SQLSTATE
 * (SP_HTTP_STATUS_TABLE in src/errors.h, docs/contract/streams.md §5); a
 * SQLSTATE missing here has no status of its own.
 */
export const HTTP_STATUS: Record<string, number> = {
  'SP701': 404,
  'SP702': 410,
  'SP703': 409,
  'SP704': 409,
  'SP705': 409,
  'SP706': 403,
  'SP707': 409,
  'SP708': 410,
  'SP709': 404,
  'SP710': 409,
  'SP711': 400,
  'SP712': 401,
  '22023': 400,
  '22P02': 400,
  '22001': 400,
  '22021': 400,
  '54000': 413,
  '54001': 400,
}
