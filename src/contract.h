/*
 * contract.h
 *
 * The contract's vocabulary, with one home in C: run and interrupt statuses,
 * the content-address key rule, the NOTIFY channels, the lock key prefixes
 * the server reads, and the literals of the producer-lost chunk. Every C file
 * that names one of them uses these macros. They are string literals so that
 * they also compose, at compile time, into the SQL text of the prepared
 * statements (SP_SQL_* below): a status spelled in a query is the same token
 * as the one the validator accepts.
 *
 * The SP error table has its own home, errors.h. test/scripts/vocabulary.sh
 * compiles a small program against both headers and checks the installed SQL
 * catalog (CHECK constraints, partial indexes, views, SQL functions), the Node
 * adapter and the error tables of README.md and docs/contract/ against them,
 * so a word changed in one place only fails a test.
 *
 * Constants only: no code, no PostgreSQL headers (the test includes this file
 * in a plain C program), no locking.
 */
#ifndef SANDBOX_PERSIST_CONTRACT_H
#define SANDBOX_PERSIST_CONTRACT_H

/* Two steps, so a macro argument is expanded before it is quoted. */
#define SP_STRINGIFY_(x) #x
#define SP_STRINGIFY(x) SP_STRINGIFY_(x)

/* A word as a quoted SQL literal: 'word'. */
#define SP_SQL_Q(word) "'" word "'"

/* ---- run statuses (docs/contract/runs.md §1) ---- */

#define SP_RUN_RUNNING "running"
#define SP_RUN_INTERRUPTED "interrupted"	/* a pause, not terminal */
#define SP_RUN_COMPLETED "completed"
#define SP_RUN_FAILED "failed"
#define SP_RUN_ABORTED "aborted"

/* Every run status, in the contract's order, as a C initializer list. */
#define SP_RUN_STATUSES \
	SP_RUN_RUNNING, SP_RUN_INTERRUPTED, SP_RUN_COMPLETED, SP_RUN_FAILED, SP_RUN_ABORTED

/* The same list as prose, for error details. */
#define SP_RUN_STATUSES_TEXT \
	SP_RUN_RUNNING ", " SP_RUN_INTERRUPTED ", " SP_RUN_COMPLETED ", " \
	SP_RUN_FAILED ", " SP_RUN_ABORTED

/*
 * The terminal statuses: a terminal run is never claimed again, its open log
 * may be closed and, past the retention, it may be deleted. The others
 * (running, interrupted) are the unfinished ones.
 */
#define SP_RUN_TERMINAL_STATUSES SP_RUN_COMPLETED, SP_RUN_FAILED, SP_RUN_ABORTED
#define SP_RUN_UNFINISHED_STATUSES SP_RUN_RUNNING, SP_RUN_INTERRUPTED

/* SQL fragments for status predicates: status = SP_SQL_RUN_RUNNING, status IN (...). */
#define SP_SQL_RUN_RUNNING SP_SQL_Q(SP_RUN_RUNNING)
#define SP_SQL_RUN_TERMINAL \
	"(" SP_SQL_Q(SP_RUN_COMPLETED) ", " SP_SQL_Q(SP_RUN_FAILED) ", " SP_SQL_Q(SP_RUN_ABORTED) ")"
#define SP_SQL_RUN_UNFINISHED \
	"(" SP_SQL_Q(SP_RUN_RUNNING) ", " SP_SQL_Q(SP_RUN_INTERRUPTED) ")"

/* ---- interrupt statuses (docs/contract/README.md, interrupt store) ---- */

#define SP_INTERRUPT_PENDING "pending"
#define SP_INTERRUPT_RESOLVED "resolved"
#define SP_INTERRUPT_CANCELLED "cancelled"
#define SP_INTERRUPT_STATUSES SP_INTERRUPT_PENDING, SP_INTERRUPT_RESOLVED, SP_INTERRUPT_CANCELLED

#define SP_SQL_INTERRUPT_PENDING SP_SQL_Q(SP_INTERRUPT_PENDING)
#define SP_SQL_INTERRUPT_RESOLVED SP_SQL_Q(SP_INTERRUPT_RESOLVED)
#define SP_SQL_INTERRUPT_CANCELLED SP_SQL_Q(SP_INTERRUPT_CANCELLED)

/* ---- content-addressed blob keys (docs/contract/blobs.md) ---- */

/*
 * A content-addressed key is one of the two prefixes followed by the SHA-256
 * of the object as exactly 64 lowercase hex digits. A checkpoint's file
 * entries may only name the first kind, its artifacts the second; maintenance
 * collects only keys of either kind.
 */
#define SP_CONTENT_FILES_PREFIX "sandbox-files/sha256/"
#define SP_CONTENT_ARTIFACTS_PREFIX "sandbox-artifacts/sha256/"
#define SP_CONTENT_HASH_HEX_LEN 64
#define SP_CONTENT_HEX_DIGITS "0123456789abcdef"

/* The SQL character class of SP_CONTENT_HEX_DIGITS. */
#define SP_SQL_CONTENT_HEX_CLASS "[0-9a-f]"

/* The whole rule as a quoted SQL regular expression, for b.blob_key ~ .... */
#define SP_SQL_CONTENT_KEY_REGEX \
	"'^(" SP_CONTENT_FILES_PREFIX "|" SP_CONTENT_ARTIFACTS_PREFIX ")" \
	SP_SQL_CONTENT_HEX_CLASS "{" SP_STRINGIFY(SP_CONTENT_HASH_HEX_LEN) "}$'"

/* ---- NOTIFY channels (docs/contract/locks.md, event-log.md, maintenance.md, streams.md) ---- */

#define SP_CHANNEL_LOCK "sandbox_persist_lock"	/* payload: MD5 of the lock key */
#define SP_CHANNEL_EVENT_LOG "sandbox_persist_event_log"	/* payload: the log id [entries] */
#define SP_CHANNEL_ATTENTION "sandbox_persist_attention"	/* payload: {kind, runId} */
#define SP_CHANNEL_REAPER "sandbox_persist_reaper"	/* payload: {detached, due} */
#define SP_CHANNEL_STREAM "sandbox_persist_stream"	/* payload: the stream id */
#define SP_CHANNEL_SUBSCRIPTION "sandbox_persist_subscription"	/* payload: the subscription id */

/*
 * The longest NOTIFY payload sent, in bytes with its terminating NUL: below
 * PostgreSQL's limit (async.c, NOTIFY_PAYLOAD_MAX_LENGTH: BLCKSZ - NAMEDATALEN
 * - 128, 8000 bytes with the default block size), which Async_Notify enforces.
 */
#define SP_NOTIFY_PAYLOAD_MAX 7900

/* ---- lock keys the server reads (it never takes these locks itself) ---- */

/* Held by the driver of a run: maintenance leaves that run's log alone. */
#define SP_LOCK_RUN_DRIVER_PREFIX "run-driver:"
/* Held around a sandbox's lifecycle: its instance is not a GC candidate. */
#define SP_LOCK_SANDBOX_PREFIX "sandbox:"

/* ---- the chunk maintenance appends when a run's producer is gone ---- */

#define SP_CHUNK_RUN_ERROR "RUN_ERROR"
#define SP_PRODUCER_LOST_CODE "PRODUCER_LOST"

/* ---- what a lease takeover took (lease_takeovers.kind, the metric's label) ---- */

#define SP_TAKEOVER_CHECKPOINT_WRITER "checkpoint_writer"
#define SP_TAKEOVER_LOCK "lock"

/* The status of a stream subscription (docs/contract/streams.md §7): failed while a webhook retry is scheduled. */
#define SP_SUBSCRIPTION_ACTIVE "active"
#define SP_SUBSCRIPTION_FAILED "failed"

/* ---- pg_cron's words the maintenance health check reads (not ours) ---- */

/* cron.job_run_details.status of a finished run (maintenance.md §7). */
#define SP_CRON_STATUS_SUCCEEDED "succeeded"
#define SP_CRON_STATUS_FAILED "failed"

/* The job schedule_maintenance creates. */
#define SP_CRON_JOB_NAME "sandbox_persist_maintenance"

#endif							/* SANDBOX_PERSIST_CONTRACT_H */
