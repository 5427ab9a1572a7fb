/*
 * released_symbols.c
 *
 * C symbols that released upgrade scripts name but no current SQL function
 * uses (docs/architecture.md, "Stable C symbols"). CREATE FUNCTION checks
 * that a C function's symbol exists, so sandbox_persist--0.2.0--0.3.0.sql,
 * which points eight functions at *_v3 symbols, needs them to resolve for as
 * long as it ships; 0.3.0--0.4.0 points those functions back at the symbols
 * named after them. A 0.3.0 database has the current storage layout, so each
 * old symbol simply runs the current entry point (which checks the schema
 * itself). sandbox_persist--0.3.0--0.4.0.sql points attention_list() at
 * attention_list_v4; the entry point is attention_list since 0.5.0, whose
 * update script points the function back at it. Nothing else may call these,
 * and no new symbol is ever added here except when a released script's
 * symbol is renamed.
 *
 * Locking: that of the entry point each one runs.
 */
#include "postgres.h"

#include "fmgr.h"

/* The current entry points (checkpoints.c, fork.c, blobs.c, blob_uploads.c, maintenance.c). */
extern PGDLLEXPORT Datum checkpoint_append(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum checkpoint_delete_head(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum checkpoint_get(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum checkpoint_list(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum checkpoint_fork_from_checkpoint(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum blob_put(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum blob_get(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum blob_upload_commit(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum attention_list(PG_FUNCTION_ARGS);

/* One released symbol that runs the entry point named after its SQL function. */
#define SP_RELEASED_SYMBOL(old, current) \
	PG_FUNCTION_INFO_V1(old); \
	Datum old(PG_FUNCTION_ARGS) { return current(fcinfo); }

/* Named by sandbox_persist--0.2.0--0.3.0.sql. */
SP_RELEASED_SYMBOL(checkpoint_append_v3, checkpoint_append)
SP_RELEASED_SYMBOL(checkpoint_delete_head_v3, checkpoint_delete_head)
SP_RELEASED_SYMBOL(checkpoint_get_v3, checkpoint_get)
SP_RELEASED_SYMBOL(checkpoint_list_v3, checkpoint_list)
SP_RELEASED_SYMBOL(checkpoint_fork_from_checkpoint_v3, checkpoint_fork_from_checkpoint)
SP_RELEASED_SYMBOL(blob_put_v3, blob_put)
SP_RELEASED_SYMBOL(blob_get_v3, blob_get)
SP_RELEASED_SYMBOL(blob_upload_commit_v3, blob_upload_commit)

/* Named by sandbox_persist--0.3.0--0.4.0.sql. */
SP_RELEASED_SYMBOL(attention_list_v4, attention_list)
