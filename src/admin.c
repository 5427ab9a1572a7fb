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
	if (!sp_allow_test_reset)
		sp_error(SP_TEST_RESET_NOT_ALLOWED,
				 ("_reset_for_tests is not allowed"),
				 "It runs only while sandbox_persist.allow_test_reset is on.");
	SPI_connect();
	if (SPI_execute("TRUNCATE sandbox_persist.instances, sandbox_persist.runs,"
					" sandbox_persist.messages, sandbox_persist.checkpoint_threads,"
					" sandbox_persist.checkpoint_blob_refs, sandbox_persist.checkpoints,"
					" sandbox_persist.conversation_messages RESTART IDENTITY",
					false, 0) < 0)
		elog(ERROR, "could not truncate the sandbox_persist tables");
	SPI_finish();
	PG_RETURN_VOID();
}
