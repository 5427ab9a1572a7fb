/*
 * messages.c
 *
 * The message store (docs/contract/messages.md): one transcript per
 * thread, replaced whole and kept as the exact JSON text received, so tool
 * output with \u0000 or escaped lone surrogates round-trips byte for byte.
 * Locking: per-row atomicity of INSERT ... ON CONFLICT only.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "sandbox_persist.h"

PG_FUNCTION_INFO_V1(message_load_thread);
PG_FUNCTION_INFO_V1(message_save_thread);

static SpQuery message_select = {
	"SELECT transcript::text FROM sandbox_persist.messages WHERE thread_id = $1",
	1, {TEXTOID}
};

static SpQuery message_upsert = {
	"INSERT INTO sandbox_persist.messages (thread_id, transcript, updated_at)"
	" VALUES ($1, $2, $3)"
	" ON CONFLICT (thread_id) DO UPDATE SET transcript = EXCLUDED.transcript,"
	" updated_at = EXCLUDED.updated_at",
	3, {TEXTOID, JSONOID, INT8OID}
};

/* message_load_thread(thread_id text) -> json: the transcript, [] when never saved. */
Datum
message_load_thread(PG_FUNCTION_ARGS)
{
	char	   *thread_id = SpCheckIdArg(fcinfo, 0, "thread_id", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	MemoryContext outer = CurrentMemoryContext;
	text	   *result = NULL;
	SpArgs		args;

	SPI_connect();
	SpArgsInit(&args);
	SpArgText(&args, thread_id);
	if (SpExec(&message_select, &args, true, 1) == 1)
	{
		MemoryContext spi = MemoryContextSwitchTo(outer);

		result = cstring_to_text(SpGetText(0, 1));
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();
	PG_RETURN_TEXT_P(result != NULL ? result : cstring_to_text("[]"));
}

/* message_save_thread(thread_id text, messages json): replace the whole transcript. */
Datum
message_save_thread(PG_FUNCTION_ARGS)
{
	char	   *thread_id = SpCheckIdArg(fcinfo, 0, "thread_id", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	text	   *messages;
	SpJson	   *root;
	SpArgs		args;

	root = SpCheckJsonArg(fcinfo, 1, "messages", SP_CHECK_PLAIN);
	if (root->kind != SPJ_ARRAY)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("messages must be a JSON array"),
				 errdetail("A JSON %s was given.", SpJsonKindName(root->kind))));
	messages = PG_GETARG_TEXT_PP(1);

	SpArgsInit(&args);
	SpArgText(&args, thread_id);
	SpArgDatum(&args, PointerGetDatum(messages));
	SpArgInt64(&args, SpNowMs(fcinfo, -1));
	SPI_connect();
	SpExec(&message_upsert, &args, false, 0);
	SPI_finish();
	PG_RETURN_VOID();
}
