#!/usr/bin/env bash
# The repository stands alone: code, tests and docs cite the contract in
# docs/contract/, never documents that live outside the repository.
set -euo pipefail
cd "$(dirname "$0")/../.."
pattern='sql-api\.md|checkpoints\.md|persistence-stores\.md|durable-runs\.md|conformance-cases\.md|design\.md|shared/[s]pec|\.\./shared'
if ! command -v git >/dev/null 2>&1 || ! git rev-parse --git-dir >/dev/null 2>&1; then
    echo "summary: stands alone: skipped (not a git checkout)"
    exit 0
fi
found=$(git grep -nE "$pattern" -- . ':!*package-lock.json' || true)
if [ -n "$found" ]; then
    echo "$found"
    echo "summary: stands alone: $(echo "$found" | wc -l) references to documents outside the repository"
    exit 1
fi
echo "summary: stands alone: $(git ls-files | wc -l) tracked files, 0 references outside the repository"
