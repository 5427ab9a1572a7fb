/*
 * metadata.c
 *
 * The metadata store (docs/contract/chat-stores.md §2): any JSON value except
 * null under a composite key (namespace, key) whose two parts are separate
 * columns, so ('a:b', 'c') and ('a', 'b:c') never collide. Values are stored
 * as the exact JSON text received and returned verbatim.
 *
 * Locking: per-row atomicity of INSERT ... ON CONFLICT only (last writer
 * wins); delete is a single-row DELETE.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "sandbox_persist.h"

PG_FUNCTION_INFO_V1(metadata_get);
PG_FUNCTION_INFO_V1(metadata_set);
PG_FUNCTION_INFO_V1(metadata_delete);

static SpQuery metadata_select = {
	"SELECT value::text FROM sandbox_persist.metadata WHERE namespace = $1 AND meta_key = $2",
	2, {TEXTOID, TEXTOID}
};

static SpQuery metadata_upsert = {
	"INSERT INTO sandbox_persist.metadata (namespace, meta_key, value) VALUES ($1, $2, $3)"
	" ON CONFLICT (namespace, meta_key) DO UPDATE SET value = EXCLUDED.value",
	3, {TEXTOID, TEXTOID, JSONOID}
};

static SpQuery metadata_delete_stmt = {
	"DELETE FROM sandbox_persist.metadata WHERE namespace = $1 AND meta_key = $2",
	2, {TEXTOID, TEXTOID}
};

/* Raise 22004 for a nullish metadata value. */
static void
MetadataRaiseNull(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
			 errmsg("metadata value must not be null"),
			 errdetail("A null metadata value is indistinguishable from a missing entry; use delete to remove it.")));
}

/* metadata_get(namespace text, meta_key text) -> json: the stored value, or NULL. */
Datum
metadata_get(PG_FUNCTION_ARGS)
{
	char	   *ns = SpCheckIdArg(fcinfo, 0, "namespace", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	char	   *key = SpCheckIdArg(fcinfo, 1, "meta_key", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	MemoryContext outer = CurrentMemoryContext;
	text	   *result = NULL;
	SpArgs		args;

	SPI_connect();
	SpArgsInit(&args);
	SpArgText(&args, ns);
	SpArgText(&args, key);
	if (SpExec(&metadata_select, &args, true, 1) == 1)
	{
		MemoryContext spi = MemoryContextSwitchTo(outer);

		result = cstring_to_text(SpGetText(0, 1));
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();
	if (result == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(result);
}

/* metadata_set(namespace text, meta_key text, value json): insert or overwrite. */
Datum
metadata_set(PG_FUNCTION_ARGS)
{
	char	   *ns = SpCheckIdArg(fcinfo, 0, "namespace", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	char	   *key = SpCheckIdArg(fcinfo, 1, "meta_key", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	text	   *value;
	SpArgs		args;

	if (PG_ARGISNULL(2))
		MetadataRaiseNull();
	value = PG_GETARG_TEXT_PP(2);
	if (SpJsonParseText(value)->kind == SPJ_NULL)
		MetadataRaiseNull();
	/* the argument's whole text, surrounding whitespace included */
	SpArgsInit(&args);
	SpArgText(&args, ns);
	SpArgText(&args, key);
	SpArgDatum(&args, PointerGetDatum(value));

	SPI_connect();
	SpExec(&metadata_upsert, &args, false, 0);
	SPI_finish();
	PG_RETURN_VOID();
}

/* metadata_delete(namespace text, meta_key text) -> boolean: true when an entry was removed. */
Datum
metadata_delete(PG_FUNCTION_ARGS)
{
	char	   *ns = SpCheckIdArg(fcinfo, 0, "namespace", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	char	   *key = SpCheckIdArg(fcinfo, 1, "meta_key", SP_ID_MAX_BYTES, SP_CHECK_PLAIN);
	SpArgs		args;
	int			n;

	SPI_connect();
	SpArgsInit(&args);
	SpArgText(&args, ns);
	SpArgText(&args, key);
	n = SpExec(&metadata_delete_stmt, &args, false, 0);
	SPI_finish();
	PG_RETURN_BOOL(n > 0);
}
