/*
 * event_log_append.c
 *
 * Appends to the durable event log (docs/contract/event-log.md):
 * event_log_append (a batch of chunks to one run's log) and
 * event_log_append_many (several such appends, to one log or many, in one
 * call: the adapter's micro-batcher). Both run LogAppendAll, which takes each
 * step once for the whole call: one statement locks every log, one reads the
 * idempotency ledger, one the fences, one inserts every entry, one every
 * ledger row and one moves every tail. So n appends cost about what one costs
 * plus their rows, where calling event_log_append n times made about 6n
 * statements.
 *
 * Locking: every log row FOR UPDATE until commit (commit order is sequence
 * order, event_log.c), taken in run_id order (the column's collation is C,
 * byte order, as strcmp sorts the batch), so two calls over the same logs
 * never wait on each other in a cycle; then the fenced runs' rows FOR SHARE,
 * in run_id order. Lock order: log rows, then run rows.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "nodes/parsenodes.h"
#include "common/cryptohash.h"
#include "common/sha2.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "event_log.h"

PG_FUNCTION_INFO_V1(event_log_append);
PG_FUNCTION_INFO_V1(event_log_append_many);

/*
 * The statements take arrays, one element per row, and come in two forms
 * (LogForm): LOG_ONE reads the elements [1] of a one-row call, whose plan is
 * as small as a scalar statement's (a single VALUES row is pulled up into
 * plain index look-ups), and LOG_MANY unnests any number. A single append,
 * the common call, so pays nothing for the batch path's sorts and joins.
 * Every one keeps its generic plan (CURSOR_OPT_GENERIC_PLAN): left to
 * choose, the plan cache prices a custom plan for a known small array below
 * the generic one and plans every call again.
 */
#define LOG_ONE 0
#define LOG_MANY 1
#define LOG_PLAN NULL, CURSOR_OPT_GENERIC_PLAN

/* The locked rows of the logs $1, in run_id order (their lock order). */
#define LOG_LOCK(columns) { \
	{"SELECT " columns " FROM sandbox_persist.event_logs WHERE run_id = $1[1] FOR UPDATE", \
	 1, {TEXTARRAYOID}, LOG_PLAN}, \
	{"SELECT " columns " FROM sandbox_persist.event_logs WHERE run_id = ANY($1)" \
	 " ORDER BY run_id FOR UPDATE", 1, {TEXTARRAYOID}, LOG_PLAN}}
#define LOG_LOCK_COLUMNS "log_id, run_id, tail_seq, closed_at IS NOT NULL AS closed"
static SpQuery log_lock[2] = LOG_LOCK(LOG_LOCK_COLUMNS);

/* The same, for the 0.4.0 schema: also the tail's digest. */
static SpQuery log_lock_digest[2] = LOG_LOCK(LOG_LOCK_COLUMNS ", tail_digest");

/* The logs of the runs $1 that have none yet (sorted: the insert order). */
static SpQuery log_create = {
	"INSERT INTO sandbox_persist.event_logs (run_id, created_at, last_append_at)"
	" SELECT r, $2, $2 FROM unnest($1::text[]) AS r ON CONFLICT (run_id) DO NOTHING",
	2, {TEXTARRAYOID, INT8OID}, LOG_PLAN
};

/* The ledger rows of the idempotent appends (log $1, producer $2, seq $3), by their ordinal i. */
#define LOG_LEDGER(rows) \
	"SELECT u.i, p.first_seq, p.chunk_count::bigint FROM " rows \
	"   AS u(log_id, producer_id, producer_seq, i)" \
	" JOIN sandbox_persist.event_log_producers p ON p.log_id = u.log_id" \
	"  AND p.producer_id = u.producer_id::uuid AND p.producer_seq = u.producer_seq"
static SpQuery log_producers[2] = {
	{LOG_LEDGER("(VALUES ($1[1], $2[1], $3[1], 1::bigint))"),
	 3, {INT8ARRAYOID, TEXTARRAYOID, INT8ARRAYOID}, LOG_PLAN},
	{LOG_LEDGER("unnest($1::bigint[], $2::text[], $3::bigint[]) WITH ORDINALITY"),
	 3, {INT8ARRAYOID, TEXTARRAYOID, INT8ARRAYOID}, LOG_PLAN}
};

/* The driver epochs of the runs $1, their rows FOR SHARE in run_id order. */
static SpQuery log_fences[2] = {
	{"SELECT run_id, driver_epoch FROM sandbox_persist.runs WHERE run_id = $1[1] FOR SHARE",
	 1, {TEXTARRAYOID}, LOG_PLAN},
	{"SELECT run_id, driver_epoch FROM sandbox_persist.runs"
	 " WHERE run_id = ANY($1) ORDER BY run_id FOR SHARE", 1, {TEXTARRAYOID}, LOG_PLAN}
};

static SpQuery log_run_status = {
	"SELECT status FROM sandbox_persist.runs WHERE run_id = $1",
	1, {TEXTOID}
};

/* The chunks arrive as json[] built from already-validated text: no second parse. */
static SpQuery log_insert_entries = {
	"INSERT INTO sandbox_persist.event_log_entries (log_id, seq, chunk)"
	" SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::json[])",
	3, {INT8ARRAYOID, INT8ARRAYOID, JSONARRAYOID}, LOG_PLAN
};

/* The same with each entry's running digest. */
static SpQuery log_insert_entries_digest = {
	"INSERT INTO sandbox_persist.event_log_entries (log_id, seq, chunk, digest)"
	" SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::json[], $4::bigint[])",
	4, {INT8ARRAYOID, INT8ARRAYOID, JSONARRAYOID, INT8ARRAYOID}, LOG_PLAN
};

#define LOG_INSERT_PRODUCERS(rows) \
	"INSERT INTO sandbox_persist.event_log_producers" \
	" (log_id, producer_id, producer_seq, first_seq, chunk_count)" \
	" SELECT u.log_id, u.producer_id::uuid, u.producer_seq, u.first_seq, u.chunk_count" \
	" FROM " rows " AS u(log_id, producer_id, producer_seq, first_seq, chunk_count)"
#define LOG_INSERT_PRODUCERS_TYPES \
	5, {INT8ARRAYOID, TEXTARRAYOID, INT8ARRAYOID, INT8ARRAYOID, INT4ARRAYOID}, LOG_PLAN
static SpQuery log_insert_producers[2] = {
	{LOG_INSERT_PRODUCERS("(VALUES ($1[1], $2[1], $3[1], $4[1], $5[1]))"), LOG_INSERT_PRODUCERS_TYPES},
	{LOG_INSERT_PRODUCERS("unnest($1::bigint[], $2::text[], $3::bigint[], $4::bigint[], $5::int[])"),
	 LOG_INSERT_PRODUCERS_TYPES}
};

/*
 * The new tails ($1 logs, $2 tails; $3 appends made while closed, counted;
 * $4 reopen the log; $5 the time; $6 the tail's digest, 0.4.0). The SET
 * expressions read the old row.
 */
#define LOG_ADVANCE_SET \
	"UPDATE sandbox_persist.event_logs l SET tail_seq = u.tail, last_append_at = $5," \
	" appends_after_close = l.appends_after_close + u.after_close," \
	" closed_at = CASE WHEN u.reopen THEN NULL ELSE l.closed_at END"
#define LOG_ADVANCE_ONE(digest_arg, digest_col) \
	" FROM (VALUES ($1[1], $2[1], $3[1], $4[1]" digest_arg "))" \
	" AS u(log_id, tail, after_close, reopen" digest_col ") WHERE l.log_id = u.log_id"
#define LOG_ADVANCE_MANY(digest_arg, digest_col) \
	" FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bool[]" digest_arg ")" \
	" AS u(log_id, tail, after_close, reopen" digest_col ") WHERE l.log_id = u.log_id"
#define LOG_ADVANCE_TYPES INT8ARRAYOID, INT8ARRAYOID, INT8ARRAYOID, BOOLARRAYOID, INT8OID

/* The 0.3.0 schema. */
static SpQuery log_advance[2] = {
	{LOG_ADVANCE_SET LOG_ADVANCE_ONE("", ""), 5, {LOG_ADVANCE_TYPES}, LOG_PLAN},
	{LOG_ADVANCE_SET LOG_ADVANCE_MANY("", ""), 5, {LOG_ADVANCE_TYPES}, LOG_PLAN}
};

/* The 0.4.0 schema: also the tail's digest. */
#define LOG_ADVANCE_DIGEST_SET LOG_ADVANCE_SET ", tail_digest = u.digest"
static SpQuery log_advance_digest[2] = {
	{LOG_ADVANCE_DIGEST_SET LOG_ADVANCE_ONE(", $6[1]", ", digest"),
	 6, {LOG_ADVANCE_TYPES, INT8ARRAYOID}, LOG_PLAN},
	{LOG_ADVANCE_DIGEST_SET LOG_ADVANCE_MANY(", $6::bigint[]", ", digest"),
	 6, {LOG_ADVANCE_TYPES, INT8ARRAYOID}, LOG_PLAN}
};

/*
 * The 0.5.0 schema: also the epoch transitions (docs/contract/streams.md
 * §1): $7 the current epoch (timeline - 1); when it is above the log's last
 * epoch (normally never: only the first append after a failover or a
 * point-in-time recovery), the transition (old tail + 1, $7) is appended.
 */
#define LOG_ADVANCE_EPOCH_SET LOG_ADVANCE_DIGEST_SET "," \
	" epoch_first_seqs = CASE WHEN $7 > " SP_SQL_LOG_LAST_EPOCH("l.epochs") \
	"   THEN coalesce(l.epoch_first_seqs, '{}') || (l.tail_seq + 1) ELSE l.epoch_first_seqs END," \
	" epochs = CASE WHEN $7 > " SP_SQL_LOG_LAST_EPOCH("l.epochs") \
	"   THEN coalesce(l.epochs, '{}') || $7 ELSE l.epochs END"
static SpQuery log_advance_epoch[2] = {
	{LOG_ADVANCE_EPOCH_SET LOG_ADVANCE_ONE(", $6[1]", ", digest"),
	 7, {LOG_ADVANCE_TYPES, INT8ARRAYOID, INT8OID}, LOG_PLAN},
	{LOG_ADVANCE_EPOCH_SET LOG_ADVANCE_MANY(", $6::bigint[]", ", digest"),
	 7, {LOG_ADVANCE_TYPES, INT8ARRAYOID, INT8OID}, LOG_PLAN}
};

/* The digests of entries ($2, $3] of log $1 (a retried append's tokens). */
static SpQuery log_stored_digests = {
	"SELECT digest FROM sandbox_persist.event_log_entries"
	" WHERE log_id = $1 AND seq > $2 AND seq <= $3 ORDER BY seq",
	3, {INT8OID, INT8OID, INT8OID}
};

/* The options of one append; producer_id NULL when the append is not idempotent. */
typedef struct LogAppendOptions
{
	char	   *producer_id;
	int64		producer_seq;
	bool		fenced;
	int64		fence_epoch;
	bool		with_digests;	/* return [{seq, digest}] instead of [seq] */
} LogAppendOptions;

/* One log of a call, locked: as read, then as the appends leave it. */
typedef struct LogTarget
{
	char	   *run_id;
	int64		log_id;
	int64		tail;
	int64		tail_digest;
	bool		closed;
	bool		locked;			/* its row was read (and locked) */
	bool		written;		/* an append of the call adds entries to it */
	bool		reopen;			/* an append reopened it */
	int64		after_close;	/* appends made while it was closed */
	bool		has_epoch;		/* its run row was read for a fence */
	int64		driver_epoch;
} LogTarget;

/* One append of a call: its input, then what was made of it. */
typedef struct LogAppend
{
	int			index;			/* position in the input: the result's place */
	char	   *run_id;
	const SpJson *chunks;
	LogAppendOptions opts;
	LogTarget  *log;
	bool		retry;			/* a committed append repeated: nothing written */
	bool		in_ledger;		/* the ledger holds (producer_id, producer_seq) */
	int64		ledger_first;
	int64		ledger_count;
	int64		first_seq;
	int64		prev_digest;	/* the digest of entry first_seq - 1 */
	int64	   *digests;		/* one per chunk (zeros without the 0.4.0 schema) */
} LogAppend;

/* An error context naming which append of event_log_append_many is at fault. */
typedef struct LogAppendContext
{
	int			index;
	const char *run_id;
} LogAppendContext;

/* errcontext callback: "append <i> (run "<id>") of the batch". */
static void
LogAppendErrorContext(void *arg)
{
	LogAppendContext *c = (LogAppendContext *) arg;

	if (c->run_id != NULL)
		errcontext("append %d (run \"%s\") of event_log_append_many", c->index, c->run_id);
	else
		errcontext("append %d of event_log_append_many", c->index);
}

/* Read options = {producerId?, producerSeq?, fenceEpoch?, withDigests?}; NULL means none. */
static void
LogReadOptions(const SpJson *opts, LogAppendOptions *out)
{
	static const char *const names[] = {"producerId", "producerSeq", "fenceEpoch", "withDigests"};
	SpJson	   *m[lengthof(names)] = {NULL, NULL, NULL, NULL};

	memset(out, 0, sizeof(LogAppendOptions));
	if (opts != NULL)
	{
		SpCheckKindJson(opts, "options", SPJ_OBJECT, "a JSON object", SP_CHECK_PLAIN);
		SpJsonMembers(opts, names, lengthof(names), m, "event log append options", false,
					  ERRCODE_INVALID_PARAMETER_VALUE, -1);
	}
	if ((m[0] == NULL) != (m[1] == NULL))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("producerId and producerSeq go together"),
				 errdetail("An idempotent append names both its producer and its sequence number.")));
	if (m[0] != NULL)
	{
		out->producer_id = SpCheckStringJson(m[0], "producerId", true, -1, SP_CHECK_PLAIN);
		if (!SpIsUuid(out->producer_id))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("producerId must be a UUID"),
					 errdetail("\"%s\" is not a UUID.", out->producer_id)));
		out->producer_seq = SpCheckIntJson(m[1], "producerSeq", 0);
	}
	if (m[2] != NULL)
	{
		out->fenced = true;
		out->fence_epoch = SpCheckIntJson(m[2], "fenceEpoch", 0);
	}
	if (m[3] != NULL)
	{
		if (m[3]->kind != SPJ_BOOL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("withDigests must be a boolean"),
					 errdetail("A JSON %s was given.", SpJsonKindName(m[3]->kind))));
		out->with_digests = m[3]->raw[0] == 't';
		if (out->with_digests && !LogHasDigests())
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("event log digests need the 0.4.0 schema"),
					 errdetail("Run ALTER EXTENSION sandbox_persist UPDATE.")));
	}
}

/* Check the chunks: a JSON array of objects, before anything is written. */
static void
LogCheckChunks(const SpJson *chunks)
{
	if (chunks->kind != SPJ_ARRAY)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("chunks must be a JSON array"),
				 errdetail("A JSON %s was given.", SpJsonKindName(chunks->kind))));
	for (int i = 0; i < chunks->count; i++)
		if (chunks->items[i]->kind != SPJ_OBJECT)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("each chunk must be a JSON object"),
					 errdetail("Element %d is a JSON %s.", i,
							   SpJsonKindName(chunks->items[i]->kind))));
}

/* The form of a statement for n rows: LOG_ONE or LOG_MANY. */
static inline int
LogForm(int n)
{
	return n == 1 ? LOG_ONE : LOG_MANY;
}

/* qsort order of appends: by run_id in byte order (the lock order), then input order. */
static int
LogAppendCompare(const void *a, const void *b)
{
	const LogAppend *x = *(LogAppend *const *) a;
	const LogAppend *y = *(LogAppend *const *) b;
	int			c = strcmp(x->run_id, y->run_id);

	return c != 0 ? c : (x->index > y->index) - (x->index < y->index);
}

/* The target of run_id among the n sorted targets, or NULL. */
static LogTarget *
LogFindTarget(LogTarget *targets, int n, const char *run_id)
{
	int			lo = 0;
	int			hi = n - 1;

	while (lo <= hi)
	{
		int			mid = (lo + hi) / 2;
		int			c = strcmp(run_id, targets[mid].run_id);

		if (c == 0)
			return &targets[mid];
		if (c < 0)
			hi = mid - 1;
		else
			lo = mid + 1;
	}
	return NULL;
}

/* Lock the logs of the runs given and copy their rows into targets. Inside SPI. */
static void
LogLockTargets(LogTarget *targets, int ntargets, char *const *run_ids, int nruns)
{
	SpArgs		args;
	bool		digests = LogHasDigests();
	int			rows;

	SpArgsInit(&args);
	SpArgDatum(&args, SpTextArray(run_ids, nruns));
	rows = SpExec(&(digests ? log_lock_digest : log_lock)[LogForm(nruns)], &args, false, 0);
	for (int r = 0; r < rows; r++)
	{
		LogTarget  *t = LogFindTarget(targets, ntargets, SpGetText(r, SpColumn("run_id")));

		if (t == NULL)
			elog(ERROR, "event log lock returned a run it was not asked for");
		SpGetInt64(r, SpColumn("log_id"), &t->log_id);
		SpGetInt64(r, SpColumn("tail_seq"), &t->tail);
		SpGetBool(r, SpColumn("closed"), &t->closed);
		if (digests)
			SpGetInt64(r, SpColumn("tail_digest"), &t->tail_digest);
		t->locked = true;
	}
}

/*
 * Lock every target's log row, creating the logs that do not exist yet (the
 * first append to a run). Inside SPI.
 */
static void
LogLockOrCreate(LogTarget *targets, int ntargets, int64 now)
{
	char	  **all = palloc(sizeof(char *) * ntargets);
	char	  **missing = palloc(sizeof(char *) * ntargets);
	int			nmissing = 0;
	SpArgs		args;

	for (int i = 0; i < ntargets; i++)
		all[i] = targets[i].run_id;
	LogLockTargets(targets, ntargets, all, ntargets);
	for (int i = 0; i < ntargets; i++)
		if (!targets[i].locked)
			missing[nmissing++] = targets[i].run_id;
	if (nmissing == 0)
		return;
	SpArgsInit(&args);
	SpArgDatum(&args, SpTextArray(missing, nmissing));
	SpArgInt64(&args, now);
	SpExec(&log_create, &args, false, 0);
	LogLockTargets(targets, ntargets, missing, nmissing);
	for (int i = 0; i < ntargets; i++)
		if (!targets[i].locked)
			elog(ERROR, "event log of run \"%s\" was neither found nor created", targets[i].run_id);
}

/* Mark the appends whose (producerId, producerSeq) the ledger holds. Inside SPI. */
static void
LogReadLedger(LogAppend **sorted, int n)
{
	int64	   *log_ids = palloc(sizeof(int64) * n);
	char	  **producers = palloc(sizeof(char *) * n);
	int64	   *seqs = palloc(sizeof(int64) * n);
	LogAppend **asked = palloc(sizeof(LogAppend *) * n);
	int			nasked = 0;
	SpArgs		args;
	int			rows;

	for (int i = 0; i < n; i++)
	{
		if (sorted[i]->opts.producer_id == NULL)
			continue;
		log_ids[nasked] = sorted[i]->log->log_id;
		producers[nasked] = sorted[i]->opts.producer_id;
		seqs[nasked] = sorted[i]->opts.producer_seq;
		asked[nasked++] = sorted[i];
	}
	if (nasked == 0)
		return;
	SpArgsInit(&args);
	SpArgDatum(&args, SpInt64Array(log_ids, nasked));
	SpArgDatum(&args, SpTextArray(producers, nasked));
	SpArgDatum(&args, SpInt64Array(seqs, nasked));
	rows = SpExec(&log_producers[LogForm(nasked)], &args, false, 0);
	for (int r = 0; r < rows; r++)
	{
		int64		i = 0;
		LogAppend  *a;

		SpGetInt64(r, SpColumn("i"), &i);
		a = asked[i - 1];
		a->in_ledger = true;
		SpGetInt64(r, SpColumn("first_seq"), &a->ledger_first);
		SpGetInt64(r, SpColumn("chunk_count"), &a->ledger_count);
	}
}

/* Read (and share-lock) the run rows of the fenced appends not in the ledger. Inside SPI. */
static void
LogReadFences(LogAppend **sorted, int n, LogTarget *targets, int ntargets)
{
	char	  **run_ids = palloc(sizeof(char *) * n);
	int			nruns = 0;
	SpArgs		args;
	int			rows;

	for (int i = 0; i < n; i++)
	{
		if (!sorted[i]->opts.fenced || sorted[i]->in_ledger)
			continue;
		/* sorted by run_id: one entry per run */
		if (nruns == 0 || strcmp(run_ids[nruns - 1], sorted[i]->run_id) != 0)
			run_ids[nruns++] = sorted[i]->run_id;
	}
	if (nruns == 0)
		return;
	SpArgsInit(&args);
	SpArgDatum(&args, SpTextArray(run_ids, nruns));
	rows = SpExec(&log_fences[LogForm(nruns)], &args, false, 0);
	for (int r = 0; r < rows; r++)
	{
		LogTarget  *t = LogFindTarget(targets, ntargets, SpGetText(r, SpColumn("run_id")));

		if (t != NULL)
			t->has_epoch = SpGetInt64(r, SpColumn("driver_epoch"), &t->driver_epoch);
	}
}

/* Whether an append to a closed log reopens it: only for a running or interrupted run. */
static bool
LogReopens(const char *run_id)
{
	SpArgs		args;
	char	   *status = NULL;

	if (sp_event_log_reopen != SP_REOPEN_IF_RUN_ACTIVE)
		return false;
	SpArgsInit(&args);
	SpArgText(&args, run_id);
	if (SpExec(&log_run_status, &args, false, 1) == 1)
		status = SpGetText(0, SpColumn("status"));
	return status != NULL &&
		(strcmp(status, SP_RUN_RUNNING) == 0 || strcmp(status, SP_RUN_INTERRUPTED) == 0);
}

/* The stored digests of a retried append's entries. Inside SPI. */
static void
LogStoredDigests(LogAppend *a)
{
	SpArgs		args;
	int			rows;

	SpArgsInit(&args);
	SpArgInt64(&args, a->log->log_id);
	SpArgInt64(&args, a->first_seq - 1);
	SpArgInt64(&args, a->first_seq + a->chunks->count - 1);
	rows = SpExec(&log_stored_digests, &args, false, 0);
	for (int i = 0; i < rows && i < a->chunks->count; i++)
		SpGetInt64(i, SpColumn("digest"), &a->digests[i]);
}

/*
 * An earlier append of this call with the same (producerId, producerSeq) to
 * the same log, or NULL: a retry inside one batch.
 */
static LogAppend *
LogEarlierTwin(LogAppend **sorted, int at)
{
	const LogAppend *a = sorted[at];

	for (int i = at - 1; i >= 0 && sorted[i]->log == a->log; i--)
		if (sorted[i]->opts.producer_id != NULL &&
			sorted[i]->opts.producer_seq == a->opts.producer_seq &&
			pg_strcasecmp(sorted[i]->opts.producer_id, a->opts.producer_id) == 0)
			return sorted[i];
	return NULL;
}

/*
 * A retried append: the numbers of the committed one; PRODUCER_SEQ_CONFLICT
 * when it had another number of chunks. True when a is a retry. Inside SPI.
 */
static bool
LogResolveRetry(LogAppend **sorted, int at)
{
	LogAppend  *a = sorted[at];
	LogAppend  *twin;
	int64		count;

	if (a->opts.producer_id == NULL)
		return false;
	twin = a->in_ledger ? NULL : LogEarlierTwin(sorted, at);
	if (!a->in_ledger && twin == NULL)
		return false;
	count = a->in_ledger ? a->ledger_count : twin->chunks->count;
	if (count != a->chunks->count)
		sp_error(SP_EVENT_LOG_PRODUCER_SEQ_CONFLICT,
				 ("event log producer sequence reused"),
				 "Producer %s already appended " INT64_FORMAT " chunks as sequence "
				 INT64_FORMAT ", not %d.", a->opts.producer_id, count, a->opts.producer_seq,
				 a->chunks->count);
	a->retry = true;
	if (twin != NULL)
	{
		a->first_seq = twin->first_seq;
		memcpy(a->digests, twin->digests, sizeof(int64) * count);
	}
	else
	{
		a->first_seq = a->ledger_first;
		if (a->opts.with_digests)
			LogStoredDigests(a);
	}
	return true;
}

/*
 * The hash of one entry: the first 8 bytes (big-endian) of
 * sha256(seq as 8 big-endian bytes || chunk text). The 0.4.0 upgrade script
 * and maintenance compute the same in SQL (SP_SQL_ENTRY_HASH); an entry's
 * digest is the XOR of the hashes of every entry up to it.
 */
static uint64
LogEntryHash(pg_cryptohash_ctx *ctx, int64 seq, const char *chunk, int len)
{
	uint8		be[8];
	uint8		out[PG_SHA256_DIGEST_LENGTH];
	uint64		h = 0;

	for (int i = 0; i < 8; i++)
		be[i] = (uint8) ((uint64) seq >> (56 - 8 * i));
	if (pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, be, sizeof(be)) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) chunk, len) < 0 ||
		pg_cryptohash_final(ctx, out, sizeof(out)) < 0)
		elog(ERROR, "could not hash an event log entry: %s", pg_cryptohash_error(ctx));
	for (int i = 0; i < 8; i++)
		h = (h << 8) | out[i];
	return h;
}

/*
 * Number one append's chunks after its log's tail (with their running
 * digests), after the fence and the reopen rule. Inside SPI.
 */
static void
LogPlace(LogAppend *a, pg_cryptohash_ctx *hash)
{
	LogTarget  *t = a->log;
	uint64		d = (uint64) t->tail_digest;

	if (a->opts.fenced && (!t->has_epoch || t->driver_epoch != a->opts.fence_epoch))
		sp_error(SP_EVENT_LOG_FENCE_STALE,
				 ("event log append fenced out"),
				 "Run \"%s\" is not at driverEpoch " INT64_FORMAT "; this driver was superseded.",
				 a->run_id, a->opts.fence_epoch);
	if (t->closed)
	{
		t->after_close++;
		if (LogReopens(a->run_id))
			t->closed = false, t->reopen = true;
	}
	a->first_seq = t->tail + 1;
	a->prev_digest = t->tail_digest;
	if (LogHasDigests())
	{
		for (int i = 0; i < a->chunks->count; i++)
		{
			d ^= LogEntryHash(hash, a->first_seq + i, a->chunks->items[i]->raw,
							  a->chunks->items[i]->rawlen);
			a->digests[i] = (int64) d;
		}
		t->tail_digest = (int64) d;
	}
	t->tail += a->chunks->count;
	t->written = true;
}

/* Insert the entries and the ledger rows of the appends placed. Inside SPI. */
static void
LogInsertEntries(LogAppend **sorted, int n, int nentries)
{
	int64	   *log_ids = palloc(sizeof(int64) * Max(nentries, n));
	int64	   *seqs = palloc(sizeof(int64) * Max(nentries, n));
	int64	   *digests = palloc(sizeof(int64) * nentries);
	Datum	   *chunks = palloc(sizeof(Datum) * nentries);
	char	  **producers = palloc(sizeof(char *) * n);
	int64	   *firsts = palloc(sizeof(int64) * n);
	Datum	   *counts = palloc(sizeof(Datum) * n);
	int			e = 0;
	int			p = 0;
	SpArgs		args;

	for (int i = 0; i < n; i++)
	{
		const LogAppend *a = sorted[i];

		if (a->retry)
			continue;
		for (int c = 0; c < a->chunks->count; c++, e++)
		{
			log_ids[e] = a->log->log_id;
			seqs[e] = a->first_seq + c;
			digests[e] = a->digests[c];
			chunks[e] = PointerGetDatum(cstring_to_text_with_len(a->chunks->items[c]->raw,
																 a->chunks->items[c]->rawlen));
		}
	}
	SpArgsInit(&args);
	SpArgDatum(&args, SpInt64Array(log_ids, e));
	SpArgDatum(&args, SpInt64Array(seqs, e));
	SpArgDatum(&args, PointerGetDatum(construct_array(chunks, e, JSONOID, -1, false,
													  TYPALIGN_INT)));
	if (LogHasDigests())
	{
		SpArgDatum(&args, SpInt64Array(digests, e));
		SpExec(&log_insert_entries_digest, &args, false, 0);
	}
	else
		SpExec(&log_insert_entries, &args, false, 0);

	for (int i = 0; i < n; i++)
	{
		const LogAppend *a = sorted[i];

		if (a->retry || a->opts.producer_id == NULL)
			continue;
		log_ids[p] = a->log->log_id;
		producers[p] = a->opts.producer_id;
		seqs[p] = a->opts.producer_seq;
		firsts[p] = a->first_seq;
		counts[p++] = Int32GetDatum(a->chunks->count);
	}
	if (p == 0)
		return;
	SpArgsInit(&args);
	SpArgDatum(&args, SpInt64Array(log_ids, p));
	SpArgDatum(&args, SpTextArray(producers, p));
	SpArgDatum(&args, SpInt64Array(seqs, p));
	SpArgDatum(&args, SpInt64Array(firsts, p));
	SpArgDatum(&args, PointerGetDatum(construct_array(counts, p, INT4OID, sizeof(int32), true,
													  TYPALIGN_INT)));
	SpExec(&log_insert_producers[LogForm(p)], &args, false, 0);
}

/* Move the tails of the logs written to. Inside SPI. */
static void
LogAdvance(LogTarget *targets, int ntargets, int64 now)
{
	int64	   *log_ids = palloc(sizeof(int64) * ntargets);
	int64	   *tails = palloc(sizeof(int64) * ntargets);
	int64	   *after_close = palloc(sizeof(int64) * ntargets);
	int64	   *digests = palloc(sizeof(int64) * ntargets);
	Datum	   *reopen = palloc(sizeof(Datum) * ntargets);
	int			n = 0;
	SpArgs		args;

	for (int i = 0; i < ntargets; i++)
	{
		if (!targets[i].written)
			continue;
		log_ids[n] = targets[i].log_id;
		tails[n] = targets[i].tail;
		after_close[n] = targets[i].after_close;
		digests[n] = targets[i].tail_digest;
		reopen[n++] = BoolGetDatum(targets[i].reopen);
	}
	if (n == 0)
		return;
	SpArgsInit(&args);
	SpArgDatum(&args, SpInt64Array(log_ids, n));
	SpArgDatum(&args, SpInt64Array(tails, n));
	SpArgDatum(&args, SpInt64Array(after_close, n));
	SpArgDatum(&args, PointerGetDatum(construct_array(reopen, n, BOOLOID, 1, true, TYPALIGN_CHAR)));
	SpArgInt64(&args, now);
	if (!LogHasDigests())
	{
		SpExec(&log_advance[LogForm(n)], &args, false, 0);
		return;
	}
	SpArgDatum(&args, SpInt64Array(digests, n));
	if (LogHasEpochs())
	{
		SpArgInt64(&args, SpTimelineEpoch());
		SpExec(&log_advance_epoch[LogForm(n)], &args, false, 0);
	}
	else
		SpExec(&log_advance_digest[LogForm(n)], &args, false, 0);
}

/* The result of one append: [seq, ...], or [{seq, digest}, ...] with withDigests. */
static void
LogAppendResult(StringInfo buf, const LogAppend *a)
{
	appendStringInfoChar(buf, '[');
	for (int i = 0; i < a->chunks->count; i++)
	{
		if (i > 0)
			appendStringInfoChar(buf, ',');
		if (!a->opts.with_digests)
		{
			appendStringInfo(buf, INT64_FORMAT, a->first_seq + i);
			continue;
		}
		appendStringInfo(buf, "{\"seq\":" INT64_FORMAT ",\"digest\":", a->first_seq + i);
		LogAppendDigest(buf, a->digests[i]);
		appendStringInfoChar(buf, '}');
	}
	appendStringInfoChar(buf, ']');
}

/*
 * Do the n appends (checked already) as one: lock, ledger, fences, place in
 * run and input order, write; then notify each written append's readers.
 * Per log the order of the appends is their input order; every check that
 * can refuse runs before the first write.
 */
static void
LogAppendAll(LogAppend *appends, int n, int64 now)
{
	LogAppend **sorted = palloc(sizeof(LogAppend *) * Max(n, 1));
	LogTarget  *targets = palloc0(sizeof(LogTarget) * Max(n, 1));
	int			nsorted = 0;
	int			ntargets = 0;
	int			nentries = 0;
	pg_cryptohash_ctx *hash;

	/* an empty append is [] and touches nothing, not even its log's existence */
	for (int i = 0; i < n; i++)
	{
		appends[i].digests = palloc0(sizeof(int64) * Max(appends[i].chunks->count, 1));
		if (appends[i].chunks->count > 0)
			sorted[nsorted++] = &appends[i];
	}
	if (nsorted == 0)
		return;
	qsort(sorted, nsorted, sizeof(LogAppend *), LogAppendCompare);
	for (int i = 0; i < nsorted; i++)
	{
		if (ntargets == 0 || strcmp(targets[ntargets - 1].run_id, sorted[i]->run_id) != 0)
			targets[ntargets++].run_id = sorted[i]->run_id;
		sorted[i]->log = &targets[ntargets - 1];
	}

	SPI_connect();
	LogLockOrCreate(targets, ntargets, now);
	LogReadLedger(sorted, nsorted);
	LogReadFences(sorted, nsorted, targets, ntargets);
	hash = pg_cryptohash_create(PG_SHA256);
	if (hash == NULL)
		elog(ERROR, "out of memory");
	for (int i = 0; i < nsorted; i++)
	{
		if (LogResolveRetry(sorted, i))
			continue;
		LogPlace(sorted[i], hash);
		nentries += sorted[i]->chunks->count;
	}
	pg_cryptohash_free(hash);
	if (nentries > 0)
	{
		LogInsertEntries(sorted, nsorted, nentries);
		LogAdvance(targets, ntargets, now);
	}
	SPI_finish();

	for (int i = 0; i < nsorted; i++)
		if (!sorted[i]->retry)
			LogNotify(sorted[i]->log->log_id, sorted[i]->first_seq, sorted[i]->prev_digest,
					  sorted[i]->chunks, LogHasDigests() ? sorted[i]->digests : NULL);
}

/*
 * event_log_append(run_id text, chunks json, options json) -> json: append a
 * batch atomically and return one sequence number per chunk, in order.
 * options = {producerId?, producerSeq?, fenceEpoch?, withDigests?}. Order:
 * input checks, the log lock, the idempotency ledger, the fence, the write.
 */
Datum
event_log_append(PG_FUNCTION_ARGS)
{
	LogAppend	a = {0};
	StringInfoData result;

	a.run_id = SpCheckIdArg(fcinfo, 0, "run_id", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	a.chunks = SpCheckJsonArg(fcinfo, 1, "chunks", SP_CHECK_PLAIN);
	LogCheckChunks(a.chunks);
	LogReadOptions(PG_ARGISNULL(2) ? NULL : SpJsonParseText(PG_GETARG_TEXT_PP(2)), &a.opts);
	LogAppendAll(&a, 1, SpNowMs(fcinfo, -1));
	initStringInfo(&result);
	LogAppendResult(&result, &a);
	PG_RETURN_DATUM(SpJsonResult(&result));
}

/*
 * event_log_append_many(appends json) -> json: the appends
 * [{runId, chunks, options?}, ...] atomically, as event_log_append would make
 * them one after another in this order; returns the array of their results.
 */
Datum
event_log_append_many(PG_FUNCTION_ARGS)
{
	static const char *const names[] = {"runId", "chunks", "options"};
	SpJson	   *list = SpCheckJsonKindArg(fcinfo, 0, "appends", SPJ_ARRAY, "a JSON array",
										  SP_CHECK_PLAIN);
	LogAppend  *appends = palloc0(sizeof(LogAppend) * Max(list->count, 1));
	LogAppendContext where = {0};
	ErrorContextCallback callback = {
		.callback = LogAppendErrorContext, .arg = &where, .previous = error_context_stack
	};
	StringInfoData result;

	error_context_stack = &callback;
	for (int i = 0; i < list->count; i++)
	{
		SpJson	   *m[lengthof(names)] = {NULL, NULL, NULL};
		LogAppend  *a = &appends[i];

		where.index = i;
		where.run_id = NULL;
		SpCheckKindJson(list->items[i], "append", SPJ_OBJECT, "a JSON object", SP_CHECK_PLAIN);
		SpJsonMembers(list->items[i], names, lengthof(names), m, "event log append", false,
					  ERRCODE_INVALID_PARAMETER_VALUE, -1);
		a->index = i;
		a->run_id = SpCheckIdJson(m[0], "runId", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
		where.run_id = a->run_id;
		SpCheckRequiredJson(m[1], "chunks", "a JSON array", SP_CHECK_PLAIN);
		a->chunks = m[1];
		LogCheckChunks(a->chunks);
		LogReadOptions(m[2] == NULL || m[2]->kind == SPJ_NULL ? NULL : m[2], &a->opts);
	}
	error_context_stack = callback.previous;

	LogAppendAll(appends, list->count, SpNowMs(fcinfo, -1));
	initStringInfo(&result);
	appendStringInfoChar(&result, '[');
	for (int i = 0; i < list->count; i++)
	{
		if (i > 0)
			appendStringInfoChar(&result, ',');
		LogAppendResult(&result, &appends[i]);
	}
	appendStringInfoChar(&result, ']');
	PG_RETURN_DATUM(SpJsonResult(&result));
}
