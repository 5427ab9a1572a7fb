/*
 * stream_run_logs.c
 *
 * A run's durable event log (event_log.c) seen as a read-only JSON stream at
 * path run-logs/<run_id> (docs/contract/streams.md §1): stream_read and
 * stream_head serve it from event_logs and event_log_entries, each chunk one
 * JSON message (its exact stored text); stream_create, stream_append and
 * stream_delete refuse the path (STREAM_CONFLICT), which no protocol stream
 * can take.
 *
 * Offsets have the format of every stream (§3): the entry's epoch, then its
 * seq. The epoch of entry k is that of the log's last epoch transition
 * (epoch_first_seqs[i] <= k, epochs[i]) at or before k, 0 before the first:
 * the log row keeps its transitions, not every entry, and event_log_append
 * adds one only when the timeline's epoch is above the log's last (after a
 * failover or a point-in-time recovery). An offset E_k is served only when
 * the log holds entry k now and k's epoch is E; past the tail or from another
 * history it is STREAM_OFFSET_GONE, never other bytes.
 *
 * Locking: none. The log row and the entries are read in one statement
 * snapshot each; entries up to the tail read from the row never change
 * (maintenance deletes whole closed logs only, A5), so the read's entries
 * are those of the row it vouched the offset against.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "streams.h"

/* The path prefix of the run log view (§1). */
#define STREAM_RUN_LOG_PREFIX "run-logs/"

/* The streamId of a run log in answers: distinct from the numeric ids of protocol streams. */
#define STREAM_RUN_LOG_ID_PREFIX "eventLog:"

static SpQuery run_log_row = {
	"SELECT log_id, tail_seq, closed_at IS NOT NULL AS closed, epoch_first_seqs, epochs"
	" FROM sandbox_persist.event_logs WHERE run_id = $1",
	1, {TEXTOID}
};

/* Entries ($2, $3] of log $1, the chunks as stored (json is its text), as StreamPageEntries reads them. */
static SpQuery run_log_entries = {
	"SELECT seq, chunk AS data FROM sandbox_persist.event_log_entries"
	" WHERE log_id = $1 AND seq > $2 AND seq <= $3 ORDER BY seq",
	3, {INT8OID, INT8OID, INT8OID}
};

/* One event_logs row with its epoch transitions. */
typedef struct RunLogRow
{
	int64		log_id;
	int64		tail_seq;
	bool		closed;
	int			ntransitions;
	int64	   *first_seqs;		/* ascending */
	int64	   *epochs;			/* ascending, paired with first_seqs */
} RunLogRow;

/* Whether path names the run log view (run-logs/...). */
bool
StreamIsRunLogPath(const char *path)
{
	return strncmp(path, STREAM_RUN_LOG_PREFIX, strlen(STREAM_RUN_LOG_PREFIX)) == 0;
}

/* STREAM_CONFLICT for a write (what: create, append, delete, fork) at a run log path. */
void
StreamRefuseRunLogWrite(const char *path, const char *what)
{
	ereport(ERROR,
			(errcode_sp(SP_STREAM_CONFLICT),
			 errmsg("stream path is a run's event log"),
			 errdetail_sp(SP_STREAM_CONFLICT,
						  "The path \"%s\" is the read-only view of a run's event log; a stream %s there is refused.",
						  path, what),
			 errhint("Use a path outside run-logs/; a run's log is written by event_log_append and event_log_close.")));
}

/* The int8[] column col of the current SPI result's first row, as *n values (NULL: none). */
static int64 *
RunLogArray(int col, int *n)
{
	bool		isnull;
	Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col, &isnull);
	Datum	   *elems;
	bool	   *nulls;
	int64	   *out;

	*n = 0;
	if (isnull)
		return NULL;
	deconstruct_array(DatumGetArrayTypeP(d), INT8OID, sizeof(int64), FLOAT8PASSBYVAL,
					  TYPALIGN_DOUBLE, &elems, &nulls, n);
	out = palloc(sizeof(int64) * Max(*n, 1));
	for (int i = 0; i < *n; i++)
		out[i] = nulls[i] ? 0 : DatumGetInt64(elems[i]);
	return out;
}

/* The log of run_id, or STREAM_NOT_FOUND (the path names no stream). Inside SPI. */
static void
RunLogLoad(const char *path, RunLogRow *out)
{
	SpArgs		args;
	int			nepochs;

	SpArgsInit(&args);
	SpArgText(&args, path + strlen(STREAM_RUN_LOG_PREFIX));
	if (SpExec(&run_log_row, &args, true, 1) == 0)
		sp_error(SP_STREAM_NOT_FOUND,
				 ("stream not found"),
				 "No stream is at path \"%s\": run \"%s\" has no event log.", path,
				 path + strlen(STREAM_RUN_LOG_PREFIX));
	SpGetInt64(0, SpColumn("log_id"), &out->log_id);
	SpGetInt64(0, SpColumn("tail_seq"), &out->tail_seq);
	SpGetBool(0, SpColumn("closed"), &out->closed);
	out->first_seqs = RunLogArray(SpColumn("epoch_first_seqs"), &out->ntransitions);
	out->epochs = RunLogArray(SpColumn("epochs"), &nepochs);
	out->ntransitions = Min(out->ntransitions, nepochs);
}

/* The epoch of entry seq (seq 0, and entries before the first transition: 0). */
static int64
RunLogEpochAt(const RunLogRow *log, int64 seq)
{
	for (int i = log->ntransitions - 1; i >= 0; i--)
		if (log->first_seqs[i] <= seq)
			return log->epochs[i];
	return 0;
}


/* Append the meta fields every answer about a run log shares: streamId, contentType. */
static void
RunLogAppendId(StringInfo buf, const RunLogRow *log)
{
	appendStringInfo(buf, "{\"streamId\":\"" STREAM_RUN_LOG_ID_PREFIX INT64_FORMAT
					 "\",\"contentType\":\"" STREAM_JSON_MEDIA_TYPE "\"", log->log_id);
}

/*
 * stream_read of a run log path (§1): the row (meta json, body bytea) of
 * stream_read, the body the JSON array of the chunks read. kind, epoch and
 * seq are the parsed offset (text as given, for errors). Connects to SPI
 * itself.
 */
Datum
StreamRunLogRead(FunctionCallInfo fcinfo, const char *path, const char *offset,
				 StreamOffsetKind kind, int64 epoch, int64 seq, int64 max_bytes)
{
	MemoryContext outer = CurrentMemoryContext;
	MemoryContext spi;
	StringInfoData meta;
	StringInfoData body;
	TupleDesc	desc;
	Datum		values[2];
	bool		nulls[2] = {false, false};
	RunLogRow	log;
	int64		next_seq;
	bool		up_to_date;
	bytea	   *out;

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "stream_read must return a record");
	initStringInfo(&body);

	SPI_connect();
	RunLogLoad(path, &log);
	if (kind == STREAM_OFFSET_START)
		epoch = seq = 0;
	else if (kind == STREAM_OFFSET_NOW)
	{
		seq = log.tail_seq;
		epoch = RunLogEpochAt(&log, seq);
	}
	else
		StreamVouchOffset(path, offset, seq, log.tail_seq,
						  seq <= log.tail_seq && RunLogEpochAt(&log, seq) == epoch);
	next_seq = seq;
	if (seq < log.tail_seq)
	{
		SpArgs		args;

		SpArgsInit(&args);
		SpArgInt64(&args, log.log_id);
		SpArgInt64(&args, seq);
		SpArgInt64(&args, log.tail_seq);
		StreamPageEntries(SpOpenCursor(&run_log_entries, &args, true), false, true, max_bytes,
						  outer, &body, NULL, &next_seq);
	}
	up_to_date = next_seq == log.tail_seq;

	spi = MemoryContextSwitchTo(outer);
	initStringInfo(&meta);
	RunLogAppendId(&meta, &log);
	appendStringInfoString(&meta, ",\"startOffset\":");
	StreamAppendOffset(&meta, epoch, seq);
	appendStringInfoString(&meta, ",\"nextOffset\":");
	StreamAppendOffset(&meta, RunLogEpochAt(&log, next_seq), next_seq);
	appendStringInfo(&meta, ",\"upToDate\":%s,\"closed\":%s}", up_to_date ? "true" : "false",
					 up_to_date && log.closed ? "true" : "false");
	out = palloc(VARHDRSZ + body.len + 2);
	SET_VARSIZE(out, VARHDRSZ + body.len + 2);
	VARDATA(out)[0] = '[';
	memcpy(VARDATA(out) + 1, body.data, body.len);
	VARDATA(out)[body.len + 1] = ']';
	MemoryContextSwitchTo(spi);
	SPI_finish();

	values[0] = SpJsonResult(&meta);
	values[1] = PointerGetDatum(out);
	desc = BlessTupleDesc(desc);
	return HeapTupleGetDatum(heap_form_tuple(desc, values, nulls));
}

/*
 * stream_head of a run log path (§1): {streamId, contentType, nextOffset,
 * closed}. A run log has no protocol producers: producer_id is not looked up.
 * Connects to SPI itself.
 */
Datum
StreamRunLogHead(const char *path)
{
	MemoryContext outer = CurrentMemoryContext;
	MemoryContext spi;
	StringInfoData result;
	RunLogRow	log;

	SPI_connect();
	RunLogLoad(path, &log);
	spi = MemoryContextSwitchTo(outer);
	initStringInfo(&result);
	RunLogAppendId(&result, &log);
	appendStringInfoString(&result, ",\"nextOffset\":");
	StreamAppendOffset(&result, RunLogEpochAt(&log, log.tail_seq), log.tail_seq);
	appendStringInfo(&result, ",\"closed\":%s}", log.closed ? "true" : "false");
	MemoryContextSwitchTo(spi);
	SPI_finish();
	return SpJsonResult(&result);
}
