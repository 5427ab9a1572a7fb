// Checks META.json against the PGXN meta spec 1.0.0 (the keys and types it
// requires, and those it defines that we use) and against the tree: the
// version equals sandbox_persist.control's default_version, every provided
// file exists, PostgreSQL 15 is the lowest runtime requirement and pg_cron is
// recommended. Prints one line per check, "meta: ..." last; exits 1 on a
// failed check. Usage: node test/dist/meta.js [META.json]
import { readFileSync, existsSync } from "node:fs";
import { resolve, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const file = process.argv[2] ?? resolve(root, "META.json");
let failed = 0;
let passed = 0;
// check: one named assertion.
const check = (ok, what) => {
  console.log(`${ok ? "ok" : "not ok"} - ${what}`);
  if (ok) passed++; else failed++;
};
const isString = (v) => typeof v === "string" && v.length > 0;
const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
// Semantic version 2.0.0 as the spec requires for versions.
const isSemver = (v) => typeof v === "string" && /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$/.test(v);
// A prereq version: 0 (any) or a version string.
const isPrereqVersion = (v) => v === 0 || v === "0" || (typeof v === "string" && /^(>=|<=|==|!=|>|<)?\s*\d+(\.\d+)*/.test(v));

let meta;
try {
  meta = JSON.parse(readFileSync(file, "utf8"));
  check(true, "PX1 META.json is JSON");
} catch (e) {
  check(false, `PX1 META.json is JSON (${e.message})`);
  console.log("meta: PGXN META.json: 0 passed, 1 failed");
  process.exit(1);
}

// Required keys (spec: "Required" fields) and their types.
check(isString(meta.name) && /^[A-Za-z0-9_-]{2,}$/.test(meta.name), "PX2.1 name: a string of 2+ letters, digits, '-' or '_'");
check(isString(meta.abstract), "PX2.2 abstract: a string");
check(isSemver(meta.version), "PX2.3 version: a semantic version");
check((isString(meta.maintainer)) || (Array.isArray(meta.maintainer) && meta.maintainer.length > 0 && meta.maintainer.every(isString)),
  "PX2.4 maintainer: a string or a non-empty list of strings");
// No made-up address: the example domains (RFC 2606) are placeholders, not a contact.
check([].concat(meta.maintainer ?? []).every((m) => !/@(?:[a-z0-9-]+\.)*example\.(?:org|com|net)\b|\.(?:example|invalid|test)>/i.test(m)),
  "PX2.4.1 maintainer: no placeholder address (example.org/.com/.net, .example, .invalid, .test)");
const licenses = ["agpl_3", "apache_1_1", "apache_2_0", "artistic_1", "artistic_2", "bsd", "freebsd", "gfdl_1_2",
  "gfdl_1_3", "gpl_1", "gpl_2", "gpl_3", "lgpl_2_1", "lgpl_3_0", "mit", "mozilla_1_0", "mozilla_1_1", "openssl",
  "perl_5", "postgresql", "qpl_1_0", "ssleay", "sun", "zlib", "open_source", "restricted", "unrestricted", "unknown"];
check((isString(meta.license) && licenses.includes(meta.license)) || (isObject(meta.license) && Object.keys(meta.license).length > 0),
  "PX2.5 license: one of the spec's names, or an object of name -> URL");
check(isObject(meta["meta-spec"]) && meta["meta-spec"].version === "1.0.0", "PX2.6 meta-spec.version is 1.0.0");
check(isObject(meta.provides) && Object.keys(meta.provides).length > 0, "PX2.7 provides: a non-empty object");
for (const [ext, p] of Object.entries(meta.provides ?? {})) {
  check(isObject(p) && isString(p.file) && isSemver(p.version), `PX2.8 provides.${ext}: file and version (semantic)`);
  check(isString(p.file) && existsSync(resolve(root, p.file)), `PX2.9 provides.${ext}.file exists in the tree`);
  if (p.docfile !== undefined) check(isString(p.docfile) && existsSync(resolve(root, p.docfile)), `PX2.10 provides.${ext}.docfile exists`);
}

// Optional keys we use: their spec types.
check(meta.tags === undefined || (Array.isArray(meta.tags) && meta.tags.every((t) => isString(t) && t.length < 256)),
  "PX3.1 tags: a list of strings under 256 characters");
check(meta.resources === undefined || (isObject(meta.resources) &&
  Object.entries(meta.resources).every(([k, v]) => ["homepage", "bugtracker", "repository"].includes(k) || k.startsWith("x_")) &&
  (meta.resources.homepage === undefined || /^https?:\/\//.test(meta.resources.homepage))),
  "PX3.2 resources: homepage, bugtracker, repository (homepage a URL)");
check(meta.release_status === undefined || ["stable", "testing", "unstable"].includes(meta.release_status),
  "PX3.3 release_status: stable, testing or unstable");
const phases = ["configure", "build", "test", "runtime", "develop"];
const relations = ["requires", "recommends", "suggests", "conflicts"];
check(isObject(meta.prereqs) && Object.entries(meta.prereqs).every(([ph, rels]) => phases.includes(ph) && isObject(rels) &&
  Object.entries(rels).every(([rel, deps]) => relations.includes(rel) && isObject(deps) &&
    Object.values(deps).every(isPrereqVersion))),
  "PX3.4 prereqs: phase -> relation -> name -> version");

// Against the tree.
const control = readFileSync(resolve(root, "sandbox_persist.control"), "utf8");
const defaultVersion = /^default_version\s*=\s*'([^']+)'/m.exec(control)?.[1];
check(meta.version === defaultVersion, `PX4.1 version ${meta.version} equals the control file's default_version ${defaultVersion}`);
check(meta.provides?.sandbox_persist?.version === defaultVersion, "PX4.2 provides.sandbox_persist.version equals it too");
const pg = meta.prereqs?.runtime?.requires?.PostgreSQL;
check(typeof pg === "string" && /^15\.0\.0$/.test(pg), "PX4.3 runtime requires PostgreSQL 15.0.0 (15 and later)");
check(meta.prereqs?.runtime?.recommends?.pg_cron !== undefined, "PX4.4 pg_cron is recommended at runtime");
check(meta.prereqs?.test?.requires?.pgtap !== undefined, "PX4.5 pgtap is required by the tests");

console.log(`meta: PGXN META.json: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
