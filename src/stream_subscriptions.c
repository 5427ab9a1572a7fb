/*
 * stream_subscriptions.c
 *
 * Stream subscriptions and their links (docs/contract/streams.md §7): create
 * or re-confirm (stream_subscription_put), read, delete, explicit links, and
 * the two hooks of the stream functions: a new stream is linked to the
 * subscriptions whose pattern it matches, a deleted one loses its links.
 * Wakes, leases and acknowledgements are stream_wakes.c's.
 *
 * Locking: a subscription's row is its lock (FOR UPDATE by whatever changes
 * its wake). Pattern matching races stream creation: a subscription could
 * miss a stream created while it backfills, and that stream miss the
 * subscription. So a put with a pattern takes the transaction advisory lock
 * SUB_PATTERN_LOCK exclusively before it backfills, and stream_create takes
 * it shared before it matches patterns: whichever comes second sees the
 * other's row (test/specs x35).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "streams.h"

PG_FUNCTION_INFO_V1(stream_subscription_put);
PG_FUNCTION_INFO_V1(stream_subscription_get);
PG_FUNCTION_INFO_V1(stream_subscription_delete);
PG_FUNCTION_INFO_V1(stream_subscription_link);
PG_FUNCTION_INFO_V1(stream_subscription_unlink);

#define SUB_LEASE_MIN_MS 1000
#define SUB_LEASE_MAX_MS 600000
#define SUB_LEASE_DEFAULT_MS 30000
#define SUB_DESCRIPTION_MAX_BYTES 4096
#define SUB_STREAMS_MAX 1000

/* The advisory lock that orders pattern backfills and stream creates (see the header). */
#define SUB_PATTERN_LOCK(fn) \
	"SELECT pg_catalog." fn "('sandbox_persist.stream_subscriptions'::pg_catalog.regclass::pg_catalog.oid::pg_catalog.int4, 0)"

/* A put's configuration, validated. */
typedef struct SubConfig
{
	const char *kind;
	char	   *pattern;
	char	  **streams;		/* sorted, without repeats */
	int			nstreams;
	char	   *webhook_url;
	char	   *wake_stream;
	int64		lease_ttl_ms;
	char	   *description;
	StringInfoData canonical;	/* what re-confirmation compares */
} SubConfig;

static SpQuery sub_lock_patterns = {SUB_PATTERN_LOCK("pg_advisory_xact_lock"), 0, {InvalidOid}};
static SpQuery sub_share_patterns = {SUB_PATTERN_LOCK("pg_advisory_xact_lock_shared"), 0, {InvalidOid}};

static SpQuery sub_insert = {
	"INSERT INTO sandbox_persist.stream_subscriptions (subscription_id, kind, pattern, webhook_url,"
	" wake_stream, lease_ttl_ms, description, config, created_at)"
	" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (subscription_id) DO NOTHING RETURNING 1",
	9, {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT4OID, TEXTOID, TEXTOID, INT8OID}
};

static SpQuery sub_config = {
	"SELECT config FROM sandbox_persist.stream_subscriptions WHERE subscription_id = $1 FOR SHARE",
	1, {TEXTOID}
};

/* Link streams explicitly at their tail (the tail of an empty stream when there is none yet). */
static SpQuery sub_link_explicit = {
	"INSERT INTO sandbox_persist.stream_subscription_links AS l (subscription_id, path, explicit, glob, acked_offset)"
	" SELECT $1, p, true, false, " SUB_TAIL_OF("p")
	" FROM pg_catalog.unnest($2::text[]) AS u(p)"
	" ON CONFLICT (subscription_id, path) DO UPDATE SET explicit = true",
	2, {TEXTOID, TEXTARRAYOID}
};

/*
 * Link the visible streams the pattern matches, at their tail. $3 and $4
 * bound the paths by the pattern's literal prefix ($4 NULL: no upper bound),
 * so the path index narrows the backfill to the matching subtree.
 */
static SpQuery sub_link_glob = {
	"INSERT INTO sandbox_persist.stream_subscription_links AS l (subscription_id, path, explicit, glob, acked_offset)"
	" SELECT $1, st.path, false, true, " SUB_TAIL_SQL
	" FROM sandbox_persist.streams st"
	" WHERE st.path >= $3 AND ($4::text IS NULL OR st.path < $4) AND st.deleted_at IS NULL"
	"   AND sandbox_persist.stream_glob_match($2, st.path)"
	" ON CONFLICT (subscription_id, path) DO UPDATE SET glob = true",
	4, {TEXTOID, TEXTOID, TEXTOID, TEXTOID}
};

static SpQuery sub_view = {
	"SELECT pg_catalog.json_build_object('id', s.subscription_id, 'subscription_id', s.subscription_id,"
	" 'type', s.kind, 'pattern', s.pattern,"
	" 'streams', COALESCE((SELECT pg_catalog.json_agg(pg_catalog.json_build_object('path', k.path,"
	"   'link_type', k.link_type, 'acked_offset', k.acked_offset) ORDER BY k.path) FROM (" SUB_LINK_ROWS ") k),"
	"   '[]'::json),"
	" 'webhook', CASE WHEN s.webhook_url IS NOT NULL THEN pg_catalog.json_build_object('url', s.webhook_url) END,"
	" 'wake_stream', s.wake_stream, 'lease_ttl_ms', s.lease_ttl_ms,"
	" 'created_at', pg_catalog.to_char(pg_catalog.to_timestamp(s.created_at / 1000.0) AT TIME ZONE 'UTC',"
	"   'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),"
	" 'status', CASE WHEN s.failed_attempts > 0 THEN '" SP_SUBSCRIPTION_FAILED "'"
	"  ELSE '" SP_SUBSCRIPTION_ACTIVE "' END,"
	" 'description', s.description)::text AS view"
	" FROM sandbox_persist.stream_subscriptions s WHERE s.subscription_id = $1",
	1, {TEXTOID}
};

static SpQuery sub_delete = {
	"DELETE FROM sandbox_persist.stream_subscriptions WHERE subscription_id = $1",
	1, {TEXTOID}
};

static SpQuery sub_exists = {
	"SELECT 1 FROM sandbox_persist.stream_subscriptions WHERE subscription_id = $1 FOR SHARE",
	1, {TEXTOID}
};

/* Drop the explicit mark of a link; a link left with no mark goes. */
static SpQuery sub_unlink = {
	"WITH u AS (UPDATE sandbox_persist.stream_subscription_links SET explicit = false"
	"  WHERE subscription_id = $1 AND path = $2 AND explicit AND glob RETURNING 1)"
	" , d AS (DELETE FROM sandbox_persist.stream_subscription_links"
	"  WHERE subscription_id = $1 AND path = $2 AND explicit AND NOT glob RETURNING 1)"
	" SELECT (SELECT count(*) FROM u) + (SELECT count(*) FROM d) AS unlinked",
	2, {TEXTOID, TEXTOID}
};

/*
 * A new stream at $1: its links (explicit ones made before it existed, stale
 * ones of a stream that was at the path before) start at its tail $2, and it
 * is linked to every subscription whose pattern it matches.
 */
static SpQuery sub_link_new_stream = {
	"WITH reset AS (UPDATE sandbox_persist.stream_subscription_links SET acked_offset = $2 WHERE path = $1)"
	" INSERT INTO sandbox_persist.stream_subscription_links (subscription_id, path, explicit, glob, acked_offset)"
	" SELECT s.subscription_id, $1, false, true, $2 FROM sandbox_persist.stream_subscriptions s"
	" WHERE s.pattern IS NOT NULL AND sandbox_persist.stream_glob_match(s.pattern, $1)"
	" ON CONFLICT (subscription_id, path) DO UPDATE SET glob = true, acked_offset = EXCLUDED.acked_offset",
	2, {TEXTOID, TEXTOID}
};

static SpQuery sub_unlink_path = {
	"DELETE FROM sandbox_persist.stream_subscription_links WHERE path = $1",
	1, {TEXTOID}
};

/* 22023 for a configuration that breaks a rule of §7. */
static SP_NORETURN void
SubInvalid(const char *msg, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("%s", msg),
			 errdetail("%s", detail)));
}

/* A member that is absent or JSON null, as NULL. */
static SpJson *
SubPresent(SpJson *node)
{
	return node == NULL || node->kind == SPJ_NULL ? NULL : node;
}

/*
 * A stream path of a subscription (already an id): refused under the reserved
 * __ds prefix, and under run-logs/ (a run log's appends issue no wakes, so a
 * link there would never have work: refused rather than silently idle).
 */
static char *
SubCheckNotReserved(char *path)
{
	if (strcmp(path, "__ds") == 0 || strncmp(path, "__ds/", 5) == 0)
		SubInvalid("stream path is reserved", "Paths under __ds/ are the protocol's control paths.");
	if (StreamIsRunLogPath(path))
		SubInvalid("a run's event log cannot be subscribed to",
				   "Paths under run-logs/ are read-only views of run event logs; subscriptions cover protocol streams.");
	return path;
}

/* A stream path of a subscription given in JSON. */
static char *
SubCheckPath(const SpJson *node, const char *field)
{
	return SubCheckNotReserved(SpCheckIdJson(node, field, SP_ID_MAX_BYTES, SP_CHECK_PLAIN));
}

/* qsort comparator of C strings, byte-wise. */
static int
SubCompareStrings(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/* The streams member: paths, sorted, repeats dropped. */
static void
SubReadStreams(const SpJson *node, SubConfig *c)
{
	int			n = 0;

	SpCheckKindJson(node, "streams", SPJ_ARRAY, "an array of stream paths", SP_CHECK_PLAIN);
	if (node->count > SUB_STREAMS_MAX)
		SubInvalid("too many streams", "A subscription names at most 1000 streams in one call.");
	c->streams = palloc(sizeof(char *) * Max(node->count, 1));
	for (int i = 0; i < node->count; i++)
		c->streams[i] = SubCheckPath(node->items[i], "streams[]");
	qsort(c->streams, node->count, sizeof(char *), SubCompareStrings);
	for (int i = 0; i < node->count; i++)
		if (n == 0 || strcmp(c->streams[n - 1], c->streams[i]) != 0)
			c->streams[n++] = c->streams[i];
	c->nstreams = n;
}

/* Append a JSON string, or null for NULL. */
static void
SubAppendNullable(StringInfo buf, const char *s)
{
	if (s == NULL)
		appendStringInfoString(buf, "null");
	else
		SpAppendString(buf, s);
}

/* The canonical text of a configuration: its members in one order, streams sorted. */
static void
SubCanonical(SubConfig *c)
{
	initStringInfo(&c->canonical);
	appendStringInfo(&c->canonical, "{\"type\":\"%s\",\"pattern\":", c->kind);
	SubAppendNullable(&c->canonical, c->pattern);
	appendStringInfoString(&c->canonical, ",\"streams\":[");
	for (int i = 0; i < c->nstreams; i++)
	{
		if (i > 0)
			appendStringInfoChar(&c->canonical, ',');
		SpAppendString(&c->canonical, c->streams[i]);
	}
	appendStringInfoString(&c->canonical, "],\"webhook_url\":");
	SubAppendNullable(&c->canonical, c->webhook_url);
	appendStringInfoString(&c->canonical, ",\"wake_stream\":");
	SubAppendNullable(&c->canonical, c->wake_stream);
	appendStringInfo(&c->canonical, ",\"lease_ttl_ms\":" INT64_FORMAT ",\"description\":",
					 c->lease_ttl_ms);
	SubAppendNullable(&c->canonical, c->description);
	appendStringInfoChar(&c->canonical, '}');
}

/* The delivery members: webhook.url for a webhook, wake_stream for pull-wake, never both. */
static void
SubReadDelivery(SpJson *webhook, SpJson *wake_stream, SubConfig *c)
{
	if (strcmp(c->kind, "webhook") == 0)
	{
		static const char *const names[] = {"url"};
		SpJson	   *m[1] = {NULL};

		if (webhook == NULL || wake_stream != NULL)
			SubInvalid("a webhook subscription takes webhook.url and no wake_stream",
					   "Give {\"webhook\": {\"url\": \"https://...\"}}.");
		SpCheckKindJson(webhook, "webhook", SPJ_OBJECT, "an object", SP_CHECK_PLAIN);
		SpJsonMembers(webhook, names, 1, m, "webhook", false, ERRCODE_INVALID_PARAMETER_VALUE, -1);
		c->webhook_url = SpCheckStringJson(m[0], "webhook.url", true, SP_ID_MAX_BYTES * 2,
										   SP_CHECK_PLAIN);
		StreamCheckWebhookUrl(c->webhook_url);
		return;
	}
	if (wake_stream == NULL || webhook != NULL)
		SubInvalid("a pull-wake subscription takes wake_stream and no webhook",
				   "Give {\"wake_stream\": \"<path of a stream you created>\"}.");
	c->wake_stream = SubCheckPath(wake_stream, "wake_stream");
}

/*
 * 22023 for a pull-wake subscription that would link its own wake stream:
 * each wake event would be pending work, so every wake would issue the next.
 */
static void
SubCheckNoSelfWake(const SubConfig *c)
{
	bool		self = c->pattern != NULL &&
		StreamGlobMatches(c->pattern, strlen(c->pattern), c->wake_stream, strlen(c->wake_stream));

	for (int i = 0; i < c->nstreams && !self; i++)
		self = strcmp(c->streams[i], c->wake_stream) == 0;
	if (self)
		SubInvalid("a pull-wake subscription may not link its own wake stream",
				   "Its wake events would be pending work of their own; keep the wake stream out of pattern and streams.");
}

/* Validate a put's configuration (argument argno) into c. */
static void
SubReadConfig(FunctionCallInfo fcinfo, int argno, SubConfig *c)
{
	static const char *const names[] = {"type", "pattern", "streams", "webhook", "wake_stream",
	"lease_ttl_ms", "description"};
	SpJson	   *m[lengthof(names)] = {NULL};
	char	   *type;

	memset(c, 0, sizeof(SubConfig));
	if (!StreamOptionMembers(fcinfo, argno, names, lengthof(names), m, "subscription configuration"))
		SubInvalid("subscription configuration is missing", "Give a JSON object with at least type.");
	type = SpCheckStringJson(m[0], "type", true, 16, SP_CHECK_PLAIN);
	if (strcmp(type, "webhook") != 0 && strcmp(type, "pull-wake") != 0)
		SubInvalid("type must be webhook or pull-wake", "The two deliveries of §7.");
	c->kind = type;
	if (SubPresent(m[1]) != NULL)
		c->pattern = SpCheckIdJson(m[1], "pattern", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	if (SubPresent(m[2]) != NULL)
		SubReadStreams(m[2], c);
	if (c->pattern == NULL && c->nstreams == 0)
		SubInvalid("a subscription needs a pattern or streams",
				   "Give pattern (a glob over stream paths), streams (paths), or both.");
	SubReadDelivery(SubPresent(m[3]), SubPresent(m[4]), c);
	if (c->wake_stream != NULL)
		SubCheckNoSelfWake(c);
	c->lease_ttl_ms = SUB_LEASE_DEFAULT_MS;
	if (SubPresent(m[5]) != NULL)
	{
		c->lease_ttl_ms = SpCheckIntJson(m[5], "lease_ttl_ms", 0);
		if (c->lease_ttl_ms < SUB_LEASE_MIN_MS || c->lease_ttl_ms > SUB_LEASE_MAX_MS)
			SubInvalid("lease_ttl_ms is not between 1000 and 600000",
					   "A lease lasts from 1 second to 10 minutes.");
	}
	if (SubPresent(m[6]) != NULL)
		c->description = SpCheckStringJson(m[6], "description", true, SUB_DESCRIPTION_MAX_BYTES,
										   SP_CHECK_PLAIN);
	SubCanonical(c);
}

/* The last clock a subscription accepts: 9999-12-31T23:59:59.999Z, which the views can still print. */
#define SUB_CLOCK_MAX_MS INT64CONST(253402300799999)

/*
 * 22008 unless now is a clock the subscriptions can work with: not before
 * 1970, and far enough from the bigint range that now plus a lease (at most
 * 10 minutes) or a retry still is one, and created_at prints as a date.
 */
void
StreamSubscriptionCheckClock(int64 now)
{
	if (now < 0 || now > SUB_CLOCK_MAX_MS)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("clock out of range for stream subscriptions"),
				 errdetail("now_ms " INT64_FORMAT " is not between 0 and " INT64_FORMAT " (9999-12-31).",
						   now, SUB_CLOCK_MAX_MS)));
}

/* The clock of a subscription function (its now_ms argument argno, or the wall clock), checked. */
int64
StreamSubscriptionNow(FunctionCallInfo fcinfo, int argno)
{
	int64		now = SpNowMs(fcinfo, argno);

	StreamSubscriptionCheckClock(now);
	return now;
}

/* SP709 for a subscription id with no row. */
void
StreamSubscriptionNotFound(const char *id)
{
	sp_error(SP_SUBSCRIPTION_NOT_FOUND,
			 ("subscription not found"),
			 "No subscription has id \"%s\".", id);
}

/*
 * Run a statement of one argument, a subscription id, and return the text
 * column `column` of its first row allocated in outer; NULL when it returns
 * no row. Inside SPI.
 */
char *
StreamSubscriptionText(SpQuery *q, const char *id, const char *column, MemoryContext outer)
{
	SpArgs		args;
	MemoryContext spi;
	char	   *text;

	SpArgsInit(&args);
	SpArgText(&args, id);
	if (SpExec(q, &args, false, 1) == 0)
		return NULL;
	spi = MemoryContextSwitchTo(outer);
	text = SpGetText(0, SpColumn(column));
	MemoryContextSwitchTo(spi);
	return text;
}

/* Link c's explicit streams to subscription id. Inside SPI. */
static void
SubLinkExplicit(const char *id, char **streams, int n)
{
	SpArgs		args;

	if (n == 0)
		return;
	SpArgsInit(&args);
	SpArgText(&args, id);
	SpArgDatum(&args, SpTextArray(streams, n));
	SpExec(&sub_link_explicit, &args, false, 0);
}

/*
 * Link the existing streams the pattern matches. The literal segments before
 * the first one with a star bound the paths scanned: [prefix, prefix with its
 * last byte raised).
 */
static void
SubLinkPattern(const char *id, const char *pattern)
{
	SpArgs		args;
	int			cut = 0;
	char	   *low;
	char	   *high = NULL;

	for (int i = 0; pattern[i] != '\0' && pattern[i] != '*'; i++)
		if (pattern[i] == '/')
			cut = i + 1;
	if (strchr(pattern, '*') == NULL)
		cut = strlen(pattern);
	low = pnstrdup(pattern, cut);
	if (cut > 0 && (unsigned char) low[cut - 1] < 0xff)
	{
		high = pstrdup(low);
		high[cut - 1]++;
	}
	SpArgsInit(&args);
	SpArgText(&args, id);
	SpArgText(&args, pattern);
	SpArgText(&args, low);
	SpArgText(&args, high);
	SpExec(&sub_link_glob, &args, false, 0);
}

/* The view of subscription id as text in the caller's context outer; SP709 when absent. Inside SPI. */
static char *
SubView(const char *id, MemoryContext outer)
{
	char	   *view = StreamSubscriptionText(&sub_view, id, "view", outer);

	if (view == NULL)
		StreamSubscriptionNotFound(id);
	return view;
}

/* Lock subscription id's row FOR SHARE; SP709 when absent. Inside SPI. */
static void
SubRequire(const char *id)
{
	SpArgs		args;

	SpArgsInit(&args);
	SpArgText(&args, id);
	if (SpExec(&sub_exists, &args, false, 1) == 0)
		StreamSubscriptionNotFound(id);
}

/* Insert a new subscription and its links; false when the id exists. Inside SPI. */
static bool
SubCreate(const char *id, SubConfig *c, int64 now)
{
	SpArgs		args;
	StreamRow	wake;

	if (c->wake_stream != NULL && !StreamLoad(c->wake_stream, false, &wake))
		SubInvalid("wake stream does not exist",
				   "Create the pull-wake stream (a JSON stream) before the subscription that writes to it.");
	if (c->pattern != NULL)
		SpExec(&sub_lock_patterns, &(SpArgs) {0}, false, 0);
	SpArgsInit(&args);
	SpArgText(&args, id);
	SpArgText(&args, c->kind);
	SpArgText(&args, c->pattern);
	SpArgText(&args, c->webhook_url);
	SpArgText(&args, c->wake_stream);
	SpArgDatum(&args, Int32GetDatum((int32) c->lease_ttl_ms));
	SpArgText(&args, c->description);
	SpArgText(&args, c->canonical.data);
	SpArgInt64(&args, now);
	if (SpExec(&sub_insert, &args, false, 1) == 0)
		return false;
	SubLinkExplicit(id, c->streams, c->nstreams);
	if (c->pattern != NULL)
		SubLinkPattern(id, c->pattern);
	return true;
}

/*
 * stream_subscription_put(subscription_id text, config json, now_ms bigint)
 * -> json {created, subscription}: create a subscription, or re-confirm one
 * whose canonical configuration is the same (SP710 otherwise).
 */
Datum
stream_subscription_put(PG_FUNCTION_ARGS)
{
	char	   *id = SpCheckIdArg(fcinfo, 0, "subscription_id", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	int64		now = StreamSubscriptionNow(fcinfo, 2);
	MemoryContext outer = CurrentMemoryContext;
	SubConfig	c;
	SpArgs		args;
	bool		created;
	char	   *view;
	StringInfoData result;

	SubReadConfig(fcinfo, 1, &c);
	SPI_connect();
	created = SubCreate(id, &c, now);
	if (!created)
	{
		char	   *stored;

		SpArgsInit(&args);
		SpArgText(&args, id);
		if (SpExec(&sub_config, &args, false, 1) == 0)
			elog(ERROR, "subscription \"%s\" was deleted during the put", id);
		stored = SpGetText(0, SpColumn("config"));
		if (strcmp(stored, c.canonical.data) != 0)
			sp_error(SP_SUBSCRIPTION_CONFLICT,
					 ("subscription exists with another configuration"),
					 "The subscription \"%s\" exists with the configuration %s.", id, stored);
	}
	view = SubView(id, outer);
	SPI_finish();
	initStringInfo(&result);
	appendStringInfo(&result, "{\"created\":%s,\"subscription\":%s}", created ? "true" : "false",
					 view);
	PG_RETURN_DATUM(SpJsonResult(&result));
}

/* stream_subscription_get(subscription_id text, now_ms bigint) -> json: the subscription's view. */
Datum
stream_subscription_get(PG_FUNCTION_ARGS)
{
	char	   *id = SpCheckIdArg(fcinfo, 0, "subscription_id", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	MemoryContext outer = CurrentMemoryContext;
	StringInfoData result;
	char	   *view;

	(void) StreamSubscriptionNow(fcinfo, 1);
	SPI_connect();
	view = SubView(id, outer);
	SPI_finish();
	initStringInfo(&result);
	appendStringInfoString(&result, view);
	PG_RETURN_DATUM(SpJsonResult(&result));
}

/* stream_subscription_delete(subscription_id text) -> json {deleted}: the row and its links. */
Datum
stream_subscription_delete(PG_FUNCTION_ARGS)
{
	char	   *id = SpCheckIdArg(fcinfo, 0, "subscription_id", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	SpArgs		args;
	StringInfoData result;

	SPI_connect();
	SpArgsInit(&args);
	SpArgText(&args, id);
	if (SpExec(&sub_delete, &args, false, 0) == 0)
		StreamSubscriptionNotFound(id);
	SPI_finish();
	initStringInfo(&result);
	appendStringInfoString(&result, "{\"deleted\":true}");
	PG_RETURN_DATUM(SpJsonResult(&result));
}

/*
 * stream_subscription_link(subscription_id text, streams text[], now_ms
 * bigint) -> json {linked}: link streams explicitly, each at its tail.
 */
Datum
stream_subscription_link(PG_FUNCTION_ARGS)
{
	char	   *id = SpCheckIdArg(fcinfo, 0, "subscription_id", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	SubConfig	c;
	Datum	   *items;
	bool	   *nulls;
	int			n;
	StringInfoData result;

	(void) StreamSubscriptionNow(fcinfo, 2);
	SpCheckArgNotNull(fcinfo, 1, "streams", "Give an array of stream paths.", SP_CHECK_PLAIN);
	deconstruct_array(PG_GETARG_ARRAYTYPE_P(1), TEXTOID, -1, false, TYPALIGN_INT, &items, &nulls, &n);
	if (n > SUB_STREAMS_MAX)
		SubInvalid("too many streams", "A subscription names at most 1000 streams in one call.");
	memset(&c, 0, sizeof(c));
	c.streams = palloc(sizeof(char *) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		if (nulls[i])
			SubInvalid("streams holds a NULL", "Every element is a stream path.");
		SpCheckIdBytes(VARSIZE_ANY_EXHDR(DatumGetTextPP(items[i])), "streams[]", SP_ID_MAX_BYTES,
					   SP_CHECK_PLAIN);
		c.streams[i] = SubCheckNotReserved(TextDatumGetCString(items[i]));
	}
	SPI_connect();
	SubRequire(id);
	SubLinkExplicit(id, c.streams, n);
	SPI_finish();
	initStringInfo(&result);
	appendStringInfo(&result, "{\"linked\":%d}", n);
	PG_RETURN_DATUM(SpJsonResult(&result));
}

/* stream_subscription_unlink(subscription_id text, path text) -> json {unlinked}. */
Datum
stream_subscription_unlink(PG_FUNCTION_ARGS)
{
	char	   *id = SpCheckIdArg(fcinfo, 0, "subscription_id", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	char	   *path = SpCheckIdArg(fcinfo, 1, "path", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	SpArgs		args;
	int64		unlinked = 0;
	StringInfoData result;

	SPI_connect();
	SubRequire(id);
	SpArgsInit(&args);
	SpArgText(&args, id);
	SpArgText(&args, path);
	SpExec(&sub_unlink, &args, false, 1);
	SpGetInt64(0, SpColumn("unlinked"), &unlinked);
	SPI_finish();
	initStringInfo(&result);
	appendStringInfo(&result, "{\"unlinked\":%s}", unlinked > 0 ? "true" : "false");
	PG_RETURN_DATUM(SpJsonResult(&result));
}

/*
 * Link a stream stream_create has just made at path to the subscriptions that
 * name or match it, at its tail (before its first body). Inside SPI.
 */
void
StreamSubscriptionsLinkNew(const char *path, const StreamRow *row)
{
	SpArgs		args;
	StringInfoData tail;

	initStringInfo(&tail);
	StreamAppendOffset(&tail, row->tail_epoch, row->tail_seq);
	SpExec(&sub_share_patterns, &(SpArgs) {0}, false, 0);
	SpArgsInit(&args);
	SpArgText(&args, path);
	/* StreamAppendOffset writes a JSON string: drop its quotes */
	SpArgTextLen(&args, tail.data + 1, tail.len - 2);
	SpExec(&sub_link_new_stream, &args, false, 0);
}

/* Drop every link of a deleted stream's path. Inside SPI. */
void
StreamSubscriptionsUnlinkPath(const char *path)
{
	SpArgs		args;

	SpArgsInit(&args);
	SpArgText(&args, path);
	SpExec(&sub_unlink_path, &args, false, 0);
}
