/*
 * validate.c
 *
 * Check* helpers for the plain stores (instances, runs, messages and those
 * added later): each reads one argument or JSON field and raises the precise
 * standard SQLSTATE of docs/contract/README.md §4.3 when it is wrong. Checkpoint
 * inputs have their own rules and codes (checkpoints.c). No locking.
 */
#include "postgres.h"

#include "utils/builtins.h"

#include "sandbox_persist.h"

/* Raise 22004 for a missing required value. */
static void
CheckRaiseNull(const char *field)
{
	ereport(ERROR,
			(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
			 errmsg("%s must not be null", field),
			 errdetail("The value is required.")));
}

/* Raise 22023 for a JSON value of the wrong type. */
static void
CheckRaiseType(const SpJson *node, const char *field, const char *expected)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("%s must be %s", field, expected),
			 errdetail("A JSON %s was given.", SpJsonKindName(node->kind))));
}

/* Apply the identifier rules shared by text arguments and JSON ids. */
static void
CheckIdBytes(const char *s, int len, const char *field, int maxbytes)
{
	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", field),
				 errdetail("Identifiers are non-empty strings.")));
	if (len > maxbytes)
		ereport(ERROR,
				(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
				 errmsg("%s is too long", field),
				 errdetail("It has %d UTF-8 bytes; the limit is %d.", len, maxbytes)));
}

/* Read a required identifier argument of type text. */
char *
CheckIdArg(FunctionCallInfo fcinfo, int argno, const char *name, int maxbytes)
{
	text	   *t;

	if (PG_ARGISNULL(argno))
		CheckRaiseNull(name);
	t = PG_GETARG_TEXT_PP(argno);
	CheckIdBytes(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), name, maxbytes);
	return text_to_cstring(t);
}

/* True when s has the textual form of a UUID (8-4-4-4-12 hex digits). */
bool
SpIsUuid(const char *s)
{
	if (strlen(s) != 36)
		return false;
	for (int i = 0; i < 36; i++)
	{
		bool		dash = (i == 8 || i == 13 || i == 18 || i == 23);

		if (dash ? s[i] != '-' : !isxdigit((unsigned char) s[i]))
			return false;
	}
	return true;
}

/*
 * True when key is prefix followed by exactly SP_CONTENT_HASH_HEX_LEN digits
 * of SP_CONTENT_HEX_DIGITS: the content-address rule of contract.h, the one
 * implementation that blobs, checkpoint entries and artifacts share.
 */
bool
SpIsContentKey(const char *key, const char *prefix)
{
	size_t		plen = strlen(prefix);

	if (strncmp(key, prefix, plen) != 0 || strlen(key) != plen + SP_CONTENT_HASH_HEX_LEN)
		return false;
	for (const char *p = key + plen; *p; p++)
		if (strchr(SP_CONTENT_HEX_DIGITS, *p) == NULL)
			return false;
	return true;
}

/* Read a required json argument into a tree. */
SpJson *
CheckJsonArg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		CheckRaiseNull(name);
	return SpJsonParseText(PG_GETARG_TEXT_PP(argno));
}

/* Read a required json argument that must be an object. */
SpJson *
CheckJsonObjectArg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	SpJson	   *node = CheckJsonArg(fcinfo, argno, name);

	if (node->kind != SPJ_OBJECT)
		CheckRaiseType(node, name, "a JSON object");
	return node;
}

/* Decode a string node, refusing U+0000 and unpaired surrogates with 22021. */
static char *
CheckDecode(const SpJson *node, const char *field, int *len)
{
	char	   *s;
	SpStringStatus st = SpJsonDecodeString(node->raw, node->rawlen, &s, len);

	if (st != SPS_OK)
		ereport(ERROR,
				(errcode(ERRCODE_CHARACTER_NOT_IN_REPERTOIRE),
				 errmsg("%s contains %s", field,
						st == SPS_NUL ? "U+0000" : "an unpaired surrogate"),
				 errdetail("Structural strings must be well-formed text without U+0000.")));
	return s;
}

/* Read a required identifier field of a JSON record. */
char *
CheckIdJson(const SpJson *node, const char *field, int maxbytes)
{
	char	   *s;
	int			len;

	if (node == NULL || node->kind == SPJ_NULL)
		CheckRaiseNull(field);
	if (node->kind != SPJ_STRING)
		CheckRaiseType(node, field, "a string");
	s = CheckDecode(node, field, &len);
	CheckIdBytes(s, len, field, maxbytes);
	return s;
}

/* Read a required string field (any content but U+0000 and lone surrogates). */
char *
CheckStringJson(const SpJson *node, const char *field)
{
	int			len;

	if (node == NULL || node->kind == SPJ_NULL)
		CheckRaiseNull(field);
	if (node->kind != SPJ_STRING)
		CheckRaiseType(node, field, "a string");
	return CheckDecode(node, field, &len);
}

/* Read an optional string field: NULL when absent or JSON null. */
char *
CheckOptStringJson(const SpJson *node, const char *field)
{
	if (node == NULL || node->kind == SPJ_NULL)
		return NULL;
	return CheckStringJson(node, field);
}

/*
 * Read an optional string field that is stored in an indexed column: NULL
 * when absent or JSON null, 22001 past maxbytes UTF-8 bytes (an index row
 * has a size limit, and the limit must be ours, not the index's).
 */
char *
CheckOptStringMaxJson(const SpJson *node, const char *field, int maxbytes)
{
	char	   *s;
	int			len;

	if (node == NULL || node->kind == SPJ_NULL)
		return NULL;
	if (node->kind != SPJ_STRING)
		CheckRaiseType(node, field, "a string");
	s = CheckDecode(node, field, &len);
	if (len > maxbytes)
		ereport(ERROR,
				(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
				 errmsg("%s is too long", field),
				 errdetail("It has %d UTF-8 bytes; the limit is %d.", len, maxbytes)));
	return s;
}

/* Read a required integral number within +/-(2^53 - 1) and >= minval. */
int64
CheckIntJson(const SpJson *node, const char *field, int64 minval)
{
	int64		v = 0;

	if (node == NULL || node->kind == SPJ_NULL)
		CheckRaiseNull(field);
	if (node->kind != SPJ_NUMBER)
		CheckRaiseType(node, field, "a number");
	switch (SpJsonGetInt(node, &v))
	{
		case SPI_NOT_INTEGRAL:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s must be an integer", field),
					 errdetail("The value %.*s has a fractional part; it is never rounded.",
							   node->rawlen, node->raw)));
			break;
		case SPI_OUT_OF_RANGE:
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("%s is out of range", field),
					 errdetail("The value %.*s is beyond +/-(2^53 - 1).",
							   node->rawlen, node->raw)));
			break;
		case SPI_OK:
			break;
	}
	if (v < minval)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("%s is out of range", field),
				 errdetail("The value " INT64_FORMAT " is below " INT64_FORMAT ".", v, minval)));
	return v;
}

/* Read a required run status: one of the five RunStatus values. */
const char *
CheckRunStatusJson(const SpJson *node, const char *field)
{
	static const char *const statuses[] = {SP_RUN_STATUSES};
	char	   *s = CheckStringJson(node, field);

	for (int i = 0; i < lengthof(statuses); i++)
		if (strcmp(s, statuses[i]) == 0)
			return statuses[i];
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown run status \"%s\"", s),
			 errdetail("A run status is one of " SP_RUN_STATUSES_TEXT ".")));
	return NULL;				/* keep the compiler quiet */
}

/* Check a run error: an object {message: string, code?: string} and nothing else. */
void
CheckRunErrorJson(const SpJson *node, const char *field)
{
	static const char *const names[] = {"message", "code"};
	SpJson	   *m[2];

	if (node->kind != SPJ_OBJECT)
		CheckRaiseType(node, field, "an object {message, code?}");
	SpJsonMembers(node, names, 2, m, field, false, ERRCODE_INVALID_PARAMETER_VALUE, -1);
	if (m[0] == NULL || m[0]->kind != SPJ_STRING)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s.message must be a string", field),
				 errdetail("A run error is {message: string, code?: string}.")));
	if (m[1] != NULL && m[1]->kind != SPJ_STRING)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s.code must be a string", field),
				 errdetail("A run error is {message: string, code?: string}.")));
}

/* Check that a field holds a JSON object (its content stays opaque). */
void
CheckObjectJson(const SpJson *node, const char *field)
{
	if (node->kind != SPJ_OBJECT)
		CheckRaiseType(node, field, "an object");
}

/* Check that a required value is present and not JSON null (22004). */
void
CheckRequiredJson(const SpJson *node, const char *field)
{
	if (node == NULL || node->kind == SPJ_NULL)
		CheckRaiseNull(field);
}

/* Check that a field holds a JSON array (its elements stay opaque). */
void
CheckArrayJson(const SpJson *node, const char *field)
{
	if (node->kind != SPJ_ARRAY)
		CheckRaiseType(node, field, "an array");
}

/* Read a required json argument that must be an array. */
SpJson *
CheckJsonArrayArg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	SpJson	   *node = CheckJsonArg(fcinfo, argno, name);

	if (node->kind != SPJ_ARRAY)
		CheckRaiseType(node, name, "a JSON array");
	return node;
}

/* Read a required finite number; fractions are allowed (artifact createdAt). */
double
CheckNumberJson(const SpJson *node, const char *field)
{
	double		v = 0;

	if (node == NULL || node->kind == SPJ_NULL)
		CheckRaiseNull(field);
	if (node->kind != SPJ_NUMBER)
		CheckRaiseType(node, field, "a number");
	if (!SpJsonGetDouble(node, &v))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("%s is out of range", field),
				 errdetail("The value %.*s is not a finite double precision number.",
						   node->rawlen, node->raw)));
	return v;
}

/*
 * Patch helpers: each appends one column value of a key-presence-aware patch
 * to args. An absent key appends SQL NULL (the statement's presence mask
 * leaves the column alone); JSON null appends SQL NULL too, which clears it.
 */

/* A patch's status: absent -> NULL; JSON null -> 22004 (a status is never cleared). */
void
PatchArgStatus(SpArgs *args, const SpJson *node, const char *what)
{
	if (node != NULL && node->kind == SPJ_NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("status cannot be cleared"),
				 errdetail("A %s always has a status; omit the key to leave it unchanged.", what)));
	SpArgText(args, node ? CheckRunStatusJson(node, "status") : NULL);
}

/* A patch's safe integer field. */
void
PatchArgInt(SpArgs *args, const SpJson *node, const char *field, int64 minval)
{
	if (node == NULL || node->kind == SPJ_NULL)
		SpArgNull(args);
	else
		SpArgInt64(args, CheckIntJson(node, field, minval));
}

/* A patch's opaque JSON field: shape-checked by check, then stored verbatim. */
void
PatchArgJson(SpArgs *args, const SpJson *node, const char *field, SpJsonCheck check)
{
	if (node == NULL || node->kind == SPJ_NULL)
		SpArgNull(args);
	else
	{
		check(node, field);
		SpArgTextLen(args, node->raw, node->rawlen);
	}
}
