-- Upgrade suite: the catalog facts of the extension, one line each,
-- "<object>\t<property>\t<value>", names instead of OIDs, sorted, so that two
-- databases can be compared line by line: for every member (functions,
-- tables, views, sequences) its owner, privileges, initial privileges
-- (pg_init_privs, what pg_dump compares against) and comment; for functions
-- proconfig, SECURITY DEFINER, volatility, strictness, parallel safety and
-- their whole definition; for relations their columns, constraints, indexes,
-- triggers and options; the schema's owner, privileges and initial
-- privileges; the extension's version and the tables and sequences it
-- registers for pg_dump, with their conditions.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only on
\pset fieldsep '\t'
SET client_min_messages = warning;

WITH ext AS (SELECT * FROM pg_catalog.pg_extension WHERE extname = 'sandbox_persist'),
members AS (
    SELECT d.classid, d.objid, pg_catalog.pg_describe_object(d.classid, d.objid, 0) AS obj
      FROM pg_catalog.pg_depend d, ext
     WHERE d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = ext.oid
       AND d.deptype = 'e'),
facts(obj, prop, val) AS (
    -- what the extension is made of
    SELECT 'extension', 'version', extversion FROM ext
    UNION ALL SELECT 'extension', 'relocatable', extrelocatable::text FROM ext
    UNION ALL SELECT 'extension', 'schema', extnamespace::regnamespace::text FROM ext
    UNION ALL SELECT 'extension', 'member', obj FROM members
    UNION ALL
    SELECT 'extension', 'dumped with pg_dump', c.oid::regclass::text || ' where ' || coalesce(cond, '(null)')
      FROM ext, unnest(ext.extconfig, ext.extcondition) AS u(cfg, cond)
      JOIN pg_catalog.pg_class c ON c.oid = u.cfg
    -- the schema
    UNION ALL
    SELECT 'schema sandbox_persist', 'owner', nspowner::regrole::text
      FROM pg_catalog.pg_namespace WHERE nspname = 'sandbox_persist'
    UNION ALL
    SELECT 'schema sandbox_persist', 'acl', coalesce(nspacl::text, '(default)')
      FROM pg_catalog.pg_namespace WHERE nspname = 'sandbox_persist'
    UNION ALL
    SELECT 'schema sandbox_persist', 'comment', coalesce(obj_description(oid, 'pg_namespace'), '(none)')
      FROM pg_catalog.pg_namespace WHERE nspname = 'sandbox_persist'
    -- initial privileges of members and the schema
    UNION ALL
    SELECT pg_catalog.pg_describe_object(i.classoid, i.objoid, i.objsubid), 'initial privileges',
           i.privtype::text || ' ' || i.initprivs::text
      FROM pg_catalog.pg_init_privs i
     WHERE (i.classoid, i.objoid) IN (SELECT classid, objid FROM members)
        OR (i.classoid = 'pg_catalog.pg_namespace'::regclass
            AND i.objoid = 'sandbox_persist'::regnamespace)
    UNION ALL
    SELECT m.obj, 'initial privileges', '(none)' FROM members m
     WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_init_privs i
                        WHERE i.classoid = m.classid AND i.objoid = m.objid)
    -- functions
    UNION ALL
    SELECT m.obj, x.prop, x.val
      FROM members m JOIN pg_catalog.pg_proc p
        ON m.classid = 'pg_catalog.pg_proc'::regclass AND p.oid = m.objid,
     LATERAL (VALUES
        ('owner', p.proowner::regrole::text),
        ('acl', coalesce(p.proacl::text, '(default)')),
        ('proconfig', coalesce(p.proconfig::text, '(none)')),
        ('security definer', p.prosecdef::text),
        ('volatility, strict, leakproof, parallel',
         concat_ws(' ', p.provolatile, p.proisstrict, p.proleakproof, p.proparallel)),
        ('cost, rows', p.procost || ' ' || p.prorows),
        ('definition', pg_catalog.pg_get_functiondef(p.oid)),
        ('comment', coalesce(obj_description(p.oid, 'pg_proc'), '(none)'))) AS x(prop, val)
    -- relations
    UNION ALL
    SELECT m.obj, x.prop, x.val
      FROM members m JOIN pg_catalog.pg_class c
        ON m.classid = 'pg_catalog.pg_class'::regclass AND c.oid = m.objid,
     LATERAL (VALUES
        ('owner', c.relowner::regrole::text),
        ('acl', coalesce(c.relacl::text, '(default)')),
        ('kind, persistence, row security', concat_ws(' ', c.relkind, c.relpersistence,
                                                       c.relrowsecurity, c.relforcerowsecurity)),
        ('options', coalesce(c.reloptions::text, '(none)')),
        ('comment', coalesce(obj_description(c.oid, 'pg_class'), '(none)')),
        ('view definition', CASE WHEN c.relkind = 'v' THEN pg_catalog.pg_get_viewdef(c.oid) END))
        AS x(prop, val)
     WHERE x.val IS NOT NULL
    UNION ALL
    SELECT m.obj, 'column ' || (SELECT count(*) FROM pg_catalog.pg_attribute l
                                  WHERE l.attrelid = a.attrelid AND l.attnum > 0
                                    AND NOT l.attisdropped AND l.attnum <= a.attnum)
                  || ' ' || a.attname,
           concat_ws(' ', pg_catalog.format_type(a.atttypid, a.atttypmod),
                     CASE WHEN a.attcollation <> 0 THEN 'collate ' || a.attcollation::regcollation END,
                     CASE WHEN a.attnotnull THEN 'not null' END,
                     CASE WHEN a.attidentity <> '' THEN 'identity ' || a.attidentity::text END,
                     CASE WHEN a.attgenerated <> '' THEN 'generated ' || a.attgenerated::text END,
                     'storage ' || a.attstorage::text,
                     'default ' || pg_catalog.pg_get_expr(ad.adbin, ad.adrelid),
                     'acl ' || a.attacl::text)
      FROM members m
      JOIN pg_catalog.pg_attribute a ON m.classid = 'pg_catalog.pg_class'::regclass
                                    AND a.attrelid = m.objid AND a.attnum > 0 AND NOT a.attisdropped
      LEFT JOIN pg_catalog.pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
    UNION ALL
    SELECT m.obj, 'constraint ' || co.conname, pg_catalog.pg_get_constraintdef(co.oid)
      FROM members m JOIN pg_catalog.pg_constraint co
        ON m.classid = 'pg_catalog.pg_class'::regclass AND co.conrelid = m.objid
    UNION ALL
    SELECT m.obj, 'index ' || i.indexrelid::regclass, pg_catalog.pg_get_indexdef(i.indexrelid)
      FROM members m JOIN pg_catalog.pg_index i
        ON m.classid = 'pg_catalog.pg_class'::regclass AND i.indrelid = m.objid
    UNION ALL
    SELECT m.obj, 'trigger ' || t.tgname, pg_catalog.pg_get_triggerdef(t.oid)
      FROM members m JOIN pg_catalog.pg_trigger t
        ON m.classid = 'pg_catalog.pg_class'::regclass AND t.tgrelid = m.objid AND NOT t.tgisinternal
    UNION ALL
    SELECT m.obj, 'sequence', concat_ws(' ', s.seqtypid::regtype, s.seqstart, s.seqincrement,
                                       s.seqmax, s.seqmin, s.seqcache, s.seqcycle)
      FROM members m JOIN pg_catalog.pg_sequence s
        ON m.classid = 'pg_catalog.pg_class'::regclass AND s.seqrelid = m.objid
)
SELECT obj, prop, replace(replace(val, E'\\', E'\\\\'), E'\n', E'\\n')
  FROM facts ORDER BY obj, prop, 3;
