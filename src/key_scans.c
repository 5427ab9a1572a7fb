/*
 * key_scans.c
 *
 * The extension's own index scans, one home for what the paths that leave
 * SPI out share (event_log.c, blob_rows.c, row_counts.c): opening one of its
 * tables or indexes by name, a text scan key under the index's collation,
 * and beginning a scan (index_beginscan takes an instrumentation argument
 * from PostgreSQL 18 on).
 *
 * Locking: the caller's lock mode, kept to the end of the transaction as a
 * statement keeps it (callers close with NoLock).
 */
#include "postgres.h"

#include "access/stratnum.h"
#include "catalog/namespace.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"

#include "key_scans.h"

/* The oid of relation `name` in the extension's schema (an error when missing). */
Oid
SpRelationOid(const char *name)
{
	Oid			relid = get_relname_relid(name, get_namespace_oid("sandbox_persist", false));

	if (!OidIsValid(relid))
		elog(ERROR, "relation sandbox_persist.%s does not exist", name);
	return relid;
}

/* Open table `name` of the extension's schema. */
Relation
SpOpenTable(const char *name, LOCKMODE lock)
{
	return table_open(SpRelationOid(name), lock);
}

/* Open index `name` of the extension's schema. */
Relation
SpOpenIndex(const char *name, LOCKMODE lock)
{
	return index_open(SpRelationOid(name), lock);
}

/* key: column attno of index idx equals the text value, under the column's collation. */
void
SpTextScanKey(ScanKey key, AttrNumber attno, Relation idx, text *value)
{
	ScanKeyEntryInitialize(key, 0, attno, BTEqualStrategyNumber, InvalidOid,
						   idx->rd_indcollation[attno - 1], F_TEXTEQ, PointerGetDatum(value));
}

/* Begin a scan of rel through idx with the keys, seeing what snapshot sees. */
IndexScanDesc
SpBeginIndexScan(Relation rel, Relation idx, Snapshot snapshot, ScanKey keys, int nkeys)
{
	IndexScanDesc scan;

#if PG_VERSION_NUM >= 180000
	scan = index_beginscan(rel, idx, snapshot, NULL, nkeys, 0);
#else
	scan = index_beginscan(rel, idx, snapshot, nkeys, 0);
#endif
	index_rescan(scan, keys, nkeys, NULL, 0);
	return scan;
}
