/*
 * checkpoints.h
 *
 * Shared by the checkpoint store modules. The files call each other in one
 * direction only: checkpoints.c and fork.c use leases.c (the writer, its
 * lease test, the thread-row lock), checkpoint_entries.c (identifiers and
 * entries of checkpoint input) and conversations.c (conversation storage);
 * leases.c uses checkpoint_entries.c; the last two use neither.
 *
 * Lock order, always: the checkpoint_threads row, then checkpoint rows, then
 * blob rows in sorted key order.
 */
#ifndef SANDBOX_PERSIST_CHECKPOINTS_H
#define SANDBOX_PERSIST_CHECKPOINTS_H

#include "sandbox_persist.h"

/*
 * The storage layout the checkpoint functions need: the per-thread
 * conversation log of 0.3.0 (conversations.c). A database at an older
 * schema is refused (SpRequireSchema, schema_version.c).
 */
#define CKPT_LAYOUT_SINCE	"0.3.0"

/* The three writer members the store reads; anything else is ignored. */
typedef struct CkptWriter
{
	char	   *thread_id;
	char	   *owner_token;	/* NULL when malformed: never current */
	bool		fence_ok;
	int64		fence;
} CkptWriter;

/* A locked checkpoint_threads row. */
typedef struct CkptThread
{
	bool		exists;
	int64		fence;
	char	   *owner_token;	/* NULL when no lease is recorded */
	bool		has_expiry;
	int64		expires_at;
	char	   *head_id;		/* NULL when the thread has no head */
} CkptThread;

/* Validated files and artifacts of one checkpoint. */
typedef struct CkptEntries
{
	StringInfoData files;		/* canonical JSON array */
	StringInfoData artifacts;	/* canonical JSON array */
	int			nkeys;			/* every blob key, duplicates included */
	char	  **keys;
} CkptEntries;

/* A conversation argument split into the exact text of each message. */
typedef struct ConvMessages
{
	int			n;
	const char **raw;			/* spans into the argument's text */
	int		   *rawlen;
} ConvMessages;

/* Blocks a ConvParts reader fetches at a time (a block is a turn or more). */
#define CONV_PARTS_BATCH	64

/* A conversation read a block at a time (ConvPartsOpen). */
typedef struct ConvParts
{
	Portal		portal;			/* the blocks in order; NULL once done */
	MemoryContext batch_cxt;	/* holds batch, reset per fetch */
	Datum	   *batch;			/* CONV_PARTS_BATCH blocks' text, compressed as stored */
	int			count;			/* blocks in batch */
	int			next;			/* the next of them to return */
} ConvParts;

/* Where an append or a fork put a conversation. */
typedef struct ConvStored
{
	Datum		base;			/* int8multirange kept from the parent ... */
	bool		base_null;		/* ... or none */
	int64		block_from;		/* the log positions this checkpoint appended */
	int64		block_to;
	int32		len;			/* number of messages */
	Datum		digest;			/* bytea: the chain over the messages' sha256s (conversations.c) */
} ConvStored;

/*
 * The blocks (alias b) of thread `thread` that the int8multirange `ranges`
 * is made of: one index range scan over the span of the ranges, so a
 * conversation reads in as many rows as it has blocks (plus those of an
 * abandoned branch between a shared prefix and a later block).
 */
#define CONV_BLOCKS_IN(thread, ranges) \
	" sandbox_persist.conversation_blocks b WHERE b.thread_id = " thread \
	" AND b.first_pos >= pg_catalog.lower(" ranges ") AND b.first_pos < pg_catalog.upper(" ranges ")" \
	" AND b.first_pos OPERATOR(pg_catalog.<@) " ranges

/*
 * The conversation of checkpoint row `alias` as the text between '[' and ']'
 * (NULL when empty): its blocks in position order.
 */
#define CONV_BODIES_SQL(alias) \
	"(SELECT string_agg(b.bodies, ',' ORDER BY b.first_pos) FROM" \
	CONV_BLOCKS_IN(alias ".thread_id", alias ".conv_ranges") ")"

/*
 * Checkpoint input is checked by the validator family (validate.c) with the
 * checkpoint policies, so every problem is SP007 (SP_CHECK_CKPT_ID, for
 * identifiers, with SP_ID_MAX_BYTES) or SP008 (SP_CHECK_CKPT_ENTRY).
 */

/* checkpoint_entries.c: member lookups and entries of checkpoint input */
extern void CkptLookup(const SpJson *obj, const char *const *names, int nnames,
					   SpJson **out);
extern void CkptMembers(const SpJson *obj, const char *const *names, int nnames,
						SpJson **out, const char *what);
extern char *CkptReadWriterThread(const SpJson *writer);
extern void CkptValidateFiles(const SpJson *files, CkptEntries *out);
extern void CkptValidateArtifacts(const SpJson *artifacts, CkptEntries *out);
extern Datum CkptDistinctKeys(const CkptEntries *entries, int *nkeys);

/* leases.c: the writer, its lease and the thread-row lock */
extern void CkptReadWriterLease(const SpJson *writer, CkptWriter *out);
extern void CkptLockThread(const char *thread_id, CkptThread *out);
extern bool CkptLeaseCurrent(const CkptThread *thread, const CkptWriter *writer, int64 now);
extern int64 CkptRequireLease(FunctionCallInfo fcinfo, int now_argno, const CkptThread *thread,
							  const CkptWriter *writer, const char *thread_id);
extern int64 CkptLeaseMs(FunctionCallInfo fcinfo, int argno);

/* checkpoints.c: records and references */
extern void CkptInsertRefs(const char *checkpoint_id, Datum keys);
extern Datum CkptRecordById(const char *checkpoint_id, bool read_only, MemoryContext outer,
							bool *found);

/* The input of a fork, read once (fork.c); the cross-shard import reads the same. */
typedef struct ForkInput
{
	char	   *source_thread;
	char	   *source_id;
	char	   *dest_thread;
	char	   *dest_id;
	char	   *writer_thread;
	double		created_at;
	CkptWriter	writer;
} ForkInput;

/*
 * Where a fork root's conversation comes from: `conversation` is the log
 * ranges of thread `thread_id`, with its length and digest. A local fork copies those ranges into the
 * destination's log; an import has already appended them there (own_block,
 * [block_from, block_to) of the destination's log).
 */
typedef struct ForkSource
{
	const char *thread_id;
	Datum		conversation;
	int64		len;
	Datum		digest;
	bool		own_block;
	int64		block_from;
	int64		block_to;
} ForkSource;

/* fork.c: the steps the local fork and the cross-shard import share */
extern void ForkReadInput(FunctionCallInfo fcinfo, int now_argno, ForkInput *in);
extern void ForkCheckSourceThread(const ForkInput *in, const char *stored_thread);
extern int64 ForkCheckDestination(FunctionCallInfo fcinfo, int now_argno, const ForkInput *in,
								  const CkptThread *thread, bool id_taken);
extern Datum ForkPublish(const ForkInput *in, const CkptEntries *entries, const ForkSource *src,
						 Datum keys, int64 now, MemoryContext outer);
extern Datum ForkResult(Datum record);

/* conversations.c: conversation storage */
extern void ConvSplit(FunctionCallInfo fcinfo, int argno, ConvMessages *out);
extern void ConvAppend(const char *thread_id, const char *parent_id, const ConvMessages *msgs,
					   ConvStored *out);
extern void ConvAppendTail(const char *thread_id, const char *parent_id, int64 claim_len,
						   const uint8 *claim_digest, int claim_digest_len,
						   const ConvMessages *tail, ConvStored *out);
extern int64 ConvAppendText(StringInfo buf, const char *thread_id, Datum ranges,
							 bool read_only);
extern ConvParts *ConvPartsOpen(const char *thread_id, Datum ranges);
extern text *ConvPartsNext(ConvParts *parts);
extern void ConvPartsClose(Datum parts);
extern void ConvCopy(const char *source_thread, Datum source_ranges, const char *dest_thread,
					 ConvStored *out);
extern int64 ConvCollect(int64 max_rows);

#endif							/* SANDBOX_PERSIST_CHECKPOINTS_H */
