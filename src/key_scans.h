/*
 * key_scans.h
 *
 * The extension's own index scans (key_scans.c), for the hot paths that read
 * or write a table without SPI (docs/architecture.md, "Where SPI is left out").
 */
#ifndef SANDBOX_PERSIST_KEY_SCANS_H
#define SANDBOX_PERSIST_KEY_SCANS_H

#include "access/genam.h"
#include "access/table.h"
#include "utils/rel.h"
#include "utils/snapshot.h"

extern Oid	SpRelationOid(const char *name);
extern Relation SpOpenTable(const char *name, LOCKMODE lock);
extern Relation SpOpenIndex(const char *name, LOCKMODE lock);
extern void SpTextScanKey(ScanKey key, AttrNumber attno, Relation idx, text *value);
extern IndexScanDesc SpBeginIndexScan(Relation rel, Relation idx, Snapshot snapshot,
									  ScanKey keys, int nkeys);

#endif							/* SANDBOX_PERSIST_KEY_SCANS_H */
