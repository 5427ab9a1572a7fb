/*
 * sandbox_persist.h
 *
 * Declarations shared by every module of the extension: settings, the clock,
 * the JSON walker, validators, the SPI plan cache and output helpers.
 * Nothing here takes locks; each store module states its own locking rule.
 */
#ifndef SANDBOX_PERSIST_H
#define SANDBOX_PERSIST_H

#include "postgres.h"

#include "common/int.h"
#include "fmgr.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"

#include "contract.h"
#include "errors.h"

/* PostgreSQL 18 spells "never returns" as a prefix, earlier majors as an attribute. */
#ifdef pg_noreturn
#define SP_NORETURN pg_noreturn
#else
#define SP_NORETURN pg_attribute_noreturn()
#endif

/* Largest integer a JavaScript number represents exactly: 2^53 - 1. */
#define SP_MAX_SAFE_INTEGER INT64CONST(9007199254740991)

/* Identifier byte limits (docs/contract/README.md §2.3). */
#define SP_ID_MAX_BYTES 1024
#define SP_KEY_MAX_BYTES 2048

/* ---- settings (sandbox_persist.c) ---- */
extern bool sp_allow_client_clock;
extern bool sp_allow_test_reset;
extern int	sp_test_timeline;
extern int	sp_writer_lease_ms;
extern int	sp_upload_expiry_s;
extern int	sp_lock_purge_after_s;
extern int	sp_event_log_close_grace_s;
extern int	sp_event_log_idle_close_s;
extern int	sp_event_log_retention_s;
extern int	sp_event_log_reopen;
extern int	sp_run_retention_s;
extern int	sp_reaper_ttl_s;
extern int	sp_reaper_sweep_interval_s;
extern int	sp_watchdog_idle_s;
extern int	sp_maintenance_overdue_after_s;
extern int	sp_maintenance_time_budget_ms;

/* Values of sandbox_persist.event_log_reopen_on_append. */
typedef enum SpReopenPolicy
{
	SP_REOPEN_OFF,
	SP_REOPEN_IF_RUN_ACTIVE
} SpReopenPolicy;

/*
 * Raise 55000 (hint: ALTER EXTENSION sandbox_persist UPDATE) when the
 * database's schema is older than release `since` (schema_version.c).
 */
extern void SpRequireSchema(const char *since, const char *function);
extern bool SpSchemaIsAtLeast(const char *since);

/*
 * The schema maintain() and _maintenance_backlog() serve: the blob GC queue,
 * the row counters they fold and read, and event_logs.lost_tail_seq.
 */
#define MAINT_LAYOUT_SINCE	"0.5.0"

/* Current time in epoch milliseconds, honouring an injected clock when allowed. */
extern int64 SpNowMs(FunctionCallInfo fcinfo, int now_argno);

/*
 * A time minus a duration in milliseconds, saturated at the bigint range
 * instead of wrapping. Every cutoff (now - grace, now - retention, ...) goes
 * through this, so an extreme injected clock can only put a cutoff "before
 * everything" or "after everything", never jump to the other end. An expiry
 * handed back to a caller (now + lease) is refused on overflow instead.
 */
static inline int64
SpTimeBefore(int64 t, int64 duration_ms)
{
	int64		result;

	if (pg_sub_s64_overflow(t, duration_ms, &result))
		return duration_ms > 0 ? PG_INT64_MIN : PG_INT64_MAX;
	return result;
}

/* ---- JSON walker (json_io.c) ---- */
typedef enum SpJsonKind
{
	SPJ_NULL,
	SPJ_BOOL,
	SPJ_NUMBER,
	SPJ_STRING,
	SPJ_ARRAY,
	SPJ_OBJECT
} SpJsonKind;

typedef struct SpJson
{
	SpJsonKind	kind;
	const char *raw;			/* exact source text of the value */
	int			rawlen;
	bool		boolval;
	int			count;			/* members of an array or object */
	struct SpJson **items;		/* array elements or object values */
	const char **keys;			/* object member names (raw, undecoded) */
	int		   *keylens;
} SpJson;

/* Outcome of decoding a JSON string into UTF-8. */
typedef enum SpStringStatus
{
	SPS_OK,
	SPS_NUL,					/* contains U+0000 */
	SPS_LONE_SURROGATE			/* contains an unpaired surrogate escape */
} SpStringStatus;

/* Outcome of reading a JSON number as a safe integer. */
typedef enum SpIntStatus
{
	SP_INT_OK,
	SP_INT_NOT_INTEGRAL,
	SP_INT_OUT_OF_RANGE
} SpIntStatus;

extern SpJson *SpJsonParse(const char *text, int len);
extern SpJson *SpJsonParseText(text *t);
extern void SpJsonCheckNesting(text *t);
extern SpStringStatus SpJsonDecodeString(const char *raw, int rawlen, char **out, int *outlen);
extern SpIntStatus SpJsonGetInt(const SpJson *node, int64 *out);
extern bool SpJsonGetDouble(const SpJson *node, double *out);
extern const char *SpJsonKindName(SpJsonKind kind);
extern char *SpJsonKeyName(const SpJson *obj, int i);

/*
 * Strict member lookup: out[i] receives the value of member names[i], or NULL
 * when absent. An unknown or repeated member raises an error with
 * unknown_errcode (or is skipped when ignore_unknown is set).
 */
extern void SpJsonMembers(const SpJson *obj, const char *const *names, int nnames,
						  SpJson **out, const char *what, bool ignore_unknown,
						  int unknown_errcode, int sp_code);

/* ---- output (json_io.c) ---- */
extern void SpAppendKey(StringInfo buf, bool *first, const char *key);
extern void SpAppendString(StringInfo buf, const char *s);
extern void SpAppendInt64(StringInfo buf, int64 v);
extern void SpAppendDouble(StringInfo buf, double v);
extern Datum SpJsonResult(StringInfo buf);
extern void SpBeginJsonRows(FunctionCallInfo fcinfo, const char *column);

/* ---- validation (validate.c) ---- */

/*
 * The error policy of a check: which SQLSTATE and wording a problem gets.
 * One family of checks serves every store; only the policy differs.
 */
typedef enum SpCheckPolicy
{
	SP_CHECK_PLAIN,				/* standard SQLSTATEs (README.md §4.3) */
	SP_CHECK_CKPT_ID,			/* SP007 INVALID_ID */
	SP_CHECK_CKPT_ENTRY			/* SP008 INVALID_ENTRY */
} SpCheckPolicy;

extern void SpCheckArgNotNull(FunctionCallInfo fcinfo, int argno, const char *name,
							  const char *detail, SpCheckPolicy policy);
extern void SpCheckIdBytes(int len, const char *field, int maxbytes, SpCheckPolicy policy);
extern char *SpCheckIdArg(FunctionCallInfo fcinfo, int argno, const char *name, int maxbytes,
						  SpCheckPolicy policy);
extern SpJson *SpCheckJsonArg(FunctionCallInfo fcinfo, int argno, const char *name,
							  SpCheckPolicy policy);
extern SpJson *SpCheckJsonKindArg(FunctionCallInfo fcinfo, int argno, const char *name,
								  SpJsonKind kind, const char *expected, SpCheckPolicy policy);
extern void SpCheckKindJson(const SpJson *node, const char *field, SpJsonKind kind,
							const char *expected, SpCheckPolicy policy);
extern void SpCheckRequiredJson(const SpJson *node, const char *field, const char *expected,
								SpCheckPolicy policy);
extern char *SpCheckIdJson(const SpJson *node, const char *field, int maxbytes,
						   SpCheckPolicy policy);
extern char *SpCheckStringJson(const SpJson *node, const char *field, bool required,
							   int maxbytes, SpCheckPolicy policy);
extern double SpCheckNumberJson(const SpJson *node, const char *field, SpCheckPolicy policy);

/* A row limit that means "no limit" (blob_list's documented default). */
#define SP_NO_ROW_LIMIT INT64CONST(-1)

extern bool SpIsUuid(const char *s);
extern bool SpIsContentKey(const char *key, const char *prefix);
extern int64 SpCheckIntJson(const SpJson *node, const char *field, int64 minval);
extern int64 SpCheckRowLimitArg(FunctionCallInfo fcinfo, int argno, const char *name, int64 dflt);
extern const char *SpCheckRunStatusJson(const SpJson *node, const char *field);

/* A shape check of an opaque JSON field (SpCheckObjectJson, SpCheckRunErrorJson, ...). */
typedef void (*SpJsonCheck) (const SpJson *node, const char *field);
extern void SpCheckRunErrorJson(const SpJson *node, const char *field);
extern void SpCheckObjectJson(const SpJson *node, const char *field);
extern void SpCheckArrayJson(const SpJson *node, const char *field);

/* ---- SPI helpers (spi_util.c) ---- */
#define SP_MAX_ARGS 16

typedef struct SpQuery
{
	const char *sql;
	int			nargs;
	Oid			argtypes[SP_MAX_ARGS];
	SPIPlanPtr	plan;			/* prepared and kept on first use */
	int			cursor_options; /* for SPI_prepare_cursor; 0 for most */
} SpQuery;

typedef struct SpArgs
{
	int			n;
	Datum		values[SP_MAX_ARGS];
	char		nulls[SP_MAX_ARGS];
} SpArgs;

extern void SpArgsInit(SpArgs *args);
extern void SpArgText(SpArgs *args, const char *s);
extern void SpArgTextLen(SpArgs *args, const char *s, int len);
extern void SpArgInt64(SpArgs *args, int64 v);
extern void SpArgFloat8(SpArgs *args, double v);
extern void SpArgBool(SpArgs *args, bool v);
extern void SpArgNull(SpArgs *args);
extern void SpArgDatum(SpArgs *args, Datum d);
extern Datum SpTextArray(char *const *items, int n);
extern Datum SpInt64Array(const int64 *values, int n);
extern void SpPlannerInit(void);
extern int	SpExec(SpQuery *q, SpArgs *args, bool read_only, long tcount);

/* ---- bounded row-lock waits (row_wait.c) ---- */
extern int	sp_lease_row_wait_ms;
extern int	SpExecRowWait(SpQuery *q, SpArgs *args, long tcount, const char *what);
extern Portal SpOpenCursor(SpQuery *q, SpArgs *args, bool read_only);

/* Writes the JSON record of one row of the current SPI result. */
typedef void (*SpRowWriter) (StringInfo buf, int row);

/* How a record field is written. */
typedef enum SpFieldKind
{
	SPF_STRING,					/* text, as a JSON string */
	SPF_INT64,					/* bigint, as a JSON number */
	SPF_DOUBLE,					/* double precision, shortest round-trip form */
	SPF_BOOL,					/* boolean */
	SPF_JSON					/* stored JSON text, spliced verbatim */
} SpFieldKind;

/* One output key of a record and the result column (by name) it comes from. */
typedef struct SpField
{
	const char *key;			/* the record key */
	const char *column;			/* the statement's result column */
	SpFieldKind kind;
} SpField;

/*
 * A record shape: its fields in output order. A SQL NULL column omits its
 * key (unset optionals are omitted, never null); required fields come from
 * NOT NULL columns.
 */
typedef struct SpRecord
{
	const SpField *fields;
	int			nfields;
} SpRecord;

#define SP_RECORD(fields) {(fields), lengthof(fields)}

extern int	SpColumn(const char *name);
extern void SpCheckRecordMembers(const SpJson *obj, const SpRecord *record, SpJson **out,
							   const char *what);
extern void SpAppendRecord(StringInfo buf, int row, const SpRecord *record);

extern Datum SpRowsJson(SpQuery *q, SpArgs *args, bool read_only, SpRowWriter writer,
						bool single, MemoryContext outer, bool *isnull);
extern Datum SpReadJson(FunctionCallInfo fcinfo, SpQuery *q, SpArgs *args, SpRowWriter writer,
						bool single);

/*
 * The common read method: argument 0 is an identifier named argname; return
 * the matching record (SQL NULL when none) or the array of matching records.
 * Inline, so the SPI layer never calls the validators (they call it).
 */
static inline Datum
SpLookupJson(FunctionCallInfo fcinfo, SpQuery *q, const char *argname, SpRowWriter writer,
			 bool single)
{
	SpArgs		args;

	SpArgsInit(&args);
	SpArgText(&args, SpCheckIdArg(fcinfo, 0, argname, SP_ID_MAX_BYTES, SP_CHECK_PLAIN));
	return SpReadJson(fcinfo, q, &args, writer, single);
}

extern Datum SpCreateOrResume(FunctionCallInfo fcinfo, SpQuery *insert, SpArgs *insert_args,
							  SpQuery *select, const char *id, SpRowWriter writer);

/* patch helpers (validate.c) */
extern void PatchArgStatus(SpArgs *args, const SpJson *node, const char *what);
extern void PatchArgInt(SpArgs *args, const SpJson *node, const char *field, int64 minval);
extern void PatchArgJson(SpArgs *args, const SpJson *node, const char *field, SpJsonCheck check);

/* ---- fence epochs (fences.c) ---- */

/* A fence is epoch << SP_FENCE_EPOCH_SHIFT + counter; epoch = timeline - 1. */
#define SP_FENCE_EPOCH_SHIFT 40

/* Every fence granted now is greater than this (the current epoch's floor). */
extern int64 SpFenceFloor(void);

/* The current epoch (timeline - 1) without the fence range's bound (event log entries). */
extern int64 SpTimelineEpoch(void);

/* Refuse a granted fence above 2^53 - 1. */
extern void SpCheckFence(int64 fence);

/* event_log.c: whether the event log tables have the 0.4.0 digests */
extern bool LogHasDigests(void);

/* event_log.c: whether event_logs has the 0.5.0 epoch transitions (epoch_first_seqs, epochs) */
extern bool LogHasEpochs(void);

/*
 * The 64-bit hash of one event log entry in SQL (the C side is LogEntryHash
 * in event_log_append.c; test/pgtap/failover.sql T7 checks they agree): the
 * first 8 bytes of sha256(int8send(seq) || the chunk's UTF-8 text).
 */
#define SP_SQL_ENTRY_HASH(seq, chunk) \
	"('x' || pg_catalog.encode(pg_catalog.substr(pg_catalog.sha256(" \
	"pg_catalog.int8send(" seq ") || pg_catalog.convert_to((" chunk ")::text, 'UTF8')), 1, 8), 'hex'))" \
	"::pg_catalog.bit(64)::bigint"

/*
 * The epoch of an event log's entries from its last transition on, in SQL
 * (docs/contract/streams.md §1): the last element of the log row's epochs
 * column (named by `epochs`), 0 for a log that never changed epoch. One home
 * for the append (event_log.c) and A10 (maintenance.c).
 */
#define SP_SQL_LOG_LAST_EPOCH(epochs) \
	"coalesce(" epochs "[pg_catalog.cardinality(" epochs ")], 0)"

/* runs.c: whether the runs table has the 0.3.0 status clock */
extern bool RunsHaveStatusClock(void);

/* row_counts.c: fold the counter rows of exited backends (maintain()); count a row written without the executor */
extern void RowCountsFold(void);
extern bool RowCountsAreAllTriggers(Relation rel);
extern void RowCountsOfWrite(Relation rel, HeapTuple oldrow, HeapTuple newrow);

/* takeovers.c: count one lease takeover (nothing before 0.4.0) */
extern void TakeoverCount(const char *kind);

extern Datum SpGetDatum(int row, int col, bool *isnull);
extern char *SpGetText(int row, int col);
extern bool SpGetInt64(int row, int col, int64 *out);
extern bool SpGetFloat8(int row, int col, double *out);
extern bool SpGetBool(int row, int col, bool *out);
extern bool SpIsNull(int row, int col);

#endif							/* SANDBOX_PERSIST_H */
