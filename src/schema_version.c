/*
 * schema_version.c
 *
 * The schema a C entry point needs (docs/architecture.md, "Stable C
 * symbols"): every entry point is named after its SQL function and serves
 * only the current storage layout. One that needs a layout newer than the
 * oldest schema a released script installs calls SpRequireSchema with the
 * release that introduced it, and a database still at an older schema gets
 * one clear error naming ALTER EXTENSION sandbox_persist UPDATE, instead of
 * whatever a statement written for another layout would raise.
 *
 * Locking: none; reads pg_extension with the catalog snapshot. A backend
 * remembers that it found the schema new enough (and for which layout), and
 * then answers without reading the catalog: a schema never becomes older
 * except by DROP EXTENSION and CREATE EXTENSION ... VERSION, and both drop or
 * create the extension's functions, so every pg_proc invalidation (a
 * syscache callback on PROCOID; also a full cache reset after a sinval
 * overflow) forgets the answer, in this backend at the next command, in the
 * others when they next accept invalidations (a new transaction, a lock),
 * the same moment they would see the new catalog. An answer that refused is
 * not remembered, so ALTER EXTENSION ... UPDATE takes effect at once.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "sandbox_persist.h"

/* The newest layout the schema was found to have, NULL when not known. */
static const char *schema_ok_since = NULL;
static bool schema_callback_registered = false;

/* Syscache callback: pg_proc changed (DROP or CREATE EXTENSION among others), forget the answer. */
static void
SchemaForget(Datum arg, int cacheid, uint32 hashvalue)
{
	schema_ok_since = NULL;
}

/* Compare two dotted versions ("0.3.0") numerically: <0, 0 or >0. */
static int
SchemaVersionCompare(const char *a, const char *b)
{
	while (*a || *b)
	{
		long		x = strtol(a, (char **) &a, 10);
		long		y = strtol(b, (char **) &b, 10);

		if (x != y)
			return x < y ? -1 : 1;
		if (*a == '.')
			a++;
		if (*b == '.')
			b++;
		if ((*a && !isdigit((unsigned char) *a)) || (*b && !isdigit((unsigned char) *b)))
			return strcmp(a, b);
	}
	return 0;
}

/* The installed version of extension `ext` (palloc'd), or NULL when it has none. */
static char *
SchemaInstalledVersion(Oid ext)
{
	Relation	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	char	   *version = NULL;

	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(ext));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		bool		isnull;
		Datum		d = heap_getattr(tuple, Anum_pg_extension_extversion,
									 RelationGetDescr(rel), &isnull);

		if (!isnull)
			version = text_to_cstring(DatumGetTextPP(d));
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return version;
}

/*
 * True when the database's sandbox_persist schema is at release `since` or
 * later; otherwise false, with the installed version in *found. During CREATE
 * or ALTER EXTENSION of sandbox_persist itself the version row is not final
 * yet, so the answer is true and nothing is remembered.
 */
static bool
SchemaIsAtLeast(const char *since, char **found)
{
	Oid			ext;
	char	   *version;

	if (schema_ok_since != NULL &&
		(schema_ok_since == since || SchemaVersionCompare(schema_ok_since, since) >= 0))
		return true;
	/* Registered before the catalog is read, so no invalidation after the read is missed. */
	if (!schema_callback_registered)
	{
		CacheRegisterSyscacheCallback(PROCOID, SchemaForget, (Datum) 0);
		schema_callback_registered = true;
	}
	ext = get_extension_oid("sandbox_persist", true);
	if (ext == InvalidOid || (creating_extension && CurrentExtensionObject == ext))
		return true;
	version = SchemaInstalledVersion(ext);
	if (version != NULL && SchemaVersionCompare(version, since) < 0)
	{
		*found = version;
		return false;
	}
	schema_ok_since = since;
	return true;
}

/* True when the schema is at release `since` or later, for a path that has another way. */
bool
SpSchemaIsAtLeast(const char *since)
{
	char	   *found;

	return SchemaIsAtLeast(since, &found);
}

/*
 * Raise 55000 unless the database's sandbox_persist schema is at release
 * `since` or later; `function` names the SQL function in the message.
 */
void
SpRequireSchema(const char *since, const char *function)
{
	char	   *version;

	if (!SchemaIsAtLeast(since, &version))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the sandbox_persist schema of this database is older than its library"),
				 errdetail("%s() needs the schema of sandbox_persist %s or later; this database is at %s.",
						   function, since, version),
				 errhint("Run ALTER EXTENSION sandbox_persist UPDATE.")));
}
