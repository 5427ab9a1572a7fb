-- pgTAP: the LockStore backend, a lease table (docs/contract/locks.md §1-§2).
-- Cases: L1-L10, L12, L13, L19, L20, V25.
-- (L11 is the isolation spec l11_release_notifies; L14-L18 are NODE.)
-- Run with: pg_prove -d <db> test/pgtap/locks.sql
-- (needs sandbox_persist.allow_test_reset and allow_client_clock on).
BEGIN;
SELECT plan(146);
SELECT sandbox_persist._reset_for_tests();
SET LOCAL sandbox_persist.allow_client_clock = on;

------------------------------------------------------------------------------
-- Helpers (temporary, gone at ROLLBACK).
------------------------------------------------------------------------------

-- Every lease row and every checkpoint thread row (the writer leases of
-- V25), all columns, in a fixed order: equal values mean nothing changed.
CREATE FUNCTION pg_temp.state() RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(E'\n',
        'locks:' || (SELECT count(*) FROM sandbox_persist.locks),
        (SELECT string_agg(l::text, E'\n' ORDER BY l.lock_key) FROM sandbox_persist.locks l),
        'checkpoint_threads:' || (SELECT count(*) FROM sandbox_persist.checkpoint_threads),
        (SELECT string_agg(t::text, E'\n' ORDER BY t.thread_id) FROM sandbox_persist.checkpoint_threads t))
$$;

-- One lease row as text (NULL when absent).
CREATE FUNCTION pg_temp.row_of(k text) RETURNS text LANGUAGE sql AS $$
    SELECT l::text FROM sandbox_persist.locks l WHERE l.lock_key = k
$$;

\ir lib/durable_helpers.psql

-- Leases granted so far, by a test-chosen name.
CREATE TEMP TABLE leases (name text PRIMARY KEY, lease json);
CREATE FUNCTION pg_temp.acq(name text, k text, ttl bigint, now_ms bigint) RETURNS json
LANGUAGE plpgsql AS $$
DECLARE
    r json := sandbox_persist.lock_acquire(k, ttl, now_ms);
BEGIN
    IF r IS NOT NULL THEN
        INSERT INTO pg_temp.leases VALUES (name, r)
            ON CONFLICT ON CONSTRAINT leases_pkey DO UPDATE SET lease = EXCLUDED.lease;
    END IF;
    RETURN r;
END
$$;
CREATE FUNCTION pg_temp.tok(name text) RETURNS text LANGUAGE sql AS $$
    SELECT lease->>'ownerToken' FROM pg_temp.leases WHERE leases.name = tok.name
$$;
CREATE FUNCTION pg_temp.fence(name text) RETURNS bigint LANGUAGE sql AS $$
    SELECT (lease->>'fence')::bigint FROM pg_temp.leases WHERE leases.name = fence.name
$$;
-- Keys of a JSON object, in order.
CREATE FUNCTION pg_temp.keys(j json) RETURNS text[] LANGUAGE sql AS $$
    SELECT array_agg(k ORDER BY n) FROM json_object_keys(j) WITH ORDINALITY AS t(k, n)
$$;

------------------------------------------------------------------------------
-- L1: acquiring a free key.
------------------------------------------------------------------------------
SELECT pg_temp.acq('l1', 'l1-key', 5000, 1000) IS NOT NULL AS l1_granted \gset
SELECT ok(:'l1_granted', 'L1.1 acquiring a free key returns a lease');
SELECT is(pg_temp.keys((SELECT lease FROM leases WHERE name = 'l1')),
    ARRAY['ownerToken', 'fence', 'expiresAt'],
    'L1.2 the lease has exactly ownerToken, fence and expiresAt');
SELECT is((SELECT (lease->>'expiresAt')::bigint FROM leases WHERE name = 'l1'), 6000::bigint,
    'L1.3 expiresAt = now + ttl (1000 + 5000)');
SELECT is((SELECT json_typeof(lease->'ownerToken') FROM leases WHERE name = 'l1'), 'string',
    'L1.4 ownerToken is a JSON string');
SELECT ok(length(pg_temp.tok('l1')) >= 16, 'L1.5 ownerToken is a non-trivial random token');
SELECT ok((SELECT json_typeof(lease->'fence') = 'number' FROM leases WHERE name = 'l1')
          AND pg_temp.fence('l1') >= 1,
    'L1.6 fence is a positive JSON number');
SELECT is(sandbox_persist.lock_holder('l1-key', 1000)::jsonb,
    jsonb_build_object('fence', pg_temp.fence('l1'), 'acquiredAt', 1000, 'expiresAt', 6000, 'expired', false),
    'L1.7 the holder row records the fence, acquiredAt = now and expiresAt = now + ttl');
SELECT ok(sandbox_persist.lock_check('l1-key', pg_temp.tok('l1'), pg_temp.fence('l1'), 1000),
    'L1.8 the returned token and fence hold the key');
SELECT pg_temp.acq('l1b', 'l1-key-2', 5000, 1000);
SELECT isnt(pg_temp.tok('l1b'), pg_temp.tok('l1'), 'L1.9 two leases get different tokens');
SELECT cmp_ok(pg_temp.fence('l1b'), '>', pg_temp.fence('l1'), 'L1.10 a later lease gets a larger fence');

------------------------------------------------------------------------------
-- L2: acquiring a held key returns NULL at once.
------------------------------------------------------------------------------
SELECT pg_temp.acq('l2', 'l2-key', 10000, 1000);
SELECT pg_temp.state() AS l2_before \gset
SELECT ok(sandbox_persist.lock_acquire('l2-key', 10000, 2000) IS NULL,
    'L2.1 acquiring a held key returns SQL NULL');
SELECT ok(sandbox_persist.lock_acquire('l2-key', 1000, 10999) IS NULL,
    'L2.2 still NULL 1 ms before expiry, whatever the ttl asked for');
SELECT ok(sandbox_persist.lock_acquire('l2-key', 600000, 500) IS NULL,
    'L2.3 NULL for a clock before acquiredAt too (the lease is unexpired)');
SELECT is(pg_temp.state(), :'l2_before', 'L2.4 the failed acquisitions changed no lease row');
SELECT ok(sandbox_persist.lock_check('l2-key', pg_temp.tok('l2'), pg_temp.fence('l2'), 2000),
    'L2.5 the first owner still holds the key');
SELECT is((SELECT count(*) FROM sandbox_persist.locks WHERE lock_key = 'l2-key'), 1::bigint,
    'L2.6 there is one row for the key');

------------------------------------------------------------------------------
-- L3: different keys are independent.
------------------------------------------------------------------------------
SELECT ok(pg_temp.acq('l3a', 'l3:a', 10000, 1000) IS NOT NULL, 'L3.1 key l3:a is granted');
SELECT ok(pg_temp.acq('l3b', 'l3:b', 10000, 1000) IS NOT NULL, 'L3.2 key l3:b is granted while l3:a is held');
SELECT ok(pg_temp.acq('l3A', 'L3:A', 10000, 1000) IS NOT NULL, 'L3.3 keys compare bytewise: L3:A is another key');
SELECT ok(pg_temp.acq('l3ax', 'l3:a:x', 10000, 1000) IS NOT NULL, 'L3.4 a key extending a held key is another key');
SELECT ok(sandbox_persist.lock_release('l3:a', pg_temp.tok('l3a')), 'L3.5 l3:a is released');
SELECT ok(sandbox_persist.lock_check('l3:b', pg_temp.tok('l3b'), pg_temp.fence('l3b'), 2000)
          AND sandbox_persist.lock_check('L3:A', pg_temp.tok('l3A'), pg_temp.fence('l3A'), 2000)
          AND sandbox_persist.lock_check('l3:a:x', pg_temp.tok('l3ax'), pg_temp.fence('l3ax'), 2000),
    'L3.6 releasing l3:a leaves the other keys held');
SELECT ok(sandbox_persist.lock_acquire('l3:b', 10000, 2000) IS NULL
          AND sandbox_persist.lock_acquire('l3:a', 10000, 2000) IS NOT NULL,
    'L3.7 l3:b stays held while l3:a can be acquired again');

------------------------------------------------------------------------------
-- L4: release by the owner.
------------------------------------------------------------------------------
SELECT pg_temp.acq('l4', 'l4-key', 10000, 1000);
SELECT ok(sandbox_persist.lock_release('l4-key', pg_temp.tok('l4')), 'L4.1 release by the owner returns true');
SELECT ok(pg_temp.row_of('l4-key') IS NULL, 'L4.2 the lease row is gone');
SELECT ok(sandbox_persist.lock_holder('l4-key', 1000) IS NULL, 'L4.3 lock_holder reports no holder');
SELECT ok(NOT sandbox_persist.lock_release('l4-key', pg_temp.tok('l4')),
    'L4.4 a second release with the same token returns false');
SELECT pg_temp.acq('l4-next', 'l4-key', 10000, 1000);
SELECT cmp_ok(pg_temp.fence('l4-next'), '>', pg_temp.fence('l4'),
    'L4.5 the next acquire (at the same clock) gets a larger fence');
SELECT isnt(pg_temp.tok('l4-next'), pg_temp.tok('l4'), 'L4.6 and a new token');

------------------------------------------------------------------------------
-- L5: release with a wrong token.
------------------------------------------------------------------------------
SELECT pg_temp.acq('l5', 'l5-key', 10000, 1000);
SELECT pg_temp.state() AS l5_before \gset
SELECT ok(NOT sandbox_persist.lock_release('l5-key', gen_random_uuid()::text),
    'L5.1 release with another UUID returns false');
SELECT ok(NOT sandbox_persist.lock_release('l5-key', 'not-a-token'),
    'L5.2 release with a malformed token returns false (no error)');
SELECT ok(NOT sandbox_persist.lock_release('l5-key', pg_temp.tok('l4-next')),
    'L5.3 release with the token of another key returns false');
SELECT ok(NOT sandbox_persist.lock_release('l5-key', upper(pg_temp.tok('l5'))) OR
          pg_temp.tok('l5') = upper(pg_temp.tok('l5')),
    'L5.4 the token is compared exactly (an upper-cased token is not the token)');
SELECT is(pg_temp.state(), :'l5_before', 'L5.5 the wrong-token releases changed nothing');
SELECT ok(sandbox_persist.lock_check('l5-key', pg_temp.tok('l5'), pg_temp.fence('l5'), 2000),
    'L5.6 the key stays held by its owner');

------------------------------------------------------------------------------
-- L6: after expiry and a takeover the old owner cannot release.
------------------------------------------------------------------------------
SELECT pg_temp.acq('l6-old', 'l6-key', 1000, 1000);   -- expires at 2000
SELECT ok(pg_temp.acq('l6-new', 'l6-key', 5000, 2500) IS NOT NULL, 'L6.1 an expired lease is taken over');
SELECT cmp_ok(pg_temp.fence('l6-new'), '>', pg_temp.fence('l6-old'), 'L6.2 the takeover has a larger fence');
SELECT pg_temp.state() AS l6_before \gset
SELECT ok(NOT sandbox_persist.lock_release('l6-key', pg_temp.tok('l6-old')),
    'L6.3 the old owner''s release returns false');
SELECT is(pg_temp.state(), :'l6_before', 'L6.4 the old owner''s release changed nothing');
SELECT ok(sandbox_persist.lock_check('l6-key', pg_temp.tok('l6-new'), pg_temp.fence('l6-new'), 3000),
    'L6.5 the new holder keeps the key');
SELECT ok(sandbox_persist.lock_release('l6-key', pg_temp.tok('l6-new')), 'L6.6 the new holder can release it');

------------------------------------------------------------------------------
-- L7: the expiry boundary (free at now == expiresAt).
------------------------------------------------------------------------------
SELECT pg_temp.acq('l7', 'l7-key', 1000, 10000);      -- expires at 11000
SELECT ok(sandbox_persist.lock_acquire('l7-key', 1000, 10999) IS NULL,
    'L7.1 at now = expiresAt - 1 acquire returns NULL');
SELECT ok(pg_temp.acq('l7-next', 'l7-key', 1000, 11000) IS NOT NULL,
    'L7.2 at now = expiresAt acquire succeeds');
SELECT is(sandbox_persist.lock_holder('l7-key', 11000)::jsonb,
    jsonb_build_object('fence', pg_temp.fence('l7-next'), 'acquiredAt', 11000, 'expiresAt', 12000, 'expired', false),
    'L7.3 the key now belongs to the new lease (acquiredAt 11000, expiresAt 12000)');

------------------------------------------------------------------------------
-- L8: renew before expiry sets expiresAt = now + ttl.
------------------------------------------------------------------------------
SELECT pg_temp.acq('l8', 'l8-key', 10000, 1000);      -- expires at 11000
SELECT is(sandbox_persist.lock_renew('l8-key', pg_temp.tok('l8'), 20000, 5000)::text, '{"expiresAt":25000}',
    'L8.1 renew at 5000 with ttl 20000 returns exactly {"expiresAt":25000}');
SELECT is(sandbox_persist.lock_holder('l8-key', 5000)::jsonb,
    jsonb_build_object('fence', pg_temp.fence('l8'), 'acquiredAt', 1000, 'expiresAt', 25000, 'expired', false),
    'L8.2 the row has expiresAt 25000; fence and acquiredAt are unchanged');
SELECT is(sandbox_persist.lock_renew('l8-key', pg_temp.tok('l8'), 1000, 6000)::jsonb, '{"expiresAt":7000}'::jsonb,
    'L8.3 a renew measures from the current clock, so it can also shorten (6000 + 1000)');
SELECT ok(sandbox_persist.lock_check('l8-key', pg_temp.tok('l8'), pg_temp.fence('l8'), 6999),
    'L8.4 the same token and fence still hold the key before the new expiry');
SELECT ok(sandbox_persist.lock_acquire('l8-key', 1000, 6999) IS NULL
          AND pg_temp.acq('l8-next', 'l8-key', 1000, 7000) IS NOT NULL,
    'L8.5 the renewed expiry is the new boundary (held at 6999, free at 7000)');

------------------------------------------------------------------------------
-- L9: renew after expiry, or with a wrong token, returns NULL.
------------------------------------------------------------------------------
SELECT pg_temp.acq('l9', 'l9-key', 1000, 1000);       -- expires at 2000
SELECT pg_temp.state() AS l9_before \gset
SELECT ok(sandbox_persist.lock_renew('l9-key', pg_temp.tok('l9'), 5000, 2000) IS NULL,
    'L9.1 renew at now = expiresAt returns NULL');
SELECT ok(sandbox_persist.lock_renew('l9-key', pg_temp.tok('l9'), 5000, 9000) IS NULL,
    'L9.2 renew long after expiry returns NULL although nobody took the key');
SELECT is(pg_temp.state(), :'l9_before', 'L9.3 the expired lease was not revived (row unchanged)');
SELECT is(sandbox_persist.lock_holder('l9-key', 9000)->>'expired', 'true', 'L9.4 the lease still reads as expired');
SELECT pg_temp.acq('l9b', 'l9b-key', 10000, 1000);
SELECT pg_temp.state() AS l9b_before \gset
SELECT ok(sandbox_persist.lock_renew('l9b-key', gen_random_uuid()::text, 5000, 2000) IS NULL,
    'L9.5 renew with a wrong token before expiry returns NULL');
SELECT ok(sandbox_persist.lock_renew('l9b-key', 'garbage', 5000, 2000) IS NULL,
    'L9.6 renew with a malformed token returns NULL');
SELECT ok(sandbox_persist.lock_renew('l9-missing', pg_temp.tok('l9b'), 5000, 2000) IS NULL,
    'L9.7 renew of a key nobody holds returns NULL');
SELECT is(pg_temp.state(), :'l9b_before', 'L9.8 the refused renewals changed nothing');

------------------------------------------------------------------------------
-- L10: fences strictly increase across acquire, release, takeover and purge.
------------------------------------------------------------------------------
SELECT pg_temp.acq('l10-1', 'l10-key', 1000, 1000);
SELECT sandbox_persist.lock_release('l10-key', pg_temp.tok('l10-1'));
SELECT pg_temp.acq('l10-2', 'l10-key', 1000, 1000);   -- after release
SELECT pg_temp.acq('l10-3', 'l10-key', 1000, 2000);   -- takeover at expiry
SELECT ok(pg_temp.fence('l10-1') < pg_temp.fence('l10-2') AND pg_temp.fence('l10-2') < pg_temp.fence('l10-3'),
    'L10.1 fence after release > fence before; fence after takeover > both');
-- l10-3 expired at 3000; maintenance purges rows expired longer than 1 h.
SELECT cmp_ok((sandbox_persist.maintain(1000, 3000 + 3600 * 1000 + 1)->>'locksPurged')::int, '>=', 1,
    'L10.2 maintenance purges the long-expired row');
SELECT ok(pg_temp.row_of('l10-key') IS NULL, 'L10.3 the l10-key row is gone');
SELECT pg_temp.acq('l10-4', 'l10-key', 1000, 5000);
SELECT cmp_ok(pg_temp.fence('l10-4'), '>', pg_temp.fence('l10-3'),
    'L10.4 the first acquire after the purge gets a larger fence than every earlier one');
SELECT pg_temp.acq('l10-5', 'l10-other', 1000, 5000);
SELECT cmp_ok(pg_temp.fence('l10-5'), '>', pg_temp.fence('l10-4'),
    'L10.5 fences come from one global sequence (another key continues above)');
SELECT is((SELECT max((lease->>'fence')::bigint) FROM leases), pg_temp.fence('l10-5'),
    'L10.6 the latest lease has the largest fence ever handed out in this file');

------------------------------------------------------------------------------
-- L12: lock_renew_many renews the leases still held and reports the others.
------------------------------------------------------------------------------
SELECT pg_temp.acq('l12a', 'l12:a', 10000, 1000);
SELECT pg_temp.acq('l12b', 'l12:b', 10000, 1000);
SELECT pg_temp.acq('l12c', 'l12:c', 1000, 1000);     -- expires at 2000
SELECT pg_temp.acq('l12d', 'l12:d', 10000, 1000);
SELECT pg_temp.row_of('l12:c') AS l12c_before, pg_temp.row_of('l12:d') AS l12d_before \gset
SELECT is(sandbox_persist.lock_renew_many(json_build_array(
        json_build_object('key', 'l12:a', 'ownerToken', pg_temp.tok('l12a')),
        json_build_object('key', 'l12:c', 'ownerToken', pg_temp.tok('l12c')),
        json_build_object('key', 'l12:b', 'ownerToken', pg_temp.tok('l12b')),
        json_build_object('key', 'l12:d', 'ownerToken', pg_temp.tok('l12a')),
        json_build_object('key', 'l12:missing', 'ownerToken', pg_temp.tok('l12a'))), 3000, 5000)::text,
    '{"renewed":[{"key":"l12:a","expiresAt":8000},{"key":"l12:b","expiresAt":8000}],"lost":["l12:c","l12:d","l12:missing"]}',
    'L12.1 held leases are renewed to now + ttl; expired, wrong-token and unknown ones are lost (input order)');
SELECT is((sandbox_persist.lock_holder('l12:a', 5000)->>'expiresAt')::bigint, 8000::bigint,
    'L12.2 l12:a now expires at 8000');
SELECT is((sandbox_persist.lock_holder('l12:b', 5000)->>'expiresAt')::bigint, 8000::bigint,
    'L12.3 l12:b now expires at 8000');
SELECT is(pg_temp.row_of('l12:c'), :'l12c_before', 'L12.4 the expired lease was not revived');
SELECT is(pg_temp.row_of('l12:d'), :'l12d_before', 'L12.5 the lease named with a wrong token is untouched');
SELECT is(sandbox_persist.lock_renew_many('[]', 3000, 5000)::jsonb, '{"renewed":[],"lost":[]}'::jsonb,
    'L12.6 an empty list renews nothing: {renewed: [], lost: []}');
SELECT is(sandbox_persist.lock_renew_many(json_build_array(
        json_build_object('key', 'l12:a', 'ownerToken', pg_temp.tok('l12a'))), 3000, 8000)::jsonb,
    '{"renewed":[],"lost":["l12:a"]}'::jsonb,
    'L12.7 at now = expiresAt the lease is lost');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.lock_renew_many('{"key":"l12:b"}', 3000, 5000)$$,
    '22023', 'L12.8 leases that is not an array');
SELECT * FROM pg_temp.rejects(format($$SELECT sandbox_persist.lock_renew_many(%L, 3000, 5000)$$,
        json_build_array(json_build_object('key', 'l12:b', 'ownerToken', pg_temp.tok('l12b'), 'fence', 1))),
    '22023', 'L12.9 a lease with an unknown key');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.lock_renew_many('[{"key":"l12:b"}]', 3000, 5000)$$,
    '22004', 'L12.10 a lease without ownerToken');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.lock_renew_many('[{"key":"l12:b","ownerToken":7}]', 3000, 5000)$$,
    '22023', 'L12.11 a lease whose ownerToken is not a string');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.lock_renew_many('[{"key":"l12:b"', 3000, 5000)$$,
    '22P02', 'L12.12 malformed JSON');

------------------------------------------------------------------------------
-- L13: ttl bounds and key rules.
------------------------------------------------------------------------------
SELECT pg_temp.acq('l13', 'l13-key', 10000, 1000);
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.lock_acquire('l13-new', 999, 1000)$$, '22023',
    'L13.1 lock_acquire with ttl_ms 999');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.lock_acquire('l13-new', 600001, 1000)$$, '22023',
    'L13.2 lock_acquire with ttl_ms 600001');
SELECT * FROM pg_temp.rejects(format($$SELECT sandbox_persist.lock_renew('l13-key', %L, 999, 2000)$$,
        pg_temp.tok('l13')), '22023', 'L13.3 lock_renew with ttl_ms 999');
SELECT * FROM pg_temp.rejects(format($$SELECT sandbox_persist.lock_renew('l13-key', %L, 600001, 2000)$$,
        pg_temp.tok('l13')), '22023', 'L13.4 lock_renew with ttl_ms 600001');
SELECT * FROM pg_temp.rejects(format($$SELECT sandbox_persist.lock_renew_many(%L, 600001, 2000)$$,
        json_build_array(json_build_object('key', 'l13-key', 'ownerToken', pg_temp.tok('l13')))),
    '22023', 'L13.5 lock_renew_many with ttl_ms 600001');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.lock_acquire('', 1000, 1000)$$, '22023',
    'L13.6 lock_acquire with an empty key');
SELECT * FROM pg_temp.rejects(format($$SELECT sandbox_persist.lock_acquire(%L, 1000, 1000)$$, repeat('k', 2049)),
    '22001', 'L13.7 lock_acquire with a 2049-byte key');
SELECT * FROM pg_temp.rejects(format($$SELECT sandbox_persist.lock_acquire(%L, 1000, 1000)$$, repeat('é', 1024) || 'k'),
    '22001', 'L13.8 lock_acquire with a 2049-byte key of 1025 characters (bytes count, not characters)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.lock_acquire(NULL, 1000, 1000)$$, '22004',
    'L13.9 lock_acquire with a NULL key');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.lock_acquire('l13-new', NULL, 1000)$$, '22004',
    'L13.10 lock_acquire with a NULL ttl_ms');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.lock_release('', 'x')$$, '22023',
    'L13.11 lock_release with an empty key');
SELECT * FROM pg_temp.rejects(format($$SELECT sandbox_persist.lock_renew_many(%L, 1000, 2000)$$,
        json_build_array(json_build_object('key', '', 'ownerToken', pg_temp.tok('l13')))),
    '22023', 'L13.12 lock_renew_many with an empty key');
SELECT is((pg_temp.acq('l13-min', 'l13-min', 1000, 1000)->>'expiresAt')::bigint, 2000::bigint,
    'L13.13 ttl_ms 1000 is accepted');
SELECT is((pg_temp.acq('l13-max', 'l13-max', 600000, 1000)->>'expiresAt')::bigint, 601000::bigint,
    'L13.14 ttl_ms 600000 is accepted');
SELECT ok(pg_temp.acq('l13-long', repeat('k', 2048), 1000, 1000) IS NOT NULL,
    'L13.15 a 2048-byte key is accepted');
SELECT ok(pg_temp.acq('l13-long2', repeat('é', 1024), 1000, 1000) IS NOT NULL,
    'L13.16 a 2048-byte key of 1024 two-byte characters is accepted');

------------------------------------------------------------------------------
-- L19: lock_check is true only for the current, unexpired token and fence.
------------------------------------------------------------------------------
SELECT pg_temp.acq('l19', 'l19-key', 1000, 1000);     -- expires at 2000
SELECT ok(sandbox_persist.lock_check('l19-key', pg_temp.tok('l19'), pg_temp.fence('l19'), 1999),
    'L19.1 the current token and fence, unexpired -> true');
SELECT ok(NOT sandbox_persist.lock_check('l19-key', pg_temp.tok('l19'), pg_temp.fence('l19') + 1, 1500),
    'L19.2 a larger fence -> false');
SELECT ok(NOT sandbox_persist.lock_check('l19-key', pg_temp.tok('l19'), pg_temp.fence('l19') - 1, 1500),
    'L19.3 a smaller fence -> false');
SELECT ok(NOT sandbox_persist.lock_check('l19-key', gen_random_uuid()::text, pg_temp.fence('l19'), 1500),
    'L19.4 another token with the right fence -> false');
SELECT ok(NOT sandbox_persist.lock_check('l19-key', 'garbage', pg_temp.fence('l19'), 1500),
    'L19.5 a malformed token -> false');
SELECT ok(NOT sandbox_persist.lock_check('l19-key', pg_temp.tok('l19'), pg_temp.fence('l19'), 2000),
    'L19.6 at now = expiresAt -> false');
SELECT ok(NOT sandbox_persist.lock_check('l19-other', pg_temp.tok('l19'), pg_temp.fence('l19'), 1500),
    'L19.7 the right token and fence for another key -> false');
SELECT pg_temp.acq('l19-new', 'l19-key', 1000, 2000);
SELECT ok(NOT sandbox_persist.lock_check('l19-key', pg_temp.tok('l19'), pg_temp.fence('l19'), 2000),
    'L19.8 after a takeover the old token and fence -> false');
SELECT ok(sandbox_persist.lock_check('l19-key', pg_temp.tok('l19-new'), pg_temp.fence('l19-new'), 2000),
    'L19.9 the new token and fence -> true');
SELECT ok(NOT sandbox_persist.lock_check('l19-key', pg_temp.tok('l19-new'), pg_temp.fence('l19'), 2000),
    'L19.10 the new token with the old fence -> false');
SELECT sandbox_persist.lock_release('l19-key', pg_temp.tok('l19-new'));
SELECT ok(NOT sandbox_persist.lock_check('l19-key', pg_temp.tok('l19-new'), pg_temp.fence('l19-new'), 2000),
    'L19.11 after release -> false');

------------------------------------------------------------------------------
-- L20: lock_holder reports fence and expiry, never the token.
------------------------------------------------------------------------------
SELECT pg_temp.acq('l20', 'l20-key', 4000, 1000);     -- expires at 5000
SELECT is(pg_temp.keys(sandbox_persist.lock_holder('l20-key', 1000)),
    ARRAY['fence', 'acquiredAt', 'expiresAt', 'expired'],
    'L20.1 lock_holder has exactly fence, acquiredAt, expiresAt, expired');
SELECT is(sandbox_persist.lock_holder('l20-key', 4999)::jsonb,
    jsonb_build_object('fence', pg_temp.fence('l20'), 'acquiredAt', 1000, 'expiresAt', 5000, 'expired', false),
    'L20.2 before expiry: the fence, acquiredAt, expiresAt and expired false');
SELECT is(sandbox_persist.lock_holder('l20-key', 5000)::jsonb,
    jsonb_build_object('fence', pg_temp.fence('l20'), 'acquiredAt', 1000, 'expiresAt', 5000, 'expired', true),
    'L20.3 at now = expiresAt: expired true');
SELECT ok(strpos(sandbox_persist.lock_holder('l20-key', 1000)::text, pg_temp.tok('l20')) = 0,
    'L20.4 the token appears nowhere in the answer');
SELECT ok(sandbox_persist.lock_holder('l20-missing', 1000) IS NULL, 'L20.5 an unknown key -> SQL NULL');
SELECT is(json_typeof(sandbox_persist.lock_holder('l20-key', 1000)->'expired'), 'boolean',
    'L20.6 expired is a JSON boolean');
SELECT sandbox_persist.lock_release('l20-key', pg_temp.tok('l20'));
SELECT ok(sandbox_persist.lock_holder('l20-key', 1000) IS NULL, 'L20.7 after release -> SQL NULL');

------------------------------------------------------------------------------
-- V25: lease_ms <= 0 and ttl_ms outside 1000-600000 -> 22023, unchanged.
------------------------------------------------------------------------------
SELECT sandbox_persist.checkpoint_acquire_writer('v25-thread', 60000, 1000) AS v25_writer \gset
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.checkpoint_acquire_writer('v25-new', 0, 1000)$$, '22023',
    'V25.1 checkpoint_acquire_writer with lease_ms 0');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.checkpoint_acquire_writer('v25-new', -1, 1000)$$, '22023',
    'V25.2 checkpoint_acquire_writer with lease_ms -1');
SELECT * FROM pg_temp.rejects(format($$SELECT sandbox_persist.checkpoint_renew_writer(%L, 0, 2000)$$, :'v25_writer'),
    '22023', 'V25.3 checkpoint_renew_writer with lease_ms 0');
SELECT * FROM pg_temp.rejects(format($$SELECT sandbox_persist.checkpoint_renew_writer(%L, -60000, 2000)$$, :'v25_writer'),
    '22023', 'V25.4 checkpoint_renew_writer with lease_ms -60000');
SELECT pg_temp.acq('v25', 'v25-key', 10000, 1000);
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.lock_acquire('v25-new', 0, 1000)$$, '22023',
    'V25.5 lock_acquire with ttl_ms 0');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.lock_acquire('v25-new', -1000, 1000)$$, '22023',
    'V25.6 lock_acquire with ttl_ms -1000');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.lock_acquire('v25-new', 9223372036854775807, 1000)$$, '22023',
    'V25.7 lock_acquire with ttl_ms at the bigint maximum');
SELECT * FROM pg_temp.rejects(format($$SELECT sandbox_persist.lock_renew('v25-key', %L, 0, 2000)$$, pg_temp.tok('v25')),
    '22023', 'V25.8 lock_renew with ttl_ms 0');
SELECT * FROM pg_temp.rejects(format($$SELECT sandbox_persist.lock_renew_many(%L, 999, 2000)$$,
        json_build_array(json_build_object('key', 'v25-key', 'ownerToken', pg_temp.tok('v25')))),
    '22023', 'V25.9 lock_renew_many with ttl_ms 999');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.lock_acquire('v25-key', 999, 20000)$$, '22023',
    'V25.10 a bad ttl_ms is refused even where the acquire would otherwise take over an expired lease');

SELECT * FROM finish();
ROLLBACK;
