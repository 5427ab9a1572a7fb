-- pgTAP: generation run store (docs/contract/chat-stores.md §3).
-- Cases: P11, P12, R30, R34 (generation run part), V1-V10, V12-V16
-- (generation run parts).
-- Run with: pg_prove -d <db> test/pgtap/generation_runs.sql (needs allow_test_reset).
BEGIN;
SELECT plan(167);
SELECT sandbox_persist._reset_for_tests();
\ir lib/chat_store_helpers.psql

-- A bad call: asserts the SQLSTATE (and, when given, a pattern the error
-- message must match, e.g. the unknown key's name), then that nothing changed.
CREATE FUNCTION pg_temp.rejects(sql text, code text, descr text, msg_re text DEFAULT NULL)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    before text := pg_temp.state();
    e text[];
BEGIN
    RETURN NEXT throws_ok(sql, code::char(5), NULL, descr || ' -> ' || code);
    IF msg_re IS NOT NULL THEN
        e := pg_temp.err(sql);
        RETURN NEXT matches(coalesce(e[2], 'no error'), msg_re, descr || ': the message names it');
    END IF;
    RETURN NEXT is(pg_temp.state(), before, descr || ': nothing changed');
END
$$;

-- Create a generation run with fixed activity, provider and model.
CREATE FUNCTION pg_temp.mk(id text, thread text, started bigint) RETURNS json LANGUAGE sql AS $$
    SELECT sandbox_persist.generation_run_create_or_resume(json_build_object(
        'runId', id, 'threadId', thread, 'activity', 'image', 'provider', 'openai',
        'model', 'gpt-image-1', 'startedAt', started))
$$;

------------------------------------------------------------------------------
-- P11: create, resume, update, get.
------------------------------------------------------------------------------
SELECT ok(sandbox_persist.generation_run_get('gen-1') IS NULL,
    'P11.1 get of a missing generation run is SQL NULL');
SELECT is(sandbox_persist.generation_run_create_or_resume(
        '{"runId":"gen-1","threadId":"thread-gen","activity":"image","provider":"openai","model":"gpt-image-1","startedAt":1000}')::text,
    '{"runId":"gen-1","threadId":"thread-gen","activity":"image","provider":"openai","model":"gpt-image-1","status":"running","startedAt":1000}',
    'P11.2 create returns the input plus status running, in the contract field order');
SELECT is(sandbox_persist.generation_run_create_or_resume(
        '{"runId":"gen-1","threadId":"thread-elsewhere","activity":"audio","provider":"elevenlabs","model":"m2","startedAt":5,"status":"completed"}')::jsonb,
    '{"runId":"gen-1","threadId":"thread-gen","activity":"image","provider":"openai","model":"gpt-image-1","status":"running","startedAt":1000}'::jsonb,
    'P11.3 a resume with another activity, provider, model, start, status and thread returns the originals');
SELECT is(sandbox_persist.generation_run_get('gen-1')->>'threadId', 'thread-gen',
    'P11.4 the exact threadId is kept');
SELECT is(sandbox_persist.generation_run_update('gen-1',
        '{"result":{"images":[{"url":"https://example.test/a.png"}]},
          "artifacts":[{"role":"output","artifactId":"art-1","runId":"gen-1","threadId":"thread-not-the-run","name":"a.png","mimeType":"image/png","size":42,"createdAt":"2025-01-01T00:00:00.000Z","source":{"activity":"image","path":"/a.png","provider":"openai","model":"gpt-image-1"}}],
          "usage":{"promptTokens":1,"completionTokens":2,"totalTokens":3}}'),
    true, 'P11.5 update of an existing run returns true');
SELECT is(sandbox_persist.generation_run_get('gen-1')::jsonb,
    '{"runId":"gen-1","threadId":"thread-gen","activity":"image","provider":"openai","model":"gpt-image-1","status":"running","startedAt":1000,
      "result":{"images":[{"url":"https://example.test/a.png"}]},
      "artifacts":[{"role":"output","artifactId":"art-1","runId":"gen-1","threadId":"thread-not-the-run","name":"a.png","mimeType":"image/png","size":42,"createdAt":"2025-01-01T00:00:00.000Z","source":{"activity":"image","path":"/a.png","provider":"openai","model":"gpt-image-1"}}],
      "usage":{"promptTokens":1,"completionTokens":2,"totalTokens":3}}'::jsonb,
    'P11.6 result, the artifact ref (ISO createdAt, source, another thread: opaque) and usage round-trip');
SELECT sandbox_persist.generation_run_update('gen-1',
    '{"status":"failed","finishedAt":2000,"error":{"message":"boom","code":"provider_error"}}');
SELECT is((sandbox_persist.generation_run_get('gen-1')->'error')::jsonb,
    '{"message":"boom","code":"provider_error"}'::jsonb,
    'P11.7 a failed update''s error equals {boom, provider_error}');
SELECT is(sandbox_persist.generation_run_get('gen-1')->>'status', 'failed',
    'P11.8 the failed status is stored');
SELECT is(sandbox_persist.generation_run_get('gen-1')->>'finishedAt', '2000',
    'P11.9 finishedAt is stored');
SELECT is((sandbox_persist.generation_run_get('gen-1')->'usage')::jsonb,
    '{"promptTokens":1,"completionTokens":2,"totalTokens":3}'::jsonb,
    'P11.10 fields absent from the patch keep their values');
SELECT is(sandbox_persist.generation_run_create_or_resume(
        '{"runId":"gen-1","threadId":"x","activity":"x","provider":"x","model":"x","startedAt":1}')::jsonb,
    sandbox_persist.generation_run_get('gen-1')::jsonb,
    'P11.11 a resume returns the complete stored record, equal to get');
SELECT is(sandbox_persist.generation_run_update('gen-missing', '{"status":"completed"}'), false,
    'P11.12 update of a missing id returns false and does not throw');
SELECT ok(sandbox_persist.generation_run_get('gen-missing') IS NULL,
    'P11.13 update of a missing id creates nothing');
SELECT is(sandbox_persist.generation_run_update('gen-missing', '{}'), false,
    'P11.14 an empty patch on a missing id returns false');
SELECT is(sandbox_persist.generation_run_update('gen-1', '{}'), true,
    'P11.15 an empty patch on an existing id returns true and changes nothing');
SELECT is(sandbox_persist.generation_run_create_or_resume(
        '{"runId":"gen-summ","threadId":"thread-gen","activity":"summarize","provider":"anthropic","model":"claude","startedAt":1,"status":"interrupted"}')::jsonb,
    '{"runId":"gen-summ","threadId":"thread-gen","activity":"summarize","provider":"anthropic","model":"claude","status":"interrupted","startedAt":1}'::jsonb,
    'P11.16 activity is free text (summarize) and an initial status is honoured');
SELECT lives_ok($$SELECT sandbox_persist.generation_run_update('gen-summ', '{"status":"aborted","finishedAt":9}')$$,
    'P11.17 status aborted is accepted');
SELECT is(ARRAY[sandbox_persist.generation_run_get('gen-1')->>'runId', sandbox_persist.generation_run_get('gen-summ')->>'runId'],
    ARRAY['gen-1', 'gen-summ'],
    'P11.18 two gets in one statement each return their own record');

------------------------------------------------------------------------------
-- P12: findLatestForThread.
------------------------------------------------------------------------------
SELECT ok(sandbox_persist.generation_run_find_latest_for_thread('thread-latest') IS NULL,
    'P12.1 findLatestForThread of an empty thread is SQL NULL');
SELECT pg_temp.mk('latest-new', 'thread-latest', 3000);
SELECT pg_temp.mk('latest-old', 'thread-latest', 1000);
SELECT pg_temp.mk('latest-other', 'thread-latest-other', 9000);
SELECT is(sandbox_persist.generation_run_find_latest_for_thread('thread-latest')::jsonb,
    '{"runId":"latest-new","threadId":"thread-latest","activity":"image","provider":"openai","model":"gpt-image-1","status":"running","startedAt":3000}'::jsonb,
    'P12.2 the run started at 3000 beats one started at 1000 inserted later');
SELECT is(sandbox_persist.generation_run_find_latest_for_thread('thread-latest')->>'runId', 'latest-new',
    'P12.3 another thread''s run at 9000 is ignored');
SELECT sandbox_persist.generation_run_update('latest-new', '{"status":"completed","finishedAt":3500}');
SELECT is(sandbox_persist.generation_run_find_latest_for_thread('thread-latest')->>'runId', 'latest-new',
    'P12.4 the latest is still returned after it completes (any status)');
SELECT is(sandbox_persist.generation_run_find_latest_for_thread('thread-latest')->>'status', 'completed',
    'P12.5 and it carries its completed status');
SELECT ok(sandbox_persist.generation_run_find_latest_for_thread('thread-unlinked') IS NULL,
    'P12.6 an unlinked thread gives SQL NULL');

------------------------------------------------------------------------------
-- R30: result null is a value; clear removes; artifacts and usage replaced whole.
------------------------------------------------------------------------------
SELECT pg_temp.mk('r30', 'thread-r30', 1);
SELECT sandbox_persist.generation_run_update('r30', '{"result":null}');
SELECT ok(sandbox_persist.generation_run_get('r30')::jsonb ? 'result',
    'R30.1 update{result: null} leaves the result key present');
SELECT is(sandbox_persist.generation_run_get('r30')::text,
    '{"runId":"r30","threadId":"thread-r30","activity":"image","provider":"openai","model":"gpt-image-1","status":"running","startedAt":1,"result":null}',
    'R30.2 result: null reads back as "result": null');
SELECT sandbox_persist.generation_run_update('r30', '{}', '["result"]');
SELECT ok(NOT sandbox_persist.generation_run_get('r30')::jsonb ? 'result',
    'R30.3 clear: [result] removes the result key');
SELECT sandbox_persist.generation_run_update('r30',
    '{"result":{"a":1},"artifacts":[{"artifactId":"x1"},{"artifactId":"x2"}],"usage":{"promptTokens":5,"costDetails":{"usd":1}}}');
SELECT sandbox_persist.generation_run_update('r30',
    '{"artifacts":[{"artifactId":"x3"}],"usage":{"totalTokens":9}}');
SELECT is(sandbox_persist.generation_run_get('r30')::jsonb,
    '{"runId":"r30","threadId":"thread-r30","activity":"image","provider":"openai","model":"gpt-image-1","status":"running","startedAt":1,
      "result":{"a":1},"artifacts":[{"artifactId":"x3"}],"usage":{"totalTokens":9}}'::jsonb,
    'R30.4 artifacts and usage are replaced whole (not appended, not merged or summed)');
SELECT sandbox_persist.generation_run_update('r30', '{"result":"text result"}');
SELECT is(sandbox_persist.generation_run_get('r30')->>'result', 'text result',
    'R30.5 result may be any JSON (a string here)');
SELECT sandbox_persist.generation_run_update('r30', '{"status":"completed","finishedAt":10,"error":{"message":"e"}}');
SELECT sandbox_persist.generation_run_update('r30', '{"artifacts":null,"usage":null,"finishedAt":null,"error":null}');
SELECT is(sandbox_persist.generation_run_get('r30')::jsonb,
    '{"runId":"r30","threadId":"thread-r30","activity":"image","provider":"openai","model":"gpt-image-1","status":"completed","startedAt":1,"result":"text result"}'::jsonb,
    'R30.6 JSON null clears artifacts, usage, finishedAt and error (the general patch rule)');
SELECT sandbox_persist.generation_run_update('r30', '{"finishedAt":11,"usage":{"n":1},"error":{"message":"m"},"artifacts":[]}');
SELECT sandbox_persist.generation_run_update('r30', '{"status":"failed"}', '["finishedAt","usage","error","artifacts","result"]');
SELECT is(sandbox_persist.generation_run_get('r30')::text,
    '{"runId":"r30","threadId":"thread-r30","activity":"image","provider":"openai","model":"gpt-image-1","status":"failed","startedAt":1}',
    'R30.7 clear may name every clearable key together with a patch of other keys');
SELECT sandbox_persist.generation_run_update('r30', '{"result":[1,{"k":"\u0000"}]}');
SELECT is(sandbox_persist.generation_run_get('r30')::text,
    '{"runId":"r30","threadId":"thread-r30","activity":"image","provider":"openai","model":"gpt-image-1","status":"failed","startedAt":1,"result":[1,{"k":"\u0000"}]}',
    'R30.8 result with \u0000 is stored and spliced verbatim');
SELECT sandbox_persist.generation_run_update('r30', '{}', '[]');
SELECT ok(strpos(sandbox_persist.generation_run_get('r30')::text, '"result":[1,{"k":"\u0000"}]') > 0,
    'R30.9 an empty clear list clears nothing');
SELECT sandbox_persist.generation_run_update('r30', '{}', '["result","result"]');
SELECT ok(NOT sandbox_persist.generation_run_get('r30')::jsonb ? 'result',
    'R30.10 a key named twice in clear is cleared once');

------------------------------------------------------------------------------
-- R34 (generation run part): equal startedAt -> earliest inserted.
------------------------------------------------------------------------------
SELECT pg_temp.mk('r34-z', 'thread-r34', 7);
SELECT pg_temp.mk('r34-a', 'thread-r34', 7);
SELECT pg_temp.mk('r34-m', 'thread-r34', 7);
SELECT pg_temp.mk('r34-early', 'thread-r34', 6);
-- Updating r34-z moves its tuple to the end of the heap: it must stay first.
SELECT sandbox_persist.generation_run_update('r34-z', '{"usage":{"n":1}}');
SELECT sandbox_persist.generation_run_update('r34-z', '{"status":"completed"}');
SELECT is(sandbox_persist.generation_run_find_latest_for_thread('thread-r34')->>'runId', 'r34-z',
    'R34.10 findLatestForThread with equal startedAt returns the earliest inserted run, whatever its status');
SELECT sandbox_persist.generation_run_update('r34-a', '{"status":"failed"}');
SELECT is(sandbox_persist.generation_run_find_latest_for_thread('thread-r34')->>'runId', 'r34-z',
    'R34.11 later status changes of other tied runs do not change the answer');

------------------------------------------------------------------------------
-- V: bad input. Fixture run v-gen.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT pg_temp.mk('v-gen', 'v-t', 100);
SELECT sandbox_persist.generation_run_update('v-gen', '{"result":{"r":1},"usage":{"u":1}}');

-- V1 malformed JSON text
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_create_or_resume('{"runId":')$$,
    '22P02', 'V1.1 malformed JSON input to generation_run_create_or_resume');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_update('v-gen', '{"status":"completed",}')$$,
    '22P02', 'V1.2 malformed JSON patch');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_update('v-gen', '{}', '["result"')$$,
    '22P02', 'V1.3 malformed JSON clear list');

-- V2 input or patch not an object
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_create_or_resume('[{"runId":"v-new"}]')$$,
    '22023', 'V2.1 createOrResume input given as a JSON array');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_update('v-gen', '[{"status":"completed"}]')$$,
    '22023', 'V2.2 update patch given as a JSON array');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_update('v-gen', 'null')$$,
    '22023', 'V2.3 update patch given as JSON null');

-- V3 wrong JSON types
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_create_or_resume('{"runId":"v-new","threadId":"v-t","activity":"image","provider":"p","model":"m","startedAt":"1000"}')$$,
    '22023', 'V3.1 startedAt "1000" (a string)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_create_or_resume('{"runId":"v-new","threadId":7,"activity":"image","provider":"p","model":"m","startedAt":1000}')$$,
    '22023', 'V3.2 threadId 7 (a number)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_create_or_resume('{"runId":"v-new","threadId":"v-t","activity":3,"provider":"p","model":"m","startedAt":1000}')$$,
    '22023', 'V3.3 activity 3 (a number)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_create_or_resume('{"runId":"v-new","threadId":"v-t","activity":"image","provider":{},"model":"m","startedAt":1000}')$$,
    '22023', 'V3.4 provider given as an object');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_create_or_resume('{"runId":"v-new","threadId":"v-t","activity":"image","provider":"p","model":false,"startedAt":1000}')$$,
    '22023', 'V3.5 model given as a boolean');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_update('v-gen', '{"artifacts":{"a":1}}')$$,
    '22023', 'V3.6 artifacts given as an object (must be an array)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_update('v-gen', '{"usage":[1]}')$$,
    '22023', 'V3.7 usage given as an array (must be an object)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_update('v-gen', '{"finishedAt":"2000"}')$$,
    '22023', 'V3.8 finishedAt "2000" (a string)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_update('v-gen', '{"error":"boom"}')$$,
    '22023', 'V3.9 error flattened to a string');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_update('v-gen', '{"error":{"message":"m","stack":"s"}}')$$,
    '22023', 'V3.10 error with an extra key', 'stack');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_update('v-gen', '{"status":"completed"}', '"result"')$$,
    '22023', 'V3.11 clear given as a string, not an array');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_update('v-gen', '{"status":"completed"}', '[1]')$$,
    '22023', 'V3.12 clear naming a key with a number');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_update('v-gen', '{}', '{"result":true}')$$,
    '22023', 'V3.13 clear given as an object');

-- V4 SQL NULL for a required argument
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_get(NULL)$$,
    '22004', 'V4.1 generation_run_get(NULL)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_create_or_resume(NULL)$$,
    '22004', 'V4.2 generation_run_create_or_resume(NULL)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_update(NULL, '{"status":"completed"}')$$,
    '22004', 'V4.3 generation_run_update(NULL, patch)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_update('v-gen', NULL, '["result"]')$$,
    '22004', 'V4.4 generation_run_update(id, NULL, clear)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_find_latest_for_thread(NULL)$$,
    '22004', 'V4.5 generation_run_find_latest_for_thread(NULL)');

-- V5 required key absent or JSON null
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_create_or_resume('{"runId":"v-new","activity":"image","provider":"p","model":"m","startedAt":1}')$$,
    '22004', 'V5.1 threadId absent');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_create_or_resume('{"runId":"v-new","threadId":null,"activity":"image","provider":"p","model":"m","startedAt":1}')$$,
    '22004', 'V5.2 threadId JSON null');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_create_or_resume('{"runId":"v-new","threadId":"v-t","provider":"p","model":"m","startedAt":1}')$$,
    '22004', 'V5.3 activity absent');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_create_or_resume('{"runId":"v-new","threadId":"v-t","activity":"image","model":"m","startedAt":1}')$$,
    '22004', 'V5.4 provider absent');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_create_or_resume('{"runId":"v-new","threadId":"v-t","activity":"image","provider":"p","model":null,"startedAt":1}')$$,
    '22004', 'V5.5 model JSON null');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_create_or_resume('{"runId":"v-new","threadId":"v-t","activity":"image","provider":"p","model":"m"}')$$,
    '22004', 'V5.6 startedAt absent');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_create_or_resume('{"threadId":"v-t","activity":"image","provider":"p","model":"m","startedAt":1}')$$,
    '22004', 'V5.7 runId absent');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_create_or_resume('{"runId":"v-new","threadId":"v-t","activity":"image","provider":"p","model":"m","startedAt":1,"status":null}')$$,
    '22004', 'V5.8 createOrResume status JSON null');

-- V6 unknown keys (the message names the key)
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_create_or_resume('{"runId":"v-new","threadId":"v-t","activity":"image","provider":"p","model":"m","startedAt":1,"started_at":1}')$$,
    '22023', 'V6.1 unknown createOrResume key started_at', 'started_at');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_update('v-gen', '{"status":"completed","finished_at":5}')$$,
    '22023', 'V6.2 unknown patch key finished_at', 'finished_at');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_update('v-gen', '{"threadId":"other"}')$$,
    '22023', 'V6.3 threadId is not a patch key', 'threadId');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_update('v-gen', '{"sandboxKey":"sk"}')$$,
    '22023', 'V6.4 sandboxKey (a run key) is not a generation run patch key', 'sandboxKey');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_update('v-gen', '{}', '["results"]')$$,
    '22023', 'V6.5 an unknown key name in clear', 'results');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_update('v-gen', '{}', '["startedAt"]')$$,
    '22023', 'V6.6 startedAt cannot be cleared (not a patch key)', 'startedAt');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_update('v-gen', '{"result":1}', '["result"]')$$,
    '22023', 'V6.7 a key both set in the patch and named in clear', 'result');

-- V7 unknown status
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_update('v-gen', '{"status":"canceled"}')$$,
    '22023', 'V7.1 patch status canceled');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_update('v-gen', '{"status":"done"}')$$,
    '22023', 'V7.2 patch status done');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_create_or_resume('{"runId":"v-new","threadId":"v-t","activity":"image","provider":"p","model":"m","startedAt":1,"status":"RUNNING"}')$$,
    '22023', 'V7.3 createOrResume status RUNNING (case matters)');

-- V8 status cannot be cleared
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_update('v-gen', '{"status":null,"usage":{"u":2}}')$$,
    '22004', 'V8.1 status: null in a generation run patch');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_update('v-gen', '{"usage":{"u":2}}', '["status"]')$$,
    '22004', 'V8.2 status named in clear');

-- V9 fractional integers
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_create_or_resume('{"runId":"v-new","threadId":"v-t","activity":"image","provider":"p","model":"m","startedAt":1000.5}')$$,
    '22023', 'V9.1 startedAt 1000.5');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_update('v-gen', '{"finishedAt":2000.25}')$$,
    '22023', 'V9.2 patch finishedAt 2000.25');

-- V10 integers beyond +/-(2^53 - 1)
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_create_or_resume('{"runId":"v-new","threadId":"v-t","activity":"image","provider":"p","model":"m","startedAt":9007199254740992}')$$,
    '22003', 'V10.1 startedAt 2^53');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_update('v-gen', '{"finishedAt":1e+21}')$$,
    '22003', 'V10.2 patch finishedAt 1e+21');

-- V12 NaN or Infinity arriving as JSON null for a required number
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_create_or_resume('{"runId":"v-new","threadId":"v-t","activity":"image","provider":"p","model":"m","startedAt":null}')$$,
    '22004', 'V12.1 startedAt JSON null');

-- V13 U+0000 in structural strings
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_create_or_resume('{"runId":"v-\u0000","threadId":"v-t","activity":"image","provider":"p","model":"m","startedAt":1}')$$,
    '22021', 'V13.1 runId containing \u0000');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_create_or_resume('{"runId":"v-new","threadId":"v-t","activity":"im\u0000age","provider":"p","model":"m","startedAt":1}')$$,
    '22021', 'V13.2 activity containing \u0000');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_get(E'v-gen\x00')$$,
    '22021', 'V13.3 a text id containing U+0000');
SELECT lives_ok($$SELECT sandbox_persist.generation_run_update('v-gen', '{"usage":{"k\u0000":"\u0000"},"artifacts":["\u0000"]}')$$,
    'V13.4 \u0000 inside usage and artifacts (opaque) is accepted');
SELECT is(sandbox_persist.generation_run_get('v-gen')::text,
    '{"runId":"v-gen","threadId":"v-t","activity":"image","provider":"openai","model":"gpt-image-1","status":"running","startedAt":100,"result":{"r":1},"artifacts":["\u0000"],"usage":{"k\u0000":"\u0000"}}',
    'V13.5 usage and artifacts with \u0000 read back byte for byte');

-- V14 lone surrogate escapes in structural strings
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_create_or_resume('{"runId":"\ud800","threadId":"v-t","activity":"image","provider":"p","model":"m","startedAt":1}')$$,
    '22021', 'V14.1 runId \ud800');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_create_or_resume('{"runId":"v-new","threadId":"v-t","activity":"image","provider":"p","model":"\udfff","startedAt":1}')$$,
    '22021', 'V14.2 model with a lone low surrogate');
SELECT lives_ok($$SELECT sandbox_persist.generation_run_update('v-gen', '{"result":{"s":"\ud800"}}')$$,
    'V14.3 a lone surrogate escape inside result is accepted');
SELECT ok(strpos(sandbox_persist.generation_run_get('v-gen')::text, '"result":{"s":"\ud800"}') > 0,
    'V14.4 the result with a lone surrogate escape reads back byte for byte');

-- V15 ids over 1024 bytes
SELECT * FROM pg_temp.rejects(format($$SELECT sandbox_persist.generation_run_create_or_resume('{"runId":"%s","threadId":"v-t","activity":"image","provider":"p","model":"m","startedAt":1}')$$, repeat('a', 1025)),
    '22001', 'V15.1 runId of 1025 bytes');

-- V16 empty ids
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_create_or_resume('{"runId":"","threadId":"v-t","activity":"image","provider":"p","model":"m","startedAt":1}')$$,
    '22023', 'V16.1 empty runId');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_create_or_resume('{"runId":"v-new","threadId":"","activity":"image","provider":"p","model":"m","startedAt":1}')$$,
    '22023', 'V16.2 empty threadId');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_update('', '{"status":"completed"}')$$,
    '22023', 'V16.3 generation_run_update('''', patch)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.generation_run_find_latest_for_thread('')$$,
    '22023', 'V16.4 generation_run_find_latest_for_thread('''')');
SELECT is(sandbox_persist.generation_run_create_or_resume('{"runId":"v-empty-strings","threadId":"v-t","activity":"","provider":"","model":"","startedAt":1}')->>'activity', '',
    'V16.5 (control) activity, provider and model are free strings: empty is accepted');

SELECT * FROM finish();
ROLLBACK;
