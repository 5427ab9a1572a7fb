/*
 * admin.c
 *
 * Administration functions that are not store methods. _reset_for_tests
 * empties every table for the conformance suites; it takes the ACCESS
 * EXCLUSIVE locks of TRUNCATE, so it must not run beside live traffic, and it
 * is refused unless a superuser turned sandbox_persist.allow_test_reset on.
 */
#include "postgres.h"

#include "sandbox_persist.h"

PG_FUNCTION_INFO_V1(_reset_for_tests);

/* _reset_for_tests(): empty every table and restart its sequences. */
Datum
_reset_for_tests(PG_FUNCTION_ARGS)
{
	char	   *truncate;
	char	   *restart;

	if (!sp_allow_test_reset)
		sp_error(SP_TEST_RESET_NOT_ALLOWED,
				 ("_reset_for_tests is not allowed"),
				 "It runs only while sandbox_persist.allow_test_reset is on.");
	SPI_connect();
	/*
	 * Every relation registered for pg_dump is data: empty the tables and
	 * restart the sequences, whichever store added them.
	 */
	if (SPI_execute("SELECT 'TRUNCATE ' || string_agg(c.oid::regclass::text, ', ')"
					"   FILTER (WHERE c.relkind = 'r') || ' RESTART IDENTITY' AS truncate,"
					" string_agg(pg_catalog.format('ALTER SEQUENCE %s RESTART', c.oid::regclass), '; ')"
					"   FILTER (WHERE c.relkind = 'S') AS restart"
					" FROM pg_catalog.pg_extension e, unnest(e.extconfig) AS t(oid)"
					" JOIN pg_catalog.pg_class c ON c.oid = t.oid"
					" WHERE e.extname = 'sandbox_persist'",
					true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not list the sandbox_persist tables");
	truncate = SpGetText(0, SpColumn("truncate"));
	restart = SpGetText(0, SpColumn("restart"));
	if (SPI_execute(truncate, false, 0) != SPI_OK_UTILITY ||
		(restart != NULL && SPI_execute(restart, false, 0) != SPI_OK_UTILITY))
		elog(ERROR, "could not reset the sandbox_persist tables");
	SPI_finish();
	PG_RETURN_VOID();
}
