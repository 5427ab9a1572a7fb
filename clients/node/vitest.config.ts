import { defineConfig } from 'vitest/config'

// One database, reset between suites: files and tests run serially.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    fileParallelism: false,
    pool: 'forks',
    poolOptions: { forks: { singleFork: true } },
    sequence: { concurrent: false },
    // Ceilings that turn a hang into a failure, not budgets: a busy machine
    // (SANDBOX_PERSIST_CPU_HOG, issue 18) may run a test several times slower.
    testTimeout: 180_000,
    hookTimeout: 180_000,
    reporters: ['default'],
  },
})
