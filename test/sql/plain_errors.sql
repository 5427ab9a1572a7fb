--
-- plain_errors: the exact error text (message and DETAIL) of one
-- representative of each error class raised by the foundation stores
-- (instances, runs, messages). docs/contract/README.md §4.
--
\set VERBOSITY default

-- Fixture: one run with a stored driverEpoch, one instance, one transcript.
SELECT sandbox_persist.run_create_or_resume('{"runId":"pe-run","threadId":"pe-t","startedAt":1000}');
SELECT sandbox_persist.run_update('pe-run', '{"driverEpoch":3}');
SELECT sandbox_persist.instance_upsert('{"key":"pe-inst","provider":"fake","providerSandboxId":"sb-1","threadId":"pe-t","updatedAt":1}');
SELECT sandbox_persist.message_save_thread('pe-t', '[{"role":"user","content":"hi"}]');

-- 22P02: malformed JSON text (raised by json input, before the call).
SELECT sandbox_persist.run_create_or_resume('{"runId":"pe-new","threadId":');
\echo SQLSTATE :LAST_ERROR_SQLSTATE

-- 22023: a record that is not an object.
SELECT sandbox_persist.instance_upsert('["pe-inst"]');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- 22023: a field of the wrong JSON type.
SELECT sandbox_persist.run_create_or_resume('{"runId":"pe-new","threadId":7,"startedAt":1000}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- 22023: an unknown key (the message names it).
SELECT sandbox_persist.run_update('pe-run', '{"detached_since":5}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT sandbox_persist.instance_upsert('{"key":"pe-inst","provider":"fake","providerSandboxId":"sb-1","threadId":"pe-t","updatedAt":1,"createdAt":1}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- 22023: an unknown status.
SELECT sandbox_persist.run_update('pe-run', '{"status":"canceled"}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- 22023: a fractional integer.
SELECT sandbox_persist.run_create_or_resume('{"runId":"pe-new","threadId":"pe-t","startedAt":1000.5}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- 22023: an empty identifier (text argument and JSON field).
SELECT sandbox_persist.run_get('');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT sandbox_persist.run_create_or_resume('{"runId":"","threadId":"pe-t","startedAt":1}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- 22023: messages that are not an array.
SELECT sandbox_persist.message_save_thread('pe-t', '{"role":"user","content":"hi"}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- 22023: a run error of the wrong shape.
SELECT sandbox_persist.run_update('pe-run', '{"error":{"message":"x","stack":"y"}}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE

-- 22004: SQL NULL for a required argument.
SELECT sandbox_persist.run_get(NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT sandbox_persist.message_save_thread('pe-t', NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- 22004: a required key absent.
SELECT sandbox_persist.instance_upsert('{"key":"pe-inst","providerSandboxId":"sb-1","threadId":"pe-t","updatedAt":1}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- 22004: a required key that is JSON null.
SELECT sandbox_persist.run_create_or_resume('{"runId":"pe-new","threadId":null,"startedAt":1}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- 22004: status: null in a patch.
SELECT sandbox_persist.run_update('pe-run', '{"status":null}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE

-- 22003: an integer beyond +/-(2^53 - 1).
SELECT sandbox_persist.run_create_or_resume('{"runId":"pe-new","threadId":"pe-t","startedAt":9007199254740992}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- 22003: a negative driverEpoch.
SELECT sandbox_persist.run_update('pe-run', '{"driverEpoch":-1}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- 22003: caller_now_ms - ttl_ms overflows bigint.
SELECT sandbox_persist.run_list_reclaimable(-9223372036854775808, 1);
\echo SQLSTATE :LAST_ERROR_SQLSTATE

-- 22001: an identifier over 1024 UTF-8 bytes.
SELECT sandbox_persist.run_get(repeat('a', 1025));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT sandbox_persist.instance_upsert(format('{"key":"%s","provider":"fake","providerSandboxId":"sb-1","threadId":"pe-t","updatedAt":1}', repeat('é', 513))::json);
\echo SQLSTATE :LAST_ERROR_SQLSTATE

-- 22021: \u0000 or a lone surrogate in a structural id inside JSON.
SELECT sandbox_persist.run_create_or_resume('{"runId":"pe-\u0000","threadId":"pe-t","startedAt":1}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT sandbox_persist.instance_upsert('{"key":"pe-inst","provider":"fake","providerSandboxId":"sb-1","threadId":"\ud800","updatedAt":1}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE

-- SP201 RUN_EPOCH_NOT_INCREASING: errdetail is a sentence (the SQLSTATE names
-- the code), and the HINT says what the caller can do.
SELECT sandbox_persist.run_update('pe-run', '{"driverEpoch":3}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE

-- Nothing above changed the fixture.
SELECT sandbox_persist.run_get('pe-run');
SELECT sandbox_persist.instance_get('pe-inst');
SELECT sandbox_persist.message_load_thread('pe-t');
SELECT count(*) AS runs FROM sandbox_persist.runs;
