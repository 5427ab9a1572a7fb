/*
 * sandbox_persist.c
 *
 * Module entry point: PG_MODULE_MAGIC, the settings (all superuser-only and
 * reserved under the sandbox_persist. prefix) and the clock every store uses.
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
int			sp_blob_max_read = 512 * 1024 * 1024;
int			sp_blob_gc_grace_s = 24 * 60 * 60;

void		_PG_init(void);

/* Define the extension's settings. */
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
							256 * 1024, 4 * 1024, 16 * 1024 * 1024,
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
							"Larger objects are read in ranges.",
							&sp_blob_max_read,
							512 * 1024 * 1024, 1024, (int) (MaxAllocSize - VARHDRSZ),
							PGC_SUSET, GUC_UNIT_BYTE,
							NULL, NULL, NULL);
	DefineCustomIntVariable("sandbox_persist.blob_gc_grace",
							"Unreferenced content-addressed blobs relied on more recently than this are kept.",
							"put and head refresh the time; head at most once per quarter of this period.",
							&sp_blob_gc_grace_s,
							24 * 60 * 60, 60, INT_MAX,
							PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);
	MarkGUCPrefixReserved("sandbox_persist");
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
