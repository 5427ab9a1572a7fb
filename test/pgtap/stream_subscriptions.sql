-- pgTAP: stream subscriptions, the Durable Streams protocol's subscription
-- APIs stored in PostgreSQL (docs/contract/streams.md §7). Cases DS36-DS44.
-- Every refused call is checked for its SQLSTATE and for leaving every
-- stream and subscription table as it was; so is every answer that must
-- change nothing (fenced, invalidOffset, alreadyClaimed, noPendingWork).
-- Every time-dependent call is given its clock (now_ms).
-- Run with: pg_prove -d <db> test/pgtap/stream_subscriptions.sql (needs
-- allow_test_reset and allow_client_clock on).
BEGIN;
SELECT plan(405);
SELECT sandbox_persist._reset_for_tests();
SET LOCAL sandbox_persist.allow_client_clock = on;
SET LOCAL sandbox_persist.test_timeline = 1;

------------------------------------------------------------------------------
-- Helpers (temporary, gone at ROLLBACK).
------------------------------------------------------------------------------

-- Every row of the stream and subscription tables: equal values mean nothing changed.
CREATE FUNCTION pg_temp.state() RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(E'\n',
        'streams:' || (SELECT count(*) FROM sandbox_persist.streams),
        (SELECT string_agg(s::text, E'\n' ORDER BY s.stream_id) FROM sandbox_persist.streams s),
        'entries:' || (SELECT count(*) FROM sandbox_persist.stream_entries),
        (SELECT string_agg(e::text, E'\n' ORDER BY e.stream_id, e.seq) FROM sandbox_persist.stream_entries e),
        'producers:' || (SELECT count(*) FROM sandbox_persist.stream_producers),
        (SELECT string_agg(p::text, E'\n' ORDER BY p.stream_id, p.producer_id) FROM sandbox_persist.stream_producers p),
        'subscriptions:' || (SELECT count(*) FROM sandbox_persist.stream_subscriptions),
        (SELECT string_agg(s::text, E'\n' ORDER BY s.subscription_id) FROM sandbox_persist.stream_subscriptions s),
        'links:' || (SELECT count(*) FROM sandbox_persist.stream_subscription_links),
        (SELECT string_agg(l::text, E'\n' ORDER BY l.subscription_id, l.path)
           FROM sandbox_persist.stream_subscription_links l))
$$;

\ir lib/durable_helpers.psql

-- A call that must answer want (jsonb) and change nothing.
CREATE FUNCTION pg_temp.same(stmt text, want jsonb, descr text)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    before text := pg_temp.state();
    got jsonb;
BEGIN
    EXECUTE stmt INTO got;
    RETURN NEXT is(got, want, descr);
    RETURN NEXT is(pg_temp.state(), before, descr || ': unchanged');
END
$$;

-- Values kept between statements (a delivery, a claim, a wake id).
CREATE TEMP TABLE kv (k text PRIMARY KEY, v jsonb);
CREATE FUNCTION pg_temp.keep(key text, val jsonb) RETURNS jsonb LANGUAGE sql AS $$
    INSERT INTO pg_temp.kv VALUES (key, val) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v RETURNING v
$$;
CREATE FUNCTION pg_temp.got(key text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT v FROM pg_temp.kv WHERE k = key
$$;

-- Shorthands: create, append, read (body as text), at clock t.
CREATE FUNCTION pg_temp.mk(p text, ct text DEFAULT 'text/plain', o json DEFAULT NULL, b text DEFAULT NULL,
                           t bigint DEFAULT 1000) RETURNS json LANGUAGE sql AS $$
    SELECT sandbox_persist.stream_create(p, ct, o, convert_to(b, 'UTF8'), t)
$$;
CREATE FUNCTION pg_temp.ap(p text, b text, t bigint DEFAULT 1000, o json DEFAULT NULL,
                           ct text DEFAULT 'text/plain') RETURNS json LANGUAGE sql AS $$
    SELECT sandbox_persist.stream_append(p, ct, convert_to(b, 'UTF8'), o, t)
$$;
CREATE FUNCTION pg_temp.rd(p text, t bigint DEFAULT 1000) RETURNS text LANGUAGE sql AS $$
    SELECT convert_from(r.body, 'UTF8') FROM sandbox_persist.stream_read(p, '-1', 1048576, t) r
$$;
CREATE FUNCTION pg_temp.off(e bigint, s bigint) RETURNS text LANGUAGE sql AS $$
    SELECT lpad(e::text, 16, '0') || '_' || lpad(s::text, 16, '0')
$$;
CREATE FUNCTION pg_temp.nentries(p text) RETURNS int LANGUAGE sql AS $$
    SELECT count(*)::int FROM sandbox_persist.stream_entries e JOIN sandbox_persist.streams s USING (stream_id)
     WHERE s.path = p
$$;

-- Subscriptions: put, get, the row (jsonb), the links ({path: {explicit, glob, acked_offset}}).
CREATE FUNCTION pg_temp.put(id text, cfg json, t bigint DEFAULT 1000) RETURNS jsonb LANGUAGE sql AS $$
    SELECT sandbox_persist.stream_subscription_put(id, cfg, t)::jsonb
$$;
CREATE FUNCTION pg_temp.get(id text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT sandbox_persist.stream_subscription_get(id, 1000)::jsonb
$$;
CREATE FUNCTION pg_temp.row(id text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT to_jsonb(s) FROM sandbox_persist.stream_subscriptions s WHERE s.subscription_id = id
$$;
CREATE FUNCTION pg_temp.links(id text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT COALESCE(jsonb_object_agg(l.path, to_jsonb(l) - 'subscription_id' - 'path'), '{}')
      FROM sandbox_persist.stream_subscription_links l WHERE l.subscription_id = id
$$;
CREATE FUNCTION pg_temp.lk(e boolean, g boolean, a text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object('explicit', e, 'glob', g, 'acked_offset', a)
$$;
-- Idle (no wake, no holder) while a linked stream has entries past its acknowledged offset.
CREATE FUNCTION pg_temp.idle_pending(id text) RETURNS boolean LANGUAGE sql AS $$
    SELECT s.wake_id IS NULL AND s.holder IS NULL AND EXISTS (
             SELECT 1 FROM sandbox_persist.stream_subscription_links l
               JOIN sandbox_persist.streams st ON st.path = l.path AND st.deleted_at IS NULL
              WHERE l.subscription_id = s.subscription_id
                AND pg_temp.off(st.tail_epoch, st.tail_seq) > l.acked_offset)
      FROM sandbox_persist.stream_subscriptions s WHERE s.subscription_id = id
$$;

-- Webhook deliveries at clock t: the whole answer kept as 'deliveries', the one of subscription id returned.
CREATE FUNCTION pg_temp.dl(id text, t bigint) RETURNS jsonb LANGUAGE sql AS $$
    WITH r AS (SELECT pg_temp.keep('deliveries', sandbox_persist.stream_subscription_deliveries(16, t)::jsonb) AS v)
    SELECT d FROM r, jsonb_array_elements(r.v->'deliveries') d WHERE d->>'subscription_id' = id
$$;
-- The request naming the wake kept under key k, with acks and done.
CREATE FUNCTION pg_temp.rq(k text, acks jsonb DEFAULT NULL, done boolean DEFAULT NULL) RETURNS json
LANGUAGE sql AS $$
    SELECT jsonb_strip_nulls(jsonb_build_object('wake_id', pg_temp.got(k)->'wake_id',
                                                'generation', pg_temp.got(k)->'generation',
                                                'acks', acks, 'done', done))::json
$$;
-- The bearer token of the wake kept under key k (a delivery's callback_token or a claim's token).
CREATE FUNCTION pg_temp.tok(k text) RETURNS text LANGUAGE sql AS $$
    SELECT COALESCE(pg_temp.got(k)->>'callback_token', pg_temp.got(k)->>'token')
$$;
-- Ack / release with the token and wake kept under key k.
CREATE FUNCTION pg_temp.ack(id text, k text, acks jsonb, done boolean, t bigint) RETURNS jsonb LANGUAGE sql AS $$
    SELECT sandbox_persist.stream_subscription_ack(id, pg_temp.tok(k), pg_temp.rq(k, acks, done), t)::jsonb
$$;
CREATE FUNCTION pg_temp.rel(id text, k text, t bigint) RETURNS jsonb LANGUAGE sql AS $$
    SELECT sandbox_persist.stream_subscription_release(id, pg_temp.tok(k), pg_temp.rq(k), t)::jsonb
$$;
-- A webhook delivery report for the wake kept under key k.
CREATE FUNCTION pg_temp.dd(id text, k text, res json, t bigint) RETURNS jsonb LANGUAGE sql AS $$
    SELECT sandbox_persist.stream_subscription_delivered(id, pg_temp.got(k)->>'wake_id',
                                                         (pg_temp.got(k)->>'generation')::bigint, res, t)::jsonb
$$;
CREATE FUNCTION pg_temp.claim(id text, w text, t bigint) RETURNS jsonb LANGUAGE sql AS $$
    SELECT sandbox_persist.stream_subscription_claim(id, w, t)::jsonb
$$;
-- One {stream, offset} ack.
CREATE FUNCTION pg_temp.a(p text, o text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object('stream', p, 'offset', o)
$$;

------------------------------------------------------------------------------
-- DS36: stream_glob_match.
------------------------------------------------------------------------------
SELECT is(sandbox_persist.stream_glob_match(p, s), want,
          format('DS36: %s %s %s', p, CASE WHEN want THEN 'matches' ELSE 'does not match' END, s))
  FROM (VALUES ('ev/*', 'ev/a', true),          -- * is one segment
               ('ev/*', 'ev', false),
               ('ev/*', 'ev/a/b', false),       -- never across /
               ('ev*/x', 'events/x', true),     -- * inside a segment
               ('ev*/x', 'ev/x', true),         -- an empty run
               ('ev*/x', 'e/x', false),
               ('ev*/x', 'ev/a/x', false),
               ('*a*b', 'xxaybb', true),
               ('*a*b', 'xxaybc', false),
               ('x**', 'xyz', true),            -- ** inside a segment is a *
               ('x**', 'x/y', false),
               ('**', 'a/b/c', true),
               ('**/x', 'x', true),             -- ** at the start: zero segments
               ('**/x', 'a/b/x', true),         -- or more
               ('**/x', 'a/b/y', false),
               ('a/**/b', 'a/b', true),         -- in the middle
               ('a/**/b', 'a/x/y/b', true),
               ('a/**/b', 'a/x/y/c', false),
               ('a/**', 'a', true),             -- at the end
               ('a/**', 'a/b/c', true),
               ('a/**', 'ab', false),
               ('a/b', 'a/b', true),            -- exact paths
               ('a/b', 'a/bc', false),
               ('a/b', 'A/b', false),
               ('a/b', 'a/b/', false),
               ('a//b', 'a//b', true),          -- empty segments
               ('a//b', 'a/b', false),
               ('a/*/b', 'a//b', true),
               ('a/', 'a/', true),
               ('a/', 'a', false)) v(p, s, want);
SELECT is(sandbox_persist.stream_glob_match('**', repeat('a/', 63) || 'a'), true,
          'DS36: a path of 64 segments matches **');
SELECT is(sandbox_persist.stream_glob_match('**', repeat('a/', 64) || 'a'), false,
          'DS36: a path of 65 segments matches nothing, not even **');
SELECT is(sandbox_persist.stream_glob_match(repeat('*/', 63) || '*', repeat('a/', 63) || 'a'), true,
          'DS36: a pattern of 64 segments matches');
SELECT is(sandbox_persist.stream_glob_match(repeat('*/', 64) || '*', repeat('a/', 64) || 'a'), false,
          'DS36: a pattern of 65 segments matches nothing');

------------------------------------------------------------------------------
-- DS37: put, re-confirmation, configuration refusals, get.
------------------------------------------------------------------------------
SELECT is(pg_temp.put('ds37', '{"type":"webhook","pattern":"c/*","webhook":{"url":"https://example.com/h"}}', 2500),
          '{"created":true,"subscription":{"id":"ds37","subscription_id":"ds37","type":"webhook","pattern":"c/*",
            "streams":[],"webhook":{"url":"https://example.com/h"},"wake_stream":null,"lease_ttl_ms":30000,
            "created_at":"1970-01-01T00:00:02.500Z","status":"active","description":null}}'::jsonb,
          'DS37: a new subscription: created, its view (created_at from the clock, no streams yet, default lease)');
SELECT is((SELECT (created_at, generation, wake_id, holder, lease_expires_at, delivery_due_at)::text
             FROM sandbox_persist.stream_subscriptions WHERE subscription_id = 'ds37'),
          '(2500,0,,,,)', 'DS37: stored idle at generation 0');
SELECT is(pg_temp.put('ds37', '{"webhook":{"url":"https://example.com/h"},"pattern":"c/*","type":"webhook","lease_ttl_ms":30000}', 9000),
          '{"created":false}'::jsonb || jsonb_build_object('subscription', pg_temp.get('ds37')),
          'DS37: the same configuration (members in another order, the default lease given) is created: false');
SELECT pg_temp.mk('c37w', 'application/json');
SELECT pg_temp.mk('c37/y', 'text/plain', NULL, 'yy', 1000);
SELECT is(pg_temp.put('ds37p', '{"type":"pull-wake","streams":["c37/z","c37/y","c37/z"],"wake_stream":"c37w","lease_ttl_ms":1000,"description":"d"}', 3000),
          jsonb_build_object('created', true, 'subscription', jsonb_build_object(
            'id', 'ds37p', 'subscription_id', 'ds37p', 'type', 'pull-wake', 'pattern', NULL,
            'streams', jsonb_build_array(
               jsonb_build_object('path', 'c37/y', 'link_type', 'explicit', 'acked_offset', pg_temp.off(0, 1)),
               jsonb_build_object('path', 'c37/z', 'link_type', 'explicit', 'acked_offset', pg_temp.off(0, 0))),
            'webhook', NULL, 'wake_stream', 'c37w', 'lease_ttl_ms', 1000,
            'created_at', '1970-01-01T00:00:03.000Z', 'status', 'active', 'description', 'd')),
          'DS37: a pull-wake subscription with explicit streams, sorted without repeats');
SELECT is((SELECT config::jsonb->'streams' FROM sandbox_persist.stream_subscriptions WHERE subscription_id = 'ds37p'),
          '["c37/y","c37/z"]'::jsonb, 'DS37: the canonical configuration holds the streams sorted without repeats');
SELECT pg_temp.same($$SELECT pg_temp.put('ds37p', '{"description":"d","streams":["c37/y","c37/z","c37/y"],"lease_ttl_ms":1000,"wake_stream":"c37w","type":"pull-wake"}', 4000)->'created'$$,
                    'false', 'DS37: streams reordered and repeated: the same configuration');
SELECT pg_temp.rejects($$SELECT pg_temp.put('ds37p', '{"type":"pull-wake","streams":["c37/y","c37/z"],"wake_stream":"c37w","lease_ttl_ms":1000,"description":"e"}')$$,
                       'SP710 SUBSCRIPTION_ALREADY_EXISTS', 'DS37: another description');
SELECT pg_temp.rejects($$SELECT pg_temp.put('ds37p', '{"type":"pull-wake","streams":["c37/y"],"wake_stream":"c37w","lease_ttl_ms":1000,"description":"d"}')$$,
                       'SP710 SUBSCRIPTION_ALREADY_EXISTS', 'DS37: other streams');
SELECT pg_temp.rejects($$SELECT pg_temp.put('ds37', '{"type":"webhook","pattern":"c/**","webhook":{"url":"https://example.com/h"}}')$$,
                       'SP710 SUBSCRIPTION_ALREADY_EXISTS', 'DS37: another pattern');
SELECT pg_temp.rejects(format('SELECT pg_temp.put(%L, %L)', 'ds37x', c), '22023', 'DS37: ' || d)
  FROM (VALUES ('{"type":"push","pattern":"c/*","webhook":{"url":"https://example.com/h"}}', 'a bad type'),
               ('{"type":"webhook","webhook":{"url":"https://example.com/h"}}', 'neither pattern nor streams'),
               ('{"type":"webhook","streams":[],"webhook":{"url":"https://example.com/h"}}', 'an empty streams and no pattern'),
               ('{"type":"webhook","pattern":"c/*"}', 'a webhook without webhook'),
               ('{"type":"pull-wake","pattern":"c/*"}', 'a pull-wake without wake_stream'),
               ('{"type":"webhook","pattern":"c/*","webhook":{"url":"https://example.com/h"},"wake_stream":"c37w"}', 'a webhook with a wake_stream'),
               ('{"type":"pull-wake","pattern":"c/*","webhook":{"url":"https://example.com/h"},"wake_stream":"c37w"}', 'a pull-wake with a webhook'),
               ('{"type":"webhook","pattern":"c/*","webhook":{"url":"https://example.com/h"},"lease_ttl_ms":999}', 'lease_ttl_ms 999'),
               ('{"type":"webhook","pattern":"c/*","webhook":{"url":"https://example.com/h"},"lease_ttl_ms":600001}', 'lease_ttl_ms 600001'),
               ('{"type":"webhook","pattern":"c/*","webhook":{"url":"https://example.com/h"},"lease_ttl_ms":1.5}', 'lease_ttl_ms 1.5'),
               ('{"type":"webhook","pattern":"c/*","webhook":{"url":"https://example.com/h"},"nope":1}', 'an unknown member'),
               ('{"type":"webhook","pattern":"c/*","webhook":{"url":"https://example.com/h","x":1}}', 'an unknown webhook member'),
               ('{"type":"webhook","streams":["c/a","__ds/x"],"webhook":{"url":"https://example.com/h"}}', 'a __ds/ stream path'),
               ('{"type":"pull-wake","streams":["c/a"],"wake_stream":"__ds/w"}', 'a __ds/ wake stream'),
               ('{"type":"pull-wake","streams":["c/a"],"wake_stream":"c37/nowhere"}', 'a wake stream that does not exist'),
               ('{"type":"pull-wake","pattern":"c37*","wake_stream":"c37w"}', 'a pull-wake whose pattern matches its own wake stream'),
               ('{"type":"pull-wake","streams":["c/a","c37w"],"wake_stream":"c37w"}', 'a pull-wake linking its own wake stream'),
               ('[1]', 'a configuration that is not an object')) v(c, d);
-- A required member absent is 22004 (README.md V5), like every required key.
SELECT pg_temp.rejects($$SELECT pg_temp.put('ds37x', '{"pattern":"c/*","webhook":{"url":"https://example.com/h"}}')$$,
                       '22004', 'DS37: a missing type');
SELECT pg_temp.rejects($$SELECT pg_temp.put('ds37x', '{"type":"webhook","pattern":"c/*","webhook":{}}')$$,
                       '22004', 'DS37: a webhook without url');
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_subscription_put('ds37x', NULL, 1000)$$, '22023',
                       'DS37: a NULL configuration');
SELECT pg_temp.rejects($$SELECT pg_temp.get('ds37x')$$, 'SP709 SUBSCRIPTION_NOT_FOUND', 'DS37: get of an absent id');
SELECT is(pg_temp.get('ds37p'), pg_temp.put('ds37p', '{"type":"pull-wake","streams":["c37/y","c37/z"],"wake_stream":"c37w","lease_ttl_ms":1000,"description":"d"}')->'subscription',
          'DS37: get answers the view put answers');

------------------------------------------------------------------------------
-- DS38: webhook URLs (SSRF rules): refused with SP711, nothing stored.
------------------------------------------------------------------------------
SELECT pg_temp.rejects(format('SELECT pg_temp.put(%L, %L)', 'ds38',
                              json_build_object('type', 'webhook', 'streams', json_build_array('u/x'),
                                                'webhook', json_build_object('url', u))),
                       'SP711 WEBHOOK_URL_REJECTED', 'DS38: ' || u)
  FROM (VALUES ('http://example.com/h'), ('http://10.0.0.1/h'), ('https://10.0.0.1/h'), ('https://127.0.0.1/h'),
               ('https://169.254.169.254/latest'), ('https://172.16.0.1/'), ('https://172.31.255.255/'),
               ('https://192.168.1.1/'), ('https://100.64.0.1/'), ('https://100.127.0.1/'), ('https://0.0.0.0/'),
               ('https://192.0.0.1/'), ('https://198.18.0.1/'), ('https://198.19.255.1/'), ('https://224.0.0.1/'),
               ('https://255.255.255.255/'), ('https://[::1]/'), ('https://[::ffff:8.8.8.8]/'),
               ('https://0x7f000001/'), ('https://2130706433/'), ('https://017.0.0.1/'), ('https://127.1/'),
               ('https://8.8.8.8.8/'), ('https://user:pw@example.com/'), ('https://user@example.com/'),
               ('https://localhost/'), ('https://a.localhost/'), ('https://localhost./'),
               ('http://localhost.example.com/'), ('ftp://example.com/'), ('HTTPS://example.com/'),
               ('https://example.com/a b'), ('https://example.com\@10.0.0.1/'), ('https://'),
               ('https:///h')) v(u);
SELECT is(pg_temp.put('ds38_' || n, json_build_object('type', 'webhook', 'streams', json_build_array('u/x'),
                                                       'webhook', json_build_object('url', u)))
            #>> '{subscription,webhook,url}',
          u, 'DS38: accepted ' || u)
  FROM (VALUES (1, 'https://example.com/hook'), (2, 'https://8.8.8.8/x'), (3, 'http://localhost:8080/h'),
               (4, 'http://127.0.0.5/h'), (5, 'https://EXAMPLE.com'), (6, 'https://100.63.255.255/'),
               (7, 'https://172.32.0.1/'), (8, 'https://example.com:8443/h?q=1#f')) v(n, u);

------------------------------------------------------------------------------
-- DS39: links: backfill, explicit, new streams, link/unlink, delete, re-create.
------------------------------------------------------------------------------
SELECT pg_temp.mk('l/a', 'text/plain', NULL, 'a');
SELECT pg_temp.mk('l/b');
SELECT pg_temp.mk('m/c', 'text/plain', NULL, 'c');
SELECT pg_temp.mk('l/d', 'text/plain', NULL, 'd');
SELECT pg_temp.mk('f/d', NULL, '{"forkedFrom":"l/d"}');
SELECT sandbox_persist.stream_delete('l/d', 1000);
SELECT pg_temp.mk('x/e', 'text/plain', '{"expiresAt":5000}', 'e');
SELECT pg_temp.ap('x/e', 'e');
SELECT is((SELECT deleted_at IS NOT NULL FROM sandbox_persist.streams WHERE path = 'l/d'), true,
          'DS39 (setup): l/d is soft-deleted');
SELECT is(pg_temp.put('ds39', '{"type":"webhook","pattern":"l/*","streams":["x/e","x/n"],"webhook":{"url":"https://example.com/h"}}', 2000)->'created',
          'true', 'DS39: put with a pattern and streams');
SELECT is(pg_temp.links('ds39'),
          jsonb_build_object('l/a', pg_temp.lk(false, true, pg_temp.off(0, 1)),
                             'l/b', pg_temp.lk(false, true, pg_temp.off(0, 0)),
                             'x/e', pg_temp.lk(true, false, pg_temp.off(0, 2)),
                             'x/n', pg_temp.lk(true, false, pg_temp.off(0, 0))),
          'DS39: matching streams linked at their tail (not m/c, not the soft-deleted l/d); explicit ones at their tail or the empty offset');
SELECT is(pg_temp.row('ds39')->'wake_id', 'null', 'DS39: no history is replayed: no wake');
SELECT pg_temp.put('ds39b', '{"type":"webhook","streams":["l/a"],"webhook":{"url":"https://example.com/h"}}', 2000);
SELECT pg_temp.mk('l/new', 'text/plain', NULL, 'hello', 3000);
SELECT is(pg_temp.links('ds39')->'l/new', pg_temp.lk(false, true, pg_temp.off(0, 0)),
          'DS39: a stream created later that matches is linked at its tail before its first body');
SELECT is((pg_temp.row('ds39')->>'generation')::int, 1, 'DS39: so its body is pending: a wake');
SELECT is(pg_temp.links('ds39b') ? 'l/new', false, 'DS39: not linked to a subscription without a matching pattern');
SELECT pg_temp.mk('l/x/deep', 'text/plain', NULL, 'z', 3000);
SELECT is(pg_temp.links('ds39') ? 'l/x/deep', false, 'DS39: a stream the pattern does not match is not linked');
SELECT is(sandbox_persist.stream_subscription_link('ds39', ARRAY['l/a', 'y/1'], 4000)::jsonb, '{"linked":2}',
          'DS39: link');
SELECT is(pg_temp.links('ds39') - 'l/b' - 'l/new' - 'x/e' - 'x/n',
          jsonb_build_object('l/a', pg_temp.lk(true, true, pg_temp.off(0, 1)),
                             'y/1', pg_temp.lk(true, false, pg_temp.off(0, 0))),
          'DS39: a glob link becomes explicit too (offset kept), an absent path at the empty offset');
SELECT is((SELECT s->>'link_type' FROM jsonb_array_elements(pg_temp.get('ds39')->'streams') s WHERE s->>'path' = 'l/a'),
          'explicit', 'DS39: explicit wins in the view');
SELECT pg_temp.same($$SELECT sandbox_persist.stream_subscription_link('ds39', ARRAY['l/a', 'y/1'], 4000)::jsonb$$,
                    '{"linked":2}', 'DS39: linking again is idempotent');
SELECT is(sandbox_persist.stream_subscription_unlink('ds39', 'l/a')::jsonb, '{"unlinked":true}',
          'DS39: unlink a glob and explicit link');
SELECT is(pg_temp.links('ds39')->'l/a', pg_temp.lk(false, true, pg_temp.off(0, 1)), 'DS39: its glob link stays');
SELECT is(sandbox_persist.stream_subscription_unlink('ds39', 'y/1')::jsonb, '{"unlinked":true}',
          'DS39: unlink an explicit-only link');
SELECT is(pg_temp.links('ds39') ? 'y/1', false, 'DS39: it is gone');
SELECT pg_temp.same($$SELECT sandbox_persist.stream_subscription_unlink('ds39', 'y/1')::jsonb$$,
                    '{"unlinked":false}', 'DS39: unlinking an absent link');
SELECT pg_temp.same($$SELECT sandbox_persist.stream_subscription_unlink('ds39', 'l/b')::jsonb$$,
                    '{"unlinked":false}', 'DS39: unlinking a glob-only link');
SELECT sandbox_persist.stream_delete('l/a', 5000);
SELECT is((SELECT count(*)::int FROM sandbox_persist.stream_subscription_links WHERE path = 'l/a'), 0,
          'DS39: stream_delete drops the links of the path, of every subscription');
SELECT pg_temp.mk('x/e', 'text/plain', NULL, 'again', 6000);
SELECT is(pg_temp.links('ds39')->'x/e', pg_temp.lk(true, false, pg_temp.off(0, 0)),
          'DS39: a stream created again at a linked path (the old one expired) restarts the link at its new tail');
SELECT is(pg_temp.idle_pending('ds39') IS NOT NULL AND (SELECT acked_offset < pg_temp.off(0, 1)
             FROM sandbox_persist.stream_subscription_links WHERE subscription_id = 'ds39' AND path = 'x/e'),
          true, 'DS39: and its first body is pending');
SELECT pg_temp.mk('x/n', 'text/plain', NULL, 'n', 6000);
SELECT is(pg_temp.links('ds39')->'x/n', pg_temp.lk(true, false, pg_temp.off(0, 0)),
          'DS39: a stream created at an explicitly linked absent path: its body is pending');
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_subscription_link('nope', ARRAY['l/b'], 1000)$$,
                       'SP709 SUBSCRIPTION_NOT_FOUND', 'DS39: link on an absent subscription');
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_subscription_unlink('nope', 'l/b')$$,
                       'SP709 SUBSCRIPTION_NOT_FOUND', 'DS39: unlink on an absent subscription');
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_subscription_link('ds39', ARRAY['__ds/x'], 1000)$$,
                       '22023', 'DS39: link of a __ds/ path');
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_subscription_link('ds39', ARRAY['a', NULL], 1000)$$,
                       '22023', 'DS39: link of a NULL path');
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_subscription_link('ds39', ARRAY['run-logs/r1'], 1000)$$,
                       '22023', 'DS39: link of a run log (its appends issue no wakes)');
SELECT pg_temp.rejects($$SELECT pg_temp.put('ds39r', '{"type":"webhook","streams":["run-logs/r1"],"webhook":{"url":"https://example.com/h"}}')$$,
                       '22023', 'DS39: a put naming a run log');
SELECT pg_temp.rejects($$SELECT pg_temp.put('ds39r', '{"type":"pull-wake","streams":["c/x"],"wake_stream":"run-logs/w","lease_ttl_ms":1000}')$$,
                       '22023', 'DS39: a wake stream under run-logs/');
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_subscription_link('ds39', ARRAY['a', ''], 1000)$$,
                       '22023', 'DS39: link of an empty path');
SELECT pg_temp.rejects(format($$SELECT sandbox_persist.stream_subscription_link('ds39', ARRAY[%L], 1000)$$, repeat('p', 1025)),
                       '22001', 'DS39: link of a 1025-byte path (as put: too long)');

------------------------------------------------------------------------------
-- DS40: webhook wakes and delivery.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT pg_temp.mk('w/a', 'text/plain', NULL, 'a');
SELECT pg_temp.mk('w/b', 'text/plain', NULL, 'b');
SELECT pg_temp.mk('u/u', 'text/plain', NULL, 'u');
SELECT pg_temp.put('ds40', '{"type":"webhook","streams":["w/a","w/b"],"webhook":{"url":"https://example.com/h"},"lease_ttl_ms":10000}');
SELECT pg_temp.ap('u/u', 'x', 1500);
SELECT is((pg_temp.row('ds40')->>'generation')::int, 0, 'DS40: an append to an unlinked stream issues no wake');
SELECT is(sandbox_persist.stream_subscription_deliveries(16, 1500)::jsonb, '{"deliveries":[],"next_due_at":null}',
          'DS40: nothing to deliver, nothing due');
SELECT pg_temp.ap('w/a', 'x', 2000);
SELECT is(pg_temp.row('ds40') - 'wake_id' - 'config' - 'kind' - 'pattern' - 'webhook_url' - 'wake_stream' - 'description'
            - 'created_at' - 'lease_ttl_ms' - 'subscription_id',
          jsonb_build_object('generation', 1, 'wake_snapshot', jsonb_build_object('w/a', pg_temp.off(0, 2), 'w/b', pg_temp.off(0, 1)),
                             'token_hash', NULL, 'holder', NULL, 'lease_expires_at', 12000, 'delivery_due_at', 2000,
                             'failed_attempts', 0),
          'DS40: an append to a linked stream issues a wake: generation 1, the tails as snapshot, due now, lease now + ttl');
SELECT is(pg_temp.row('ds40')->>'wake_id' ~ '^w_[0-9a-f]{32}$', true, 'DS40: wake_id is w_ and 32 hex digits');
SELECT pg_temp.keep('w1', pg_temp.row('ds40'));
SELECT pg_temp.ap('w/b', 'y', 2100);
SELECT is(pg_temp.row('ds40'), pg_temp.got('w1'), 'DS40: an append while the wake is in flight issues none');
SELECT pg_temp.keep('d1', pg_temp.dl('ds40', 2200));
SELECT is(pg_temp.got('d1') - 'callback_token',
          jsonb_build_object('subscription_id', 'ds40', 'url', 'https://example.com/h',
                             'wake_id', pg_temp.got('w1')->'wake_id', 'generation', 1,
                             'streams', jsonb_build_array(
              jsonb_build_object('path', 'w/a', 'link_type', 'explicit', 'acked_offset', pg_temp.off(0, 1),
                                 'tail_offset', pg_temp.off(0, 2), 'has_pending', true),
              jsonb_build_object('path', 'w/b', 'link_type', 'explicit', 'acked_offset', pg_temp.off(0, 1),
                                 'tail_offset', pg_temp.off(0, 2), 'has_pending', true))),
          'DS40: deliveries returns the wake with its streams, tails and has_pending');
SELECT is(pg_temp.got('d1')->>'callback_token' ~ '^[0-9a-f]{64}$', true, 'DS40: callback_token is 64 hex digits');
SELECT is(pg_temp.got('deliveries')->'next_due_at', '62200', 'DS40: next_due_at: the delivery taken, due again in 60 s');
SELECT is((pg_temp.row('ds40')->>'delivery_due_at')::bigint, 62200::bigint, 'DS40: the delivery is due again at now + 60 s');
SELECT pg_temp.same($$SELECT sandbox_persist.stream_subscription_deliveries(16, 2200)::jsonb$$,
                    '{"deliveries":[],"next_due_at":62200}', 'DS40: a second call at the same time returns nothing');
SELECT pg_temp.keep('d2', pg_temp.dl('ds40', 62200));
SELECT is((pg_temp.got('d2') - 'callback_token'), (pg_temp.got('d1') - 'callback_token'),
          'DS40: at now + 60 s the same wake is returned again');
SELECT isnt(pg_temp.got('d2')->>'callback_token', pg_temp.got('d1')->>'callback_token', 'DS40: with a new token');
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_subscription_ack('ds40', pg_temp.tok('d1'), pg_temp.rq('d2'), 62250)$$,
                       'SP712 TOKEN_INVALID', 'DS40: the old token on an ack');
SELECT is(pg_temp.dd('ds40', 'd2', '{"ok":false}', 62300), '{"outcome":"retry"}', 'DS40: a failed delivery: retry');
SELECT ok((pg_temp.row('ds40')->>'delivery_due_at')::bigint BETWEEN 63100 AND 63500,
          'DS40: the first retry is due 1 s later, +-20 %');
SELECT is(pg_temp.get('ds40')->>'status', 'failed', 'DS40: status failed');
SELECT is(sandbox_persist.stream_subscription_deliveries(16, 62300)::jsonb,
          jsonb_build_object('deliveries', '[]'::jsonb, 'next_due_at', (pg_temp.row('ds40')->>'delivery_due_at')::bigint),
          'DS40: next_due_at is the retry');
SELECT pg_temp.keep('d3', pg_temp.dl('ds40', 63500));
SELECT is(pg_temp.got('d3')->'generation', '1', 'DS40: the retry is delivered when due');
SELECT is(pg_temp.dd('ds40', 'd3', '{"ok":false}', 70000), '{"outcome":"retry"}', 'DS40: a second failure');
SELECT ok((pg_temp.row('ds40')->>'delivery_due_at')::bigint BETWEEN 71600 AND 72400,
          'DS40: the second retry is due 2 s later, +-20 %');
SELECT is((pg_temp.row('ds40')->>'failed_attempts')::int, 2, 'DS40: two failed attempts');
SELECT pg_temp.keep('d4', pg_temp.dl('ds40', 72400));
SELECT is(pg_temp.dd('ds40', 'd4', '{"ok":true}', 80000), '{"outcome":"awaitingCallback"}',
          'DS40: a delivery that succeeded awaits the callback');
SELECT is(pg_temp.get('ds40')->>'status', 'active', 'DS40: status active again');
SELECT is(pg_temp.row('ds40')->'lease_expires_at', '90000', 'DS40: the callback lease runs from now');
SELECT is(pg_temp.row('ds40')->'delivery_due_at', 'null', 'DS40: nothing due');
SELECT is(sandbox_persist.stream_subscription_deliveries(16, 80000)::jsonb, '{"deliveries":[],"next_due_at":90000}',
          'DS40: next_due_at is the lease''s expiry');
SELECT is(pg_temp.dd('ds40', 'd4', '{"ok":true,"done":true}', 81000), '{"outcome":"acked","next_wake":true}',
          'DS40: ok and done: acked; an append after the snapshot: next wake');
SELECT is(pg_temp.links('ds40'),
          jsonb_build_object('w/a', pg_temp.lk(true, false, pg_temp.off(0, 2)), 'w/b', pg_temp.lk(true, false, pg_temp.off(0, 1))),
          'DS40: the snapshot''s tails became the acknowledged offsets');
SELECT is((pg_temp.row('ds40')->>'generation')::int, 2, 'DS40: generation 2');
SELECT isnt(pg_temp.row('ds40')->>'wake_id', pg_temp.got('w1')->>'wake_id', 'DS40: a new wake');
SELECT is(pg_temp.row('ds40')->'delivery_due_at', '81000', 'DS40: due at once');
SELECT pg_temp.keep('d5', pg_temp.dl('ds40', 81000));
SELECT is(pg_temp.dd('ds40', 'd5', '{"ok":true,"done":true}', 82000), '{"outcome":"acked","next_wake":false}',
          'DS40: acked with nothing after the snapshot');
SELECT is(pg_temp.row('ds40') - 'config' - 'kind' - 'pattern' - 'webhook_url' - 'wake_stream' - 'description'
            - 'created_at' - 'lease_ttl_ms' - 'subscription_id' - 'wake_snapshot',
          '{"generation":2,"wake_id":null,"token_hash":null,"holder":null,"lease_expires_at":null,
            "delivery_due_at":null,"failed_attempts":0}',
          'DS40: the wake ended: idle');
SELECT is(sandbox_persist.stream_subscription_deliveries(16, 82000)::jsonb, '{"deliveries":[],"next_due_at":null}',
          'DS40: nothing due');
SELECT pg_temp.same($$SELECT pg_temp.dd('ds40', 'd5', '{"ok":true,"done":true}', 82100)$$, '{"outcome":"fenced"}',
                    'DS40: delivered for a wake that ended');
SELECT pg_temp.ap('w/a', 'z', 90000);
SELECT pg_temp.keep('w3', pg_temp.row('ds40'));
SELECT pg_temp.same($$SELECT sandbox_persist.stream_subscription_delivered('ds40', pg_temp.got('w3')->>'wake_id', 2, '{"ok":true,"done":true}', 90100)::jsonb$$,
                    '{"outcome":"fenced"}', 'DS40: delivered for the wake in flight with a stale generation');
SELECT pg_temp.same($$SELECT sandbox_persist.stream_subscription_delivered('ds40', pg_temp.got('d1')->>'wake_id', 3, '{"ok":false}', 90100)::jsonb$$,
                    '{"outcome":"fenced"}', 'DS40: delivered for a stale wake with the current generation');
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_subscription_deliveries(0, 90100)$$, '22023', 'DS40: max_rows 0');
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_subscription_deliveries(1001, 90100)$$, '22023', 'DS40: max_rows 1001');
-- Clocks a subscription cannot work with (found by the fuzzer: now + a lease overflowed inside a statement).
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_subscription_deliveries(16, 9223372036854775807)$$, '22008',
                       'DS40: deliveries at a clock past 9999 (now + a lease would overflow)');
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_subscription_deliveries(16, -1)$$, '22008',
                       'DS40: deliveries at a clock before 1970');
SELECT pg_temp.rejects($$SELECT pg_temp.ap('w/a', 'q', 9223372036854775807)$$, '22008',
                       'DS40: an append to a linked stream at a clock past 9999 is refused, nothing written');
SELECT pg_temp.rejects($$SELECT pg_temp.put('ds40x', '{"type":"webhook","streams":["w/a"],"webhook":{"url":"https://example.com/h"}}', 253402300800000)$$,
                       '22008', 'DS40: a put at a clock past 9999-12-31');
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_subscription_delivered('ds40', pg_temp.got('w3')->>'wake_id', 3, '{"done":true}', 90100)$$,
                       '22023', 'DS40: a delivery result without ok');

------------------------------------------------------------------------------
-- DS41: callback/ack fencing, tokens, offsets.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT pg_temp.mk('k/a', 'text/plain', NULL, 'a');
SELECT pg_temp.mk('k/b', 'text/plain', NULL, 'b');
SELECT pg_temp.mk('k/other', 'text/plain', NULL, 'o');
SELECT pg_temp.put('ds41', '{"type":"webhook","streams":["k/a","k/b"],"webhook":{"url":"https://example.com/h"},"lease_ttl_ms":10000}');
SELECT pg_temp.ap('k/a', 'x', 2000);
SELECT pg_temp.ap('k/a', 'y', 2000);
SELECT pg_temp.keep('c', pg_temp.dl('ds41', 2000));
SELECT is(pg_temp.dd('ds41', 'c', '{"ok":true}', 2000), '{"outcome":"awaitingCallback"}', 'DS41 (setup): delivered');
SELECT pg_temp.same($$SELECT sandbox_persist.stream_subscription_ack('ds41', pg_temp.tok('c'),
                        json_build_object('wake_id', 'w_00000000000000000000000000000000', 'generation', 1), 2500)::jsonb$$,
                    '{"outcome":"fenced"}', 'DS41: a wrong wake_id');
SELECT pg_temp.same($$SELECT sandbox_persist.stream_subscription_ack('ds41', pg_temp.tok('c'),
                        json_build_object('wake_id', pg_temp.got('c')->'wake_id', 'generation', 2, 'done', true), 2500)::jsonb$$,
                    '{"outcome":"fenced"}', 'DS41: a wrong generation');
SELECT pg_temp.same($$SELECT sandbox_persist.stream_subscription_release('ds41', pg_temp.tok('c'),
                        json_build_object('wake_id', pg_temp.got('c')->'wake_id', 'generation', 0), 2500)::jsonb$$,
                    '{"outcome":"fenced"}', 'DS41: a release with a wrong generation');
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_subscription_ack('ds41', repeat('0', 64), pg_temp.rq('c', NULL, true), 2500)$$,
                       'SP712 TOKEN_INVALID', 'DS41: the right wake with a wrong token');
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_subscription_release('ds41', 'nope', pg_temp.rq('c'), 2500)$$,
                       'SP712 TOKEN_INVALID', 'DS41: a release with a wrong token');
SELECT pg_temp.same(format('SELECT pg_temp.ack(%L, %L, %L, NULL, 2500) - %L', 'ds41', 'c', acks, 'message'),
                    '{"outcome":"invalidOffset"}', 'DS41: invalidOffset, nothing applied: ' || d)
  FROM (VALUES (jsonb_build_array(pg_temp.a('k/other', pg_temp.off(0, 1))), 'an unlinked stream'),
               (jsonb_build_array(pg_temp.a('k/nowhere', pg_temp.off(0, 0))), 'no stream at all'),
               (jsonb_build_array(pg_temp.a('k/a', '-1')), 'offset -1'),
               (jsonb_build_array(pg_temp.a('k/a', 'now')), 'offset now'),
               (jsonb_build_array(pg_temp.a('k/a', 'abc')), 'a malformed offset'),
               (jsonb_build_array(pg_temp.a('k/a', '0000000000000000-0000000000000002')), 'a malformed offset (separator)'),
               (jsonb_build_array(pg_temp.a('k/a', '0000000000000000_000000000000000_')), 'a malformed offset (seq not digits)'),
               (jsonb_build_array(pg_temp.a('k/a', pg_temp.off(0, 0))), 'before the acknowledged offset'),
               (jsonb_build_array(pg_temp.a('k/a', pg_temp.off(0, 4))), 'past the tail'),
               (jsonb_build_array(pg_temp.a('k/a', pg_temp.off(1, 2))), 'another epoch, past the tail'),
               (jsonb_build_array(pg_temp.a('k/a', pg_temp.off(0, 2)), pg_temp.a('k/b', pg_temp.off(0, 2))),
                'a valid ack beside one past the tail'),
               (jsonb_build_array(pg_temp.a('k/a', pg_temp.off(0, 3)), pg_temp.a('k/other', pg_temp.off(0, 1))),
                'a valid ack beside an unlinked stream')) v(acks, d);
SELECT is(pg_temp.ack('ds41', 'c', jsonb_build_array(pg_temp.a('k/a', pg_temp.off(0, 4))), NULL, 2500)->>'message',
          'The ack of stream "k/a" at "0000000000000000_0000000000000004" has an offset past the stream''s tail.',
          'DS41: invalidOffset says which ack and why');
SELECT is(pg_temp.ack('ds41', 'c', jsonb_build_array(pg_temp.a('k/a', pg_temp.off(0, 2))), NULL, 3000),
          '{"outcome":"ok","next_wake":false}', 'DS41: a valid ack without done');
SELECT is(pg_temp.links('ds41')->'k/a'->>'acked_offset', pg_temp.off(0, 2), 'DS41: it moves acked_offset');
SELECT is(pg_temp.row('ds41')->'lease_expires_at', '13000', 'DS41: it extends the lease to now + ttl');
SELECT is(pg_temp.row('ds41')->>'wake_id', pg_temp.got('c')->>'wake_id', 'DS41: the wake stays');
SELECT is(pg_temp.ack('ds41', 'c', jsonb_build_array(pg_temp.a('k/a', pg_temp.off(0, 2))), NULL, 3100),
          '{"outcome":"ok","next_wake":false}', 'DS41: the acknowledged offset again (acks are inclusive)');
SELECT is(pg_temp.ack('ds41', 'c', jsonb_build_array(pg_temp.a('k/a', pg_temp.off(0, 3)), pg_temp.a('k/a', pg_temp.off(0, 2))), NULL, 3500),
          '{"outcome":"ok","next_wake":false}', 'DS41: two acks of one stream');
SELECT is(pg_temp.links('ds41')->'k/a'->>'acked_offset', pg_temp.off(0, 3), 'DS41: the larger applies');
SELECT is(pg_temp.ack('ds41', 'c', jsonb_build_array(pg_temp.a('k/b', pg_temp.off(0, 1))), true, 4000),
          '{"outcome":"ok","next_wake":false}', 'DS41: done with nothing pending: no next wake');
SELECT is(pg_temp.row('ds41') - 'config' - 'kind' - 'pattern' - 'webhook_url' - 'wake_stream' - 'description'
            - 'created_at' - 'lease_ttl_ms' - 'subscription_id' - 'wake_snapshot',
          '{"generation":1,"wake_id":null,"token_hash":null,"holder":null,"lease_expires_at":null,
            "delivery_due_at":null,"failed_attempts":0}',
          'DS41: the wake ended: idle');
SELECT pg_temp.same($$SELECT pg_temp.ack('ds41', 'c', NULL, true, 4100)$$, '{"outcome":"fenced"}',
                    'DS41: a request after the wake ended');
SELECT pg_temp.same($$SELECT pg_temp.rel('ds41', 'c', 4100)$$, '{"outcome":"fenced"}',
                    'DS41: a release after the wake ended');
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_subscription_ack('ds41', 'x', '{"generation":1}', 4100)$$,
                       '22004', 'DS41: a request without wake_id');
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_subscription_ack('ds41', 'x', '{"wake_id":"w","generation":1,"nope":1}', 4100)$$,
                       '22023', 'DS41: a request with an unknown member');
-- Offsets the stream never issued, sorting between the acknowledged offset and the tail.
SELECT pg_temp.mk('k/w', 'application/json', NULL, NULL, 5000);
SELECT pg_temp.mk('k/m', 'text/plain', NULL, NULL, 5000);
SELECT pg_temp.put('ds41m', '{"type":"pull-wake","streams":["k/m"],"wake_stream":"k/w"}', 5000);
SELECT pg_temp.ap('k/m', 'x', 5000) FROM generate_series(1, 20);
SET LOCAL sandbox_persist.test_timeline = 2;
SELECT pg_temp.ap('k/m', 'x', 5000);
SET LOCAL sandbox_persist.test_timeline = 1;
SELECT pg_temp.keep('m', pg_temp.claim('ds41m', 'w1', 5000));
SELECT is(pg_temp.got('m')->'streams'->0->>'tail_offset', pg_temp.off(1, 21), 'DS41 (setup): k/m ends at 1_21');
SELECT pg_temp.same(format('SELECT pg_temp.ack(%L, %L, %L, NULL, 5100) - %L', 'ds41m', 'm', jsonb_build_array(pg_temp.a('k/m', o)), 'message'),
                    '{"outcome":"invalidOffset"}', 'DS41: invalidOffset, nothing applied: ' || d)
  FROM (VALUES ('0000000000000000_000000000000001_', 'a malformed offset between the acknowledged one and the tail'),
               ('0000000000000000_0000000000000021', 'entry 21 with an epoch it was not written at')) v(o, d);
SELECT is(pg_temp.ack('ds41m', 'm', jsonb_build_array(pg_temp.a('k/m', pg_temp.off(0, 20))), NULL, 5200),
          '{"outcome":"ok","next_wake":false}', 'DS41 (control): an offset k/m issued');

------------------------------------------------------------------------------
-- DS42: webhook leases.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT pg_temp.mk('e/a', 'text/plain', NULL, 'a');
SELECT pg_temp.put('ds42', '{"type":"webhook","streams":["e/a"],"webhook":{"url":"https://example.com/h"},"lease_ttl_ms":5000}');
SELECT pg_temp.ap('e/a', 'x', 2000);
SELECT pg_temp.keep('g1', pg_temp.dl('ds42', 2000));
SELECT is(pg_temp.dd('ds42', 'g1', '{"ok":true}', 2000), '{"outcome":"awaitingCallback"}', 'DS42 (setup): delivered');
SELECT pg_temp.same($$SELECT sandbox_persist.stream_subscription_deliveries(16, 6999)::jsonb$$,
                    '{"deliveries":[],"next_due_at":7000}', 'DS42: before the lease lapses nothing happens');
SELECT pg_temp.keep('g2', pg_temp.dl('ds42', 7000));
SELECT is(pg_temp.got('g2')->'generation', '2',
          'DS42: a lapsed lease with work pending: a new wake (generation + 1), due and delivered at once');
SELECT isnt(pg_temp.got('g2')->>'wake_id', pg_temp.got('g1')->>'wake_id', 'DS42: with a new wake_id');
SELECT is(pg_temp.links('ds42')->'e/a'->>'acked_offset', pg_temp.off(0, 1), 'DS42: nothing was acknowledged');
SELECT pg_temp.same($$SELECT pg_temp.ack('ds42', 'g1', NULL, true, 7000)$$, '{"outcome":"fenced"}',
                    'DS42: the old wake''s callback is fenced');
SELECT pg_temp.same($$SELECT pg_temp.dd('ds42', 'g1', '{"ok":true,"done":true}', 7000)$$, '{"outcome":"fenced"}',
                    'DS42: the old wake''s delivery report is fenced');
SELECT is(pg_temp.dd('ds42', 'g2', '{"ok":true}', 7100), '{"outcome":"awaitingCallback"}', 'DS42: the new wake delivered');
SELECT is(pg_temp.ack('ds42', 'g2', jsonb_build_array(pg_temp.a('e/a', pg_temp.off(0, 2))), NULL, 7200),
          '{"outcome":"ok","next_wake":false}', 'DS42: its callback acknowledges the tail without done');
SELECT is(pg_temp.row('ds42')->'lease_expires_at', '12200', 'DS42: lease extended');
SELECT is(pg_temp.dl('ds42', 12200), NULL, 'DS42: the lease lapses with nothing pending: no delivery');
SELECT is(pg_temp.got('deliveries'), '{"deliveries":[],"next_due_at":null}', 'DS42: nothing due');
SELECT is(pg_temp.row('ds42') - 'config' - 'kind' - 'pattern' - 'webhook_url' - 'wake_stream' - 'description'
            - 'created_at' - 'lease_ttl_ms' - 'subscription_id' - 'wake_snapshot',
          '{"generation":2,"wake_id":null,"token_hash":null,"holder":null,"lease_expires_at":null,
            "delivery_due_at":null,"failed_attempts":0}',
          'DS42: the subscription is idle');
SELECT pg_temp.same($$SELECT pg_temp.ack('ds42', 'g2', NULL, true, 12300)$$, '{"outcome":"fenced"}',
                    'DS42: the lapsed wake''s token is fenced');

------------------------------------------------------------------------------
-- DS43: pull-wake.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT pg_temp.mk('w43', 'application/json');
SELECT pg_temp.mk('d43/a');
SELECT pg_temp.mk('d43/b');
SELECT pg_temp.put('ds43', '{"type":"pull-wake","pattern":"d43/*","wake_stream":"w43","lease_ttl_ms":5000}');
SELECT pg_temp.same($$SELECT pg_temp.claim('ds43', 'w1', 1000)$$, '{"outcome":"noPendingWork"}',
                    'DS43: a claim with nothing pending');
SELECT pg_temp.ap('d43/a', 'x', 2000);
SELECT is(pg_temp.rd('w43', 2000)::jsonb,
          '[{"type":"wake","subscription_id":"ds43","stream":"d43/a","generation":1,"ts":2000}]',
          'DS43: an append issues a wake and appends one wake event to the wake stream');
SELECT is((pg_temp.row('ds43')->>'generation')::int, 1, 'DS43: generation 1');
SELECT is(pg_temp.row('ds43')->'lease_expires_at', 'null', 'DS43: no lease until a claim');
SELECT pg_temp.ap('d43/b', 'y', 2100);
SELECT is(pg_temp.nentries('w43'), 1, 'DS43: a second append while the wake is in flight: no event');
SELECT pg_temp.keep('p1', pg_temp.claim('ds43', 'w1', 2200));
SELECT is(pg_temp.got('p1') - 'token',
          jsonb_build_object('outcome', 'claimed', 'wake_id', pg_temp.row('ds43')->'wake_id', 'generation', 1,
                             'lease_ttl_ms', 5000, 'streams', jsonb_build_array(
              jsonb_build_object('path', 'd43/a', 'link_type', 'glob', 'acked_offset', pg_temp.off(0, 0),
                                 'tail_offset', pg_temp.off(0, 1), 'has_pending', true),
              jsonb_build_object('path', 'd43/b', 'link_type', 'glob', 'acked_offset', pg_temp.off(0, 0),
                                 'tail_offset', pg_temp.off(0, 1), 'has_pending', true))),
          'DS43: claim: the wake, the lease, the streams with their tails');
SELECT is(pg_temp.got('p1')->>'token' ~ '^[0-9a-f]{64}$', true, 'DS43: the token is 64 hex digits');
SELECT is((pg_temp.row('ds43')->>'holder', pg_temp.row('ds43')->>'lease_expires_at')::text, '(w1,7200)',
          'DS43: holder and lease stored');
SELECT pg_temp.same($$SELECT pg_temp.claim('ds43', 'w2', 2300)$$,
                    '{"outcome":"alreadyClaimed","current_holder":"w1","generation":1}',
                    'DS43: a second worker');
SELECT pg_temp.same($$SELECT pg_temp.claim('ds43', 'w1', 2300)$$,
                    '{"outcome":"alreadyClaimed","current_holder":"w1","generation":1}',
                    'DS43: the holder claiming again');
SELECT pg_temp.put('ds43h', '{"type":"webhook","streams":["d43/a"],"webhook":{"url":"https://example.com/h"}}');
SELECT pg_temp.rejects($$SELECT pg_temp.claim('ds43h', 'w1', 2300)$$, '22023', 'DS43: claim of a webhook subscription');
SELECT is(pg_temp.ack('ds43', 'p1', NULL, NULL, 3000), '{"outcome":"ok","next_wake":false}',
          'DS43: an ack without done (heartbeat)');
SELECT is(pg_temp.row('ds43')->'lease_expires_at', '8000', 'DS43: extends the lease');
SELECT is(pg_temp.ack('ds43', 'p1', jsonb_build_array(pg_temp.a('d43/a', pg_temp.off(0, 1))), true, 3100),
          '{"outcome":"ok","next_wake":true}', 'DS43: ack with done, d43/b still pending: next wake');
SELECT is((pg_temp.row('ds43')->>'generation', pg_temp.row('ds43')->>'holder')::text, '(2,)',
          'DS43: generation 2, unclaimed');
SELECT is(pg_temp.rd('w43', 3100)::jsonb->1,
          '{"type":"wake","subscription_id":"ds43","stream":"d43/b","generation":2,"ts":3100}',
          'DS43: and its event');
SELECT pg_temp.keep('p2', pg_temp.claim('ds43', 'w2', 3200));
SELECT is(pg_temp.got('p2')->'generation', '2', 'DS43: claimed generation 2');
SELECT is(pg_temp.rel('ds43', 'p2', 3300), '{"outcome":"released"}', 'DS43: release');
SELECT is((pg_temp.row('ds43')->>'generation', pg_temp.row('ds43')->>'holder')::text, '(3,)',
          'DS43: with work pending a new wake');
SELECT is(pg_temp.rd('w43', 3300)::jsonb->2,
          '{"type":"wake","subscription_id":"ds43","stream":"d43/b","generation":3,"ts":3300}',
          'DS43: and a new event');
SELECT pg_temp.same($$SELECT pg_temp.rel('ds43', 'p2', 3350)$$, '{"outcome":"fenced"}', 'DS43: releasing again is fenced');
SELECT pg_temp.keep('p3', pg_temp.claim('ds43', 'w1', 3400));
SELECT pg_temp.keep('p4', pg_temp.claim('ds43', 'w2', 8400));
SELECT is(pg_temp.got('p4') - 'token' - 'wake_id' - 'streams', '{"outcome":"claimed","generation":4,"lease_ttl_ms":5000}',
          'DS43: a holder whose lease lapsed is replaced: generation + 1');
SELECT isnt(pg_temp.got('p4')->>'wake_id', pg_temp.got('p3')->>'wake_id', 'DS43: a new wake');
SELECT is(pg_temp.nentries('w43'), 4, 'DS43: with its event');
SELECT pg_temp.same($$SELECT pg_temp.ack('ds43', 'p3', NULL, true, 8500)$$, '{"outcome":"fenced"}',
                    'DS43: the replaced holder is fenced');
SELECT is(pg_temp.ack('ds43', 'p4', jsonb_build_array(pg_temp.a('d43/b', pg_temp.off(0, 1))), true, 8500),
          '{"outcome":"ok","next_wake":false}', 'DS43: done with nothing pending: no next wake');
SELECT is(pg_temp.nentries('w43'), 4, 'DS43: and no event');
SELECT pg_temp.ap('w43', '', 9000, '{"close":true}', 'application/json');
SELECT pg_temp.ap('d43/a', 'y', 9100);
SELECT is(pg_temp.nentries('w43'), 4, 'DS43: a closed wake stream gets no event');
SELECT is((pg_temp.row('ds43')->>'generation')::int, 5, 'DS43: but the wake is issued');
SELECT is(pg_temp.claim('ds43', 'w1', 9200) - 'token' - 'wake_id' - 'streams', '{"outcome":"claimed","generation":5,"lease_ttl_ms":5000}',
          'DS43: and claimable');
SELECT pg_temp.keep('p5', pg_temp.claim('ds43', 'w2', 14200));
SELECT is(pg_temp.got('p5') - 'token' - 'wake_id' - 'streams', '{"outcome":"claimed","generation":6,"lease_ttl_ms":5000}',
          'DS43: a lapsed holder replaced with work still pending');
SELECT is(pg_temp.ack('ds43', 'p5', jsonb_build_array(pg_temp.a('d43/a', pg_temp.off(0, 2))), NULL, 14300),
          '{"outcome":"ok","next_wake":false}', 'DS43: its work acknowledged without done');
SELECT is(pg_temp.claim('ds43', 'w1', 19300), '{"outcome":"noPendingWork"}',
          'DS43: a lapsed holder, nothing pending: noPendingWork');
SELECT is((pg_temp.row('ds43')->>'wake_id', pg_temp.row('ds43')->>'holder')::text, '(,)',
          'DS43: and the lapsed wake ended');

------------------------------------------------------------------------------
-- DS44: delete; the HTTP statuses of the subscription codes.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT pg_temp.mk('zw', 'application/json');
SELECT pg_temp.mk('z/a');
SELECT pg_temp.put('ds44', '{"type":"pull-wake","streams":["z/a"],"pattern":"z/*","wake_stream":"zw"}');
SELECT pg_temp.ap('z/a', 'x', 2000);
SELECT pg_temp.keep('q', pg_temp.claim('ds44', 'w1', 2000));
SELECT is(sandbox_persist.stream_subscription_delete('ds44')::jsonb, '{"deleted":true}', 'DS44: delete');
SELECT is((SELECT count(*)::int FROM sandbox_persist.stream_subscriptions WHERE subscription_id = 'ds44'), 0,
          'DS44: the row is gone');
SELECT is((SELECT count(*)::int FROM sandbox_persist.stream_subscription_links WHERE subscription_id = 'ds44'), 0,
          'DS44: its links are gone');
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_subscription_delete('ds44')$$, 'SP709 SUBSCRIPTION_NOT_FOUND',
                       'DS44: delete again');
SELECT pg_temp.rejects($$SELECT pg_temp.ack('ds44', 'q', NULL, true, 2100)$$, 'SP709 SUBSCRIPTION_NOT_FOUND',
                       'DS44: ack after delete');
SELECT pg_temp.rejects($$SELECT pg_temp.rel('ds44', 'q', 2100)$$, 'SP709 SUBSCRIPTION_NOT_FOUND',
                       'DS44: release after delete');
SELECT pg_temp.rejects($$SELECT pg_temp.claim('ds44', 'w2', 2100)$$, 'SP709 SUBSCRIPTION_NOT_FOUND',
                       'DS44: claim after delete');
SELECT pg_temp.rejects($$SELECT pg_temp.get('ds44')$$, 'SP709 SUBSCRIPTION_NOT_FOUND', 'DS44: get after delete');
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_subscription_delivered('ds44', 'w_x', 1, '{"ok":true}', 2100)$$,
                       'SP709 SUBSCRIPTION_NOT_FOUND', 'DS44: delivered after delete');
SELECT pg_temp.ap('z/a', 'y', 2200);
SELECT is(pg_temp.nentries('zw'), 1, 'DS44: an append after delete wakes nothing');
SELECT pg_temp.mk('z/b', 'text/plain', NULL, 'b', 2300);
SELECT is((SELECT count(*)::int FROM sandbox_persist.stream_subscription_links), 0,
          'DS44: a new stream matching its old pattern is not linked');
SELECT is((SELECT json_object_agg(c->>'sqlstate', (c->>'httpStatus')::int)::jsonb
             FROM json_array_elements(sandbox_persist.error_codes()) c WHERE c->>'sqlstate' BETWEEN 'SP709' AND 'SP712'),
          '{"SP709":404,"SP710":409,"SP711":400,"SP712":401}'::jsonb,
          'DS44: error_codes() reports httpStatus for SP709-SP712');
SELECT is((SELECT json_object_agg(c->>'sqlstate', c->>'codeName')::jsonb
             FROM json_array_elements(sandbox_persist.error_codes()) c WHERE c->>'sqlstate' BETWEEN 'SP709' AND 'SP712'),
          '{"SP709":"SUBSCRIPTION_NOT_FOUND","SP710":"SUBSCRIPTION_ALREADY_EXISTS","SP711":"WEBHOOK_URL_REJECTED","SP712":"TOKEN_INVALID"}'::jsonb,
          'DS44: and their code names');

SELECT * FROM finish();
ROLLBACK;
