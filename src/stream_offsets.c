/*
 * stream_offsets.c
 *
 * The offsets of the durable streams (docs/contract/streams.md §3): the
 * format EEEEEEEEEEEEEEEE_SSSSSSSSSSSSSSSS written into answers, and an
 * offset argument parsed as -1 (the start), now (the tail) or an epoch and
 * a seq (22023 for anything else), and the refusal of an offset a stream
 * did not issue. Whether a stream issued an offset is judged where it is
 * used (stream_reads.c, stream_run_logs.c, stream_create.c).
 *
 * Locking: none; nothing here reads or writes a table.
 */
#include "postgres.h"

#include "streams.h"

/* Append an offset as a JSON string. */
void
StreamAppendOffset(StringInfo buf, int64 epoch, int64 seq)
{
	appendStringInfo(buf, "\"%016lld_%016lld\"", (long long) epoch, (long long) seq);
}

/* 22023 for an offset that is none of the accepted forms. */
static void
StreamMalformedOffset(const char *text)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("malformed stream offset"),
			 errdetail("\"%s\" is not -1, now or two 16-digit numbers joined by _.", text)));
}

/* The value of n decimal digits at p; -1 when one is not a digit. */
static int64
StreamDigits(const char *p, int n)
{
	int64		v = 0;

	for (int i = 0; i < n; i++)
	{
		if (p[i] < '0' || p[i] > '9')
			return -1;
		v = v * 10 + (p[i] - '0');
	}
	return v;
}

/* Split an offset written EEEE_SSSS into *epoch and *seq; false for any other text. */
bool
StreamOffsetParts(const char *text, int64 *epoch, int64 *seq)
{
	if (strlen(text) != STREAM_OFFSET_LEN || text[STREAM_OFFSET_DIGITS] != '_')
		return false;
	*epoch = StreamDigits(text, STREAM_OFFSET_DIGITS);
	*seq = StreamDigits(text + STREAM_OFFSET_DIGITS + 1, STREAM_OFFSET_DIGITS);
	return *epoch >= 0 && *seq >= 0;
}

/* Parse an offset argument: -1, now, or EEEE_SSSS into *epoch and *seq; 22023 otherwise. */
StreamOffsetKind
StreamParseOffset(const char *text, int64 *epoch, int64 *seq)
{
	if (strcmp(text, "-1") == 0)
		return STREAM_OFFSET_START;
	if (strcmp(text, "now") == 0)
		return STREAM_OFFSET_NOW;
	if (!StreamOffsetParts(text, epoch, seq))
		StreamMalformedOffset(text);
	return STREAM_OFFSET_AT;
}

/*
 * STREAM_OFFSET_GONE for the offset (seq) read at path unless it is within
 * the tail and the stream holds seq with the offset's epoch (issued): past
 * the tail, or another history (§3). For protocol streams and run logs alike.
 */
void
StreamVouchOffset(const char *path, const char *offset, int64 seq, int64 tail_seq, bool issued)
{
	if (seq > tail_seq)
		sp_error(SP_STREAM_OFFSET_GONE,
				 ("stream offset past the tail"),
				 "The stream at path \"%s\" ends before offset %s.", path, offset);
	if (!issued)
		sp_error(SP_STREAM_OFFSET_GONE,
				 ("stream offset not issued by this stream"),
				 "The stream at path \"%s\" holds entry " INT64_FORMAT
				 " from another epoch than offset %s names.", path, seq, offset);
}
