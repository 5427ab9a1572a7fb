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

bool		sp_allow_client_clock = false;
bool		sp_allow_test_reset = false;
int			sp_writer_lease_ms = 120000;
int			sp_blob_chunk_size = 256 * 1024;
int			sp_zstd_level = 3;
int			sp_blob_max_read = BLOB_MAX_READ_LIMIT;
int			sp_blob_gc_grace_s = 24 * 60 * 60;
int			sp_upload_expiry_s = 24 * 60 * 60;
int			sp_lock_purge_after_s = 60 * 60;
int			sp_event_log_close_grace_s = 10 * 60;
int			sp_event_log_idle_close_s = 10 * 60;
int			sp_event_log_retention_s = 30 * 24 * 60 * 60;
int			sp_event_log_reopen = SP_REOPEN_OFF;
int			sp_run_retention_s = 0;
int			sp_reaper_ttl_s = 0;
int			sp_reaper_sweep_interval_s = 0;
int			sp_watchdog_idle_s = 10 * 60;

static const struct config_enum_entry sp_reopen_options[] = {
	{"off", SP_REOPEN_OFF, false},
	{"if_run_active", SP_REOPEN_IF_RUN_ACTIVE, false},
	{NULL, 0, false}
};

/* Define one time setting in seconds (0 allowed where it means "off"). */
static void
SpDefineSeconds(const char *name, const char *desc, int *var, int boot, int min)
{
	DefineCustomIntVariable(name, desc, NULL, var, boot, min, INT_MAX,
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
							 NULL,
							 &sp_allow_test_reset,
							 false,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("sandbox_persist.writer_lease_duration",
							"Checkpoint writer lease duration used when lease_ms is not given.",
							NULL,
							&sp_writer_lease_ms,
							120000, 1, INT_MAX,
							PGC_SUSET, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("sandbox_persist.blob_chunk_size",
							"Largest raw chunk of a blob, for new writes.",
							"Each chunk is compressed on its own and a range read decodes only the chunks it overlaps.",
							&sp_blob_chunk_size,
							256 * 1024, 4 * 1024, BLOB_CHUNK_SIZE_MAX,
							PGC_SUSET, GUC_UNIT_BYTE,
							NULL, NULL, NULL);
	DefineCustomIntVariable("sandbox_persist.zstd_level",
							"zstd compression level for blob chunks.",
							NULL,
							&sp_zstd_level,
							3, 1, 19,
							PGC_SUSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("sandbox_persist.blob_max_read",
							"Most bytes one blob_get call returns.",
							"Larger objects are read in ranges. At most 511MB, so the bytea text"
							" of a whole read fits one message.",
							&sp_blob_max_read,
							BLOB_MAX_READ_LIMIT, 1024, BLOB_MAX_READ_LIMIT,
							PGC_SUSET, GUC_UNIT_BYTE,
							NULL, NULL, NULL);
	DefineCustomIntVariable("sandbox_persist.blob_gc_grace",
							"Unreferenced content-addressed blobs relied on more recently than this are kept.",
							"put and head refresh the time; head at most once per quarter of this period.",
							&sp_blob_gc_grace_s,
							24 * 60 * 60, 60, INT_MAX,
							PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);
	SpDefineSeconds("sandbox_persist.upload_expiry",
					"Streamed uploads idle longer than this are removed by maintenance.",
					&sp_upload_expiry_s, 24 * 60 * 60, 60);
	SpDefineSeconds("sandbox_persist.lock_purge_after",
					"Lock rows expired longer than this are deleted by maintenance.",
					&sp_lock_purge_after_s, 60 * 60, 0);
	SpDefineSeconds("sandbox_persist.event_log_close_grace",
					"Idle time before maintenance closes the open log of a terminal run.",
					&sp_event_log_close_grace_s, 10 * 60, 0);
	SpDefineSeconds("sandbox_persist.event_log_idle_close",
					"Idle time after which maintenance ends the open log of a run whose producer is gone; 0 = never.",
					&sp_event_log_idle_close_s, 10 * 60, 0);
	SpDefineSeconds("sandbox_persist.event_log_retention",
					"Closed event logs older than this are deleted by maintenance; 0 keeps them.",
					&sp_event_log_retention_s, 30 * 24 * 60 * 60, 0);
	DefineCustomEnumVariable("sandbox_persist.event_log_reopen_on_append",
							 "Whether an append after close reopens the log of a running or interrupted run.",
							 NULL,
							 &sp_event_log_reopen,
							 SP_REOPEN_OFF, sp_reopen_options,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);
	SpDefineSeconds("sandbox_persist.run_retention",
					"Terminal runs unchanged this long may be deleted by maintenance; 0 keeps them.",
					&sp_run_retention_s, 0, 0);
	SpDefineSeconds("sandbox_persist.reaper_ttl",
					"The application's detached-run TTL, for the reaper wake-up and watchdog; 0 = unknown.",
					&sp_reaper_ttl_s, 0, 0);
	SpDefineSeconds("sandbox_persist.reaper_sweep_interval",
					"The application's reaper sweep interval, for the watchdog; 0 = unknown.",
					&sp_reaper_sweep_interval_s, 0, 0);
	SpDefineSeconds("sandbox_persist.watchdog_idle",
					"Idle time after which the watchdog reports invisible runs and stuck cancels.",
					&sp_watchdog_idle_s, 10 * 60, 1);
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
