/*
 * event_log.c
 *
 * The durable event log behind StreamDurability (docs/contract/event-log.md):
 * one append-only log per run, chunks stored as their exact JSON text,
 * numbered densely from 1. Appends are idempotent per (producerId,
 * producerSeq), may be fenced by the run's driverEpoch, and are accepted
 * after close. Every append and close notifies sandbox_persist_event_log with
 * the numeric log id; an append's payload also carries its entries when they
 * fit (LogNotify). The appends themselves are event_log_append.c's; this
 * file owns the layout, the notifications, reads, close and snapshot.
 *
 * Since 0.4.0 every entry carries a running digest (docs/contract/failover.md
 * §2): the XOR of a 64-bit hash of (seq, chunk text) over the entries up to
 * it, kept on the log row for the tail. A reader's resume token is a seq and
 * its digest, and event_log_read_verified refuses (SP405) a token the server
 * cannot vouch for: past the tail, or naming entries it holds with other
 * content, as after a failover that lost acknowledged appends. The same
 * library serves a 0.3.0 schema (no digest columns): LogHasDigests() picks
 * the statements, and only 0.4.0 SQL reaches the verified read.
 *
 * Since 0.5.0 the log row also keeps its epoch transitions (epoch_first_seqs,
 * epochs: docs/contract/streams.md §1), which give every entry the epoch of
 * its offset in the stream view run-logs/<run_id> (stream_run_logs.c). The
 * statement that moves tail_seq appends a transition when the timeline's
 * epoch is above the log's last one: only after a failover or a
 * point-in-time recovery, so an append costs the same.
 *
 * Locking: an append locks its log row FOR UPDATE until commit, which is what
 * makes commit order equal sequence order (a reader past n never misses n).
 * A fenced append then reads the run row FOR SHARE, so a concurrent epoch bump
 * waits for it and every later append at the old epoch fails. Lock order:
 * log row, then run row. Reads never lock; read is STABLE, so its entries,
 * tail and closed flag come from one snapshot.
 */
#include "postgres.h"

#include "access/stratnum.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "executor/tuptable.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "event_log.h"
#include "key_scans.h"

PG_FUNCTION_INFO_V1(event_log_read);
PG_FUNCTION_INFO_V1(event_log_read_verified);
PG_FUNCTION_INFO_V1(event_log_read_pieces);
PG_FUNCTION_INFO_V1(event_log_close);
PG_FUNCTION_INFO_V1(event_log_snapshot);

/* max_rows of event_log_read when left out or NULL: the SQL signature's DEFAULT. */
#define LOG_READ_DEFAULT_ROWS 1000

static SpQuery log_select = {
	"SELECT log_id, tail_seq, closed_at IS NOT NULL AS closed FROM sandbox_persist.event_logs"
	" WHERE run_id = $1",
	1, {TEXTOID}
};

static SpQuery log_select_digest = {
	"SELECT log_id, tail_seq, closed_at IS NOT NULL AS closed, tail_digest"
	" FROM sandbox_persist.event_logs WHERE run_id = $1",
	1, {TEXTOID}
};

/* The digest of one entry: what a resume token is checked against. */
static SpQuery log_entry_digest = {
	"SELECT digest FROM sandbox_persist.event_log_entries WHERE log_id = $1 AND seq = $2",
	2, {INT8OID, INT8OID}
};

static SpQuery log_close = {
	"INSERT INTO sandbox_persist.event_logs AS l (run_id, created_at, last_append_at, closed_at)"
	" VALUES ($1, $2, $2, $2)"
	" ON CONFLICT (run_id) DO UPDATE SET closed_at = coalesce(l.closed_at, EXCLUDED.closed_at)"
	" RETURNING log_id",
	2, {TEXTOID, INT8OID}
};

/*
 * The layout of sandbox_persist.event_logs: -1 unknown, else LOG_LAYOUT_*
 * bits, forgotten on a relcache invalidation of that table or of every
 * relation (as RunsHaveStatusClock in runs.c).
 */
#define LOG_LAYOUT_DIGESTS 1	/* tail_digest (0.4.0 and later) */
#define LOG_LAYOUT_EPOCHS 2		/* epoch_first_seqs, epochs (0.5.0 and later) */
static int	log_layout = -1;
static Oid	log_relid = InvalidOid;

/* Relcache invalidation callback: forget the answer when event_logs may have changed. */
static void
LogForgetLayout(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == log_relid)
		log_layout = -1;
}

/* The LOG_LAYOUT_* bits of the event log tables (cached, see above). */
static int
LogLayout(void)
{
	static bool registered = false;

	if (log_layout < 0)
	{
		Oid			nsp = get_namespace_oid("sandbox_persist", true);

		if (!registered)
		{
			CacheRegisterRelcacheCallback(LogForgetLayout, (Datum) 0);
			registered = true;
		}
		log_relid = OidIsValid(nsp) ? get_relname_relid("event_logs", nsp) : InvalidOid;
		log_layout = 0;
		if (OidIsValid(log_relid) && get_attnum(log_relid, "tail_digest") != InvalidAttrNumber)
			log_layout |= LOG_LAYOUT_DIGESTS;
		if (OidIsValid(log_relid) && get_attnum(log_relid, "epochs") != InvalidAttrNumber)
			log_layout |= LOG_LAYOUT_EPOCHS;
	}
	return log_layout;
}

/* Whether the event log tables carry the 0.4.0 digests. */
bool
LogHasDigests(void)
{
	return (LogLayout() & LOG_LAYOUT_DIGESTS) != 0;
}

/* Whether event_logs carries the 0.5.0 epoch transitions (docs/contract/streams.md §1). */
bool
LogHasEpochs(void)
{
	return (LogLayout() & LOG_LAYOUT_EPOCHS) != 0;
}

/* Append a digest as its token text: 16 lowercase hexadecimal digits, quoted. */
void
LogAppendDigest(StringInfo buf, int64 digest)
{
	appendStringInfo(buf, "\"%016llx\"", (unsigned long long) (uint64) digest);
}

/*
 * Notify readers parked on this log; delivered at commit, dropped on rollback.
 * The payload is the log id; after an append to a log with digests it goes
 * on, when the whole payload fits PostgreSQL's limit, with a space and
 * {"prev": <digest of entry first - 1>, "entries": [{seq, digest, chunk}, ...]}
 * (event_log_read_verified's entries), so a follower that holds entry
 * first - 1 with that digest takes them without a read, and one that holds
 * another history (a failover rewrote the log) sees that it must read.
 */
void
LogNotify(int64 log_id, int64 first, int64 prev_digest, const SpJson *chunks, const int64 *digests)
{
	StringInfoData payload;
	Size		bound;

	initStringInfo(&payload);
	appendStringInfo(&payload, INT64_FORMAT, log_id);
	if (chunks != NULL && digests != NULL)
	{
		/* the frame, then per entry at most {"seq":<20>,"digest":"<16>","chunk":<text>}, */
		bound = payload.len + 48;
		for (int i = 0; i < chunks->count && bound < SP_NOTIFY_PAYLOAD_MAX; i++)
			bound += 60 + chunks->items[i]->rawlen;
		if (bound < SP_NOTIFY_PAYLOAD_MAX)
		{
			appendStringInfoString(&payload, " {\"prev\":");
			LogAppendDigest(&payload, prev_digest);
			appendStringInfoString(&payload, ",\"entries\":[");
			for (int i = 0; i < chunks->count; i++)
			{
				appendStringInfo(&payload, "%s{\"seq\":" INT64_FORMAT ",\"digest\":",
								 i ? "," : "", first + i);
				LogAppendDigest(&payload, digests[i]);
				appendStringInfoString(&payload, ",\"chunk\":");
				appendBinaryStringInfo(&payload, chunks->items[i]->raw, chunks->items[i]->rawlen);
				appendStringInfoChar(&payload, '}');
			}
			appendStringInfoString(&payload, "]}");
		}
	}
	Async_Notify(SP_CHANNEL_EVENT_LOG, payload.data);
	pfree(payload.data);
}

/* Parse a token digest (16 lowercase hexadecimal digits); 22023 otherwise. */
static int64
LogParseDigest(const char *text)
{
	uint64		v = 0;
	int			n = 0;

	for (const char *p = text; *p; p++, n++)
	{
		int			d;

		if (*p >= '0' && *p <= '9')
			d = *p - '0';
		else if (*p >= 'a' && *p <= 'f')
			d = *p - 'a' + 10;
		else
			d = -1;
		if (d < 0 || n >= 16)
		{
			n = -1;
			break;
		}
		v = (v << 4) | (uint64) d;
	}
	if (n != 16)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("after_digest must be 16 lowercase hexadecimal digits"),
				 errdetail("The digest of a resume token is the one a verified read or an append returned with the entry.")));
	return (int64) v;
}

/* The locked event_logs row of one run. */
typedef struct LogRow
{
	int64		log_id;
	int64		tail;
	bool		closed;
	bool		digests;		/* the 0.4.0 schema: tail_digest is read */
	int64		tail_digest;
} LogRow;

/* Read log_id, tail, closed (and tail_digest when digests) of the current SPI result's first row. */
static void
LogReadRow(LogRow *out, bool digests)
{
	SpGetInt64(0, SpColumn("log_id"), &out->log_id);
	SpGetInt64(0, SpColumn("tail_seq"), &out->tail);
	SpGetBool(0, SpColumn("closed"), &out->closed);
	out->digests = digests;
	out->tail_digest = 0;
	if (digests)
		SpGetInt64(0, SpColumn("tail_digest"), &out->tail_digest);
}

/*
 * Bytes of entries one row of event_log_read_pieces carries, about (a row
 * ends with the first entry that reaches it). A late reader's page of 1 000
 * chunks as one 140 KB json value was copied whole several times on the
 * server (page faults of fresh large buffers included) and decoded whole by
 * the client before the first chunk could be handed on; rows of 16 KB or
 * less read in about half the time (measured against 25 to 1 000 entries a
 * row, issue 33).
 */
#define LOG_PIECE_BYTES (16 * 1024)

/* Put the piece in buf (its entries, "[" already written) as one row of pieces, and start the next. */
static void
LogFlushPiece(StringInfo buf, ReturnSetInfo *pieces)
{
	Datum		value;
	bool		isnull = false;

	appendStringInfoChar(buf, ']');
	value = SpJsonResult(buf);
	tuplestore_putvalues(pieces->setResult, pieces->setDesc, &value, &isnull);
	pfree(DatumGetPointer(value));
	resetStringInfo(buf);
	appendStringInfoChar(buf, '[');
}

/*
 * Append [{seq, chunk}, ...] of the entries (after, last] of a log, or
 * [{seq, digest, chunk}, ...] with digests, oldest first, read with the
 * statement's snapshot (the one the SPI reads of the log row used: reads are
 * STABLE). With pieces, the entries go out as rows of pieces instead, each a
 * json array of about LOG_PIECE_BYTES (buf is scratch). An index scan of
 * event_log_entries_pkey of our own, not SPI: each chunk goes from the
 * buffer page straight into the result, where SPI copied every row into its
 * result table first (a page of 1 000 entries spent a fifth of its time
 * there). Sequence numbers are dense, so the range bounds the scan. Returns
 * the number of entries.
 */
static int
LogAppendEntries(StringInfo buf, int64 log_id, int64 after, int64 last, bool digests,
				 ReturnSetInfo *pieces)
{
	Relation	rel = SpOpenTable("event_log_entries", AccessShareLock);
	Relation	idx = SpOpenIndex("event_log_entries_pkey", AccessShareLock);
	TupleTableSlot *slot = table_slot_create(rel, NULL);
	AttrNumber	seq_att = get_attnum(RelationGetRelid(rel), "seq");
	AttrNumber	chunk_att = get_attnum(RelationGetRelid(rel), "chunk");
	AttrNumber	digest_att = digests ? get_attnum(RelationGetRelid(rel), "digest") : InvalidAttrNumber;
	ScanKeyData keys[3];
	IndexScanDesc scan;
	int			n = 0;
	int			in_piece = 0;

	/* index columns: 1 log_id, 2 seq */
	ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(log_id));
	ScanKeyInit(&keys[1], 2, BTGreaterStrategyNumber, F_INT8GT, Int64GetDatum(after));
	ScanKeyInit(&keys[2], 2, BTLessEqualStrategyNumber, F_INT8LE, Int64GetDatum(last));
	scan = SpBeginIndexScan(rel, idx, GetActiveSnapshot(), keys, 3);
	appendStringInfoChar(buf, '[');
	while (index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		bool		isnull;
		int64		seq = DatumGetInt64(slot_getattr(slot, seq_att, &isnull));
		text	   *chunk = DatumGetTextPP(slot_getattr(slot, chunk_att, &isnull));
		int			len = VARSIZE_ANY_EXHDR(chunk);

		/* one allocation for the page (or a piece), sized by its first entry: doubling copied it over and over */
		if (n == 0 && last > after)
			enlargeStringInfo(buf, (int) Min((len + 80) * (last - after),
											 pieces != NULL ? LOG_PIECE_BYTES + len + 80 : MaxAllocSize / 4));
		appendStringInfo(buf, "%s{\"seq\":" INT64_FORMAT, in_piece > 0 ? "," : "", seq);
		if (digests)
		{
			appendStringInfoString(buf, ",\"digest\":");
			LogAppendDigest(buf, DatumGetInt64(slot_getattr(slot, digest_att, &isnull)));
		}
		appendStringInfoString(buf, ",\"chunk\":");
		appendBinaryStringInfo(buf, VARDATA_ANY(chunk), len);
		appendStringInfoChar(buf, '}');
		n++;
		in_piece++;
		if (pieces != NULL && buf->len >= LOG_PIECE_BYTES)
		{
			LogFlushPiece(buf, pieces);
			in_piece = 0;
		}
	}
	if (pieces == NULL)
		appendStringInfoChar(buf, ']');
	else if (in_piece > 0)
		LogFlushPiece(buf, pieces);
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	index_close(idx, NoLock);
	table_close(rel, NoLock);
	return n;
}

/*
 * EVENT_LOG_OFFSET_DIVERGED unless the log holds the entry at after with this
 * digest (position 0 has digest 0). Inside SPI.
 */
static void
LogVouch(const char *run_id, const LogRow *log, int64 after, int64 digest)
{
	SpArgs		args;
	int64		stored = 0;

	if (after > log->tail)
		sp_error(SP_EVENT_LOG_OFFSET_DIVERGED,
				 ("event log offset cannot be vouched for"),
				 "The log of run \"%s\" ends at " INT64_FORMAT "; it holds no entry " INT64_FORMAT
				 ", so the chunks read up to it are not in this log (lost in a failover?).",
				 run_id, log->tail, after);
	if (after > 0)
	{
		SpArgsInit(&args);
		SpArgInt64(&args, log->log_id);
		SpArgInt64(&args, after);
		if (SpExec(&log_entry_digest, &args, true, 1) == 1)
			SpGetInt64(0, SpColumn("digest"), &stored);
	}
	if (stored != digest)
		sp_error(SP_EVENT_LOG_OFFSET_DIVERGED,
				 ("event log offset cannot be vouched for"),
				 "The log of run \"%s\" holds other chunks up to entry " INT64_FORMAT
				 " than the offset was read from (digest %016llx, not %016llx).",
				 run_id, after, (unsigned long long) (uint64) stored,
				 (unsigned long long) (uint64) digest);
}

/* What a read found before its entries: the log (if any) and the range to read. */
typedef struct LogReadStart
{
	bool		exists;
	LogRow		log;
	int64		after;
	int64		max_rows;
} LogReadStart;

/*
 * The checks and the log row of every read: the arguments, the log (none is
 * an empty read from 0, else EVENT_LOG_NOT_FOUND), and the offset, vouched
 * for by its digest (verified reads with a token digest, argument 2) or
 * within the tail. verified: the 0.4.0 reads, with tailDigest and digests.
 */
static void
LogStartRead(FunctionCallInfo fcinfo, bool verified, LogReadStart *start)
{
	char	   *run_id = SpCheckIdArg(fcinfo, 0, "run_id", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	int			rows_argno = verified ? 3 : 2;
	bool		check_digest = verified && !PG_ARGISNULL(2);
	int64		digest = 0;
	SpArgs		args;

	SpCheckArgNotNull(fcinfo, 1, "after_seq", "Read from the start with after_seq 0.", SP_CHECK_PLAIN);
	start->after = PG_GETARG_INT64(1);
	if (start->after < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("after_seq must not be negative"),
				 errdetail("A value of " INT64_FORMAT " was given.", start->after)));
	if (check_digest)
		digest = LogParseDigest(text_to_cstring(PG_GETARG_TEXT_PP(2)));
	start->max_rows = SpCheckRowLimitArg(fcinfo, rows_argno, "max_rows", LOG_READ_DEFAULT_ROWS);

	SPI_connect();
	SpArgsInit(&args);
	SpArgText(&args, run_id);
	start->exists = SpExec(verified ? &log_select_digest : &log_select, &args, true, 1) > 0;
	if (!start->exists)
	{
		if (start->after > 0)
			sp_error(SP_EVENT_LOG_NOT_FOUND,
					 ("event log not found"),
					 "Run \"%s\" has no event log to read after " INT64_FORMAT ".", run_id, start->after);
		SPI_finish();
		return;
	}
	LogReadRow(&start->log, verified);
	if (check_digest)
		LogVouch(run_id, &start->log, start->after, digest);
	else if (start->after > start->log.tail)
		sp_error(SP_EVENT_LOG_OFFSET_OUT_OF_RANGE,
				 ("event log offset out of range"),
				 "The log of run \"%s\" ends at " INT64_FORMAT "; offset " INT64_FORMAT
				 " is beyond it.", run_id, start->log.tail, start->after);
	SPI_finish();
}

/* Append a read's fields before its entries: {logId, exists, closed, tail[, tailDigest], without the brace closed. */
static void
LogAppendReadHead(StringInfo buf, const LogReadStart *start, bool verified)
{
	if (!start->exists)
		appendStringInfoString(buf, "{\"exists\":false,\"closed\":false,\"tail\":0");
	else
		appendStringInfo(buf, "{\"logId\":" INT64_FORMAT ",\"exists\":true,\"closed\":%s,\"tail\":"
						 INT64_FORMAT, start->log.log_id, start->log.closed ? "true" : "false",
						 start->log.tail);
	if (verified)
	{
		appendStringInfoString(buf, ",\"tailDigest\":");
		LogAppendDigest(buf, start->exists ? start->log.tail_digest : 0);
	}
}

/* Whether a read has entries to scan, and the last one it reads. */
static bool
LogReadRange(const LogReadStart *start, int64 *last)
{
	if (!start->exists || start->max_rows <= 0 || start->after >= start->log.tail)
		return false;
	*last = Min(start->log.tail, start->after + start->max_rows);
	return true;
}

/*
 * The body of both one-value reads: entries with seq > after_seq, oldest
 * first, at most max_rows, all from one snapshot (LogStartRead).
 */
static Datum
LogRead(FunctionCallInfo fcinfo, bool verified)
{
	LogReadStart start;
	StringInfoData buf;
	int64		last;

	LogStartRead(fcinfo, verified, &start);
	initStringInfo(&buf);
	LogAppendReadHead(&buf, &start, verified);
	appendStringInfoString(&buf, ",\"entries\":");
	if (LogReadRange(&start, &last))
		LogAppendEntries(&buf, start.log.log_id, start.after, last, verified, NULL);
	else
		appendStringInfoString(&buf, "[]");
	appendStringInfoChar(&buf, '}');
	PG_RETURN_DATUM(SpJsonResult(&buf));
}

/*
 * event_log_read(run_id text, after_seq bigint, max_rows integer) -> json
 * {logId, exists, closed, tail, entries}: entries with seq > after_seq,
 * oldest first, at most max_rows, all from one snapshot.
 */
Datum
event_log_read(PG_FUNCTION_ARGS)
{
	return LogRead(fcinfo, false);
}

/*
 * event_log_read_verified(run_id text, after_seq bigint, after_digest text,
 * max_rows integer) -> json {logId, exists, closed, tail, tailDigest,
 * entries: [{seq, digest, chunk}]}: the read of a resume token (0.4.0). With
 * after_digest, an offset past the tail or whose entry carries another
 * digest is EVENT_LOG_OFFSET_DIVERGED, never a different stream.
 */
Datum
event_log_read_verified(PG_FUNCTION_ARGS)
{
	return LogRead(fcinfo, true);
}

/*
 * event_log_read_pieces(run_id text, after_seq bigint, after_digest text,
 * max_rows integer) -> SETOF json: event_log_read_verified's read as rows
 * (0.5.0): first {logId, exists, closed, tail, tailDigest}, then the entries
 * [{seq, digest, chunk}, ...] in json arrays of about LOG_PIECE_BYTES each,
 * oldest first, so a client parses each row as it arrives.
 */
Datum
event_log_read_pieces(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	LogReadStart start;
	StringInfoData buf;
	Datum		head;
	bool		isnull = false;
	int64		last;

	SpBeginJsonRows(fcinfo, "piece");
	LogStartRead(fcinfo, true, &start);
	initStringInfo(&buf);
	LogAppendReadHead(&buf, &start, true);
	appendStringInfoChar(&buf, '}');
	head = SpJsonResult(&buf);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &head, &isnull);
	if (LogReadRange(&start, &last))
	{
		resetStringInfo(&buf);
		LogAppendEntries(&buf, start.log.log_id, start.after, last, true, rsinfo);
	}
	return (Datum) 0;
}

/*
 * event_log_close(run_id text): mark the log closed (creating an empty closed
 * log when none exists); idempotent, keeps the first close time, never fenced.
 */
Datum
event_log_close(PG_FUNCTION_ARGS)
{
	char	   *run_id = SpCheckIdArg(fcinfo, 0, "run_id", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	SpArgs		args;
	int64		log_id = 0;

	SPI_connect();
	SpArgsInit(&args);
	SpArgText(&args, run_id);
	SpArgInt64(&args, SpNowMs(fcinfo, -1));
	SpExec(&log_close, &args, false, 1);
	SpGetInt64(0, SpColumn("log_id"), &log_id);
	SPI_finish();
	LogNotify(log_id, 0, 0, NULL, NULL);
	PG_RETURN_VOID();
}

/* event_log_snapshot(run_id text) -> json: every stored entry in order; [] for an unknown run. */
Datum
event_log_snapshot(PG_FUNCTION_ARGS)
{
	char	   *run_id = SpCheckIdArg(fcinfo, 0, "run_id", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	StringInfoData buf;
	SpArgs		args;
	LogRow		log = {0};
	bool		found;

	SPI_connect();
	SpArgsInit(&args);
	SpArgText(&args, run_id);
	found = SpExec(&log_select, &args, true, 1) == 1;
	if (found)
		LogReadRow(&log, false);
	SPI_finish();
	initStringInfo(&buf);
	if (found && log.tail > 0)
		LogAppendEntries(&buf, log.log_id, 0, log.tail, false, NULL);
	else
		appendStringInfoString(&buf, "[]");
	PG_RETURN_DATUM(SpJsonResult(&buf));
}
