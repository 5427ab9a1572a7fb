/*
 * vocabulary_dump.c
 *
 * Prints the C vocabulary of sandbox_persist (src/contract.h, the error
 * table and the HTTP status table of src/errors.h) as tab-separated lines,
 * for test/scripts/vocabulary.sh, which checks what names them, and
 * scripts/gen_error_codes.sh, which writes what restates the error table.
 * The compiler expands the macros, so both see exactly the strings the
 * extension is built with, however the headers compose them. A plain C
 * program: no PostgreSQL headers, no locking.
 */
#include <stddef.h>
#include <stdio.h>

/* errors.h declares printf-like helpers with PostgreSQL's attribute macro. */
#define pg_attribute_printf(f, a)

#include "contract.h"
#include "errors.h"

#define DUMP_ERROR(id, sqlstate, name, hint) printf("error\t%s\t%s\n", sqlstate, name);
#define DUMP_ERROR_HINT(id, sqlstate, name, hint) DumpHint(sqlstate, hint);
#define DUMP_HTTP_STATUS(sqlstate, status) printf("http_status\t%s\t%d\n", sqlstate, status);

/* Print the hint of one error ("" for none). */
static void
DumpHint(const char *sqlstate, const char *hint)
{
	printf("error_hint\t%s\t%s\n", sqlstate, hint == NULL ? "" : hint);
}

/* Print one list of strings under a kind. */
static void
DumpList(const char *kind, const char *const *words, int n)
{
	for (int i = 0; i < n; i++)
		printf("%s\t%s\n", kind, words[i]);
}

int
main(void)
{
	static const char *const run[] = {SP_RUN_STATUSES};
	static const char *const terminal[] = {SP_RUN_TERMINAL_STATUSES};
	static const char *const unfinished[] = {SP_RUN_UNFINISHED_STATUSES};
	static const char *const interrupt[] = {SP_INTERRUPT_STATUSES};
	static const char *const prefixes[] = {SP_CONTENT_FILES_PREFIX, SP_CONTENT_ARTIFACTS_PREFIX};
	static const char *const channels[] = {
		SP_CHANNEL_LOCK, SP_CHANNEL_EVENT_LOG, SP_CHANNEL_ATTENTION, SP_CHANNEL_REAPER,
		SP_CHANNEL_STREAM, SP_CHANNEL_SUBSCRIPTION
	};
	static const char *const lock_prefixes[] = {SP_LOCK_RUN_DRIVER_PREFIX, SP_LOCK_SANDBOX_PREFIX};

	DumpList("run_status", run, sizeof(run) / sizeof(run[0]));
	printf("run_statuses_text\t%s\n", SP_RUN_STATUSES_TEXT);
	DumpList("run_terminal", terminal, sizeof(terminal) / sizeof(terminal[0]));
	DumpList("run_unfinished", unfinished, sizeof(unfinished) / sizeof(unfinished[0]));
	printf("sql_run_running\t%s\n", SP_SQL_RUN_RUNNING);
	printf("sql_run_terminal\t%s\n", SP_SQL_RUN_TERMINAL);
	printf("sql_run_unfinished\t%s\n", SP_SQL_RUN_UNFINISHED);
	DumpList("interrupt_status", interrupt, sizeof(interrupt) / sizeof(interrupt[0]));
	DumpList("content_prefix", prefixes, 2);
	printf("content_hex_len\t%d\n", SP_CONTENT_HASH_HEX_LEN);
	printf("content_hex_digits\t%s\n", SP_CONTENT_HEX_DIGITS);
	printf("content_sql_regex\t%s\n", SP_SQL_CONTENT_KEY_REGEX);
	DumpList("channel", channels, sizeof(channels) / sizeof(channels[0]));
	DumpList("lock_prefix", lock_prefixes, 2);
	printf("chunk_run_error\t%s\n", SP_CHUNK_RUN_ERROR);
	printf("producer_lost_code\t%s\n", SP_PRODUCER_LOST_CODE);
	printf("notify_payload_max\t%d\n", SP_NOTIFY_PAYLOAD_MAX);
	SP_ERROR_TABLE(DUMP_ERROR)
	SP_ERROR_TABLE(DUMP_ERROR_HINT)
	SP_HTTP_STATUS_TABLE(DUMP_HTTP_STATUS)
	return 0;
}
