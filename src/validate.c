/*
 * validate.c
 *
 * The one validator family. Each Sp* check reads one argument or JSON field
 * and, when it is wrong, describes the problem (SpProblem) to an error
 * policy, which alone decides the SQLSTATE and the wording:
 *
 *   SP_CHECK_PLAIN       the standard SQLSTATEs of docs/contract/README.md §4.3
 *                        (plain stores: instances, runs, messages, ...);
 *   SP_CHECK_CKPT_ID     SP007 INVALID_ID (checkpoint identifiers, §4.2);
 *   SP_CHECK_CKPT_ENTRY  SP008 INVALID_ENTRY (other checkpoint input).
 *
 * So the decoding, emptiness and length rules exist once, whatever the code a
 * store must raise. The Check* and Ckpt* names callers use are thin inline
 * wrappers (sandbox_persist.h, checkpoints.h) that fix the policy. The patch
 * helpers at the end turn checked patch fields into statement arguments.
 * No locking.
 */
#include "postgres.h"

#include "utils/builtins.h"

#include "sandbox_persist.h"

/* What is wrong with one input value; a policy turns it into an error. */
typedef enum SpProblemKind
{
	SPP_SQL_NULL,				/* a SQL NULL argument */
	SPP_ABSENT,					/* a JSON member absent (node NULL) or JSON null */
	SPP_WRONG_TYPE,				/* a JSON value of another kind */
	SPP_BAD_TEXT,				/* U+0000 or an unpaired surrogate */
	SPP_EMPTY,					/* an empty identifier */
	SPP_TOO_LONG,				/* more UTF-8 bytes than allowed */
	SPP_NOT_FINITE				/* a number beyond double precision */
} SpProblemKind;

typedef struct SpProblem
{
	SpProblemKind kind;
	const char *field;
	const char *expected;		/* SPP_ABSENT, SPP_WRONG_TYPE: "a string", ... */
	const SpJson *node;			/* the value; NULL when absent */
	SpStringStatus text;		/* SPP_BAD_TEXT */
	int			len;			/* SPP_TOO_LONG */
	int			maxbytes;		/* SPP_TOO_LONG */
	const char *detail;			/* SPP_SQL_NULL: the plain detail, NULL for the usual one */
} SpProblem;

/* The JSON kind of a problem's value, "absent" when there is none. */
static const char *
SpProblemKindName(const SpProblem *p)
{
	return p->node == NULL ? "absent" : SpJsonKindName(p->node->kind);
}

/* The name of a decoding problem, for messages. */
static const char *
SpBadTextName(SpStringStatus st)
{
	return st == SPS_NUL ? "U+0000" : "an unpaired surrogate";
}

/* SP_CHECK_PLAIN: the standard SQLSTATE of each problem (README.md §4.3). */
static void
SpRaisePlain(const SpProblem *p)
{
	switch (p->kind)
	{
		case SPP_SQL_NULL:
		case SPP_ABSENT:
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s must not be null", p->field),
					 errdetail("%s", p->detail ? p->detail : "The value is required.")));
			break;
		case SPP_WRONG_TYPE:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s must be %s", p->field, p->expected),
					 errdetail("A JSON %s was given.", SpProblemKindName(p))));
			break;
		case SPP_BAD_TEXT:
			ereport(ERROR,
					(errcode(ERRCODE_CHARACTER_NOT_IN_REPERTOIRE),
					 errmsg("%s contains %s", p->field, SpBadTextName(p->text)),
					 errdetail("Structural strings must be well-formed text without U+0000.")));
			break;
		case SPP_EMPTY:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s must not be empty", p->field),
					 errdetail("Identifiers are non-empty strings.")));
			break;
		case SPP_TOO_LONG:
			ereport(ERROR,
					(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
					 errmsg("%s is too long", p->field),
					 errdetail("It has %d UTF-8 bytes; the limit is %d.", p->len, p->maxbytes)));
			break;
		case SPP_NOT_FINITE:
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("%s is out of range", p->field),
					 errdetail("The value %.*s is not a finite double precision number.",
							   p->node->rawlen, p->node->raw)));
			break;
	}
}

/* The problem as the predicate of a sentence about the field ("must not be empty"). */
static const char *
SpProblemPhrase(const SpProblem *p)
{
	switch (p->kind)
	{
		case SPP_SQL_NULL:
			return "must not be null";
		case SPP_ABSENT:
		case SPP_WRONG_TYPE:
			return psprintf("must be %s, not %s", p->expected, SpProblemKindName(p));
		case SPP_BAD_TEXT:
			return psprintf("contains %s", SpBadTextName(p->text));
		case SPP_EMPTY:
			return "must not be empty";
		case SPP_TOO_LONG:
			return psprintf("has %d UTF-8 bytes; the limit is %d", p->len, p->maxbytes);
		case SPP_NOT_FINITE:
			return "must be a finite number";
	}
	return "is invalid";		/* keep the compiler quiet */
}

/*
 * SP_CHECK_CKPT_ID and SP_CHECK_CKPT_ENTRY: inside checkpoint functions every
 * problem is one contract code (README.md §4.2), never a 22xxx one.
 */
static void
SpRaiseCheckpoint(const SpProblem *p, bool identifier)
{
	if (identifier)
		sp_error(SP_SNAPSHOT_INVALID_ID,
				 ("invalid checkpoint identifier %s", p->field),
				 "%s %s.", p->field, SpProblemPhrase(p));
	/* a decoding problem of an entry does not say which of the two it is */
	if (p->kind == SPP_BAD_TEXT)
		sp_error(SP_SNAPSHOT_INVALID_ENTRY,
				 ("invalid checkpoint %s", p->field),
				 "%s contains U+0000 or an unpaired surrogate.", p->field);
	sp_error(SP_SNAPSHOT_INVALID_ENTRY,
			 ("invalid checkpoint %s", p->field),
			 "%s %s.", p->field, SpProblemPhrase(p));
}

static SP_NORETURN void SpCheckFail(SpCheckPolicy policy, const SpProblem *p);

/* Raise the error `policy` gives for problem p. */
static void
SpCheckFail(SpCheckPolicy policy, const SpProblem *p)
{
	switch (policy)
	{
		case SP_CHECK_PLAIN:
			SpRaisePlain(p);
			break;
		case SP_CHECK_CKPT_ID:
		case SP_CHECK_CKPT_ENTRY:
			SpRaiseCheckpoint(p, policy == SP_CHECK_CKPT_ID);
			break;
	}
	elog(ERROR, "unknown validation policy %d", (int) policy);
}

/* Raise for a JSON value that is absent or JSON null where one is required. */
static void
SpCheckFailAbsent(SpCheckPolicy policy, const SpJson *node, const char *field,
				  const char *expected)
{
	SpCheckFail(policy, &(SpProblem) {
		.kind = SPP_ABSENT, .field = field, .expected = expected, .node = node
	});
}

/* Raise for a JSON value of the wrong kind. */
static void
SpCheckFailType(SpCheckPolicy policy, const SpJson *node, const char *field,
				const char *expected)
{
	SpCheckFail(policy, &(SpProblem) {
		.kind = SPP_WRONG_TYPE, .field = field, .expected = expected, .node = node
	});
}

/* Refuse a SQL NULL argument: 22004 "<name> must not be null" (detail NULL: the usual one). */
void
SpCheckArgNotNull(FunctionCallInfo fcinfo, int argno, const char *name, const char *detail,
				  SpCheckPolicy policy)
{
	if (PG_ARGISNULL(argno))
		SpCheckFail(policy, &(SpProblem) {
			.kind = SPP_SQL_NULL, .field = name, .detail = detail
		});
}

/* Apply the identifier rules (non-empty, at most maxbytes) to decoded bytes. */
void
SpCheckIdBytes(int len, const char *field, int maxbytes, SpCheckPolicy policy)
{
	if (len == 0)
		SpCheckFail(policy, &(SpProblem) {
			.kind = SPP_EMPTY, .field = field
		});
	if (len > maxbytes)
		SpCheckFail(policy, &(SpProblem) {
			.kind = SPP_TOO_LONG, .field = field, .len = len, .maxbytes = maxbytes
		});
}

/* Read a required identifier argument of type text. */
char *
SpCheckIdArg(FunctionCallInfo fcinfo, int argno, const char *name, int maxbytes,
			 SpCheckPolicy policy)
{
	text	   *t;

	SpCheckArgNotNull(fcinfo, argno, name, NULL, policy);
	t = PG_GETARG_TEXT_PP(argno);
	SpCheckIdBytes(VARSIZE_ANY_EXHDR(t), name, maxbytes, policy);
	return text_to_cstring(t);
}

/* Read a required json argument into a tree, of any kind. */
SpJson *
SpCheckJsonArg(FunctionCallInfo fcinfo, int argno, const char *name, SpCheckPolicy policy)
{
	SpCheckArgNotNull(fcinfo, argno, name, NULL, policy);
	return SpJsonParseText(PG_GETARG_TEXT_PP(argno));
}

/* Read a required json argument that must be of one kind (expected names it). */
SpJson *
SpCheckJsonKindArg(FunctionCallInfo fcinfo, int argno, const char *name, SpJsonKind kind,
				   const char *expected, SpCheckPolicy policy)
{
	SpJson	   *node = SpCheckJsonArg(fcinfo, argno, name, policy);

	SpCheckKindJson(node, name, kind, expected, policy);
	return node;
}

/* Check that a present JSON value is of one kind (its content stays opaque). */
void
SpCheckKindJson(const SpJson *node, const char *field, SpJsonKind kind, const char *expected,
				SpCheckPolicy policy)
{
	if (node->kind != kind)
		SpCheckFailType(policy, node, field, expected);
}

/* Check that a required JSON value is present and not JSON null. */
void
SpCheckRequiredJson(const SpJson *node, const char *field, const char *expected,
					SpCheckPolicy policy)
{
	if (node == NULL || node->kind == SPJ_NULL)
		SpCheckFailAbsent(policy, node, field, expected);
}

/* Check that a required JSON value is present, not JSON null and of one kind. */
static void
SpCheckPresentKind(const SpJson *node, const char *field, SpJsonKind kind, const char *expected,
				   SpCheckPolicy policy)
{
	SpCheckRequiredJson(node, field, expected, policy);
	SpCheckKindJson(node, field, kind, expected, policy);
}

/* Decode a string node, refusing U+0000 and unpaired surrogates. */
static char *
SpCheckDecode(const SpJson *node, const char *field, int *len, SpCheckPolicy policy)
{
	char	   *s;
	SpStringStatus st = SpJsonDecodeString(node->raw, node->rawlen, &s, len);

	if (st != SPS_OK)
		SpCheckFail(policy, &(SpProblem) {
			.kind = SPP_BAD_TEXT, .field = field, .text = st
		});
	return s;
}

/* Read a required identifier field of a JSON record. */
char *
SpCheckIdJson(const SpJson *node, const char *field, int maxbytes, SpCheckPolicy policy)
{
	char	   *s;
	int			len;

	SpCheckPresentKind(node, field, SPJ_STRING, "a string", policy);
	s = SpCheckDecode(node, field, &len, policy);
	SpCheckIdBytes(len, field, maxbytes, policy);
	return s;
}

/*
 * Read a string field (any content but U+0000 and lone surrogates). When not
 * `required`, absent or JSON null gives NULL. maxbytes >= 0 bounds the UTF-8
 * bytes of a value stored in an indexed column (an index row has a size
 * limit, and the limit must be ours, not the index's).
 */
char *
SpCheckStringJson(const SpJson *node, const char *field, bool required, int maxbytes,
				  SpCheckPolicy policy)
{
	char	   *s;
	int			len;

	if (!required && (node == NULL || node->kind == SPJ_NULL))
		return NULL;
	SpCheckPresentKind(node, field, SPJ_STRING, "a string", policy);
	s = SpCheckDecode(node, field, &len, policy);
	if (maxbytes >= 0 && len > maxbytes)
		SpCheckFail(policy, &(SpProblem) {
			.kind = SPP_TOO_LONG, .field = field, .len = len, .maxbytes = maxbytes
		});
	return s;
}

/* Read a required finite number; fractions are allowed (createdAt). */
double
SpCheckNumberJson(const SpJson *node, const char *field, SpCheckPolicy policy)
{
	double		v = 0;

	SpCheckPresentKind(node, field, SPJ_NUMBER, "a number", policy);
	if (!SpJsonGetDouble(node, &v))
		SpCheckFail(policy, &(SpProblem) {
			.kind = SPP_NOT_FINITE, .field = field, .node = node
		});
	return v;
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

/* Read a required integral number within +/-(2^53 - 1) and >= minval (plain stores). */
int64
SpCheckIntJson(const SpJson *node, const char *field, int64 minval)
{
	int64		v = 0;

	SpCheckPresentKind(node, field, SPJ_NUMBER, "a number", SP_CHECK_PLAIN);
	switch (SpJsonGetInt(node, &v))
	{
		case SP_INT_NOT_INTEGRAL:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s must be an integer", field),
					 errdetail("The value %.*s has a fractional part; it is never rounded.",
							   node->rawlen, node->raw)));
			break;
		case SP_INT_OUT_OF_RANGE:
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("%s is out of range", field),
					 errdetail("The value %.*s is beyond +/-(2^53 - 1).",
							   node->rawlen, node->raw)));
			break;
		case SP_INT_OK:
			break;
	}
	if (v < minval)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("%s is out of range", field),
				 errdetail("The value " INT64_FORMAT " is below " INT64_FORMAT ".", v, minval)));
	return v;
}

/*
 * Read a row-limit argument (max_rows, page_limit). One rule for every
 * function that has one (docs/architecture.md, "Row limits"): SQL NULL means
 * the documented default, exactly as if the argument were left out; zero is
 * allowed and asks for no rows; a negative limit is 22023. The type (integer)
 * is the only maximum. dflt is the documented default; SP_NO_ROW_LIMIT where
 * that default is "no limit".
 */
int64
SpCheckRowLimitArg(FunctionCallInfo fcinfo, int argno, const char *name, int64 dflt)
{
	int64		limit;

	if (PG_ARGISNULL(argno))
		return dflt;
	limit = PG_GETARG_INT32(argno);
	if (limit < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be negative", name),
				 errdetail("A value of " INT64_FORMAT " was given.", limit)));
	return limit;
}

/*
 * Look up the members of an input object that has exactly the keys of a
 * record (a full-replace upsert): out[i] is the member for record->fields[i],
 * NULL when absent; an unknown or repeated key is 22023.
 */
void
SpCheckRecordMembers(const SpJson *obj, const SpRecord *record, SpJson **out, const char *what)
{
	const char **names = palloc(sizeof(char *) * record->nfields);

	for (int i = 0; i < record->nfields; i++)
		names[i] = record->fields[i].key;
	SpJsonMembers(obj, names, record->nfields, out, what, false,
				  ERRCODE_INVALID_PARAMETER_VALUE, -1);
	pfree(names);
}

/* Read a required run status: one of the five RunStatus values. */
const char *
SpCheckRunStatusJson(const SpJson *node, const char *field)
{
	static const char *const statuses[] = {SP_RUN_STATUSES};
	char	   *s = SpCheckStringJson(node, field, true, -1, SP_CHECK_PLAIN);

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
SpCheckRunErrorJson(const SpJson *node, const char *field)
{
	static const char *const names[] = {"message", "code"};
	SpJson	   *m[2];

	SpCheckKindJson(node, field, SPJ_OBJECT, "an object {message, code?}", SP_CHECK_PLAIN);
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
SpCheckObjectJson(const SpJson *node, const char *field)
{
	SpCheckKindJson(node, field, SPJ_OBJECT, "an object", SP_CHECK_PLAIN);
}

/* Check that a field holds a JSON array (its elements stay opaque). */
void
SpCheckArrayJson(const SpJson *node, const char *field)
{
	SpCheckKindJson(node, field, SPJ_ARRAY, "an array", SP_CHECK_PLAIN);
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
	SpArgText(args, node ? SpCheckRunStatusJson(node, "status") : NULL);
}

/* A patch's safe integer field. */
void
PatchArgInt(SpArgs *args, const SpJson *node, const char *field, int64 minval)
{
	if (node == NULL || node->kind == SPJ_NULL)
		SpArgNull(args);
	else
		SpArgInt64(args, SpCheckIntJson(node, field, minval));
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
