/*
 * stream_pages.c
 *
 * The body of one stream read: whole entries, in order, up to the read's
 * byte budget (docs/contract/streams.md §4 rule 3), for protocol streams
 * (stream_reads.c) and run logs (stream_run_logs.c) alike. The callers open
 * the cursor over their own tables; this file reads rows only.
 *
 * Locking: none; the callers' statements decide what the cursor sees.
 */
#include "postgres.h"

#include "streams.h"

/* Entries fetched from the read cursor at a time. */
#define STREAM_READ_BATCH 16

/*
 * Page whole entries from an open cursor into body (in the caller's context
 * `outer`): each row's `data` column (bytea or json: its bytes as stored),
 * joined by ',' when join (JSON: the inside of an array), at most max_bytes
 * (at least one entry); *next_seq, and *next_epoch when epochs (a column
 * `epoch`), get the last one's. Closes the cursor. Inside SPI.
 */
void
StreamPageEntries(Portal portal, bool epochs, bool join, int64 max_bytes, MemoryContext outer,
				  StringInfo body, int64 *next_epoch, int64 *next_seq)
{
	int64		bytes = 0;
	int64		taken = 0;
	bool		full = false;

	while (!full)
	{
		int			col_seq;
		int			col_epoch;
		int			col_data;

		SPI_cursor_fetch(portal, true, STREAM_READ_BATCH);
		if (SPI_processed == 0)
			break;
		col_seq = SpColumn("seq");
		col_epoch = epochs ? SpColumn("epoch") : 0;
		col_data = SpColumn("data");
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			bool		isnull;
			struct varlena *data = PG_DETOAST_DATUM_PACKED(SPI_getbinval(SPI_tuptable->vals[i],
																		 SPI_tuptable->tupdesc,
																		 col_data, &isnull));
			int			len = VARSIZE_ANY_EXHDR(data);
			int64		cost = len + (join && taken > 0 ? 1 : 0);
			MemoryContext spi;

			if (taken > 0 && bytes + cost > max_bytes)
			{
				full = true;
				break;
			}
			spi = MemoryContextSwitchTo(outer);
			if (join && taken > 0)
				appendStringInfoChar(body, ',');
			appendBinaryStringInfo(body, VARDATA_ANY(data), len);
			MemoryContextSwitchTo(spi);
			bytes += cost;
			taken++;
			SpGetInt64(i, col_seq, next_seq);
			if (epochs)
				SpGetInt64(i, col_epoch, next_epoch);
		}
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
}
