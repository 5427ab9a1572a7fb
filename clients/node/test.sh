#!/usr/bin/env bash
# Build and test the Node adapter against the database named by the
# PGHOST/PGPORT/PGUSER/PGDATABASE environment (exported by `make test`). The
# database must have the extension and the test settings:
#   CREATE EXTENSION sandbox_persist;
#   ALTER DATABASE <db> SET sandbox_persist.allow_test_reset = on;
#   ALTER DATABASE <db> SET sandbox_persist.allow_client_clock = on;
# The suites reset that database, so they run serially. Exits non-zero on failure.
set -euo pipefail
cd "$(dirname "$0")"

echo "== npm ci"
npm ci --no-audit --no-fund --prefer-offline --loglevel=error

echo "== build (tsc -> dist/)"
npm run --silent build

echo "== type-check examples and tests"
npx tsc --noEmit -p tsconfig.examples.json
npx tsc --noEmit -p tsconfig.test.json

echo "== pack, install into a fresh app, type-check and run it"
bash test-pack/run.sh

echo "== vitest (serial)"
report=$(mktemp)
trap 'rm -f "$report"' EXIT
status=0
npx vitest run --no-file-parallelism --reporter=default --reporter=json --outputFile.json="$report" || status=$?
# One plain closing line as well, for tools that do not parse vitest's summary.
node -e '
  const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const skipped = r.numPendingTests + r.numTodoTests;
  console.log(`vitest: ${r.numPassedTests} passed, ${r.numFailedTests} failed` + (skipped ? `, ${skipped} skipped` : ""));
  // Each failed case with the first line of its error, so a CI summary names it.
  for (const file of r.testResults)
    for (const a of file.assertionResults)
      if (a.status === "failed") {
        const why = String((a.failureMessages ?? [])[0] ?? "").split("\n")[0].slice(0, 300);
        console.log(`vitest: failed: ${require("path").basename(file.name)} > ${a.fullName}: ${why}`);
      }
  // The official Durable Streams suite has 338 tests, the 6 of the
  // subscription APIs (PROTOCOL.md sections 6-7) included: streams_protocol
  // runs them (subscriptions: true), so every one is counted.
  const ds = r.testResults.filter((f) => /streams_protocol\.test\.ts$/.test(f.name)).flatMap((f) => f.assertionResults);
  if (ds.length > 0) {
    const count = (s) => ds.filter((a) => a.status === s).length;
    const passed = count("passed"), failed = count("failed");
    console.log(`summary: Durable Streams conformance 0.3.6: ${passed} of 338 passed, ${failed} failed, ` +
      `${338 - passed - failed} not run`);
  }
' "$report" 2>/dev/null || true
exit $status
