/*
 * stream_subscription_rules.c
 *
 * The pure rules of stream subscriptions (docs/contract/streams.md §7): the
 * glob a pattern is (stream_glob_match), and the webhook URLs the SSRF rules
 * accept (the protocol's §12.8). The server that sends a webhook checks the
 * addresses its host name resolves to once more, at delivery.
 *
 * Locking: none; nothing here reads or writes a table.
 */
#include "postgres.h"

#include "common/string.h"
#include "utils/builtins.h"

#include "streams.h"

PG_FUNCTION_INFO_V1(stream_glob_match);

/* Longest webhook URL accepted. */
#define SUB_URL_MAX_BYTES 2048

/* Whether segment text[0..tlen) matches pattern segment pat[0..plen), where * matches any run. */
static bool
SubSegmentMatches(const char *pat, int plen, const char *text, int tlen)
{
	int			p = 0;
	int			t = 0;
	int			star = -1;
	int			resume = 0;

	while (t < tlen)
	{
		if (p < plen && pat[p] == '*')
		{
			star = p++;
			resume = t;
		}
		else if (p < plen && pat[p] == text[t])
		{
			p++;
			t++;
		}
		else if (star >= 0)
		{
			p = star + 1;
			t = ++resume;
		}
		else
			return false;
	}
	while (p < plen && pat[p] == '*')
		p++;
	return p == plen;
}

/* Split s at '/' into at most max segments (start and length each); the count, or -1 past max. */
static int
SubSplit(const char *s, int len, int max, int *starts, int *lens)
{
	int			n = 0;
	int			begin = 0;

	for (int i = 0; i <= len; i++)
	{
		if (i < len && s[i] != '/')
			continue;
		if (n == max)
			return -1;
		starts[n] = begin;
		lens[n] = i - begin;
		n++;
		begin = i + 1;
	}
	return n;
}

/* Most segments a pattern or path may have for the match (deeper paths never match). */
#define SUB_GLOB_MAX_SEGMENTS 64

/*
 * Whether path matches pattern: segments are split at '/', a segment "**"
 * matches zero or more segments, any other segment matches one segment with
 * '*' standing for any run of characters. A table over (pattern segment,
 * path segment) keeps it linear in their product, whatever the stars.
 */
bool
StreamGlobMatches(const char *pattern, int plen, const char *path, int slen)
{
	int			ps[SUB_GLOB_MAX_SEGMENTS],
				pl[SUB_GLOB_MAX_SEGMENTS],
				ss[SUB_GLOB_MAX_SEGMENTS],
				sl[SUB_GLOB_MAX_SEGMENTS];
	int			np = SubSplit(pattern, plen, SUB_GLOB_MAX_SEGMENTS, ps, pl);
	int			ns = SubSplit(path, slen, SUB_GLOB_MAX_SEGMENTS, ss, sl);
	bool	   *m;
	bool		result;

	if (np < 0 || ns < 0)
		return false;
	/* m[i * (ns + 1) + j]: pattern segments i.. match path segments j.. */
	m = palloc0(sizeof(bool) * (np + 1) * (ns + 1));
	m[np * (ns + 1) + ns] = true;
	for (int i = np - 1; i >= 0; i--)
	{
		bool		any = pl[i] == 2 && pattern[ps[i]] == '*' && pattern[ps[i] + 1] == '*';

		for (int j = ns; j >= 0; j--)
		{
			bool		v;

			if (any)
				v = m[(i + 1) * (ns + 1) + j] || (j < ns && m[i * (ns + 1) + j + 1]);
			else
				v = j < ns && m[(i + 1) * (ns + 1) + j + 1] &&
					SubSegmentMatches(pattern + ps[i], pl[i], path + ss[j], sl[j]);
			m[i * (ns + 1) + j] = v;
		}
	}
	result = m[0];
	pfree(m);
	return result;
}

/* stream_glob_match(pattern text, path text) -> boolean: StreamGlobMatches over SQL text. */
Datum
stream_glob_match(PG_FUNCTION_ARGS)
{
	text	   *pattern = PG_GETARG_TEXT_PP(0);
	text	   *path = PG_GETARG_TEXT_PP(1);

	PG_RETURN_BOOL(StreamGlobMatches(VARDATA_ANY(pattern), VARSIZE_ANY_EXHDR(pattern),
									 VARDATA_ANY(path), VARSIZE_ANY_EXHDR(path)));
}

/* SP711 with the reason a webhook URL is refused. */
static SP_NORETURN void
SubRejectUrl(const char *url, const char *why)
{
	sp_error(SP_WEBHOOK_URL_REJECTED,
			 ("webhook URL rejected"),
			 "The webhook URL \"%s\" is refused: %s.", url, why);
}

/*
 * The four parts of a host written as a dotted quad of decimal numbers
 * without leading zeros, each 0..255; false for anything else.
 */
static bool
SubDottedQuad(const char *host, int parts[4])
{
	const char *p = host;

	for (int i = 0; i < 4; i++)
	{
		int			v = 0;
		int			digits = 0;

		while (*p >= '0' && *p <= '9')
		{
			v = v * 10 + (*p++ - '0');
			if (++digits > 3)
				return false;
		}
		if (digits == 0 || v > 255 || (digits > 1 && p[-digits] == '0'))
			return false;
		parts[i] = v;
		if (i < 3 && *p++ != '.')
			return false;
	}
	return *p == '\0';
}

/* Whether an IPv4 address is not a public unicast one (RFC 1918, loopback, link-local, ...). */
static bool
SubLocalIpv4(const int a[4])
{
	return a[0] == 0 || a[0] == 10 || a[0] == 127 || a[0] >= 224 ||
		(a[0] == 100 && a[1] >= 64 && a[1] <= 127) ||
		(a[0] == 169 && a[1] == 254) ||
		(a[0] == 172 && a[1] >= 16 && a[1] <= 31) ||
		(a[0] == 192 && a[1] == 0 && a[2] == 0) ||
		(a[0] == 192 && a[1] == 168) ||
		(a[0] == 198 && (a[1] == 18 || a[1] == 19));
}

/*
 * Whether a host name's last label is numeric (digits, or 0x and hex): URL
 * parsers read such a host as an IPv4 address in another notation
 * (0x7f.1, 2130706433), so only the canonical dotted quad is accepted.
 */
static bool
SubNumericHost(const char *host)
{
	const char *last = strrchr(host, '.');

	last = last == NULL ? host : last + 1;
	return last[0] >= '0' && last[0] <= '9';
}

/*
 * Refuse (SP711) a webhook URL the protocol's §12.8 rules out: anything but
 * https, except http to localhost or 127.x.x.x (development); a user name or
 * password in it; an IP literal that is not public unicast IPv4 (IPv6
 * literals are refused whole); a host that only looks like a name but is an
 * IPv4 address in another notation.
 */
void
StreamCheckWebhookUrl(const char *url)
{
	bool		http = strncmp(url, "http://", 7) == 0;
	const char *start;
	int			len;
	char	   *host;
	int			quad[4];
	bool		is_quad;

	if (strlen(url) > SUB_URL_MAX_BYTES)
		SubRejectUrl("(too long)", "it is longer than 2048 bytes");
	for (const unsigned char *c = (const unsigned char *) url; *c; c++)
		if (*c <= ' ' || *c >= 0x7f || *c == '\\')
			SubRejectUrl(url, "it contains a space, a control character, a backslash or a non-ASCII byte");
	if (!http && strncmp(url, "https://", 8) != 0)
		SubRejectUrl(url, "only https (or http to localhost) is accepted");
	start = url + (http ? 7 : 8);
	len = strcspn(start, "/?#");
	host = pnstrdup(start, len);
	if (strchr(host, '@') != NULL)
		SubRejectUrl(url, "it carries a user name or password");
	if (host[0] == '[')
		SubRejectUrl(url, "IPv6 literal hosts are not accepted");
	if (strchr(host, ':') != NULL)
		*strchr(host, ':') = '\0';
	for (char *c = host; *c; c++)
		*c = pg_ascii_tolower((unsigned char) *c);
	/* a fully qualified name ends in a dot that names the same host: judge it without */
	if (host[0] != '\0' && host[strlen(host) - 1] == '.')
		host[strlen(host) - 1] = '\0';
	if (host[0] == '\0' || strchr(host, '%') != NULL)
		SubRejectUrl(url, "it names no valid host");
	is_quad = SubDottedQuad(host, quad);
	if (http)
	{
		if (strcmp(host, "localhost") == 0 || (is_quad && quad[0] == 127))
			return;
		SubRejectUrl(url, "http is accepted only for localhost or 127.x.x.x (development); use https");
	}
	if (strcmp(host, "localhost") == 0 || pg_str_endswith(host, ".localhost"))
		SubRejectUrl(url, "localhost is accepted only over http, for development");
	if (is_quad && SubLocalIpv4(quad))
		SubRejectUrl(url, "it targets a private, loopback, link-local or otherwise local address");
	if (!is_quad && SubNumericHost(host))
		SubRejectUrl(url, "a numeric host must be a dotted quad of decimal numbers");
}
