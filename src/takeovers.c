/*
 * takeovers.c
 *
 * The durable count of lease takeovers (0.4.0, docs/monitoring.md): an
 * acquire that found a checkpoint writer lease or a lock still recorded for
 * another owner, expired, and took it. The counter feeds the
 * sandbox_persist_lease_takeovers_total metric; a storm of takeovers means
 * holders stop renewing in time (stalled processes, a too-short TTL).
 *
 * Locking: one row per (kind, slot), the slot chosen by the backend's pid, so
 * two backends counting at once rarely share a row; the increment holds its
 * row until the caller's transaction ends, and a takeover that rolls back is
 * not counted. The table exists from 0.4.0 on: the same library serves older
 * schemas, where nothing is counted (the look-up is done per takeover only,
 * a rare event, so it is not cached).
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/lsyscache.h"

#include "sandbox_persist.h"

/* Rows per kind: enough that concurrent takeovers seldom wait on each other. */
#define TAKEOVER_SLOTS 16

static SpQuery takeover_count = {
	"INSERT INTO sandbox_persist.lease_takeovers AS t (kind, slot, takeovers)"
	" VALUES ($1, $2, 1)"
	" ON CONFLICT (kind, slot) DO UPDATE SET takeovers = t.takeovers + 1",
	2, {TEXTOID, INT8OID}
};

/* True when the database has the 0.4.0 counter table. */
static bool
TakeoverHasCounter(void)
{
	Oid			ns = get_namespace_oid("sandbox_persist", true);

	return OidIsValid(ns) && OidIsValid(get_relname_relid("lease_takeovers", ns));
}

/* Count one takeover of kind (SP_TAKEOVER_*). Inside SPI. */
void
TakeoverCount(const char *kind)
{
	SpArgs		args;

	if (!TakeoverHasCounter())
		return;
	SpArgsInit(&args);
	SpArgText(&args, kind);
	SpArgInt64(&args, (int64) (MyProcPid % TAKEOVER_SLOTS));
	SpExec(&takeover_count, &args, false, 0);
}
