/*
 * errors.c
 *
 * The error table of docs/contract/README.md §4.2 (SP_ERROR_TABLE in
 * errors.h: every contract error code, its SQLSTATE in the
 * implementation-defined class SP, and its name) expanded into a lookup
 * array, and the errcode/errdetail helpers that use it. No locking.
 */
#include "postgres.h"

#include "lib/stringinfo.h"

#include "errors.h"

typedef struct SpErrorEntry
{
	const char *sqlstate;
	const char *name;
} SpErrorEntry;

#define SP_ERROR_ENTRY(id, sqlstate, name) {sqlstate, name},

/* Indexed by SpErrorCode: both are expanded from SP_ERROR_TABLE. */
static const SpErrorEntry sp_errors[SP_ERROR_CODE_COUNT] = {
	SP_ERROR_TABLE(SP_ERROR_ENTRY)
};

/* SQLSTATE of a contract code, encoded for errcode(). */
int
SpSqlState(SpErrorCode code)
{
	const char *s = sp_errors[code].sqlstate;

	return MAKE_SQLSTATE(s[0], s[1], s[2], s[3], s[4]);
}

/* errcode() for a contract code. */
int
errcode_sp(SpErrorCode code)
{
	return errcode(SpSqlState(code));
}

/* errdetail() whose text is "<CODE_NAME>: <sentence>". */
int
errdetail_sp(SpErrorCode code, const char *fmt,...)
{
	StringInfoData buf;
	va_list		args;

	initStringInfo(&buf);
	appendStringInfo(&buf, "%s: ", sp_errors[code].name);
	for (;;)
	{
		int			needed;

		va_start(args, fmt);
		needed = appendStringInfoVA(&buf, fmt, args);
		va_end(args);
		if (needed == 0)
			break;
		enlargeStringInfo(&buf, needed);
	}
	return errdetail_internal("%s", buf.data);
}
