-- pgTAP: the settings (docs/contract/README.md §5): each has the documented
-- default and the unit it is defined with, so "2min", "1h" or "256kB" mean
-- what they say. The defaults are named once in src/sandbox_persist.c; this
-- suite pins them to the contract's table. Cases ST1 (defaults and units),
-- ST2 (a value with a unit is converted to the setting's unit).
-- Run with: pg_prove -d <db> test/pgtap/settings.sql
BEGIN;
SELECT plan(7);
LOAD 'sandbox_persist';

-- name, unit (pg_settings.unit), boot value in that unit: README.md §5.
CREATE TEMP TABLE documented (name text, unit text, boot text) ON COMMIT DROP;
INSERT INTO documented VALUES
    ('allow_client_clock', NULL, 'off'),
    ('allow_test_reset', NULL, 'off'),
    ('test_timeline', NULL, '0'),                  -- 0.4.0: the server's timeline
    ('writer_lease_duration', 'ms', '120000'),     -- 120s
    ('blob_chunk_size', 'B', '262144'),            -- 256kB
    ('blob_inline_max', 'B', '262144'),            -- 256kB (0.3.0)
    ('zstd_level', NULL, '1'),                     -- 3 before 0.3.0
    ('blob_codec', NULL, 'zstd'),                  -- 0.4.0, issue 22 item 3
    ('blob_recompress', NULL, 'off'),              -- 0.4.0, maintenance action A12
    ('blob_max_read', 'B', '535822336'),           -- 511MB, the cap (issue 9 defect 10)
    ('blob_gc_grace', 's', '86400'),               -- 24h
    ('upload_expiry', 's', '86400'),               -- 24h
    ('lock_purge_after', 's', '3600'),             -- 1h
    ('event_log_close_grace', 's', '600'),         -- 10min
    ('event_log_idle_close', 's', '600'),          -- 10min
    ('event_log_retention', 's', '2592000'),       -- 30d
    ('event_log_reopen_on_append', NULL, 'off'),
    ('run_retention', 's', '0'),
    ('reaper_ttl', 's', '0'),
    ('reaper_sweep_interval', 's', '0'),
    ('watchdog_idle', 's', '600'),                 -- 10min
    ('lease_row_wait', 'ms', '5000'),              -- 5s (0.4.0, issue 20 item 8)
    ('maintenance_overdue_after', 's', '0'),       -- derive from the schedule (0.4.0, issue 20 item 2)
    ('maintenance_time_budget', 'ms', '5000');     -- 5s (0.5.0, issue 31 item 2)

SELECT is((SELECT string_agg(format('%s %s %s', s.name, coalesce(s.unit, '-'), s.boot_val), E'\n' ORDER BY s.name)
             FROM pg_settings s WHERE s.name LIKE 'sandbox_persist.%'),
          (SELECT string_agg(format('sandbox_persist.%s %s %s', d.name, coalesce(d.unit, '-'), d.boot), E'\n'
                             ORDER BY 'sandbox_persist.' || d.name)
             FROM documented d),
    'ST1.1 every setting has the documented default and unit, and there are no others');
SET LOCAL sandbox_persist.writer_lease_duration = '2min';
SELECT is(current_setting('sandbox_persist.writer_lease_duration'), '2min',
    'ST2.1 writer_lease_duration takes a time with a unit');
SELECT is((SELECT setting FROM pg_settings WHERE name = 'sandbox_persist.writer_lease_duration'), '120000',
    'ST2.2 and stores it in milliseconds');

SET LOCAL sandbox_persist.watchdog_idle = '1h';
SELECT is((SELECT setting FROM pg_settings WHERE name = 'sandbox_persist.watchdog_idle'), '3600',
    'ST2.3 a seconds setting (watchdog_idle) stores 1h as 3600 seconds');
SELECT throws_ok($$SET LOCAL sandbox_persist.watchdog_idle = '500ms'$$, '22023', NULL,
    'ST2.4 and refuses a value that rounds below its minimum of 1 s');
SET LOCAL sandbox_persist.blob_chunk_size = '64kB';
SELECT is((SELECT setting FROM pg_settings WHERE name = 'sandbox_persist.blob_chunk_size'), '65536',
    'ST2.5 a byte setting (blob_chunk_size) stores 64kB as 65536 bytes');
SELECT ok(NOT EXISTS (SELECT 1 FROM pg_settings WHERE name LIKE 'sandbox_persist.%' AND context <> 'superuser'),
    'ST1.2 every setting is superuser-only (PGC_SUSET)');

SELECT * FROM finish();
ROLLBACK;
