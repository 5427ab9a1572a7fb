/*
 * blob_rows.c
 *
 * An object's blobs row as a BlobRow, and the BlobRecord JSON built from
 * one. BlobReadRow reads the row of a key through an index scan of
 * blobs_pkey of its own, without SPI: a read of a small object spent a
 * fifth of its server time starting SPI's executor for this one look-up.
 *
 * Locking: BlobReadRow takes AccessShareLock on blobs and blobs_pkey (kept
 * to the end of the transaction, as a statement would) and reads with the
 * active snapshot, so a STABLE caller sees the row and the chunks it points
 * at in one snapshot. A volatile caller that has just written the row
 * through SPI would not see its own write this way, and reads through SPI.
 */
#include "postgres.h"

#include "executor/tuptable.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "blobs.h"
#include "key_scans.h"

static const char *const blob_columns[BLOB_NCOLUMNS] = {
	"blob_key", "version", "size", "etag", "content_type", "custom_metadata",
	"created_at", "updated_at", "relied_on_at", "replaced_version", "inline_codec",
	"inline_data", "gc_settled"
};

/*
 * The attribute number of each BlobColumn in desc (InvalidAttrNumber for a
 * column an older schema lacks), in one walk of the descriptor instead of a
 * catalog look-up per column. True when the table has exactly these columns.
 */
bool
BlobMapColumns(TupleDesc desc, AttrNumber *att)
{
	int			mapped = 0;
	bool		only_known = true;

	for (int c = 0; c < BLOB_NCOLUMNS; c++)
		att[c] = InvalidAttrNumber;
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute a = TupleDescAttr(desc, i);
		int			c = 0;

		if (a->attisdropped)
			continue;
		while (c < BLOB_NCOLUMNS && strcmp(NameStr(a->attname), blob_columns[c]) != 0)
			c++;
		if (c == BLOB_NCOLUMNS)
			only_known = false;
		else
		{
			att[c] = a->attnum;
			mapped++;
		}
	}
	return only_known && mapped == BLOB_NCOLUMNS;
}

/* The text of a nullable text or json column, or NULL. */
static char *
BlobRowText(TupleTableSlot *slot, AttrNumber att)
{
	bool		isnull;
	Datum		d = slot_getattr(slot, att, &isnull);

	return isnull ? NULL : TextDatumGetCString(d);
}

/* An int8 column of the row (NOT NULL in the schema). */
static int64
BlobRowInt64(TupleTableSlot *slot, AttrNumber att)
{
	bool		isnull;

	return DatumGetInt64(slot_getattr(slot, att, &isnull));
}

/*
 * The row in slot as a BlobRow, its columns numbered by att (BlobMapColumns).
 * The text fields are copied; inline_data is copied as stored (a TOAST
 * pointer stays one, valid in the caller's snapshot), so a chunked object
 * costs no copy.
 */
void
BlobRowFromSlot(TupleTableSlot *slot, const AttrNumber *att, BlobRow *out)
{
	bool		isnull;
	Datum		data;

	out->key = BlobRowText(slot, att[BLOB_COL_KEY]);
	out->version = BlobRowInt64(slot, att[BLOB_COL_VERSION]);
	out->size = BlobRowInt64(slot, att[BLOB_COL_SIZE]);
	out->etag = BlobRowText(slot, att[BLOB_COL_ETAG]);
	out->content_type = BlobRowText(slot, att[BLOB_COL_CONTENT_TYPE]);
	out->custom_metadata = BlobRowText(slot, att[BLOB_COL_CUSTOM_METADATA]);
	out->created_at = BlobRowInt64(slot, att[BLOB_COL_CREATED_AT]);
	out->updated_at = BlobRowInt64(slot, att[BLOB_COL_UPDATED_AT]);
	out->inline_codec = DatumGetInt16(slot_getattr(slot, att[BLOB_COL_INLINE_CODEC], &isnull));
	out->is_inline = !isnull;
	data = slot_getattr(slot, att[BLOB_COL_INLINE_DATA], &isnull);
	out->inline_data = isnull ? (Datum) 0 : datumCopy(data, false, -1);
}

/* Read the blobs row of `key` into *out (BlobRowFromSlot); false when there is none. */
bool
BlobReadRow(const char *key, BlobRow *out)
{
	Relation	rel = SpOpenTable("blobs", AccessShareLock);
	Relation	idx = SpOpenIndex("blobs_pkey", AccessShareLock);
	TupleTableSlot *slot = table_slot_create(rel, NULL);
	AttrNumber	att[BLOB_NCOLUMNS];
	ScanKeyData scankey;
	IndexScanDesc scan;
	bool		found;

	BlobMapColumns(RelationGetDescr(rel), att);
	/* the index's one column is blob_key */
	SpTextScanKey(&scankey, 1, idx, cstring_to_text(key));
	scan = SpBeginIndexScan(rel, idx, GetActiveSnapshot(), &scankey, 1);
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	if (found)
		BlobRowFromSlot(slot, att, out);
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	index_close(idx, NoLock);
	table_close(rel, NoLock);
	return found;
}

/* Append the BlobRecord JSON of a row. */
void
BlobAppendRow(StringInfo buf, const BlobRow *row)
{
	bool		first = true;

	appendStringInfoChar(buf, '{');
	SpAppendKey(buf, &first, "key");
	SpAppendString(buf, row->key);
	SpAppendKey(buf, &first, "size");
	SpAppendInt64(buf, row->size);
	SpAppendKey(buf, &first, "etag");
	SpAppendString(buf, row->etag);
	if (row->content_type != NULL)
	{
		SpAppendKey(buf, &first, "contentType");
		SpAppendString(buf, row->content_type);
	}
	if (row->custom_metadata != NULL)
	{
		SpAppendKey(buf, &first, "customMetadata");
		appendStringInfoString(buf, row->custom_metadata);
	}
	SpAppendKey(buf, &first, "createdAt");
	SpAppendInt64(buf, row->created_at);
	SpAppendKey(buf, &first, "updatedAt");
	SpAppendInt64(buf, row->updated_at);
	appendStringInfoChar(buf, '}');
}

/* Append the BlobRecord of SPI result row `row`, its BLOB_RECORD_COLUMNS starting at first_col. */
void
BlobAppendRecord(StringInfo buf, int row, int first_col)
{
	BlobRow		r;

	r.key = SpGetText(row, first_col + BLOB_REC_KEY);
	SpGetInt64(row, first_col + BLOB_REC_SIZE, &r.size);
	r.etag = SpGetText(row, first_col + BLOB_REC_ETAG);
	r.content_type = SpGetText(row, first_col + BLOB_REC_CONTENT_TYPE);
	r.custom_metadata = SpGetText(row, first_col + BLOB_REC_CUSTOM_METADATA);
	SpGetInt64(row, first_col + BLOB_REC_CREATED_AT, &r.created_at);
	SpGetInt64(row, first_col + BLOB_REC_UPDATED_AT, &r.updated_at);
	BlobAppendRow(buf, &r);
}
