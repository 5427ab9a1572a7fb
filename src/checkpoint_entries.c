/*
 * checkpoint_entries.c
 *
 * Validation of checkpoint input (docs/contract/checkpoint-store.md §2-§3):
 * identifiers (every problem is INVALID_ID), member lookup, createdAt and
 * the optional header strings, and a checkpoint's file entries and
 * artifacts: workspace-relative paths, kinds, content-addressed
 * blob keys, safe-integer sizes and the rule that no file is an ancestor of
 * another entry. Every entry failure is SANDBOX_SNAPSHOT_INVALID_ENTRY. Valid input
 * is rewritten as canonical JSON (exactly the contract's keys, in the caller's
 * order) and its blob keys are collected for reference counting.
 *
 * The ancestor rule is checked in O(n log n): paths are sorted segment-wise,
 * so every entry beneath a path follows it directly. No locking.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "sandbox_persist.h"
#include "checkpoints.h"

/* One file or directory entry, kept for the ancestor check. */
typedef struct CkptPath
{
	const char *path;
	int			len;
	bool		is_file;
} CkptPath;

/* Raise INVALID_ENTRY for entry `index` of `what`. */
static void
CkptEntryError(const char *what, int index, const char *problem)
{
	sp_error(SP_SNAPSHOT_INVALID_ENTRY,
			 ("invalid checkpoint %s", what),
			 "Element %d of %s: %s.", index, what, problem);
}

/* Decode a required string member, refusing U+0000 and lone surrogates. */
static char *
CkptEntryString(const SpJson *node, const char *what, int index, const char *field,
				bool nonempty)
{
	char	   *s;
	int			len;

	if (node == NULL || node->kind != SPJ_STRING)
		CkptEntryError(what, index, psprintf("%s must be a string", field));
	if (SpJsonDecodeString(node->raw, node->rawlen, &s, &len) != SPS_OK)
		CkptEntryError(what, index,
					   psprintf("%s contains U+0000 or an unpaired surrogate", field));
	if (nonempty && len == 0)
		CkptEntryError(what, index, psprintf("%s must not be empty", field));
	return s;
}

/* Read a required size: a safe integer >= 0, never rounded. */
static int64
CkptEntrySize(const SpJson *node, const char *what, int index)
{
	int64		v = 0;

	if (node == NULL || node->kind != SPJ_NUMBER)
		CkptEntryError(what, index, "size must be a number");
	if (SpJsonGetInt(node, &v) != SP_INT_OK || v < 0)
		CkptEntryError(what, index, "size must be a safe integer >= 0");
	return v;
}

/* Make room for `more` blob keys in out->keys. */
static void
CkptReserveKeys(CkptEntries *out, int more)
{
	Size		size = sizeof(char *) * (out->nkeys + more + 1);

	out->keys = out->keys ? repalloc(out->keys, size) : palloc(size);
}

/* Check a workspace-relative path; returns NULL when valid, else the problem. */
static const char *
CkptPathProblem(const char *path)
{
	const char *seg = path;

	if (path[0] == '\0')
		return "path must not be empty";
	if (path[0] == '/' || path[0] == '\\')
		return "path must be relative";
	if (strchr(path, '\\') != NULL)
		return "path must not contain a backslash";
	if (((path[0] >= 'A' && path[0] <= 'Z') || (path[0] >= 'a' && path[0] <= 'z')) &&
		path[1] == ':' && (path[2] == '/' || path[2] == '\0'))
		return "path must not start with a drive letter";
	for (;;)
	{
		const char *slash = strchr(seg, '/');
		size_t		len = slash ? (size_t) (slash - seg) : strlen(seg);

		if (len == 0)
			return "path must not contain an empty segment";
		if ((len == 1 && seg[0] == '.') || (len == 2 && seg[0] == '.' && seg[1] == '.'))
			return "path must not contain . or .. segments";
		if (slash == NULL)
			return NULL;
		seg = slash + 1;
	}
}

/* Order paths segment-wise: '/' sorts before every other byte. */
static int
CkptPathCompare(const void *a, const void *b)
{
	const CkptPath *pa = a;
	const CkptPath *pb = b;
	int			n = Min(pa->len, pb->len);

	for (int i = 0; i < n; i++)
	{
		int			ca = pa->path[i] == '/' ? 0 : (unsigned char) pa->path[i] + 1;
		int			cb = pb->path[i] == '/' ? 0 : (unsigned char) pb->path[i] + 1;

		if (ca != cb)
			return ca - cb;
	}
	return pa->len - pb->len;
}

/* Refuse repeated paths and any entry beneath a file. */
static void
CkptCheckAncestors(CkptPath *paths, int n)
{
	qsort(paths, n, sizeof(CkptPath), CkptPathCompare);
	for (int i = 0; i + 1 < n; i++)
	{
		const CkptPath *cur = &paths[i];
		const CkptPath *next = &paths[i + 1];

		if (cur->len == next->len && memcmp(cur->path, next->path, cur->len) == 0)
			sp_error(SP_SNAPSHOT_INVALID_ENTRY,
					 ("invalid checkpoint files"),
					 "The path \"%s\" is declared more than once.", cur->path);
		if (cur->is_file && next->len > cur->len && next->path[cur->len] == '/' &&
			memcmp(cur->path, next->path, cur->len) == 0)
			sp_error(SP_SNAPSHOT_INVALID_ENTRY,
					 ("invalid checkpoint files"),
					 "The entry \"%s\" lies beneath the file \"%s\".", next->path, cur->path);
	}
}

/* Validate checkpoint files and write them canonically into out->files. */
void
CkptValidateFiles(const SpJson *files, CkptEntries *out)
{
	static const char *const names[] = {"path", "kind", "blobKey", "size"};
	CkptPath   *paths;

	initStringInfo(&out->files);
	if (files == NULL || files->kind != SPJ_ARRAY)
		sp_error(SP_SNAPSHOT_INVALID_ENTRY,
				 ("invalid checkpoint files"),
				 "files must be an array, not %s.",
				 files == NULL ? "absent" : SpJsonKindName(files->kind));
	paths = palloc(sizeof(CkptPath) * Max(files->count, 1));
	CkptReserveKeys(out, files->count);
	appendStringInfoChar(&out->files, '[');
	for (int i = 0; i < files->count; i++)
	{
		const SpJson *e = files->items[i];
		SpJson	   *m[lengthof(names)];
		char	   *path;
		char	   *kind;
		const char *problem;
		bool		first = true;

		if (e->kind != SPJ_OBJECT)
			CkptEntryError("files", i, "an entry must be an object");
		CkptMembers(e, names, lengthof(names), m, "a file entry");
		path = CkptEntryString(m[0], "files", i, "path", false);
		if ((problem = CkptPathProblem(path)) != NULL)
			CkptEntryError("files", i, psprintf("%s (\"%s\")", problem, path));
		kind = CkptEntryString(m[1], "files", i, "kind", false);
		if (i > 0)
			appendStringInfoChar(&out->files, ',');
		appendStringInfoChar(&out->files, '{');
		SpAppendKey(&out->files, &first, "path");
		SpAppendString(&out->files, path);
		SpAppendKey(&out->files, &first, "kind");
		SpAppendString(&out->files, kind);
		if (strcmp(kind, "file") == 0)
		{
			char	   *key = CkptEntryString(m[2], "files", i, "blobKey", false);
			int64		size;

			if (!SpIsContentKey(key, SP_CONTENT_FILES_PREFIX))
				CkptEntryError("files", i,
							   "blobKey must be " SP_CONTENT_FILES_PREFIX "<"
							   SP_STRINGIFY(SP_CONTENT_HASH_HEX_LEN) " lowercase hex digits>");
			size = CkptEntrySize(m[3], "files", i);
			SpAppendKey(&out->files, &first, "blobKey");
			SpAppendString(&out->files, key);
			SpAppendKey(&out->files, &first, "size");
			SpAppendInt64(&out->files, size);
			out->keys[out->nkeys++] = key;
		}
		else if (strcmp(kind, "dir") == 0)
		{
			if (m[2] != NULL || m[3] != NULL)
				CkptEntryError("files", i, "a dir entry has no blobKey and no size");
		}
		else
			CkptEntryError("files", i, psprintf("unknown kind \"%s\"", kind));
		appendStringInfoChar(&out->files, '}');
		paths[i].path = path;
		paths[i].len = strlen(path);
		paths[i].is_file = (kind[0] == 'f');
	}
	appendStringInfoChar(&out->files, ']');
	CkptCheckAncestors(paths, files->count);
}

/* Validate checkpoint artifacts and write them canonically into out->artifacts. */
void
CkptValidateArtifacts(const SpJson *artifacts, CkptEntries *out)
{
	static const char *const names[] = {
		"artifactId", "name", "mimeType", "size", "blobKey", "createdAt"
	};

	initStringInfo(&out->artifacts);
	if (artifacts == NULL || artifacts->kind != SPJ_ARRAY)
		sp_error(SP_SNAPSHOT_INVALID_ENTRY,
				 ("invalid checkpoint artifacts"),
				 "artifacts must be an array, not %s.",
				 artifacts == NULL ? "absent" : SpJsonKindName(artifacts->kind));
	CkptReserveKeys(out, artifacts->count);
	appendStringInfoChar(&out->artifacts, '[');
	for (int i = 0; i < artifacts->count; i++)
	{
		const SpJson *a = artifacts->items[i];
		SpJson	   *m[lengthof(names)];
		char	   *key;
		double		created;
		bool		first = true;

		if (a->kind != SPJ_OBJECT)
			CkptEntryError("artifacts", i, "an artifact must be an object");
		CkptMembers(a, names, lengthof(names), m, "a checkpoint artifact");
		if (i > 0)
			appendStringInfoChar(&out->artifacts, ',');
		appendStringInfoChar(&out->artifacts, '{');
		SpAppendKey(&out->artifacts, &first, "artifactId");
		SpAppendString(&out->artifacts, CkptEntryString(m[0], "artifacts", i, "artifactId", true));
		SpAppendKey(&out->artifacts, &first, "name");
		SpAppendString(&out->artifacts, CkptEntryString(m[1], "artifacts", i, "name", true));
		SpAppendKey(&out->artifacts, &first, "mimeType");
		SpAppendString(&out->artifacts, CkptEntryString(m[2], "artifacts", i, "mimeType", true));
		SpAppendKey(&out->artifacts, &first, "size");
		SpAppendInt64(&out->artifacts, CkptEntrySize(m[3], "artifacts", i));
		key = CkptEntryString(m[4], "artifacts", i, "blobKey", false);
		if (!SpIsContentKey(key, SP_CONTENT_ARTIFACTS_PREFIX))
			CkptEntryError("artifacts", i,
						   "blobKey must be " SP_CONTENT_ARTIFACTS_PREFIX "<"
						   SP_STRINGIFY(SP_CONTENT_HASH_HEX_LEN) " lowercase hex digits>");
		SpAppendKey(&out->artifacts, &first, "blobKey");
		SpAppendString(&out->artifacts, key);
		if (m[5] == NULL || m[5]->kind != SPJ_NUMBER || !SpJsonGetDouble(m[5], &created))
			CkptEntryError("artifacts", i, "createdAt must be a finite number");
		SpAppendKey(&out->artifacts, &first, "createdAt");
		SpAppendDouble(&out->artifacts, created);
		appendStringInfoChar(&out->artifacts, '}');
		out->keys[out->nkeys++] = key;
	}
	appendStringInfoChar(&out->artifacts, ']');
}

/*
 * Member lookup that ignores unknown keys: identifiers are checked before
 * entries, so an unknown key is reported only later, by CkptMembers. A
 * repeated key is INVALID_ENTRY at once: no later check could make it valid.
 */
void
CkptLookup(const SpJson *obj, const char *const *names, int nnames, SpJson **out)
{
	SpJsonMembers(obj, names, nnames, out, "checkpoint input", true, 0,
				  SP_SNAPSHOT_INVALID_ENTRY);
}

/* Strict member lookup for checkpoint input: unknown keys are INVALID_ENTRY. */
void
CkptMembers(const SpJson *obj, const char *const *names, int nnames, SpJson **out,
			const char *what)
{
	SpJsonMembers(obj, names, nnames, out, what, false, 0, SP_SNAPSHOT_INVALID_ENTRY);
}

/* The writer's threadId, checked as an identifier. */
char *
CkptReadWriterThread(const SpJson *writer)
{
	static const char *const names[] = {"threadId"};
	SpJson	   *m[1];

	if (writer == NULL || writer->kind != SPJ_OBJECT)
		return SpCheckIdJson(NULL, "writer.threadId", SP_ID_MAX_BYTES, SP_CHECK_CKPT_ID);	/* absent: INVALID_ID */
	SpJsonMembers(writer, names, 1, m, "writer", true, 0, SP_SNAPSHOT_INVALID_ENTRY);
	return SpCheckIdJson(m[0], "writer.threadId", SP_ID_MAX_BYTES, SP_CHECK_CKPT_ID);
}

/* The distinct blob keys of validated entries, as a text[] datum. */
Datum
CkptDistinctKeys(const CkptEntries *entries, int *nkeys)
{
	char	  **keys = palloc(sizeof(char *) * Max(entries->nkeys, 1));
	int			n = 0;

	if (entries->nkeys > 0)
	{
		memcpy(keys, entries->keys, sizeof(char *) * entries->nkeys);
		qsort(keys, entries->nkeys, sizeof(char *), pg_qsort_strcmp);
		for (int i = 0; i < entries->nkeys; i++)
			if (n == 0 || strcmp(keys[n - 1], keys[i]) != 0)
				keys[n++] = keys[i];
	}
	*nkeys = n;
	return SpTextArray(keys, n);
}
