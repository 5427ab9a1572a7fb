/*
 * streams.h
 *
 * Declarations shared by the files of the durable streams
 * (docs/contract/streams.md): streams.c (rows, the write of an entry and the
 * release of fork sources), stream_writes.c (append, head, delete),
 * stream_create.c (create and fork), stream_bodies.c (bodies and content
 * types), stream_offsets.c (the offset format), stream_reads.c (reads
 * through a fork chain), stream_purge.c (maintain()'s A13),
 * stream_run_logs.c (a run's event log read as the stream run-logs/<run_id>),
 * and the subscriptions of §7: stream_subscriptions.c (configuration and
 * links), stream_wakes.c (wakes, claims, acks, deliveries) and
 * stream_subscription_rules.c (globs, webhook URLs). Nothing here takes
 * locks; each file states its rule.
 */
#ifndef SANDBOX_PERSIST_STREAMS_H
#define SANDBOX_PERSIST_STREAMS_H

#include "sandbox_persist.h"

/* Digits of each half of an offset: EEEEEEEEEEEEEEEE_SSSSSSSSSSSSSSSS (§3). */
#define STREAM_OFFSET_DIGITS 16
#define STREAM_OFFSET_LEN (2 * STREAM_OFFSET_DIGITS + 1)

/* The media type of JSON mode (compared case-insensitively, parameters ignored). */
#define STREAM_JSON_MEDIA_TYPE "application/json"

/* The content type of a stream created without one. */
#define STREAM_DEFAULT_CONTENT_TYPE "application/octet-stream"

/*
 * The columns of a streams row as the row statements name them (one home:
 * StreamReadRow reads them by these names).
 */
#define STREAM_COL_ID "stream_id"
#define STREAM_COL_CONTENT_TYPE "content_type"
#define STREAM_COL_JSON_MODE "json_mode"
#define STREAM_COL_TTL "ttl_seconds"
#define STREAM_COL_EXPIRES "expires_at"
#define STREAM_COL_TOUCHED "touched_at"
#define STREAM_COL_CLOSED "closed"
#define STREAM_COL_CLOSED_PRODUCER "closed_producer"
#define STREAM_COL_CLOSED_EPOCH "closed_epoch"
#define STREAM_COL_CLOSED_SEQ "closed_seq"
#define STREAM_COL_TAIL_SEQ "tail_seq"
#define STREAM_COL_TAIL_EPOCH "tail_epoch"
#define STREAM_COL_STREAM_SEQ "stream_seq"
#define STREAM_COL_SOURCE "source_id"
#define STREAM_COL_FORK_SEQ "fork_seq"
#define STREAM_COL_FORK_OFFSET "fork_offset"
#define STREAM_COL_FORK_SUB "fork_sub_offset"
#define STREAM_COL_FORK_COUNT "fork_count"
#define STREAM_COL_DELETED "deleted"
#define STREAM_COL_PRODUCER_FENCE "producer_fence"

/* The select list of a streams row, in the names above. */
#define STREAM_ROW_COLUMNS \
	"stream_id, content_type, json_mode, ttl_seconds, expires_at, touched_at," \
	" closed_at IS NOT NULL AS closed, closed_producer, closed_epoch, closed_seq," \
	" tail_seq, tail_epoch, stream_seq, source_id, fork_seq, fork_offset, fork_sub_offset," \
	" fork_count, deleted_at IS NOT NULL AS deleted, producer_fence"

/* One streams row, copied out of the SPI result. */
typedef struct StreamRow
{
	int64		stream_id;
	char	   *content_type;
	bool		json_mode;
	bool		has_ttl;
	int64		ttl_seconds;
	bool		has_expires;
	int64		expires_at;
	int64		touched_at;
	bool		closed;
	char	   *closed_producer;	/* NULL: closed without a producer, or open */
	int64		closed_epoch;
	int64		closed_seq;
	int64		tail_seq;
	int64		tail_epoch;
	char	   *stream_seq;		/* the last Stream-Seq, or NULL */
	bool		has_source;
	int64		source_id;
	int64		fork_seq;
	char	   *fork_offset;	/* as requested, or NULL */
	bool		has_sub;
	int64		fork_sub_offset;
	int64		fork_count;
	bool		deleted;
	bool		has_fence;
	int64		producer_fence; /* the stream-wide epoch fence, when has_fence */
} StreamRow;

/* What an offset argument names. */
typedef enum StreamOffsetKind
{
	STREAM_OFFSET_START,		/* -1 */
	STREAM_OFFSET_NOW,			/* now: the tail */
	STREAM_OFFSET_AT			/* EEEE_SSSS */
} StreamOffsetKind;

/* The parsed options of stream_append; producer_id NULL when none. */
typedef struct StreamAppendOptions
{
	bool		close;
	char	   *producer_id;
	int64		producer_epoch;
	int64		producer_seq;
	int64		accepted_seq;	/* the answer's producerSeq: the highest seq accepted */
	bool		stream_fence;	/* the epoch also fences the stream's other producers */
	char	   *stream_seq;
} StreamAppendOptions;

/* The messages of a JSON body, or the one entry of another body. */
typedef struct StreamBody
{
	bool		empty;			/* no bytes, or the JSON array [] */
	int			message_count;
	StringInfoData data;		/* what the entry stores */
} StreamBody;

/* streams.c */
extern void StreamReadRow(StreamRow *out);
extern bool StreamLoad(const char *path, bool for_update, StreamRow *out);
extern bool StreamExpired(const StreamRow *row, int64 now);
extern void StreamRequireVisible(const StreamRow *row, bool found, int64 now, const char *path);
extern void StreamAppendTtl(StringInfo buf, const StreamRow *row);
extern void StreamRelease(int64 source_id);
extern int64 StreamRemove(const StreamRow *row, int64 now);
extern void StreamNotify(int64 stream_id);
extern void StreamWrite(StreamRow *row, const StreamBody *body, const StreamAppendOptions *opts,
						int64 now);
extern bool StreamOptionMembers(FunctionCallInfo fcinfo, int argno, const char *const *names,
								int nnames, SpJson **m, const char *what);
extern bool StreamBoolOption(const SpJson *node, const char *field);
extern void StreamAppendState(StringInfo buf, const StreamRow *row);

/* stream_bodies.c */
extern bool StreamSameMediaType(const char *a, const char *b);
extern bool StreamIsJson(const char *ct);
extern void StreamAppendMessages(StringInfo buf, const SpJson *array, int n);
extern void StreamReadBody(bytea *body, bool json_mode, StreamBody *out);

/* stream_purge.c */
extern int64 StreamPurge(int64 now, int64 max_rows);

/* stream_offsets.c */
extern void StreamAppendOffset(StringInfo buf, int64 epoch, int64 seq);
extern bool StreamOffsetParts(const char *text, int64 *epoch, int64 *seq);
extern StreamOffsetKind StreamParseOffset(const char *text, int64 *epoch, int64 *seq);
extern void StreamVouchOffset(const char *path, const char *offset, int64 seq, int64 tail_seq,
							  bool issued);

/* stream_reads.c */
extern bool StreamEntryAt(int64 stream_id, int64 seq, int64 *epoch, int64 *message_count,
						  bytea **data);
extern bool StreamIssued(const StreamRow *row, int64 epoch, int64 seq);

/* stream_pages.c */
extern void StreamPageEntries(Portal portal, bool epochs, bool join, int64 max_bytes,
							  MemoryContext outer, StringInfo body, int64 *next_epoch,
							  int64 *next_seq);

/* stream_run_logs.c */
extern bool StreamIsRunLogPath(const char *path);
extern SP_NORETURN void StreamRefuseRunLogWrite(const char *path, const char *what);
extern Datum StreamRunLogRead(FunctionCallInfo fcinfo, const char *path, const char *offset,
							  StreamOffsetKind kind, int64 epoch, int64 seq, int64 max_bytes);
extern Datum StreamRunLogHead(const char *path);

/* The offset text (§3) of a streams row's tail, in SQL over the row alias st. */
#define SUB_TAIL_SQL \
	"pg_catalog.lpad(st.tail_epoch::text, 16, '0') || '_' || pg_catalog.lpad(st.tail_seq::text, 16, '0')"

/* The offset of an empty stream's tail, where a stream linked before it exists starts. */
#define SUB_EMPTY_OFFSET "0000000000000000_0000000000000000"

/*
 * The tail offset of the visible stream at the SQL expression path, or the
 * empty tail when there is none (a link to it has nothing pending).
 */
#define SUB_TAIL_OF(path) \
	"COALESCE((SELECT " SUB_TAIL_SQL " FROM sandbox_persist.streams st" \
	" WHERE st.path = " path " AND st.deleted_at IS NULL), '" SUB_EMPTY_OFFSET "')"

/*
 * The links of subscription $1 with their streams' tails (§7), as rows
 * (path, link_type, acked_offset, tail_offset, has_pending).
 */
#define SUB_LINK_ROWS \
	"SELECT l.path, CASE WHEN l.explicit THEN 'explicit' ELSE 'glob' END AS link_type," \
	" l.acked_offset, t.tail_offset, t.tail_offset > l.acked_offset AS has_pending" \
	" FROM sandbox_persist.stream_subscription_links l" \
	" CROSS JOIN LATERAL (SELECT " SUB_TAIL_OF("l.path") " AS tail_offset) t" \
	" WHERE l.subscription_id = $1"

/* stream_subscription_rules.c */
extern bool StreamGlobMatches(const char *pattern, int plen, const char *path, int slen);
extern void StreamCheckWebhookUrl(const char *url);

/* stream_subscriptions.c */
extern void StreamSubscriptionCheckClock(int64 now);
extern int64 StreamSubscriptionNow(FunctionCallInfo fcinfo, int argno);
extern SP_NORETURN void StreamSubscriptionNotFound(const char *id);
extern char *StreamSubscriptionText(SpQuery *q, const char *id, const char *column,
									MemoryContext outer);
extern void StreamSubscriptionsLinkNew(const char *path, const StreamRow *row);
extern void StreamSubscriptionsUnlinkPath(const char *path);

/* stream_wakes.c */
extern void StreamSubscriptionsWake(const char *path, int64 now);
extern bool StreamSubscriptionWake(const char *subscription_id, int64 now);

#endif							/* SANDBOX_PERSIST_STREAMS_H */
