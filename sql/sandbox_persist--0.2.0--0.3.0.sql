-- sandbox_persist 0.2.0 -> 0.3.0. CREATE EXTENSION runs 0.1.0, 0.1.0--0.2.0
-- and then this script; ALTER EXTENSION sandbox_persist UPDATE runs it on a
-- 0.2.0 database (and after 0.1.0--0.2.0 on a 0.1.0 one).
-- What it changes is listed, section by section, below and in CHANGELOG.md.
\echo Use "ALTER EXTENSION sandbox_persist UPDATE" to load this file. \quit

-- Row limits: one rule for every function with a row-limit argument
-- (docs/architecture.md, "Row limits"). SQL NULL means the documented
-- default, exactly as if the argument were left out; zero asks for no rows; a
-- negative limit is 22023. maintain, instance_gc_candidates and blob_list
-- follow it in C; schedule_maintenance refused NULL (22023) and now schedules
-- maintain() with its own default, so that default is written in one place.
-- Only the body changes: signature, owner, grants and settings stay.
CREATE OR REPLACE FUNCTION schedule_maintenance(schedule text DEFAULT '* * * * *',
                                                max_rows integer DEFAULT 1000) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    command text := CASE WHEN max_rows IS NULL THEN 'SELECT sandbox_persist.maintain()'
                         ELSE format('SELECT sandbox_persist.maintain(%s)', max_rows) END;
BEGIN
    IF max_rows < 0 THEN
        RAISE EXCEPTION 'max_rows must not be negative'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('A value of %s was given.', max_rows);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_cron') THEN
        RAISE EXCEPTION 'pg_cron is not installed in database %', current_database()
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'pg_cron runs jobs only from the database named by cron.database_name.',
                  HINT = format('In that database run: SELECT cron.schedule_in_database(%L, %L, %L, %L);',
                                'sandbox_persist_maintenance', schedule, command, current_database());
    END IF;
    RETURN cron.schedule('sandbox_persist_maintenance', schedule, command);
END
$$;

-- Sections are added above this line, one per change, each opened by a
-- comment block that says what it changes and why.

-- Every upgrade script ends with the hardening (see the 0.1.0--0.2.0 header).
SELECT sandbox_persist._harden();
