/*
 * stream_wakes.c
 *
 * The delivery side of stream subscriptions (docs/contract/streams.md §7):
 * wakes, the pull-wake claim, acknowledgements (webhook callback and
 * pull-wake ack share one function), release, and the two functions the
 * server that sends webhooks calls (stream_subscription_deliveries, then
 * stream_subscription_delivered per webhook sent).
 *
 * A wake is issued when an idle subscription (no wake in flight, no holder)
 * has a linked stream whose tail sorts after its acknowledged offset: the
 * generation goes up, a new wake_id is drawn and the tails are kept as the
 * wake's snapshot. A webhook wake is due for delivery at once (NOTIFY
 * sandbox_persist_subscription); a pull-wake one appends a wake event to the
 * subscription's wake stream in the same transaction.
 *
 * Locking: a subscription's row, FOR UPDATE, serialises everything that
 * changes its wake. An append locks every subscription of its stream in id
 * order (so two appends never wait on each other in a cycle), then judges
 * idleness in a new statement, on what a concurrent ack or release
 * committed (x36). Tokens are stored as their SHA-256 only; a token is
 * handed out once, by the claim or the delivery.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/async.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "streams.h"

PG_FUNCTION_INFO_V1(stream_subscription_claim);
PG_FUNCTION_INFO_V1(stream_subscription_ack);
PG_FUNCTION_INFO_V1(stream_subscription_release);
PG_FUNCTION_INFO_V1(stream_subscription_deliveries);
PG_FUNCTION_INFO_V1(stream_subscription_delivered);

/* How long a server owns a delivery it took before another may send it again (ms). */
#define SUB_DELIVERY_CLAIM_MS 60000
/* Lapsed leases ended per stream_subscription_deliveries call. */
#define SUB_EXPIRE_BATCH 100
/* Longest worker name a claim records. */
#define SUB_WORKER_MAX_BYTES 256

/* A fresh bearer token: 244 random bits as 64 hex digits (two version-4 UUIDs). */
#define SUB_NEW_TOKEN \
	"pg_catalog.replace(pg_catalog.gen_random_uuid()::text, '-', '') ||" \
	" pg_catalog.replace(pg_catalog.gen_random_uuid()::text, '-', '')"

/* The SHA-256 of the token in parameter p. */
#define SUB_TOKEN_HASH(p) "pg_catalog.sha256(pg_catalog.convert_to(" p ", 'UTF8'))"

/* The columns that make a subscription idle again. */
#define SUB_END_WAKE \
	"wake_id = NULL, wake_snapshot = NULL, token_hash = NULL, holder = NULL," \
	" lease_expires_at = NULL, delivery_due_at = NULL, failed_attempts = 0"

/*
 * Issue a wake to each idle subscription in the CTE cand (subscription_id)
 * with pending work, $2 being now: returns kind, wake_stream, the new
 * generation and the first pending path of each. The caller holds the
 * candidates' rows locked, so this statement's snapshot, taken after those
 * locks were granted, judges idleness on their latest committed state.
 */
#define SUB_ISSUE_WAKES(cand) \
	"WITH cand AS (" cand ")," \
	" idle AS (SELECT s.subscription_id FROM sandbox_persist.stream_subscriptions s" \
	"  WHERE s.subscription_id IN (SELECT subscription_id FROM cand)" \
	"  AND s.wake_id IS NULL AND s.holder IS NULL)," \
	" k AS (SELECT l.subscription_id, l.path, t.tail_offset, t.tail_offset > l.acked_offset AS pending" \
	"  FROM sandbox_persist.stream_subscription_links l" \
	"  CROSS JOIN LATERAL (SELECT " SUB_TAIL_OF("l.path") " AS tail_offset) t" \
	"  WHERE l.subscription_id IN (SELECT subscription_id FROM idle))," \
	" p AS (SELECT k.subscription_id, pg_catalog.json_object_agg(k.path, k.tail_offset) AS snapshot," \
	"  min(k.path) FILTER (WHERE k.pending) AS first_pending FROM k GROUP BY k.subscription_id)" \
	" UPDATE sandbox_persist.stream_subscriptions s SET generation = s.generation + 1," \
	"  wake_id = 'w_' || pg_catalog.replace(pg_catalog.gen_random_uuid()::text, '-', '')," \
	"  wake_snapshot = p.snapshot, token_hash = NULL, holder = NULL, failed_attempts = 0," \
	"  lease_expires_at = CASE WHEN s.kind = 'webhook' THEN $2 + s.lease_ttl_ms END," \
	"  delivery_due_at = CASE WHEN s.kind = 'webhook' THEN $2 END" \
	" FROM p WHERE s.subscription_id = p.subscription_id AND p.first_pending IS NOT NULL" \
	"  AND s.wake_id IS NULL AND s.holder IS NULL" \
	" RETURNING s.subscription_id, s.kind, s.wake_stream, s.generation, p.first_pending"

static SpQuery sub_wake_stream_subs = {
	SUB_ISSUE_WAKES("SELECT subscription_id FROM sandbox_persist.stream_subscription_links WHERE path = $1"),
	2, {TEXTOID, INT8OID}
};

/*
 * Lock the subscriptions linking the stream at $1, in id order, whatever
 * their state: one that is ending a wake in an open transaction is waited
 * for, then judged on what it committed (a filter on idleness here would
 * read the state before that commit and skip it, leaving the append's work
 * with nobody woken). Most appends find no link and stop at this statement.
 */
static SpQuery sub_lock_stream_subs = {
	"SELECT s.subscription_id FROM sandbox_persist.stream_subscriptions s"
	" WHERE s.subscription_id IN (SELECT l.subscription_id FROM sandbox_persist.stream_subscription_links l"
	"  WHERE l.path = $1) ORDER BY s.subscription_id FOR UPDATE OF s",
	1, {TEXTOID}
};

static SpQuery sub_wake_one = {
	SUB_ISSUE_WAKES("SELECT $1::text AS subscription_id"),
	2, {TEXTOID, INT8OID}
};

/* The row a claim, ack, release or delivery report judges, locked. */
static SpQuery sub_lock = {
	"SELECT kind, wake_id, generation, holder, lease_expires_at, lease_ttl_ms::bigint AS lease_ttl_ms,"
	" wake_snapshot::text AS snapshot,"
	" token_hash IS NOT NULL AND token_hash = " SUB_TOKEN_HASH("$2") " AS token_ok"
	" FROM sandbox_persist.stream_subscriptions WHERE subscription_id = $1 FOR UPDATE",
	2, {TEXTOID, TEXTOID}
};

static SpQuery sub_end_wake = {
	"UPDATE sandbox_persist.stream_subscriptions SET " SUB_END_WAKE " WHERE subscription_id = $1",
	1, {TEXTOID}
};

static SpQuery sub_extend_lease = {
	"UPDATE sandbox_persist.stream_subscriptions SET lease_expires_at = $2 + lease_ttl_ms"
	" WHERE subscription_id = $1",
	2, {TEXTOID, INT8OID}
};

static SpQuery sub_grant_claim = {
	"WITH t AS (SELECT " SUB_NEW_TOKEN " AS token)"
	" UPDATE sandbox_persist.stream_subscriptions s SET holder = $2, token_hash = " SUB_TOKEN_HASH("t.token") ","
	" lease_expires_at = $3 + s.lease_ttl_ms FROM t WHERE s.subscription_id = $1"
	" RETURNING t.token, s.wake_id, s.generation, s.lease_ttl_ms::bigint AS lease_ttl_ms",
	3, {TEXTOID, TEXTOID, INT8OID}
};

static SpQuery sub_stream_infos = {
	"SELECT COALESCE(pg_catalog.json_agg(pg_catalog.json_build_object('path', k.path, 'link_type', k.link_type,"
	" 'acked_offset', k.acked_offset, 'tail_offset', k.tail_offset, 'has_pending', k.has_pending)"
	" ORDER BY k.path), '[]'::json)::text AS streams FROM (" SUB_LINK_ROWS ") k",
	1, {TEXTOID}
};

/* Each ack with its link's acknowledged offset (NULL: not a stream of the subscription). */
static SpQuery sub_ack_targets = {
	"SELECT a.stream, a.off, l.acked_offset"
	" FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS a(stream, off, ord)"
	" LEFT JOIN sandbox_persist.stream_subscription_links l ON l.subscription_id = $1 AND l.path = a.stream"
	" ORDER BY a.ord",
	3, {TEXTOID, TEXTARRAYOID, TEXTARRAYOID}
};

static SpQuery sub_apply_acks = {
	"UPDATE sandbox_persist.stream_subscription_links l SET acked_offset = a.off"
	" FROM (SELECT stream, max(off) AS off FROM unnest($2::text[], $3::text[]) AS u(stream, off)"
	"  GROUP BY stream) a"
	" WHERE l.subscription_id = $1 AND l.path = a.stream AND l.acked_offset < a.off",
	3, {TEXTOID, TEXTARRAYOID, TEXTARRAYOID}
};

static SpQuery sub_ack_snapshot = {
	"UPDATE sandbox_persist.stream_subscription_links l SET acked_offset = j.value"
	" FROM pg_catalog.json_each_text($2::json) j"
	" WHERE l.subscription_id = $1 AND l.path = j.key AND l.acked_offset < j.value",
	2, {TEXTOID, TEXTOID}
};

static SpQuery sub_expire_leases = {
	"UPDATE sandbox_persist.stream_subscriptions SET " SUB_END_WAKE
	" WHERE subscription_id IN (SELECT subscription_id FROM sandbox_persist.stream_subscriptions"
	"  WHERE lease_expires_at <= $1 AND delivery_due_at IS NULL ORDER BY lease_expires_at LIMIT $2"
	"  FOR UPDATE SKIP LOCKED)"
	" RETURNING subscription_id",
	2, {INT8OID, INT4OID}
};

static SpQuery sub_take_deliveries = {
	"WITH due AS (SELECT subscription_id FROM sandbox_persist.stream_subscriptions"
	"  WHERE delivery_due_at <= $1 ORDER BY delivery_due_at LIMIT $2 FOR UPDATE SKIP LOCKED),"
	" t AS (SELECT subscription_id, " SUB_NEW_TOKEN " AS token FROM due)"
	" UPDATE sandbox_persist.stream_subscriptions s SET delivery_due_at = $1 + $3,"
	"  token_hash = " SUB_TOKEN_HASH("t.token")
	" FROM t WHERE s.subscription_id = t.subscription_id"
	" RETURNING s.subscription_id, s.webhook_url, s.wake_id, s.generation, t.token",
	3, {INT8OID, INT4OID, INT8OID}
};

static SpQuery sub_next_due = {
	"SELECT LEAST((SELECT min(delivery_due_at) FROM sandbox_persist.stream_subscriptions"
	"  WHERE delivery_due_at IS NOT NULL),"
	" (SELECT min(lease_expires_at) FROM sandbox_persist.stream_subscriptions"
	"  WHERE lease_expires_at IS NOT NULL AND delivery_due_at IS NULL)) AS next_due_at",
	0, {InvalidOid}
};

static SpQuery sub_delivery_ok = {
	"UPDATE sandbox_persist.stream_subscriptions SET delivery_due_at = NULL, failed_attempts = 0,"
	" lease_expires_at = $2 + lease_ttl_ms WHERE subscription_id = $1",
	2, {TEXTOID, INT8OID}
};

/* Retry after 1 s doubling per failure up to 60 s, with 20 % jitter either way. */
static SpQuery sub_delivery_failed = {
	"UPDATE sandbox_persist.stream_subscriptions SET failed_attempts = failed_attempts + 1,"
	" delivery_due_at = $2 + (LEAST(1000 * pg_catalog.power(2, LEAST(failed_attempts, 16)), 60000)"
	"  * (0.8 + 0.4 * pg_catalog.random()))::bigint"
	" WHERE subscription_id = $1 RETURNING delivery_due_at",
	2, {TEXTOID, INT8OID}
};

/* A wake just issued, copied out of the SPI result. */
typedef struct SubWake
{
	char	   *subscription_id;
	bool		webhook;
	char	   *wake_stream;
	int64		generation;
	char	   *first_pending;
} SubWake;

/* The locked row of a subscription (sub_lock). */
typedef struct SubState
{
	char	   *kind;
	char	   *wake_id;
	int64		generation;
	char	   *holder;
	bool		has_lease;
	int64		lease_expires_at;
	int64		lease_ttl_ms;
	char	   *snapshot;
	bool		token_ok;
} SubState;

/*
 * Append a pull-wake event for a wake to its wake stream, as stream_append
 * would (entry, tail, readers notified). A wake stream that is gone, closed
 * or expired gets no event; the wake stays in flight for a claim.
 */
static void
SubWriteWakeEvent(const SubWake *w, int64 now)
{
	StreamRow	row;
	StreamAppendOptions none;
	StreamBody	body;
	StringInfoData event;
	bytea	   *b;

	if (!StreamLoad(w->wake_stream, true, &row) || row.deleted || row.closed ||
		StreamExpired(&row, now))
		return;
	initStringInfo(&event);
	appendStringInfoString(&event, "{\"type\":\"wake\",\"subscription_id\":");
	SpAppendString(&event, w->subscription_id);
	appendStringInfoString(&event, ",\"stream\":");
	SpAppendString(&event, w->first_pending);
	appendStringInfo(&event, ",\"generation\":" INT64_FORMAT ",\"ts\":" INT64_FORMAT "}",
					 w->generation, now);
	b = palloc(VARHDRSZ + event.len);
	SET_VARSIZE(b, VARHDRSZ + event.len);
	memcpy(VARDATA(b), event.data, event.len);
	StreamReadBody(b, row.json_mode, &body);
	memset(&none, 0, sizeof(none));
	StreamWrite(&row, &body, &none, now);
	StreamNotify(row.stream_id);
}

/*
 * Run a wake-issuing statement and deliver what it issued: a NOTIFY for each
 * webhook wake, an event in the wake stream for each pull-wake one. Returns
 * how many wakes were issued. Inside SPI.
 */
static int
SubIssue(SpQuery *q, const char *key, int64 now)
{
	SpArgs		args;
	int			n;
	SubWake    *wakes;

	StreamSubscriptionCheckClock(now);	/* an append's clock: now + a lease must stay a clock */
	SpArgsInit(&args);
	SpArgText(&args, key);
	SpArgInt64(&args, now);
	n = SpExec(q, &args, false, 0);
	wakes = palloc(sizeof(SubWake) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		wakes[i].subscription_id = SpGetText(i, SpColumn("subscription_id"));
		wakes[i].webhook = strcmp(SpGetText(i, SpColumn("kind")), "webhook") == 0;
		wakes[i].wake_stream = SpGetText(i, SpColumn("wake_stream"));
		SpGetInt64(i, SpColumn("generation"), &wakes[i].generation);
		wakes[i].first_pending = SpGetText(i, SpColumn("first_pending"));
	}
	for (int i = 0; i < n; i++)
	{
		if (wakes[i].webhook)
			Async_Notify(SP_CHANNEL_SUBSCRIPTION, wakes[i].subscription_id);
		else
			SubWriteWakeEvent(&wakes[i], now);
	}
	return n;
}

/*
 * Wake the idle subscriptions of the stream at path that have work pending.
 * A stream nobody subscribed to costs the one locking statement, an index
 * probe that finds nothing (the issuing statement would cost ten times
 * that). Inside SPI.
 */
void
StreamSubscriptionsWake(const char *path, int64 now)
{
	SpArgs		args;

	SpArgsInit(&args);
	SpArgText(&args, path);
	if (SpExec(&sub_lock_stream_subs, &args, false, 0) > 0)
		SubIssue(&sub_wake_stream_subs, path, now);
}

/* Wake one subscription if it is idle with work pending; true when a wake was issued. Inside SPI. */
bool
StreamSubscriptionWake(const char *subscription_id, int64 now)
{
	return SubIssue(&sub_wake_one, subscription_id, now) > 0;
}

/* Lock subscription id's row into *st, judging token (NULL: none); SP709 when absent. Inside SPI. */
static void
SubLock(const char *id, const char *token, SubState *st)
{
	SpArgs		args;

	SpArgsInit(&args);
	SpArgText(&args, id);
	SpArgText(&args, token);
	if (SpExec(&sub_lock, &args, false, 1) == 0)
		StreamSubscriptionNotFound(id);
	st->kind = SpGetText(0, SpColumn("kind"));
	st->wake_id = SpGetText(0, SpColumn("wake_id"));
	SpGetInt64(0, SpColumn("generation"), &st->generation);
	st->holder = SpGetText(0, SpColumn("holder"));
	st->has_lease = SpGetInt64(0, SpColumn("lease_expires_at"), &st->lease_expires_at);
	SpGetInt64(0, SpColumn("lease_ttl_ms"), &st->lease_ttl_ms);
	st->snapshot = SpGetText(0, SpColumn("snapshot"));
	st->token_ok = false;
	SpGetBool(0, SpColumn("token_ok"), &st->token_ok);
}

/* Run a statement whose only argument is the subscription id. Inside SPI. */
static void
SubExecId(SpQuery *q, const char *id)
{
	SpArgs		args;

	SpArgsInit(&args);
	SpArgText(&args, id);
	SpExec(q, &args, false, 0);
}

/* Run a statement of (subscription id, now). Inside SPI. */
static void
SubExecIdNow(SpQuery *q, const char *id, int64 now)
{
	SpArgs		args;

	SpArgsInit(&args);
	SpArgText(&args, id);
	SpArgInt64(&args, now);
	SpExec(q, &args, false, 0);
}

/* The stream infos of subscription id as JSON text, allocated in outer. Inside SPI. */
static char *
SubStreamInfos(const char *id, MemoryContext outer)
{
	return StreamSubscriptionText(&sub_stream_infos, id, "streams", outer);
}

/*
 * stream_subscription_claim(subscription_id text, worker text, now_ms bigint)
 * -> json: a pull-wake worker takes the wake in flight (one is issued when
 * work is pending and none is), with a token and a lease.
 */
Datum
stream_subscription_claim(PG_FUNCTION_ARGS)
{
	char	   *id = SpCheckIdArg(fcinfo, 0, "subscription_id", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	char	   *worker = SpCheckIdArg(fcinfo, 1, "worker", SUB_WORKER_MAX_BYTES, SP_CHECK_PLAIN);
	int64		now = StreamSubscriptionNow(fcinfo, 2);
	MemoryContext outer = CurrentMemoryContext;
	StringInfoData result;
	SubState	st;
	SpArgs		args;

	initStringInfo(&result);
	SPI_connect();
	SubLock(id, NULL, &st);
	if (strcmp(st.kind, "pull-wake") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("subscription is not pull-wake"),
				 errdetail("The subscription \"%s\" is delivered by webhook; only pull-wake ones are claimed.", id)));
	if (st.holder != NULL && st.has_lease && st.lease_expires_at > now)
	{
		MemoryContext spi = MemoryContextSwitchTo(outer);

		appendStringInfoString(&result, "{\"outcome\":\"alreadyClaimed\",\"current_holder\":");
		SpAppendString(&result, st.holder);
		appendStringInfo(&result, ",\"generation\":" INT64_FORMAT "}", st.generation);
		MemoryContextSwitchTo(spi);
		SPI_finish();
		PG_RETURN_DATUM(SpJsonResult(&result));
	}
	if (st.holder != NULL)
		SubExecId(&sub_end_wake, id);	/* the holder's lease lapsed: its wake is over */
	if ((st.holder != NULL || st.wake_id == NULL) && !StreamSubscriptionWake(id, now))
	{
		SPI_finish();
		appendStringInfoString(&result, "{\"outcome\":\"noPendingWork\"}");
		PG_RETURN_DATUM(SpJsonResult(&result));
	}
	SpArgsInit(&args);
	SpArgText(&args, id);
	SpArgText(&args, worker);
	SpArgInt64(&args, now);
	SpExec(&sub_grant_claim, &args, false, 1);
	{
		MemoryContext spi = MemoryContextSwitchTo(outer);
		int64		generation = 0;
		int64		ttl = 0;

		SpGetInt64(0, SpColumn("generation"), &generation);
		SpGetInt64(0, SpColumn("lease_ttl_ms"), &ttl);
		appendStringInfoString(&result, "{\"outcome\":\"claimed\",\"wake_id\":");
		SpAppendString(&result, SpGetText(0, SpColumn("wake_id")));
		appendStringInfo(&result, ",\"generation\":" INT64_FORMAT ",\"token\":", generation);
		SpAppendString(&result, SpGetText(0, SpColumn("token")));
		appendStringInfo(&result, ",\"lease_ttl_ms\":" INT64_FORMAT ",\"streams\":", ttl);
		MemoryContextSwitchTo(spi);
	}
	appendStringInfoString(&result, SubStreamInfos(id, outer));
	appendStringInfoChar(&result, '}');
	SPI_finish();
	PG_RETURN_DATUM(SpJsonResult(&result));
}

/* A callback, ack or release request: the wake it names, its acks and done. */
typedef struct SubRequest
{
	char	   *wake_id;
	int64		generation;
	int			nacks;
	char	  **ack_streams;
	char	  **ack_offsets;
	bool		done;
} SubRequest;

/* Read a request (argument argno); acks and done only when with_acks. */
static void
SubReadRequest(FunctionCallInfo fcinfo, int argno, bool with_acks, SubRequest *r)
{
	static const char *const names[] = {"wake_id", "generation", "acks", "done"};
	static const char *const ack_names[] = {"stream", "offset"};
	SpJson	   *m[lengthof(names)] = {NULL};

	memset(r, 0, sizeof(SubRequest));
	if (!StreamOptionMembers(fcinfo, argno, names, with_acks ? 4 : 2, m, "subscription request"))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("subscription request is missing"),
				 errdetail("Give {\"wake_id\": ..., \"generation\": ...}.")));
	r->wake_id = SpCheckStringJson(m[0], "wake_id", true, SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	r->generation = SpCheckIntJson(m[1], "generation", 0);
	r->done = StreamBoolOption(m[3], "done");
	if (m[2] == NULL || m[2]->kind == SPJ_NULL)
		return;
	SpCheckKindJson(m[2], "acks", SPJ_ARRAY, "an array of {stream, offset}", SP_CHECK_PLAIN);
	r->nacks = m[2]->count;
	r->ack_streams = palloc(sizeof(char *) * Max(r->nacks, 1));
	r->ack_offsets = palloc(sizeof(char *) * Max(r->nacks, 1));
	for (int i = 0; i < r->nacks; i++)
	{
		SpJson	   *a[2] = {NULL};

		SpCheckKindJson(m[2]->items[i], "acks[]", SPJ_OBJECT, "an object {stream, offset}",
						SP_CHECK_PLAIN);
		SpJsonMembers(m[2]->items[i], ack_names, 2, a, "acks[]", false,
					  ERRCODE_INVALID_PARAMETER_VALUE, -1);
		r->ack_streams[i] = SpCheckIdJson(a[0], "acks[].stream", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
		r->ack_offsets[i] = SpCheckStringJson(a[1], "acks[].offset", true, 64, SP_CHECK_PLAIN);
	}
}

/*
 * Judge a request against the locked state: fenced (true) unless it names the
 * wake in flight and its generation; SP712 when it does but the token is not
 * that wake's.
 */
static bool
SubFenced(const char *id, const SubState *st, const SubRequest *r)
{
	if (st->wake_id == NULL || strcmp(st->wake_id, r->wake_id) != 0 ||
		st->generation != r->generation)
		return true;
	if (!st->token_ok)
		sp_error(SP_SUBSCRIPTION_TOKEN_INVALID,
				 ("subscription token invalid"),
				 "The bearer token is not the one of wake %s of subscription \"%s\".", r->wake_id, id);
	return false;
}

/* The arguments (id, ack streams, ack offsets) of the statements over a request's acks. */
static void
SubAckArgs(const char *id, const SubRequest *r, SpArgs *args)
{
	Datum	   *s = palloc(sizeof(Datum) * Max(r->nacks, 1));
	Datum	   *o = palloc(sizeof(Datum) * Max(r->nacks, 1));

	for (int i = 0; i < r->nacks; i++)
	{
		s[i] = CStringGetTextDatum(r->ack_streams[i]);
		o[i] = CStringGetTextDatum(r->ack_offsets[i]);
	}
	SpArgsInit(args);
	SpArgText(args, id);
	SpArgDatum(args, PointerGetDatum(construct_array(s, r->nacks, TEXTOID, -1, false, TYPALIGN_INT)));
	SpArgDatum(args, PointerGetDatum(construct_array(o, r->nacks, TEXTOID, -1, false, TYPALIGN_INT)));
}

/* Why an ack of offset off on the linked stream at path, acknowledged up to acked, is refused; NULL if it is not. Inside SPI. */
static const char *
SubAckProblem(const char *path, const char *off, const char *acked)
{
	StreamRow	row;
	int64		epoch;
	int64		seq;

	if (acked == NULL)
		return "is not a stream of the subscription";
	if (!StreamOffsetParts(off, &epoch, &seq))
		return "has an offset that is not one a stream issues (-1 and now are not acknowledgements)";
	if (strcmp(off, acked) < 0)
		return "has an offset before the one already acknowledged";
	if (!StreamLoad(path, false, &row) || row.deleted)
		return "names a stream that does not exist";
	if (seq > row.tail_seq)
		return "has an offset past the stream's tail";
	if (!StreamIssued(&row, epoch, seq))
		return "has an offset the stream did not issue (another epoch)";
	return NULL;
}

/*
 * Check each ack against its link and its stream: linked, an offset the
 * stream issued, not before the acknowledged one. The reason of the first
 * that fails, in the caller's context outer, or NULL. Inside SPI.
 */
static char *
SubCheckAcks(const char *id, const SubRequest *r, MemoryContext outer)
{
	SpArgs		args;
	int			n;
	char	  **acked;

	SubAckArgs(id, r, &args);
	n = SpExec(&sub_ack_targets, &args, false, 0);
	acked = palloc(sizeof(char *) * Max(n, 1));
	for (int i = 0; i < n; i++)
		acked[i] = SpGetText(i, SpColumn("acked_offset"));
	for (int i = 0; i < n; i++)
	{
		const char *why = SubAckProblem(r->ack_streams[i], r->ack_offsets[i], acked[i]);

		if (why != NULL)
			return MemoryContextStrdup(outer, psprintf("The ack of stream \"%s\" at \"%s\" %s.",
														r->ack_streams[i], r->ack_offsets[i], why));
	}
	return NULL;
}

/* Append {"outcome":"fenced"} and finish SPI: the answer to a request for another wake. */
static Datum
SubFencedResult(StringInfo result)
{
	SPI_finish();
	appendStringInfoString(result, "{\"outcome\":\"fenced\"}");
	return SpJsonResult(result);
}

/*
 * stream_subscription_ack(subscription_id text, token text, request json,
 * now_ms bigint) -> json: a webhook callback or pull-wake ack (§7): moves the
 * acknowledged offsets, extends the lease, and with done ends the wake and
 * issues the next one when work is pending.
 */
Datum
stream_subscription_ack(PG_FUNCTION_ARGS)
{
	char	   *id = SpCheckIdArg(fcinfo, 0, "subscription_id", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	char	   *token = SpCheckIdArg(fcinfo, 1, "token", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	int64		now = StreamSubscriptionNow(fcinfo, 3);
	MemoryContext outer = CurrentMemoryContext;
	StringInfoData result;
	SubRequest	r;
	SubState	st;
	char	   *invalid = NULL;
	bool		next_wake = false;

	SubReadRequest(fcinfo, 2, true, &r);
	initStringInfo(&result);
	SPI_connect();
	SubLock(id, token, &st);
	if (SubFenced(id, &st, &r))
		PG_RETURN_DATUM(SubFencedResult(&result));
	if (r.nacks > 0)
		invalid = SubCheckAcks(id, &r, outer);
	if (invalid != NULL)
	{
		SPI_finish();
		appendStringInfoString(&result, "{\"outcome\":\"invalidOffset\",\"message\":");
		SpAppendString(&result, invalid);
		appendStringInfoChar(&result, '}');
		PG_RETURN_DATUM(SpJsonResult(&result));
	}
	if (r.nacks > 0)
	{
		SpArgs		args;

		SubAckArgs(id, &r, &args);
		SpExec(&sub_apply_acks, &args, false, 0);
	}
	if (r.done)
	{
		SubExecId(&sub_end_wake, id);
		next_wake = StreamSubscriptionWake(id, now);
	}
	else
		SubExecIdNow(&sub_extend_lease, id, now);
	SPI_finish();
	appendStringInfo(&result, "{\"outcome\":\"ok\",\"next_wake\":%s}", next_wake ? "true" : "false");
	PG_RETURN_DATUM(SpJsonResult(&result));
}

/*
 * stream_subscription_release(subscription_id text, token text, request json,
 * now_ms bigint) -> json: end the wake without acknowledging; the next one is
 * issued when work is pending.
 */
Datum
stream_subscription_release(PG_FUNCTION_ARGS)
{
	char	   *id = SpCheckIdArg(fcinfo, 0, "subscription_id", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	char	   *token = SpCheckIdArg(fcinfo, 1, "token", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	int64		now = StreamSubscriptionNow(fcinfo, 3);
	StringInfoData result;
	SubRequest	r;
	SubState	st;

	SubReadRequest(fcinfo, 2, false, &r);
	initStringInfo(&result);
	SPI_connect();
	SubLock(id, token, &st);
	if (SubFenced(id, &st, &r))
		PG_RETURN_DATUM(SubFencedResult(&result));
	SubExecId(&sub_end_wake, id);
	StreamSubscriptionWake(id, now);
	SPI_finish();
	appendStringInfoString(&result, "{\"outcome\":\"released\"}");
	PG_RETURN_DATUM(SpJsonResult(&result));
}

/* End the lapsed leases (at most a batch), issuing the next wake where work is pending. Inside SPI. */
static void
SubExpireLeases(int64 now)
{
	SpArgs		args;
	int			n;
	char	  **ids;

	SpArgsInit(&args);
	SpArgInt64(&args, now);
	SpArgDatum(&args, Int32GetDatum(SUB_EXPIRE_BATCH));
	n = SpExec(&sub_expire_leases, &args, false, 0);
	ids = palloc(sizeof(char *) * Max(n, 1));
	for (int i = 0; i < n; i++)
		ids[i] = SpGetText(i, SpColumn("subscription_id"));
	for (int i = 0; i < n; i++)
		StreamSubscriptionWake(ids[i], now);
}

/* The webhook deliveries taken by sub_take_deliveries, copied out. */
typedef struct SubDelivery
{
	char	   *subscription_id;
	char	   *url;
	char	   *wake_id;
	int64		generation;
	char	   *token;
} SubDelivery;

/* Append one delivery with its streams to result (allocated in outer). Inside SPI. */
static void
SubAppendDelivery(StringInfo result, const SubDelivery *d, MemoryContext outer)
{
	char	   *streams = SubStreamInfos(d->subscription_id, outer);
	MemoryContext spi = MemoryContextSwitchTo(outer);

	appendStringInfoString(result, "{\"subscription_id\":");
	SpAppendString(result, d->subscription_id);
	appendStringInfoString(result, ",\"url\":");
	SpAppendString(result, d->url);
	appendStringInfoString(result, ",\"wake_id\":");
	SpAppendString(result, d->wake_id);
	appendStringInfo(result, ",\"generation\":" INT64_FORMAT ",\"callback_token\":", d->generation);
	SpAppendString(result, d->token);
	appendStringInfo(result, ",\"streams\":%s}", streams);
	MemoryContextSwitchTo(spi);
}

/*
 * stream_subscription_deliveries(max_rows integer, now_ms bigint) -> json
 * {deliveries, next_due_at}: end lapsed leases, then take the webhook
 * deliveries due now (another server may send one again only after
 * SUB_DELIVERY_CLAIM_MS), each with a fresh callback token.
 */
Datum
stream_subscription_deliveries(PG_FUNCTION_ARGS)
{
	int64		max_rows = SpCheckRowLimitArg(fcinfo, 0, "max_rows", 16);
	int64		now = StreamSubscriptionNow(fcinfo, 1);
	MemoryContext outer = CurrentMemoryContext;
	StringInfoData result;
	SpArgs		args;
	SubDelivery *d;
	int64		next_due = 0;
	int			n;

	if (max_rows < 1 || max_rows > 1000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_rows must be between 1 and 1000"),
				 errdetail("It was " INT64_FORMAT ".", max_rows)));
	initStringInfo(&result);
	appendStringInfoString(&result, "{\"deliveries\":[");
	SPI_connect();
	SubExpireLeases(now);
	SpArgsInit(&args);
	SpArgInt64(&args, now);
	SpArgDatum(&args, Int32GetDatum((int32) max_rows));
	SpArgInt64(&args, SUB_DELIVERY_CLAIM_MS);
	n = SpExec(&sub_take_deliveries, &args, false, 0);
	d = palloc(sizeof(SubDelivery) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		d[i].subscription_id = SpGetText(i, SpColumn("subscription_id"));
		d[i].url = SpGetText(i, SpColumn("webhook_url"));
		d[i].wake_id = SpGetText(i, SpColumn("wake_id"));
		SpGetInt64(i, SpColumn("generation"), &d[i].generation);
		d[i].token = SpGetText(i, SpColumn("token"));
	}
	for (int i = 0; i < n; i++)
	{
		if (i > 0)
			appendStringInfoChar(&result, ',');
		SubAppendDelivery(&result, &d[i], outer);
	}
	SpExec(&sub_next_due, &(SpArgs) {0}, false, 1);
	if (SpGetInt64(0, SpColumn("next_due_at"), &next_due))
		appendStringInfo(&result, "],\"next_due_at\":" INT64_FORMAT "}", next_due);
	else
		appendStringInfoString(&result, "],\"next_due_at\":null}");
	SPI_finish();
	PG_RETURN_DATUM(SpJsonResult(&result));
}

/*
 * stream_subscription_delivered(subscription_id text, wake_id text,
 * generation bigint, result json, now_ms bigint) -> json {outcome,
 * next_wake?}: what came of a webhook delivery ({ok, done}).
 */
Datum
stream_subscription_delivered(PG_FUNCTION_ARGS)
{
	static const char *const names[] = {"ok", "done"};
	char	   *id = SpCheckIdArg(fcinfo, 0, "subscription_id", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	int64		now = StreamSubscriptionNow(fcinfo, 4);
	SpJson	   *m[lengthof(names)] = {NULL};
	StringInfoData result;
	SubRequest	r;
	SubState	st;
	bool		ok;
	bool		done;

	memset(&r, 0, sizeof(r));
	r.wake_id = SpCheckIdArg(fcinfo, 1, "wake_id", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	SpCheckArgNotNull(fcinfo, 2, "generation", "Give the generation of the wake delivered.", SP_CHECK_PLAIN);
	r.generation = PG_GETARG_INT64(2);
	if (!StreamOptionMembers(fcinfo, 3, names, lengthof(names), m, "delivery result") || m[0] == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("delivery result is missing ok"),
				 errdetail("Give {\"ok\": true|false, \"done\": true|false}.")));
	ok = StreamBoolOption(m[0], "ok");
	done = StreamBoolOption(m[1], "done");
	initStringInfo(&result);
	SPI_connect();
	SubLock(id, NULL, &st);
	if (strcmp(st.kind, "webhook") != 0 || st.wake_id == NULL ||
		strcmp(st.wake_id, r.wake_id) != 0 || st.generation != r.generation)
		PG_RETURN_DATUM(SubFencedResult(&result));
	if (ok && done)
	{
		SpArgs		args;
		bool		next_wake;

		SpArgsInit(&args);
		SpArgText(&args, id);
		SpArgText(&args, st.snapshot);
		SpExec(&sub_ack_snapshot, &args, false, 0);
		SubExecId(&sub_end_wake, id);
		next_wake = StreamSubscriptionWake(id, now);
		appendStringInfo(&result, "{\"outcome\":\"acked\",\"next_wake\":%s}",
						 next_wake ? "true" : "false");
	}
	else if (ok)
	{
		SubExecIdNow(&sub_delivery_ok, id, now);
		appendStringInfoString(&result, "{\"outcome\":\"awaitingCallback\"}");
	}
	else
	{
		SubExecIdNow(&sub_delivery_failed, id, now);
		appendStringInfoString(&result, "{\"outcome\":\"retry\"}");
	}
	SPI_finish();
	PG_RETURN_DATUM(SpJsonResult(&result));
}
