/*
 * errors.c
 *
 * The error table of docs/contract/README.md §4.2 (SP_ERROR_TABLE in
 * errors.h: every contract error code, its SQLSTATE in the
 * implementation-defined class SP, its name and its hint) expanded into a
 * lookup array, and the errcode/errdetail helpers that use it. The SQLSTATE
 * is the key clients read; the detail carries no code name. error_codes()
 * shows the table in SQL. No locking.
 */
#include "postgres.h"

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/json.h"

#include "errors.h"

PG_FUNCTION_INFO_V1(error_codes);

typedef struct SpErrorEntry
{
	const char *sqlstate;
	const char *name;
	const char *hint;			/* what the caller can do, or NULL */
} SpErrorEntry;

#define SP_ERROR_ENTRY(id, sqlstate, name, hint) {sqlstate, name, hint},

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

/* errdetail() with the sentence, and errhint() with the code's hint if any. */
int
errdetail_sp(SpErrorCode code, const char *fmt,...)
{
	StringInfoData buf;
	va_list		args;

	initStringInfo(&buf);
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
	if (sp_errors[code].hint != NULL)
		errhint("%s", sp_errors[code].hint);
	return errdetail_internal("%s", buf.data);
}

typedef struct SpHttpStatus
{
	const char *sqlstate;
	int			status;
} SpHttpStatus;

#define SP_HTTP_ENTRY(sqlstate, status) {sqlstate, status},

/* Expanded from SP_HTTP_STATUS_TABLE: the HTTP status of a SQLSTATE. */
static const SpHttpStatus sp_http_statuses[] = {
	SP_HTTP_STATUS_TABLE(SP_HTTP_ENTRY)
};

/* The HTTP status of a SQLSTATE, or 0 when the table has none. */
static int
SpHttpStatusOf(const char *sqlstate)
{
	for (int i = 0; i < lengthof(sp_http_statuses); i++)
		if (strcmp(sp_http_statuses[i].sqlstate, sqlstate) == 0)
			return sp_http_statuses[i].status;
	return 0;
}

/*
 * error_codes(): the error table as a json array of {sqlstate, codeName,
 * hint, httpStatus?}, for clients other than the Node adapter and for the
 * tests, which map a SQLSTATE to its code name through it. httpStatus is
 * present where SP_HTTP_STATUS_TABLE has one.
 */
Datum
error_codes(PG_FUNCTION_ARGS)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '[');
	for (int i = 0; i < SP_ERROR_CODE_COUNT; i++)
	{
		if (i > 0)
			appendStringInfoChar(&buf, ',');
		appendStringInfoString(&buf, "{\"sqlstate\":");
		escape_json(&buf, sp_errors[i].sqlstate);
		appendStringInfoString(&buf, ",\"codeName\":");
		escape_json(&buf, sp_errors[i].name);
		appendStringInfoString(&buf, ",\"hint\":");
		if (sp_errors[i].hint != NULL)
			escape_json(&buf, sp_errors[i].hint);
		else
			appendStringInfoString(&buf, "null");
		if (SpHttpStatusOf(sp_errors[i].sqlstate) != 0)
			appendStringInfo(&buf, ",\"httpStatus\":%d", SpHttpStatusOf(sp_errors[i].sqlstate));
		appendStringInfoChar(&buf, '}');
	}
	appendStringInfoChar(&buf, ']');
	PG_RETURN_TEXT_P(cstring_to_text_with_len(buf.data, buf.len));
}
