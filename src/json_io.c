/*
 * json_io.c
 *
 * Reading structural JSON and writing output objects.
 *
 * Every json argument has already been checked by PostgreSQL's json input
 * function (json_in runs the core JSON parser), so this walker only has to
 * split valid text into a tree of spans. Each node keeps the exact source text
 * of its value, so opaque payloads (messages, usage, errors) are stored and
 * spliced back byte for byte, never de-escaped. Strings are decoded only when
 * a structural field needs them, and the decoder reports U+0000 and unpaired
 * surrogates so each caller can raise its own error code. Walking text instead
 * of driving the core parser's callbacks keeps us clear of that API's changes
 * between PostgreSQL 15, 16 and 17. A json datum built server-side (for
 * example by json_build_array) never went through json_in, so the walker hands
 * any text nested past SP_JSON_DEEP levels to the core parser once: what it
 * refuses (nesting past the stack limit, 54001) is never stored, because a
 * dump of it could not be restored. No locking.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "common/shortest_dec.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/json.h"

#include "sandbox_persist.h"

/*
 * Nesting depth at which the whole text is checked by the core parser. Far
 * below any depth the core parser refuses, so ordinary input is walked once.
 */
#define SP_JSON_DEEP 64

typedef struct SpJsonCursor
{
	const char *start;
	const char *p;
	const char *end;
	bool		core_checked;	/* the core parser has accepted the whole text */
} SpJsonCursor;

static SpJson *SpJsonParseValue(SpJsonCursor *c, int depth);

/* Report text that json_in should never have let through. */
static void
SpJsonSyntaxError(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 errmsg("invalid input syntax for type json")));
}

/*
 * Run the core JSON parser (json_in) over text that nests deeply, raising its
 * own error (54001 past the stack limit) when it refuses the text.
 */
static void
SpJsonCoreCheck(const char *text, int len)
{
	char	   *copy = pnstrdup(text, len);
	Datum		parsed = DirectFunctionCall1(json_in, CStringGetDatum(copy));

	pfree(DatumGetPointer(parsed));
	pfree(copy);
}

/* Skip JSON whitespace. */
static void
SpJsonSkipSpace(SpJsonCursor *c)
{
	while (c->p < c->end &&
		   (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
		c->p++;
}

/* Advance past a string token starting at the opening quote. */
static void
SpJsonSkipString(SpJsonCursor *c)
{
	c->p++;
	while (c->p < c->end && *c->p != '"')
	{
		if (*c->p == '\\')
			c->p++;
		c->p++;
	}
	if (c->p >= c->end)
		SpJsonSyntaxError();
	c->p++;
}

/* Grow an array or object node by one member. */
static void
SpJsonAddItem(SpJson *node, int *cap, SpJson *item, const char *key, int keylen)
{
	if (node->count == *cap)
	{
		*cap = *cap ? *cap * 2 : 4;
		node->items = node->items ? repalloc(node->items, sizeof(SpJson *) * *cap)
			: palloc(sizeof(SpJson *) * *cap);
		if (node->kind == SPJ_OBJECT)
		{
			node->keys = node->keys ? repalloc(node->keys, sizeof(char *) * *cap)
				: palloc(sizeof(char *) * *cap);
			node->keylens = node->keylens ? repalloc(node->keylens, sizeof(int) * *cap)
				: palloc(sizeof(int) * *cap);
		}
	}
	node->items[node->count] = item;
	if (node->kind == SPJ_OBJECT)
	{
		node->keys[node->count] = key;
		node->keylens[node->count] = keylen;
	}
	node->count++;
}

/* Parse one value at the cursor into a node. */
static SpJson *
SpJsonParseValue(SpJsonCursor *c, int depth)
{
	SpJson	   *node = palloc0(sizeof(SpJson));
	int			cap = 0;

	check_stack_depth();
	if (depth >= SP_JSON_DEEP && !c->core_checked)
	{
		SpJsonCoreCheck(c->start, c->end - c->start);
		c->core_checked = true;
	}
	SpJsonSkipSpace(c);
	if (c->p >= c->end)
		SpJsonSyntaxError();
	node->raw = c->p;
	switch (*c->p)
	{
		case '{':
			node->kind = SPJ_OBJECT;
			c->p++;
			SpJsonSkipSpace(c);
			if (c->p < c->end && *c->p == '}')
			{
				c->p++;
				break;
			}
			for (;;)
			{
				const char *key;
				int			keylen;

				SpJsonSkipSpace(c);
				if (c->p >= c->end || *c->p != '"')
					SpJsonSyntaxError();
				key = c->p;
				SpJsonSkipString(c);
				keylen = c->p - key;
				SpJsonSkipSpace(c);
				if (c->p >= c->end || *c->p != ':')
					SpJsonSyntaxError();
				c->p++;
				SpJsonAddItem(node, &cap, SpJsonParseValue(c, depth + 1), key, keylen);
				SpJsonSkipSpace(c);
				if (c->p < c->end && *c->p == ',')
				{
					c->p++;
					continue;
				}
				if (c->p < c->end && *c->p == '}')
				{
					c->p++;
					break;
				}
				SpJsonSyntaxError();
			}
			break;
		case '[':
			node->kind = SPJ_ARRAY;
			c->p++;
			SpJsonSkipSpace(c);
			if (c->p < c->end && *c->p == ']')
			{
				c->p++;
				break;
			}
			for (;;)
			{
				SpJsonAddItem(node, &cap, SpJsonParseValue(c, depth + 1), NULL, 0);
				SpJsonSkipSpace(c);
				if (c->p < c->end && *c->p == ',')
				{
					c->p++;
					continue;
				}
				if (c->p < c->end && *c->p == ']')
				{
					c->p++;
					break;
				}
				SpJsonSyntaxError();
			}
			break;
		case '"':
			node->kind = SPJ_STRING;
			SpJsonSkipString(c);
			break;
		case 't':
		case 'f':
		case 'n':
			{
				const char *word = *c->p == 't' ? "true" : *c->p == 'f' ? "false" : "null";
				int			wlen = strlen(word);

				if (c->end - c->p < wlen || strncmp(c->p, word, wlen) != 0)
					SpJsonSyntaxError();
				c->p += wlen;
				node->kind = *word == 'n' ? SPJ_NULL : SPJ_BOOL;
				node->boolval = (*word == 't');
			}
			break;
		default:
			if (*c->p != '-' && !(*c->p >= '0' && *c->p <= '9'))
				SpJsonSyntaxError();
			node->kind = SPJ_NUMBER;
			while (c->p < c->end && strchr("+-0123456789.eE", *c->p) != NULL)
				c->p++;
			break;
	}
	node->rawlen = c->p - node->raw;
	return node;
}

/* Split valid JSON text into a tree of spans; the text must outlive the tree. */
SpJson *
SpJsonParse(const char *text, int len)
{
	SpJsonCursor c = {text, text, text + len, false};
	SpJson	   *root = SpJsonParseValue(&c, 0);

	SpJsonSkipSpace(&c);
	if (c.p != c.end)
		SpJsonSyntaxError();
	return root;
}

/* Parse a json datum's text. */
SpJson *
SpJsonParseText(text *t)
{
	return SpJsonParse(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
}

/*
 * Refuse a json datum that the core parser would refuse, for a value stored
 * without being walked: one scan of the brackets (strings skipped), and the
 * core parser only when the nesting reaches SP_JSON_DEEP.
 */
void
SpJsonCheckNesting(text *t)
{
	const char *p = VARDATA_ANY(t);
	const char *end = p + VARSIZE_ANY_EXHDR(t);
	int			depth = 0;

	for (; p < end; p++)
	{
		if (*p == '"')
		{
			for (p++; p < end && *p != '"'; p++)
				if (*p == '\\')
					p++;
		}
		else if (*p == '[' || *p == '{')
		{
			if (++depth >= SP_JSON_DEEP)
			{
				SpJsonCoreCheck(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
				return;
			}
		}
		else if (*p == ']' || *p == '}')
			depth--;
	}
}

/* Value of one hex digit, or -1. */
static int
SpHexValue(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* Read the four hex digits of a \u escape at p (just after "\u"). */
static int
SpReadHex4(const char *p, const char *end)
{
	int			v = 0;

	if (end - p < 4)
		SpJsonSyntaxError();
	for (int i = 0; i < 4; i++)
	{
		int			d = SpHexValue(p[i]);

		if (d < 0)
			SpJsonSyntaxError();
		v = v * 16 + d;
	}
	return v;
}

/*
 * Decode a JSON string token (quotes included) into NUL-terminated UTF-8.
 * Reports U+0000 and unpaired surrogates instead of raising, because the
 * error code depends on the field; *out is only valid on SPS_OK.
 */
SpStringStatus
SpJsonDecodeString(const char *raw, int rawlen, char **out, int *outlen)
{
	const char *p = raw + 1;
	const char *end = raw + rawlen - 1;
	/* decoding never lengthens: an escape of 6 or 12 bytes yields at most 4 */
	char	   *buf = palloc(rawlen);
	int			len = 0;

	while (p < end)
	{
		if (*p != '\\')
		{
			buf[len++] = *p++;
			continue;
		}
		p++;
		switch (*p)
		{
			case 'b':
				buf[len++] = '\b';
				break;
			case 'f':
				buf[len++] = '\f';
				break;
			case 'n':
				buf[len++] = '\n';
				break;
			case 'r':
				buf[len++] = '\r';
				break;
			case 't':
				buf[len++] = '\t';
				break;
			case 'u':
				{
					pg_wchar	cp = SpReadHex4(p + 1, end);

					p += 4;
					if (cp >= 0xDC00 && cp <= 0xDFFF)
						return SPS_LONE_SURROGATE;
					if (cp >= 0xD800 && cp <= 0xDBFF)
					{
						int			lo;

						if (end - p < 7 || p[1] != '\\' || p[2] != 'u')
							return SPS_LONE_SURROGATE;
						lo = SpReadHex4(p + 3, end);
						if (lo < 0xDC00 || lo > 0xDFFF)
							return SPS_LONE_SURROGATE;
						cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
						p += 6;
					}
					if (cp == 0)
						return SPS_NUL;
					unicode_to_utf8(cp, (unsigned char *) buf + len);
					len += pg_utf_mblen((unsigned char *) buf + len);
				}
				break;
			default:			/* '"', '\\' and '/' stand for themselves */
				buf[len++] = *p;
				break;
		}
		p++;
	}
	buf[len] = '\0';
	*out = buf;
	*outlen = len;
	return SPS_OK;
}

/*
 * Read a number node as an integer within +/-(2^53 - 1). The decision is made
 * on the decimal text, never through a double: a value written with a
 * fraction or exponent is accepted only when it is exactly integral
 * (1000.0, 1e3), and is never rounded (1000.0000000000000001 is refused).
 * A value with a nonzero digit after its decimal point is not integral
 * whatever its size; any other value past the limit is out of range, however
 * many digits it is written with.
 */
SpIntStatus
SpJsonGetInt(const SpJson *node, int64 *out)
{
	const char *p = node->raw;
	const char *end = node->raw + node->rawlen;
	bool		negative = false;
	bool		fraction = false;
	char		digits[16];		/* the leading significant digits */
	int64		ndigits = 0;	/* significant digits, leading zeros dropped */
	int64		last_nonzero = -1;	/* index of the last nonzero significant digit */
	int64		point = 0;		/* significant digits before the decimal point */
	int64		exponent = 0;
	int64		value = 0;

	if (p < end && *p == '-')
	{
		negative = true;
		p++;
	}
	for (; p < end; p++)
	{
		if (*p == '.' && !fraction)
		{
			fraction = true;
			continue;
		}
		if (!isdigit((unsigned char) *p))
			break;
		if (ndigits == 0 && *p == '0')
		{
			if (fraction)
				point--;		/* 0.00x: leading zeros move the point */
			continue;
		}
		if (ndigits < (int64) sizeof(digits))
			digits[ndigits] = *p;
		if (*p != '0')
			last_nonzero = ndigits;
		ndigits++;
		if (!fraction)
			point++;
	}
	if (p < end && (*p == 'e' || *p == 'E'))
	{
		bool		eneg = false;

		p++;
		if (p < end && (*p == '+' || *p == '-'))
			eneg = (*p++ == '-');
		/* clamped far beyond any digit count a json value can hold */
		for (; p < end && isdigit((unsigned char) *p); p++)
			if (exponent < INT64CONST(1000000000000000))
				exponent = exponent * 10 + (*p - '0');
		if (eneg)
			exponent = -exponent;
	}
	if (last_nonzero < 0)
	{
		*out = 0;
		return SP_INT_OK;
	}
	point += exponent;
	/* a nonzero digit at or after the point (this covers 0 < |value| < 1) */
	if (last_nonzero >= point)
		return SP_INT_NOT_INTEGRAL;
	if (point > (int64) sizeof(digits))
		return SP_INT_OUT_OF_RANGE;
	for (int i = 0; i < point; i++)
		value = value * 10 + (i < ndigits ? digits[i] - '0' : 0);
	if (value > SP_MAX_SAFE_INTEGER)
		return SP_INT_OUT_OF_RANGE;
	*out = negative ? -value : value;
	return SP_INT_OK;
}

/* Read a number node as a finite double; false when it overflows. */
bool
SpJsonGetDouble(const SpJson *node, double *out)
{
	char	   *s = pnstrdup(node->raw, node->rawlen);

	*out = strtod(s, NULL);
	return !isinf(*out) && !isnan(*out);
}

/* A JSON type's name for error messages. */
const char *
SpJsonKindName(SpJsonKind kind)
{
	switch (kind)
	{
		case SPJ_NULL:
			return "null";
		case SPJ_BOOL:
			return "boolean";
		case SPJ_NUMBER:
			return "number";
		case SPJ_STRING:
			return "string";
		case SPJ_ARRAY:
			return "array";
		case SPJ_OBJECT:
			return "object";
	}
	return "unknown";
}

/* An object member's name, decoded for messages and comparison. */
char *
SpJsonKeyName(const SpJson *obj, int i)
{
	char	   *name;
	int			len;

	if (SpJsonDecodeString(obj->keys[i], obj->keylens[i], &name, &len) != SPS_OK)
		return pnstrdup(obj->keys[i], obj->keylens[i]);
	return name;
}

/*
 * Look up the allowed members of an object. out[i] receives the value of
 * names[i] or NULL. An unknown or repeated member raises unknown_errcode, or a
 * contract error when sp_code >= 0, unless ignore_unknown is set.
 */
void
SpJsonMembers(const SpJson *obj, const char *const *names, int nnames,
			  SpJson **out, const char *what, bool ignore_unknown,
			  int unknown_errcode, int sp_code)
{
	/*
	 * Checked on every call, not only when a bad key turns up: a caller that
	 * names no error code would otherwise raise SQLSTATE 00000, and only on
	 * the rare input that reaches the error branch.
	 */
	if (unknown_errcode == 0 && sp_code < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("member lookup for %s has no error code", what)));
	for (int j = 0; j < nnames; j++)
		out[j] = NULL;
	for (int i = 0; i < obj->count; i++)
	{
		/* member names are compared on the raw bytes: no escapes, no copy */
		const char *raw = obj->keys[i] + 1;
		int			rawlen = obj->keylens[i] - 2;
		bool		plain = memchr(raw, '\\', rawlen) == NULL;
		char	   *key = plain ? NULL : SpJsonKeyName(obj, i);
		int			found = -1;

		for (int j = 0; j < nnames; j++)
		{
			if (plain ? (strncmp(raw, names[j], rawlen) == 0 && names[j][rawlen] == '\0')
				: strcmp(key, names[j]) == 0)
			{
				found = j;
				break;
			}
		}
		if (found >= 0 && out[found] == NULL)
		{
			out[found] = obj->items[i];
			continue;
		}
		if (found < 0 && ignore_unknown)
			continue;
		if (key == NULL)
			key = SpJsonKeyName(obj, i);
		if (sp_code >= 0)
			sp_error((SpErrorCode) sp_code,
					 ("%s key \"%s\" in %s", found >= 0 ? "repeated" : "unknown", key, what),
					 "The key \"%s\" is %s in %s.", key,
					 found >= 0 ? "given more than once" : "not part of the contract", what);
		ereport(ERROR,
				(errcode(unknown_errcode),
				 errmsg("%s key \"%s\" in %s", found >= 0 ? "repeated" : "unknown", key, what),
				 errdetail("The key \"%s\" is %s in %s.", key,
						   found >= 0 ? "given more than once" : "not part of the contract", what)));
	}
}

/* Append ,"key": (the comma only after the first member). */
void
SpAppendKey(StringInfo buf, bool *first, const char *key)
{
	if (!*first)
		appendStringInfoChar(buf, ',');
	*first = false;
	escape_json(buf, key);
	appendStringInfoChar(buf, ':');
}

/* Append a JSON string literal. */
void
SpAppendString(StringInfo buf, const char *s)
{
	escape_json(buf, s);
}

/* Append an integer as a JSON number. */
void
SpAppendInt64(StringInfo buf, int64 v)
{
	appendStringInfo(buf, INT64_FORMAT, v);
}

/* Append a double in shortest round-trip form, which JSON.parse reads back exactly. */
void
SpAppendDouble(StringInfo buf, double v)
{
	char		tmp[DOUBLE_SHORTEST_DECIMAL_LEN];

	if (v == 0)
		v = 0;					/* JSON has no negative zero worth keeping */
	double_to_shortest_decimal_buf(v, tmp);
	appendStringInfoString(buf, tmp);
}

/*
 * Return a built JSON text as a json datum, allocated in the current memory
 * context: call it in the caller's context, never inside SPI's.
 */
Datum
SpJsonResult(StringInfo buf)
{
	return PointerGetDatum(cstring_to_text_with_len(buf->data, buf->len));
}

/*
 * Set up the result of a set-returning function of one json column named
 * `column`, materialized: the function puts each row into rsinfo->setResult
 * with tuplestore_putvalues, described by rsinfo->setDesc.
 */
void
SpBeginJsonRows(FunctionCallInfo fcinfo, const char *column)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext old;
	TupleDesc	desc;

	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) || (rsinfo->allowedModes & SFRM_Materialize) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("set-valued function called in context that cannot accept a set"),
				 errdetail("Call it in FROM, or in the select list of a query.")));
	old = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	desc = CreateTemplateTupleDesc(1);
	TupleDescInitEntry(desc, 1, column, JSONOID, -1, 0);
	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult = tuplestore_begin_heap((rsinfo->allowedModes & SFRM_Materialize_Random) != 0,
											  false, work_mem);
	rsinfo->setDesc = desc;
	MemoryContextSwitchTo(old);
}
