/*
 * locks.c
 *
 * The LockStore backend (docs/contract/locks.md): leased, fenced locks
 * for keys such as run-driver:<runId> and sandbox:<key>, one row per held
 * key. Not advisory locks: every call is one short statement, so locks work
 * through transaction poolers, survive client crashes (the lease expires) and
 * are visible to maintenance. The blocking wait belongs to the client, which
 * polls and is woken early by the NOTIFY a release sends.
 *
 * Locking: each function touches only its keys' rows. Acquire takes the row
 * with one INSERT ... ON CONFLICT DO UPDATE only when it is absent or
 * expired, so it never waits beyond another transaction that holds the row.
 * Fences come from one global sequence and so keep growing across release,
 * takeover and the purge of expired rows; a fence is drawn only once the
 * acquire holds its row, so fences also increase in the order locks are
 * granted. At now == expiresAt a lock is free.
 *
 * Fence epochs (fences.c): a grant whose drawn value is not above the
 * current epoch's floor is the first of a new timeline (or races it); it
 * takes a transaction advisory lock on the sequence, draws again and, when
 * still below, moves the sequence to floor + 1 with setval. Only that rare
 * path serialises, and only on itself; the sequence never moves backwards
 * (setval runs only while every value drawn is below the floor).
 *
 * Clock: a call may wait for a key's row (held by another transaction, for
 * instance an app that called a lock function inside its own transaction),
 * and a lease must be judged and stamped by the clock after that wait, never
 * by one read before it. So acquire and renew first lock their keys' rows
 * FOR UPDATE, then read the clock, then run the judging statement, which can
 * no longer wait on those rows. An acquire that found no row may still wait
 * inside its INSERT for another transaction's uncommitted insert or delete
 * of the key; a granted acquire therefore stamps its lease (and draws its
 * fence) with a second statement, from the clock read after the first. Release, check and holder judge no time after
 * a wait (release does not judge time; check and holder do not wait).
 *
 * Bound: acquire, renew and renew_many wait for a key's row (or for the
 * transaction that inserted it) at most sandbox_persist.lease_row_wait
 * (row_wait.c). Only a transaction left open after calling a lock function
 * holds it that long; past the bound the call fails with LEASE_ROW_BUSY,
 * having changed nothing, instead of waiting for that transaction to end.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/async.h"
#include "common/int.h"
#include "common/md5.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "sandbox_persist.h"

PG_FUNCTION_INFO_V1(lock_acquire);
PG_FUNCTION_INFO_V1(lock_renew);
PG_FUNCTION_INFO_V1(lock_renew_many);
PG_FUNCTION_INFO_V1(lock_release);
PG_FUNCTION_INFO_V1(lock_check);
PG_FUNCTION_INFO_V1(lock_holder);

#define LOCK_TTL_MIN_MS 1000
#define LOCK_TTL_MAX_MS 600000

/*
 * Take the key when it is absent or expired. The fence is left at 0 here and
 * drawn by lock_grant once the row is this call's: a fence drawn in VALUES
 * would be drawn before the insert waits for, or is overtaken by, another
 * acquirer, and could come out smaller than a grant made in between.
 */
static SpQuery lock_take = {
	"INSERT INTO sandbox_persist.locks AS l (lock_key, owner_token, fence, acquired_at, expires_at)"
	" VALUES ($1, pg_catalog.gen_random_uuid(), 0, $2, $3)"
	" ON CONFLICT (lock_key) DO UPDATE SET owner_token = EXCLUDED.owner_token,"
	" fence = 0, acquired_at = EXCLUDED.acquired_at, expires_at = EXCLUDED.expires_at"
	" WHERE l.expires_at <= $2",
	3, {TEXTOID, INT8OID, INT8OID}
};

/* Lock the key's row, if any, before the clock is read (acquire). */
static SpQuery lock_hold = {
	"SELECT 1 FROM sandbox_persist.locks WHERE lock_key = $1 FOR UPDATE",
	1, {TEXTOID}
};

/*
 * Complete a grant on the row lock_take left this call holding: the fence,
 * drawn now so fences increase in grant order, and the lease stamped from the
 * clock after any wait the insert made.
 */
static SpQuery lock_grant = {
	"UPDATE sandbox_persist.locks SET fence = $4,"
	" acquired_at = $2, expires_at = $3 WHERE lock_key = $1"
	" RETURNING owner_token::text AS owner_token, fence",
	4, {TEXTOID, INT8OID, INT8OID, INT8OID}
};

/* Draw the next fence value. */
static SpQuery lock_draw_fence = {
	"SELECT pg_catalog.nextval('sandbox_persist.lock_fences') AS fence",
	0, {InvalidOid}
};

/* Serialise the epoch jump (the rare path of LockDrawFence) until commit. */
static SpQuery lock_jump_lock = {
	"SELECT pg_catalog.pg_advisory_xact_lock("
	"'sandbox_persist.lock_fences'::pg_catalog.regclass::pg_catalog.oid::pg_catalog.int4, 0)",
	0, {InvalidOid}
};

/* Draw again under the jump lock; below the floor $1, move the sequence to $1 + 1. */
static SpQuery lock_jump_fence = {
	"SELECT CASE WHEN d.v > $1 THEN d.v"
	" ELSE pg_catalog.setval('sandbox_persist.lock_fences', $1 + 1) END AS fence"
	" FROM (SELECT pg_catalog.nextval('sandbox_persist.lock_fences') AS v) d",
	1, {INT8OID}
};

/* Lock the owner's row before the clock is read (renew). */
static SpQuery lock_hold_owned = {
	"SELECT 1 FROM sandbox_persist.locks"
	" WHERE lock_key = $1 AND owner_token::text = $2 FOR UPDATE",
	2, {TEXTOID, TEXTOID}
};

static SpQuery lock_extend = {
	"UPDATE sandbox_persist.locks SET expires_at = $4"
	" WHERE lock_key = $1 AND owner_token::text = $2 AND expires_at > $3",
	4, {TEXTOID, TEXTOID, INT8OID, INT8OID}
};

/*
 * Renew every (key, token) pair still held; report each entry's outcome in
 * input order. An entry counts as renewed only when its own key AND token
 * matched the renewed row, so a wrong-token entry stays lost even when the
 * same key also appears with the right token.
 */
static SpQuery lock_extend_many = {
	"WITH req AS (SELECT k, t, ord FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS u(k, t, ord)),"
	" upd AS (UPDATE sandbox_persist.locks l SET expires_at = $4 FROM req"
	"         WHERE l.lock_key = req.k AND l.owner_token::text = req.t AND l.expires_at > $3"
	"         RETURNING l.lock_key, l.owner_token::text AS owner_token)"
	" SELECT req.k AS lock_key, upd.lock_key IS NOT NULL AS renewed FROM req"
	" LEFT JOIN upd ON upd.lock_key = req.k AND upd.owner_token = req.t"
	" ORDER BY req.ord",
	4, {TEXTARRAYOID, TEXTARRAYOID, INT8OID, INT8OID}
};

/*
 * Lock every owned row of a renew_many call before the clock is read; ORDER
 * BY before FOR UPDATE takes them in sorted key order.
 */
static SpQuery lock_hold_many = {
	"SELECT 1 FROM sandbox_persist.locks l"
	" WHERE (l.lock_key, l.owner_token::text) IN"
	"       (SELECT k, t FROM unnest($1::text[], $2::text[]) AS u(k, t))"
	" ORDER BY l.lock_key FOR UPDATE OF l",
	2, {TEXTARRAYOID, TEXTARRAYOID}
};

static SpQuery lock_drop = {
	"DELETE FROM sandbox_persist.locks WHERE lock_key = $1 AND owner_token::text = $2",
	2, {TEXTOID, TEXTOID}
};

static SpQuery lock_verify = {
	"SELECT 1 FROM sandbox_persist.locks"
	" WHERE lock_key = $1 AND owner_token::text = $2 AND fence = $3 AND expires_at > $4",
	4, {TEXTOID, TEXTOID, INT8OID, INT8OID}
};

static SpQuery lock_describe = {
	"SELECT fence, acquired_at, expires_at FROM sandbox_persist.locks WHERE lock_key = $1",
	1, {TEXTOID}
};

/* Read a lock key argument: an identifier of at most 2048 bytes. */
static char *
LockKeyArg(FunctionCallInfo fcinfo, int argno)
{
	return SpCheckIdArg(fcinfo, argno, "lock_key", SP_KEY_MAX_BYTES, SP_CHECK_PLAIN);
}

/* How LEASE_ROW_BUSY names a key's row. */
static const char *
LockRowName(const char *key)
{
	return psprintf("lock \"%s\"", key);
}

/* Read a required text argument that is not an identifier (an owner token). */
static char *
LockTokenArg(FunctionCallInfo fcinfo, int argno)
{
	SpCheckArgNotNull(fcinfo, argno, "owner_token", NULL, SP_CHECK_PLAIN);
	return text_to_cstring(PG_GETARG_TEXT_PP(argno));
}

/* Read ttl_ms (1000..600000) and return now + ttl_ms. */
static int64
LockExpiry(FunctionCallInfo fcinfo, int argno, int64 now)
{
	int64		ttl;
	int64		expires;

	SpCheckArgNotNull(fcinfo, argno, "ttl_ms", NULL, SP_CHECK_PLAIN);
	ttl = PG_GETARG_INT64(argno);
	if (ttl < LOCK_TTL_MIN_MS || ttl > LOCK_TTL_MAX_MS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ttl_ms must be between %d and %d", LOCK_TTL_MIN_MS, LOCK_TTL_MAX_MS),
				 errdetail("A lease of " INT64_FORMAT " ms was requested.", ttl)));
	if (pg_add_s64_overflow(now, ttl, &expires))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("lock expiry is out of range"),
				 errdetail("now + ttl_ms overflows bigint.")));
	return expires;
}

/*
 * The fence of a grant: the next sequence value, above the current epoch's
 * floor (see the header). Inside SPI, once the acquire holds its row.
 */
static int64
LockDrawFence(int64 fence_floor)
{
	int64		fence = 0;
	SpArgs		args;

	SpArgsInit(&args);
	SpExec(&lock_draw_fence, &args, false, 1);
	SpGetInt64(0, SpColumn("fence"), &fence);
	if (fence <= fence_floor)
	{
		SpArgsInit(&args);
		SpExec(&lock_jump_lock, &args, false, 0);
		SpArgsInit(&args);
		SpArgInt64(&args, fence_floor);
		SpExec(&lock_jump_fence, &args, false, 1);
		SpGetInt64(0, SpColumn("fence"), &fence);
	}
	SpCheckFence(fence);
	return fence;
}

/*
 * Read the clock (server clock, or now_ms when allowed) and return it; set
 * *expires to now + ttl_ms. Called once before locking, so a disallowed clock
 * or a bad ttl is refused before any wait, and again after the key rows are
 * locked, for the reading that judges and stamps the lease.
 */
static int64
LockClock(FunctionCallInfo fcinfo, int ttl_argno, int now_argno, int64 *expires)
{
	int64		now = SpNowMs(fcinfo, now_argno);

	*expires = LockExpiry(fcinfo, ttl_argno, now);
	return now;
}

/*
 * lock_acquire(lock_key text, ttl_ms bigint, now_ms bigint) -> json
 * {ownerToken, fence, expiresAt}, or NULL at once when the key is held.
 */
Datum
lock_acquire(PG_FUNCTION_ARGS)
{
	char	   *key = LockKeyArg(fcinfo, 0);
	MemoryContext outer = CurrentMemoryContext;
	StringInfoData buf;
	SpArgs		args;
	int64		now;
	int64		expires;
	int64		fence = 0;
	int64		fence_floor;
	char	   *token = NULL;
	bool		first = true;
	bool		granted;
	bool		held;

	(void) LockClock(fcinfo, 1, 2, &expires);	/* refuse bad input before locking */
	fence_floor = SpFenceFloor();
	SPI_connect();
	SpArgsInit(&args);
	SpArgText(&args, key);
	/* a row to lock is an expired lease not yet purged: granting it is a takeover */
	held = SpExecRowWait(&lock_hold, &args, 0, LockRowName(key)) == 1;
	now = LockClock(fcinfo, 1, 2, &expires);
	SpArgsInit(&args);
	SpArgText(&args, key);
	SpArgInt64(&args, now);
	SpArgInt64(&args, expires);
	granted = SpExecRowWait(&lock_take, &args, 0, LockRowName(key)) == 1;
	if (granted)
	{
		MemoryContext spi;

		/* with no row to lock, the insert itself may have waited: stamp anew */
		now = LockClock(fcinfo, 1, 2, &expires);
		fence = LockDrawFence(fence_floor);
		SpArgsInit(&args);
		SpArgText(&args, key);
		SpArgInt64(&args, now);
		SpArgInt64(&args, expires);
		SpArgInt64(&args, fence);
		SpExec(&lock_grant, &args, false, 0);
		spi = MemoryContextSwitchTo(outer);
		token = SpGetText(0, SpColumn("owner_token"));
		SpGetInt64(0, SpColumn("fence"), &fence);
		MemoryContextSwitchTo(spi);
		if (held)
			TakeoverCount(SP_TAKEOVER_LOCK);
	}
	SPI_finish();
	if (!granted)
		PG_RETURN_NULL();
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	SpAppendKey(&buf, &first, "ownerToken");
	SpAppendString(&buf, token);
	SpAppendKey(&buf, &first, "fence");
	SpAppendInt64(&buf, fence);
	SpAppendKey(&buf, &first, "expiresAt");
	SpAppendInt64(&buf, expires);
	appendStringInfoChar(&buf, '}');
	PG_RETURN_DATUM(SpJsonResult(&buf));
}

/*
 * lock_renew(lock_key text, owner_token text, ttl_ms bigint, now_ms bigint)
 * -> json {expiresAt}, or NULL when the lease is lost (expired, taken, or
 * never this owner's). An expired lease is never revived.
 */
Datum
lock_renew(PG_FUNCTION_ARGS)
{
	char	   *key = LockKeyArg(fcinfo, 0);
	char	   *token = LockTokenArg(fcinfo, 1);
	int64		now;
	int64		expires;
	StringInfoData buf;
	SpArgs		args;
	int			n;

	(void) LockClock(fcinfo, 2, 3, &expires);	/* refuse bad input before locking */
	SPI_connect();
	SpArgsInit(&args);
	SpArgText(&args, key);
	SpArgText(&args, token);
	SpExecRowWait(&lock_hold_owned, &args, 0, LockRowName(key));
	now = LockClock(fcinfo, 2, 3, &expires);
	SpArgsInit(&args);
	SpArgText(&args, key);
	SpArgText(&args, token);
	SpArgInt64(&args, now);
	SpArgInt64(&args, expires);
	n = SpExec(&lock_extend, &args, false, 0);
	SPI_finish();
	if (n == 0)
		PG_RETURN_NULL();
	initStringInfo(&buf);
	appendStringInfo(&buf, "{\"expiresAt\":" INT64_FORMAT "}", expires);
	PG_RETURN_DATUM(SpJsonResult(&buf));
}

/*
 * lock_renew_many(leases json, ttl_ms bigint, now_ms bigint) -> json
 * {renewed: [{key, expiresAt}], lost: [key]}: renew every {key, ownerToken}
 * of a process in one statement.
 */
Datum
lock_renew_many(PG_FUNCTION_ARGS)
{
	static const char *const names[] = {"key", "ownerToken"};
	SpJson	   *leases = SpCheckJsonArg(fcinfo, 0, "leases", SP_CHECK_PLAIN);
	int64		now;
	int64		expires;
	MemoryContext outer = CurrentMemoryContext;
	MemoryContext spi;
	Datum	   *keys;
	Datum	   *tokens;
	Datum		key_array;
	Datum		token_array;
	StringInfoData renewed;
	StringInfoData lost;
	StringInfoData buf;
	SpArgs		args;
	int			n;

	(void) LockClock(fcinfo, 1, 2, &expires);	/* refuse bad input before locking */
	if (leases->kind != SPJ_ARRAY)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("leases must be a JSON array"),
				 errdetail("A JSON %s was given.", SpJsonKindName(leases->kind))));
	keys = palloc(sizeof(Datum) * Max(leases->count, 1));
	tokens = palloc(sizeof(Datum) * Max(leases->count, 1));
	for (int i = 0; i < leases->count; i++)
	{
		SpJson	   *m[lengthof(names)];

		if (leases->items[i]->kind != SPJ_OBJECT)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("each lease must be an object {key, ownerToken}"),
					 errdetail("Element %d is a JSON %s.", i,
							   SpJsonKindName(leases->items[i]->kind))));
		SpJsonMembers(leases->items[i], names, lengthof(names), m, "a lease", false,
					  ERRCODE_INVALID_PARAMETER_VALUE, -1);
		keys[i] = CStringGetTextDatum(SpCheckIdJson(m[0], "key", SP_KEY_MAX_BYTES, SP_CHECK_PLAIN));
		tokens[i] = CStringGetTextDatum(SpCheckStringJson(m[1], "ownerToken", true, -1, SP_CHECK_PLAIN));
	}
	key_array = PointerGetDatum(construct_array(keys, leases->count, TEXTOID, -1,
												false, TYPALIGN_INT));
	token_array = PointerGetDatum(construct_array(tokens, leases->count, TEXTOID, -1,
												  false, TYPALIGN_INT));

	SPI_connect();
	SpArgsInit(&args);
	SpArgDatum(&args, key_array);
	SpArgDatum(&args, token_array);
	SpExecRowWait(&lock_hold_many, &args, 0, "a lock of this lock_renew_many call");
	now = LockClock(fcinfo, 1, 2, &expires);
	SpArgsInit(&args);
	SpArgDatum(&args, key_array);
	SpArgDatum(&args, token_array);
	SpArgInt64(&args, now);
	SpArgInt64(&args, expires);
	n = SpExec(&lock_extend_many, &args, false, 0);
	spi = MemoryContextSwitchTo(outer);
	initStringInfo(&renewed);
	initStringInfo(&lost);
	for (int i = 0; i < n; i++)
	{
		bool		ok = false;
		StringInfo	list;

		SpGetBool(i, SpColumn("renewed"), &ok);
		list = ok ? &renewed : &lost;
		if (list->len > 0)
			appendStringInfoChar(list, ',');
		if (ok)
		{
			appendStringInfoString(list, "{\"key\":");
			SpAppendString(list, SpGetText(i, SpColumn("lock_key")));
			appendStringInfo(list, ",\"expiresAt\":" INT64_FORMAT "}", expires);
		}
		else
			SpAppendString(list, SpGetText(i, SpColumn("lock_key")));
	}
	initStringInfo(&buf);
	appendStringInfo(&buf, "{\"renewed\":[%s],\"lost\":[%s]}", renewed.data, lost.data);
	MemoryContextSwitchTo(spi);
	SPI_finish();
	PG_RETURN_DATUM(SpJsonResult(&buf));
}

/*
 * lock_release(lock_key text, owner_token text) -> boolean: delete the row
 * only when the token matches, and notify sandbox_persist_lock with the MD5
 * hex of the key so waiting clients retry at once (sent at commit).
 */
Datum
lock_release(PG_FUNCTION_ARGS)
{
	char	   *key = LockKeyArg(fcinfo, 0);
	char	   *token = LockTokenArg(fcinfo, 1);
	SpArgs		args;
	bool		released;

	SPI_connect();
	SpArgsInit(&args);
	SpArgText(&args, key);
	SpArgText(&args, token);
	released = SpExec(&lock_drop, &args, false, 0) == 1;
	SPI_finish();
	if (released)
	{
		char		hex[33];
		const char *errstr = NULL;

		if (!pg_md5_hash(key, strlen(key), hex, &errstr))
			elog(ERROR, "could not hash the lock key: %s", errstr);
		Async_Notify(SP_CHANNEL_LOCK, hex);
	}
	PG_RETURN_BOOL(released);
}

/*
 * lock_check(lock_key text, owner_token text, fence bigint, now_ms bigint) ->
 * boolean: true iff that token and fence hold the key unexpired.
 */
Datum
lock_check(PG_FUNCTION_ARGS)
{
	char	   *key = LockKeyArg(fcinfo, 0);
	char	   *token = LockTokenArg(fcinfo, 1);
	int64		now = SpNowMs(fcinfo, 3);
	SpArgs		args;
	bool		held;

	SpCheckArgNotNull(fcinfo, 2, "fence", NULL, SP_CHECK_PLAIN);
	SPI_connect();
	SpArgsInit(&args);
	SpArgText(&args, key);
	SpArgText(&args, token);
	SpArgInt64(&args, PG_GETARG_INT64(2));
	SpArgInt64(&args, now);
	held = SpExec(&lock_verify, &args, true, 1) == 1;
	SPI_finish();
	PG_RETURN_BOOL(held);
}

/*
 * lock_holder(lock_key text, now_ms bigint) -> json {fence, acquiredAt,
 * expiresAt, expired}, or NULL; never the owner token.
 */
Datum
lock_holder(PG_FUNCTION_ARGS)
{
	char	   *key = LockKeyArg(fcinfo, 0);
	int64		now = SpNowMs(fcinfo, 1);
	StringInfoData buf;
	SpArgs		args;
	int64		fence = 0;
	int64		acquired = 0;
	int64		expires = 0;
	bool		found;

	SPI_connect();
	SpArgsInit(&args);
	SpArgText(&args, key);
	found = SpExec(&lock_describe, &args, true, 1) == 1;
	if (found)
	{
		SpGetInt64(0, SpColumn("fence"), &fence);
		SpGetInt64(0, SpColumn("acquired_at"), &acquired);
		SpGetInt64(0, SpColumn("expires_at"), &expires);
	}
	SPI_finish();
	if (!found)
		PG_RETURN_NULL();
	initStringInfo(&buf);
	appendStringInfo(&buf, "{\"fence\":" INT64_FORMAT ",\"acquiredAt\":" INT64_FORMAT
					 ",\"expiresAt\":" INT64_FORMAT ",\"expired\":%s}",
					 fence, acquired, expires, expires <= now ? "true" : "false");
	PG_RETURN_DATUM(SpJsonResult(&buf));
}
