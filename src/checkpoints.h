/*
 * checkpoints.h
 *
 * Shared by the checkpoint store modules: identifier checks with the
 * checkpoint error codes, the writer and its lease test, the thread-row lock,
 * entry validation and the checkpoint output builder.
 *
 * Lock order, always: the checkpoint_threads row, then checkpoint rows, then
 * blob rows in sorted key order.
 */
#ifndef SANDBOX_PERSIST_CHECKPOINTS_H
#define SANDBOX_PERSIST_CHECKPOINTS_H

#include "sandbox_persist.h"

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

/* checkpoints.c */
extern char *CkptCheckId(const SpJson *node, const char *field);
extern char *CkptCheckIdArg(FunctionCallInfo fcinfo, int argno, const char *name);
extern SpJson *CkptInputArg(FunctionCallInfo fcinfo, int argno, const char *name);
extern void CkptLookup(const SpJson *obj, const char *const *names, int nnames,
					   SpJson **out);
extern void CkptMembers(const SpJson *obj, const char *const *names, int nnames,
						SpJson **out, const char *what);
extern char *CkptReadWriterThread(const SpJson *writer);
extern void CkptReadWriterLease(const SpJson *writer, CkptWriter *out);
extern void CkptLockThread(const char *thread_id, CkptThread *out);
extern bool CkptLeaseCurrent(const CkptThread *thread, const CkptWriter *writer, int64 now);
extern int64 CkptRequireLease(FunctionCallInfo fcinfo, int now_argno, const CkptThread *thread,
							  const CkptWriter *writer, const char *thread_id);
extern double CkptCheckCreatedAt(const SpJson *node, const char *field);
extern Datum CkptDistinctKeys(const CkptEntries *entries, int *nkeys);
extern void CkptInsertRefs(const char *checkpoint_id, Datum keys);
extern Datum CkptStoreConversation(const char *thread_id, Datum messages);
extern Datum CkptRecordById(const char *checkpoint_id, bool read_only, MemoryContext outer,
							bool *found);

/* fork.c */
extern Datum ForkPublish(const char *dest_thread, const char *dest_id, double created_at,
						 const CkptEntries *entries, Datum message_ids, Datum keys, int64 now,
						 MemoryContext outer);

/* checkpoint_entries.c */
extern void CkptValidateFiles(const SpJson *files, CkptEntries *out);
extern void CkptValidateArtifacts(const SpJson *artifacts, CkptEntries *out);

/* leases.c */
extern int64 CkptLeaseMs(FunctionCallInfo fcinfo, int argno);

#endif							/* SANDBOX_PERSIST_CHECKPOINTS_H */
