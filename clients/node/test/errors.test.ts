/**
 * Errors a user can act on: set-up failures (no extension, no grant, no
 * server files, an older extension) become one error class with a hint, and
 * option validation throws RangeError / TypeError with a code.
 */
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  postgresCheckpoints,
  postgresDurability,
  postgresLocks,
  postgresPersistence,
  SandboxPersistError,
  SandboxPersistSetupError,
  translateError,
  type SandboxPersistErrorCode,
} from '../src/index.js'
import { makePool, rejection } from './helpers.js'

const pool = makePool()
const NO_EXTENSION_DB = 'sandbox_persist_noext_test'
const NO_GRANT_ROLE = 'sandbox_persist_nogrant_test'

beforeAll(async () => {
  await pool.query(`DROP DATABASE IF EXISTS ${NO_EXTENSION_DB}`)
  await pool.query(`CREATE DATABASE ${NO_EXTENSION_DB}`)
  await pool.query(`DROP ROLE IF EXISTS ${NO_GRANT_ROLE}`)
  await pool.query(`CREATE ROLE ${NO_GRANT_ROLE} LOGIN`)
})

afterAll(async () => {
  await pool.query(`DROP DATABASE IF EXISTS ${NO_EXTENSION_DB} WITH (FORCE)`)
  await pool.query(`DROP ROLE IF EXISTS ${NO_GRANT_ROLE}`)
})

function pgError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code })
}

describe('set-up errors carry a hint', () => {
  it('a database without the extension: EXTENSION_NOT_INSTALLED, hint CREATE EXTENSION', async () => {
    const elsewhere = makePool({ database: NO_EXTENSION_DB, max: 1 })
    const error = await rejection(postgresPersistence(elsewhere).stores.runs.get('r'))
    expect(error).toBeInstanceOf(SandboxPersistSetupError)
    expect(error).toBeInstanceOf(SandboxPersistError)
    expect(error.code).toBe('EXTENSION_NOT_INSTALLED')
    expect(error.sqlstate).toBe('3F000')
    expect(error.hint).toMatch(/CREATE EXTENSION sandbox_persist/)
    expect(error.message).toMatch(/CREATE EXTENSION sandbox_persist/)
    expect((error.cause as { code?: string }).code).toBe('3F000')
    await elsewhere.end()
  })

  it('a role without the grant: PERMISSION_DENIED, hint grant_app_role', async () => {
    const stranger = makePool({ user: NO_GRANT_ROLE, max: 1 })
    const error = await rejection(postgresLocks(stranger).withLock('k', async () => 1))
    expect(error).toBeInstanceOf(SandboxPersistSetupError)
    expect(error.code).toBe('PERMISSION_DENIED')
    expect(error.sqlstate).toBe('42501')
    expect(error.hint).toMatch(/grant_app_role/)
    await stranger.end()
  })

  it('missing server files and an older extension are set-up errors too; unrelated errors pass through', () => {
    const files = translateError(pgError('58P01', 'could not access file "$libdir/sandbox_persist": No such file or directory'))
    expect(files).toBeInstanceOf(SandboxPersistSetupError)
    expect(files).toMatchObject({ code: 'SERVER_FILES_MISSING', sqlstate: '58P01' })
    expect((files as SandboxPersistSetupError).hint).toMatch(/install the sandbox_persist server package/)
    const old = translateError(pgError('42883', 'function sandbox_persist.event_log_read(text, bigint, integer) does not exist'))
    expect(old).toMatchObject({ code: 'EXTENSION_OUTDATED' })
    expect((old as SandboxPersistSetupError).hint).toMatch(/ALTER EXTENSION sandbox_persist UPDATE/)
    const other = pgError('3F000', 'schema "elsewhere" does not exist')
    expect(translateError(other)).toBe(other)
  })

  it('an SP code this package does not know is UNKNOWN_SP_ERROR, with its SQLSTATE', () => {
    const error = translateError(pgError('SP777', 'new')) as SandboxPersistError
    expect(error).toBeInstanceOf(SandboxPersistError)
    expect(error.code).toBe('UNKNOWN_SP_ERROR')
    expect(error.sqlstate).toBe('SP777')
    // The code is a union of the known codes, not any string.
    // @ts-expect-error not a SandboxPersistError code
    const notACode: SandboxPersistErrorCode = 'NOT_A_CODE'
    // @ts-expect-error SandboxPersistError['code'] is not string
    const alsoNot: SandboxPersistError['code'] = 'ANYTHING'
    expect([notACode, alsoNot]).toHaveLength(2)
  })
})

describe('option validation', () => {
  const thrown = (f: () => unknown): Error & { code?: string; option?: string } => {
    try {
      f()
    } catch (error) {
      return error as Error & { code?: string }
    }
    throw new Error('expected a throw')
  }

  it('out-of-range options are RangeError ERR_OUT_OF_RANGE; wrongly typed ones TypeError ERR_INVALID_ARG_TYPE', () => {
    const range = [
      () => postgresLocks(pool, { ttlMs: 999 }),
      () => postgresLocks(pool, { minPollMs: 0 }),
      () => postgresLocks(pool, { ttlMs: 5_000, renewEveryMs: 5_000 }),
      () => postgresDurability(pool, { fallbackPollMs: -1 }),
      () => postgresDurability(pool, { pageSize: 1.5 }),
      () => postgresPersistence(pool, { blobs: { readPieceBytes: 0 } }),
    ]
    for (const f of range) {
      const error = thrown(f)
      expect(error).toBeInstanceOf(RangeError)
      expect(error.code).toBe('ERR_OUT_OF_RANGE')
    }
    const types = [
      () => postgresLocks(pool, { ttlMs: '15000' as unknown as number }),
      () => postgresDurability(pool, { firstChunkDeadlineMs: 'soon' as unknown as number }),
    ]
    for (const f of types) {
      const error = thrown(f)
      expect(error).toBeInstanceOf(TypeError)
      expect(error.code).toBe('ERR_INVALID_ARG_TYPE')
    }
    expect(thrown(() => postgresLocks(pool, { ttlMs: 999 })).option).toBe('ttlMs')
  })

  it('checkpoint lease options stay a plain Error (the store contract) but carry a code too', () => {
    const error = thrown(() => postgresCheckpoints(pool, { leaseDurationMs: 0 }))
    expect(Object.getPrototypeOf(error)).toBe(Error.prototype)
    expect(error.code).toBe('ERR_OUT_OF_RANGE')
  })
})
