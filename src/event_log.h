/*
 * event_log.h
 *
 * Declarations shared by the files of the durable event log
 * (docs/contract/event-log.md): event_log.c (the layout, notifications,
 * reads, close and snapshot) and event_log_append.c (appends). Nothing here
 * takes locks; each file states its rule.
 */
#ifndef SANDBOX_PERSIST_EVENT_LOG_H
#define SANDBOX_PERSIST_EVENT_LOG_H

#include "sandbox_persist.h"

/* Append a digest as its token text: 16 lowercase hexadecimal digits, quoted. */
extern void LogAppendDigest(StringInfo buf, int64 digest);

/* Notify readers parked on a log (with the entries appended, when they fit). */
extern void LogNotify(int64 log_id, int64 first, int64 prev_digest, const SpJson *chunks,
					  const int64 *digests);

#endif							/* SANDBOX_PERSIST_EVENT_LOG_H */
