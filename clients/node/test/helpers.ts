/**
 * Test plumbing: a pool over the harness's PGHOST/PGPORT/PGUSER/PGDATABASE,
 * the reset function, and small assertion helpers.
 */
import pg from 'pg'
import { afterAll, expect } from 'vitest'
import { closeSharedListeners } from '../src/index.js'

const pools: Array<pg.Pool> = []

/** A pool to the test database (node-postgres reads the PG* environment). */
export function makePool(config: pg.PoolConfig = {}): pg.Pool {
  const pool = new pg.Pool({ max: 8, ...config })
  pool.on('error', () => undefined)
  pools.push(pool)
  return pool
}

afterAll(async () => {
  await closeSharedListeners()
  await Promise.all(pools.splice(0).map((p) => p.end().catch(() => undefined)))
})

/** Empty every table and restart sequences (needs sandbox_persist.allow_test_reset). */
export async function reset(pool: pg.Pool): Promise<void> {
  await pool.query('SELECT sandbox_persist._reset_for_tests()')
}

/** Rows of a raw query, for checking state behind the adapter's back. */
export async function rows<T = Record<string, unknown>>(pool: pg.Pool, text: string, values: unknown[] = []): Promise<T[]> {
  return (await pool.query(text, values)).rows as T[]
}

/** Await a rejection and return the error, failing when it resolves. */
export async function rejection(promise: Promise<unknown>): Promise<Error & Record<string, unknown>> {
  try {
    await promise
  } catch (error) {
    return error as Error & Record<string, unknown>
  }
  expect.fail('expected the call to reject')
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/**
 * Wait for an event rather than for a time: poll `condition` until it holds.
 * The ceiling only turns a hang into a failure; it is far above what any
 * condition needs on a busy machine, and a passing test never waits for it.
 */
export async function until(condition: () => boolean | Promise<boolean>, ceilingMs = 30_000): Promise<void> {
  const end = performance.now() + ceilingMs
  while (!(await condition())) {
    if (performance.now() > end) throw new Error(`condition not reached within ${ceilingMs} ms`)
    await sleep(10)
  }
}

/** A promise and the function that resolves it: a test waits for the moment it names. */
export function signal(): { reached: Promise<void>; reach: () => void } {
  let reach!: () => void
  const reached = new Promise<void>((r) => (reach = r))
  return { reached, reach }
}

/** A pool whose every query is recorded, to prove a call made no server round trip. */
export function countingPool(pool: pg.Pool): { db: { query: pg.Pool['query'] }; count: () => number } {
  let n = 0
  const db = {
    query: ((...args: unknown[]) => {
      n += 1
      return (pool.query as (...a: unknown[]) => unknown)(...args)
    }) as pg.Pool['query'],
  }
  return { db, count: () => n }
}

export const hex64 = (digit: string) => digit.repeat(64)
