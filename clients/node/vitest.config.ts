import { defineConfig } from 'vitest/config'

// One database, reset between suites: files and tests run serially.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    fileParallelism: false,
    pool: 'forks',
    poolOptions: { forks: { singleFork: true } },
    sequence: { concurrent: false },
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default'],
  },
})
