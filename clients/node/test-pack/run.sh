#!/usr/bin/env bash
# Pack the adapter as npm would publish it, install the tarball into a fresh app
# with the published @tanstack/ai and pg, type-check the app strictly (no
# skipLibCheck, so the published .d.ts files and their imports must resolve),
# then run a small HTTP server there against the test database (PG* env).
# Exits non-zero on any failure. Versions are the ones the adapter is tested
# with, so npm serves them from its cache (--prefer-offline).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
pkg="$(cd "$here/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

version() { node -p "require('$pkg/node_modules/$1/package.json').version"; }

echo "== npm pack"
tarball="$(cd "$pkg" && npm pack --silent --pack-destination "$work" | tail -n 1)"
listing="$(tar -tzf "$work/$tarball")"
for f in package/package.json package/README.md package/LICENSE \
         package/dist/index.js package/dist/index.d.ts package/dist/index.js.map \
         package/src/index.ts; do
  grep -qx "$f" <<<"$listing" || { echo "pack: $f missing from $tarball"; exit 1; }
done
node -e '
  const p = JSON.parse(require("child_process").execFileSync("tar", ["-xzOf", process.argv[1], "package/package.json"]));
  const fail = (m) => { console.error("pack: " + m); process.exit(1) };
  if (!p.peerDependencies?.pg) fail("pg must be a peer dependency");
  if (p.dependencies?.pg) fail("pg must not be a dependency");
  // An optional peer: the app picks @types/pg next to its own @types/node, so this
  // package never pulls a second @types/node major into it.
  if (!p.peerDependencies?.["@types/pg"] || !p.peerDependenciesMeta?.["@types/pg"]?.optional) fail("@types/pg must be an optional peer dependency");
  if (Object.keys(p.dependencies ?? {}).length > 0) fail("no runtime dependencies expected, got " + Object.keys(p.dependencies).join(", "));
  if (p.files?.includes("examples")) fail("examples/ is documented as not shipped");
' "$work/$tarball"

echo "== install into a fresh app"
app="$work/app"
mkdir -p "$app"
cp "$here/app/tsconfig.json" "$here/app/server.ts" "$app/"
printf '{ "name": "sp-pack-check", "private": true, "type": "module" }\n' >"$app/package.json"
(cd "$app" && npm install --prefer-offline --no-audit --no-fund --loglevel=error \
  "$work/$tarball" "@tanstack/ai@$(version @tanstack/ai)" "pg@$(version pg)" "@types/pg@$(version @types/pg)" \
  "typescript@$(version typescript)" "@types/node@$(version @types/node)" >/dev/null)

echo "== one @types/node in the app, the app's own"
node -e '
  const { execFileSync } = require("child_process");
  const tree = JSON.parse(execFileSync("npm", ["ls", "--all", "--json", "@types/node"], { cwd: process.argv[1], encoding: "utf8" }));
  const versions = new Set();
  (function walk(deps) {
    for (const [name, d] of Object.entries(deps ?? {})) {
      if (name === "@types/node" && d.version) versions.add(d.version);
      walk(d.dependencies);
    }
  })(tree.dependencies);
  if (versions.size !== 1 || ![...versions][0].startsWith(process.argv[2] + ".")) {
    console.error("pack: @types/node in the app: " + [...versions].join(", ") + " (expected only " + process.argv[2] + ".x)");
    process.exit(1);
  }
' "$app" "$(version @types/node | cut -d. -f1)"

echo "== type-check the app (strict, skipLibCheck false)"
(cd "$app" && npx tsc -p tsconfig.json)

echo "== run the app's server against the test database"
(cd "$app" && timeout 180 node dist/server.js)  # a hang's ceiling, not a budget
echo "pack-install-run: ok"
