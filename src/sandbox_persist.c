/*
 * sandbox_persist.c
 *
 * Module entry point: PG_MODULE_MAGIC, the settings (all superuser-only and
 * reserved under the sandbox_persist. prefix), the planner hook of the kept
 * statements (spi_util.c) and the clock every store uses.
 * No locking.
 */
#include "postgres.h"

#include "datatype/timestamp.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "sandbox_persist.h"
#include "blobs.h"

PG_MODULE_MAGIC;

/*
 * Each setting's default, named once: the variable starts at it and its
 * definition below boots with it. The unit is in the name (_MS, _S, _BYTES)
 * and is the unit the definition declares (GUC_UNIT_MS, GUC_UNIT_S,
 * GUC_UNIT_BYTE), so "2min" or "1h" mean what they say.
 */
#define SP_WRITER_LEASE_MS_DEFAULT			(120 * 1000)
#define SP_BLOB_CHUNK_BYTES_DEFAULT			(256 * 1024)
#define SP_BLOB_INLINE_MAX_BYTES_DEFAULT	(256 * 1024)
#define SP_ZSTD_LEVEL_DEFAULT				1
#define SP_BLOB_CODEC_DEFAULT				BLOB_CODEC_ZSTD
#define SP_BLOB_MAX_READ_BYTES_DEFAULT		BLOB_MAX_READ_LIMIT
#define SP_BLOB_GC_GRACE_S_DEFAULT			(24 * 60 * 60)
#define SP_UPLOAD_EXPIRY_S_DEFAULT			(24 * 60 * 60)
#define SP_LOCK_PURGE_AFTER_S_DEFAULT		(60 * 60)
#define SP_EVENT_LOG_CLOSE_GRACE_S_DEFAULT	(10 * 60)
#define SP_EVENT_LOG_IDLE_CLOSE_S_DEFAULT	(10 * 60)
#define SP_EVENT_LOG_RETENTION_S_DEFAULT	(30 * 24 * 60 * 60)
#define SP_RUN_RETENTION_S_DEFAULT			0	/* keep */
#define SP_REAPER_TTL_S_DEFAULT				0	/* unknown */
#define SP_REAPER_SWEEP_INTERVAL_S_DEFAULT	0	/* unknown */
#define SP_WATCHDOG_IDLE_S_DEFAULT			(10 * 60)
#define SP_LEASE_ROW_WAIT_MS_DEFAULT		5000
#define SP_MAINTENANCE_OVERDUE_AFTER_S_DEFAULT	0	/* derive from the schedule */
#define SP_MAINTENANCE_TIME_BUDGET_MS_DEFAULT	5000

bool		sp_allow_client_clock = false;
bool		sp_allow_test_reset = false;
int			sp_test_timeline = 0;
int			sp_writer_lease_ms = SP_WRITER_LEASE_MS_DEFAULT;
int			sp_blob_chunk_size = SP_BLOB_CHUNK_BYTES_DEFAULT;
int			sp_blob_inline_max = SP_BLOB_INLINE_MAX_BYTES_DEFAULT;
int			sp_zstd_level = SP_ZSTD_LEVEL_DEFAULT;
int			sp_blob_codec = SP_BLOB_CODEC_DEFAULT;
bool		sp_blob_recompress = false;
int			sp_blob_max_read = SP_BLOB_MAX_READ_BYTES_DEFAULT;
int			sp_blob_gc_grace_s = SP_BLOB_GC_GRACE_S_DEFAULT;
int			sp_upload_expiry_s = SP_UPLOAD_EXPIRY_S_DEFAULT;
int			sp_lock_purge_after_s = SP_LOCK_PURGE_AFTER_S_DEFAULT;
int			sp_event_log_close_grace_s = SP_EVENT_LOG_CLOSE_GRACE_S_DEFAULT;
int			sp_event_log_idle_close_s = SP_EVENT_LOG_IDLE_CLOSE_S_DEFAULT;
int			sp_event_log_retention_s = SP_EVENT_LOG_RETENTION_S_DEFAULT;
int			sp_event_log_reopen = SP_REOPEN_OFF;
int			sp_run_retention_s = SP_RUN_RETENTION_S_DEFAULT;
int			sp_reaper_ttl_s = SP_REAPER_TTL_S_DEFAULT;
int			sp_reaper_sweep_interval_s = SP_REAPER_SWEEP_INTERVAL_S_DEFAULT;
int			sp_watchdog_idle_s = SP_WATCHDOG_IDLE_S_DEFAULT;
int			sp_lease_row_wait_ms = SP_LEASE_ROW_WAIT_MS_DEFAULT;
int			sp_maintenance_overdue_after_s = SP_MAINTENANCE_OVERDUE_AFTER_S_DEFAULT;
int			sp_maintenance_time_budget_ms = SP_MAINTENANCE_TIME_BUDGET_MS_DEFAULT;

static const struct config_enum_entry sp_reopen_options[] = {
	{"off", SP_REOPEN_OFF, false},
	{"if_run_active", SP_REOPEN_IF_RUN_ACTIVE, false},
	{NULL, 0, false}
};

/* sandbox_persist.blob_codec: the names are the codecs' own, the values those recorded per chunk. */
static const struct config_enum_entry sp_blob_codec_options[] = {
	{"zstd", BLOB_CODEC_ZSTD, false},
	{"lz4", BLOB_CODEC_LZ4, false},
	{NULL, 0, false}
};

/* Define one time setting in seconds (0 allowed where it means "off"). */
static void
SpDefineSeconds(const char *name, const char *desc, const char *long_desc, int *var, int boot,
				int min)
{
	DefineCustomIntVariable(name, desc, long_desc, var, boot, min, INT_MAX,
							PGC_SUSET, GUC_UNIT_S, NULL, NULL, NULL);
}

void		_PG_init(void);

/* Define the extension's settings and install the planner hook. */
void
_PG_init(void)
{
	DefineCustomBoolVariable("sandbox_persist.allow_client_clock",
							 "Honour now_ms arguments (an injected clock, for tests only).",
							 "A client clock could forge lease expiry, so this stays off in production.",
							 &sp_allow_client_clock,
							 false,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("sandbox_persist.allow_test_reset",
							 "Enable sandbox_persist._reset_for_tests().",
							 "That function empties every store, so this stays off outside test databases.",
							 &sp_allow_test_reset,
							 false,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("sandbox_persist.test_timeline",
							"The timeline fences are granted on, instead of the server's (for tests only); 0 = the server's.",
							"A fence carries the timeline it was granted on, so raising this simulates a"
							" failover to a promoted standby; it stays 0 outside tests.",
							&sp_test_timeline,
							0, 0, INT_MAX,
							PGC_SUSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("sandbox_persist.writer_lease_duration",
							"Checkpoint writer lease duration used when lease_ms is not given.",
							"checkpoint_acquire_writer and checkpoint_renew_writer take it when their lease_ms"
							" argument is NULL; a writer that does not renew within it loses the thread.",
							&sp_writer_lease_ms,
							SP_WRITER_LEASE_MS_DEFAULT, 1, INT_MAX,
							PGC_SUSET, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("sandbox_persist.blob_chunk_size",
							"Largest raw chunk of a blob, for new writes.",
							"Each chunk is compressed on its own and a range read decodes only the chunks it overlaps.",
							&sp_blob_chunk_size,
							SP_BLOB_CHUNK_BYTES_DEFAULT, 4 * 1024, BLOB_CHUNK_SIZE_MAX,
							PGC_SUSET, GUC_UNIT_BYTE,
							NULL, NULL, NULL);
	DefineCustomIntVariable("sandbox_persist.blob_inline_max",
							"Largest blob stored inline in its blobs row, for new puts.",
							"A non-empty object of at most this many bytes and at most one chunk is"
							" kept in one row instead of a chunk row; 0 stores every object in chunks.",
							&sp_blob_inline_max,
							SP_BLOB_INLINE_MAX_BYTES_DEFAULT, 0, BLOB_CHUNK_SIZE_MAX,
							PGC_SUSET, GUC_UNIT_BYTE,
							NULL, NULL, NULL);
	DefineCustomIntVariable("sandbox_persist.zstd_level",
							"zstd compression level for blob chunks.",
							"Level 1 compresses about twice as fast as 3 and stores a few percent more;"
							" either stays well below pglz.",
							&sp_zstd_level,
							SP_ZSTD_LEVEL_DEFAULT, 1, 19,
							PGC_SUSET, 0,
							NULL, NULL, NULL);
	DefineCustomEnumVariable("sandbox_persist.blob_codec",
							 "Codec for new blob chunks and inline objects: zstd or lz4.",
							 "Recorded per chunk, so a change applies to new writes and every object"
							 " stays readable. lz4 writes and reads several times faster; zstd stores less.",
							 &sp_blob_codec,
							 SP_BLOB_CODEC_DEFAULT, sp_blob_codec_options,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("sandbox_persist.blob_recompress",
							 "Whether maintain() rewrites lz4 blob chunks and inline objects as zstd.",
							 "With blob_codec = lz4, blobs are written at lz4 speed and stored at zstd's size"
							 " once a maintenance round has passed; the bytes, etag and times of an object"
							 " do not change. Set it where maintain() runs (ALTER DATABASE or ALTER SYSTEM).",
							 &sp_blob_recompress,
							 false,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("sandbox_persist.blob_max_read",
							"Most bytes one blob_get call returns.",
							"Larger objects are read in ranges. At most 511MB, so the bytea text"
							" of a whole read fits one message.",
							&sp_blob_max_read,
							SP_BLOB_MAX_READ_BYTES_DEFAULT, 1024, BLOB_MAX_READ_LIMIT,
							PGC_SUSET, GUC_UNIT_BYTE,
							NULL, NULL, NULL);
	DefineCustomIntVariable("sandbox_persist.blob_gc_grace",
							"Unreferenced content-addressed blobs relied on more recently than this are kept.",
							"put and head refresh the time; head at most once per quarter of this period.",
							&sp_blob_gc_grace_s,
							SP_BLOB_GC_GRACE_S_DEFAULT, 60, INT_MAX,
							PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);
	SpDefineSeconds("sandbox_persist.upload_expiry",
					"Streamed uploads idle longer than this are removed by maintenance.",
					"Their staged bytes are deleted; a later append or commit of the upload fails"
					" with BLOB_UPLOAD_NOT_FOUND and the object keeps its previous version.",
					&sp_upload_expiry_s, SP_UPLOAD_EXPIRY_S_DEFAULT, 60);
	SpDefineSeconds("sandbox_persist.lock_purge_after",
					"Lock rows expired longer than this are deleted by maintenance.",
					"Only housekeeping: an expired lease is already free to take, and fences come"
					" from one sequence, so they keep growing after a purge.",
					&sp_lock_purge_after_s, SP_LOCK_PURGE_AFTER_S_DEFAULT, 0);
	SpDefineSeconds("sandbox_persist.event_log_close_grace",
					"Idle time before maintenance closes the open log of a terminal run.",
					"A log whose run is completed, failed or aborted and that received no append"
					" for this long is closed, which ends the streams of its readers.",
					&sp_event_log_close_grace_s, SP_EVENT_LOG_CLOSE_GRACE_S_DEFAULT, 0);
	SpDefineSeconds("sandbox_persist.event_log_idle_close",
					"Idle time after which maintenance ends the open log of a run whose producer is gone; 0 = never.",
					"The producer is taken as gone when the run is unrecorded or running, nothing was"
					" appended for this long and no run-driver lock is held: maintenance appends a"
					" RUN_ERROR chunk with code PRODUCER_LOST and closes the log.",
					&sp_event_log_idle_close_s, SP_EVENT_LOG_IDLE_CLOSE_S_DEFAULT, 0);
	SpDefineSeconds("sandbox_persist.event_log_retention",
					"Closed event logs older than this are deleted by maintenance; 0 keeps them.",
					"Counted from the close; the entries and the producer ledger of the log are"
					" deleted with it.",
					&sp_event_log_retention_s, SP_EVENT_LOG_RETENTION_S_DEFAULT, 0);
	DefineCustomEnumVariable("sandbox_persist.event_log_reopen_on_append",
							 "Whether an append after close reopens the log of a running or interrupted run.",
							 "off: an append after close is stored and counted, and the log stays closed."
							 " if_run_active: it also reopens the log when its run is running or interrupted.",
							 &sp_event_log_reopen,
							 SP_REOPEN_OFF, sp_reopen_options,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);
	SpDefineSeconds("sandbox_persist.run_retention",
					"Terminal runs unchanged this long may be deleted by maintenance; 0 keeps them.",
					"A completed, failed or aborted run is deleted only when no sandbox instance"
					" refers to it and its event log, if any, is closed.",
					&sp_run_retention_s, SP_RUN_RETENTION_S_DEFAULT, 0);
	SpDefineSeconds("sandbox_persist.reaper_ttl",
					"The application's detached-run TTL, for the reaper wake-up and watchdog; 0 = unknown.",
					"Set it to the TTL the application's reaper uses: the overview then counts runs"
					" detached for longer, and the watchdog reports a reaper that lets them pile up.",
					&sp_reaper_ttl_s, SP_REAPER_TTL_S_DEFAULT, 0);
	SpDefineSeconds("sandbox_persist.reaper_sweep_interval",
					"The application's reaper sweep interval, for the watchdog; 0 = unknown.",
					"With it the watchdog reports a missing reaper: detached runs exist and no"
					" reaper_heartbeat arrived within two sweeps.",
					&sp_reaper_sweep_interval_s, SP_REAPER_SWEEP_INTERVAL_S_DEFAULT, 0);
	SpDefineSeconds("sandbox_persist.watchdog_idle",
					"Idle time after which the watchdog reports invisible runs and stuck cancels.",
					"An attached running run unchanged this long, with no append to its log and no"
					" run-driver lock held, is invisible; a running run with a cancel requested and"
					" unchanged this long is a stuck cancel.",
					&sp_watchdog_idle_s, SP_WATCHDOG_IDLE_S_DEFAULT, 1);
	DefineCustomIntVariable("sandbox_persist.lease_row_wait",
							"Longest wait for a lease row in lock and writer-lease acquire and renew; 0 = no bound.",
							"Past it the call fails with LEASE_ROW_BUSY (SP501), changes nothing and can be"
							" retried. Only a transaction left open after calling a lock or checkpoint"
							" function holds such a row that long; a shorter lock_timeout of the caller wins.",
							&sp_lease_row_wait_ms,
							SP_LEASE_ROW_WAIT_MS_DEFAULT, 0, INT_MAX,
							PGC_SUSET, GUC_UNIT_MS,
							NULL, NULL, NULL);
	SpDefineSeconds("sandbox_persist.maintenance_overdue_after",
					"Maintenance is reported overdue when maintain() has not completed for this long; 0 = derive it.",
					"0 takes twice the longest gap between two runs of the schedule recorded by"
					" schedule_maintenance, plus one minute (3 min for every minute). A positive value"
					" also applies when maintenance is scheduled elsewhere (another database, an outside cron).",
					&sp_maintenance_overdue_after_s, SP_MAINTENANCE_OVERDUE_AFTER_S_DEFAULT, 0);
	DefineCustomIntVariable("sandbox_persist.maintenance_time_budget",
							"A maintain() round starts no new batch of a collecting action after this long; 0 = no time bound.",
							"The collecting actions (A1, A2, A3, A5, A6) take at most max_rows rows each,"
							" in statements of at most 1000 rows; past this time each stops after its"
							" current batch, so a backlog drains as fast as the budget allows.",
							&sp_maintenance_time_budget_ms,
							SP_MAINTENANCE_TIME_BUDGET_MS_DEFAULT, 0, INT_MAX,
							PGC_SUSET, GUC_UNIT_MS,
							NULL, NULL, NULL);
	MarkGUCPrefixReserved("sandbox_persist");
	/* kept statements are planned without sequential scans (spi_util.c) */
	SpPlannerInit();
}

/*
 * Current time in epoch milliseconds. Argument now_argno, when not NULL, is an
 * injected clock: refused unless a superuser allowed it.
 */
int64
SpNowMs(FunctionCallInfo fcinfo, int now_argno)
{
	TimestampTz now;

	if (now_argno >= 0 && now_argno < PG_NARGS() && !PG_ARGISNULL(now_argno))
	{
		if (!sp_allow_client_clock)
			sp_error(SP_CLIENT_CLOCK_NOT_ALLOWED,
					 ("now_ms is not allowed"),
					 "The client clock is honoured only while sandbox_persist.allow_client_clock is on.");
		return PG_GETARG_INT64(now_argno);
	}
	/* The wall clock at the moment of the call, never the transaction start. */
	now = GetCurrentTimestamp();
	return now / 1000 +
		(int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000;
}
