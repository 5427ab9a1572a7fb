/*
 * stream_bodies.c
 *
 * The bodies of the durable streams (docs/contract/streams.md §2, §4 rule 2):
 * content types and JSON mode (media types compared case-insensitively,
 * parameters ignored), and a body read into what an entry stores: a JSON
 * body validated and flattened one array level into its messages, any
 * other body as it is.
 *
 * Locking: none; nothing here reads or writes a table.
 */
#include "postgres.h"

#include "common/jsonapi.h"
#include "mb/pg_wchar.h"

#include "streams.h"

/* The length of the media type of a content type: up to ';', trailing blanks trimmed. */
static int
StreamMediaTypeLen(const char *ct, const char **start)
{
	const char *s = ct;
	int			n;

	while (*s == ' ' || *s == '\t')
		s++;
	n = strcspn(s, ";");
	while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	*start = s;
	return n;
}

/* Whether two content types name the same media type (case-insensitive, parameters ignored). */
bool
StreamSameMediaType(const char *a, const char *b)
{
	const char *sa;
	const char *sb;
	int			na = StreamMediaTypeLen(a, &sa);
	int			nb = StreamMediaTypeLen(b, &sb);

	return na == nb && pg_strncasecmp(sa, sb, na) == 0;
}

/* Whether a content type is JSON mode. */
bool
StreamIsJson(const char *ct)
{
	return StreamSameMediaType(ct, STREAM_JSON_MEDIA_TYPE);
}

/*
 * Append the first n elements of a parsed JSON array, each as its exact
 * text, joined by commas: the data of an entry of a JSON stream.
 */
void
StreamAppendMessages(StringInfo buf, const SpJson *array, int n)
{
	for (int i = 0; i < n; i++)
	{
		if (i > 0)
			appendStringInfoChar(buf, ',');
		appendBinaryStringInfo(buf, array->items[i]->raw, array->items[i]->rawlen);
	}
}

/*
 * Read a body into *out: for JSON mode, validated by the core JSON parser
 * and flattened one array level, each message the exact text of its element,
 * joined by commas (22P02 when not JSON); other bodies as they are.
 */
void
StreamReadBody(bytea *body, bool json_mode, StreamBody *out)
{
	char	   *data = body ? VARDATA_ANY(body) : NULL;
	int			len = body ? VARSIZE_ANY_EXHDR(body) : 0;
	JsonLexContext *lex;
	JsonParseErrorType err;
	SpJson	   *root;

	initStringInfo(&out->data);
	out->empty = len == 0;
	out->message_count = len == 0 ? 0 : 1;
	if (len == 0)
		return;
	if (!json_mode)
	{
		appendBinaryStringInfo(&out->data, data, len);
		return;
	}
	if (!pg_verify_mbstr(PG_UTF8, data, len, true))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("body of a JSON stream is not JSON"),
				 errdetail("The body is not valid UTF-8.")));
#if PG_VERSION_NUM >= 170000
	lex = makeJsonLexContextCstringLen(NULL, data, len, PG_UTF8, false);
#else
	lex = makeJsonLexContextCstringLen(pnstrdup(data, len), len, PG_UTF8, false);
#endif
	err = pg_parse_json(lex, &nullSemAction);
	if (err != JSON_SUCCESS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("body of a JSON stream is not JSON"),
				 errdetail("%s", json_errdetail(err, lex))));
	root = SpJsonParse(data, len);
	if (root->kind != SPJ_ARRAY)
	{
		appendBinaryStringInfo(&out->data, root->raw, root->rawlen);
		return;
	}
	out->message_count = root->count;
	out->empty = root->count == 0;
	StreamAppendMessages(&out->data, root, root->count);
}

