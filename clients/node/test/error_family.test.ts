/**
 * One error family (issue 21 item 4): every error the adapter raises from the
 * database, and its own, is a `SandboxPersistError` with enumerable `code`,
 * `sqlstate`, `detail`, `hint` and `cause`; and when `@tanstack/ai-sandbox`
 * exports its `SandboxCheckpoint*Error` classes, the checkpoint store's errors
 * are instances of those too (here a stand-in package with upstream's names
 * and shapes, test/fixtures/ai-sandbox-errors-standin, since the real one is
 * not published). Cases ER1-ER6 (docs/contract/README.md §4.4).
 */
import { execFile } from 'node:child_process'
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import {
  EventLogOffsetDivergedError,
  InterruptBatchError,
  LeaseRowBusyError,
  LockAcquireTimeoutError,
  LockLostError,
  postgresCheckpoints,
  SandboxCheckpointConflictError,
  SandboxCheckpointDuplicateIdError,
  SandboxCheckpointError,
  SandboxCheckpointInvalidEntryError,
  SandboxCheckpointInvalidIdError,
  SandboxCheckpointNotHeadError,
  SandboxCheckpointParentMismatchError,
  SandboxCheckpointWriterConflictError,
  SandboxCheckpointWriterLostError,
  SandboxPersistConnectionError,
  SandboxPersistError,
  SandboxPersistInputError,
  SandboxPersistSetupError,
  SP_ERRORS,
  translateError,
} from '../src/index.js'
import { loadUpstreamErrors, useUpstreamErrors } from '../src/errors.js'
import * as standin from './fixtures/ai-sandbox-errors-standin/index.js'
import { makePool, rejection, reset } from './helpers.js'

const pool = makePool()
const FIELDS = ['code', 'sqlstate', 'detail', 'hint', 'cause']

function pgError(code: string, message: string, detail?: string): Error {
  return Object.assign(new Error(message), { code, ...(detail === undefined ? {} : { detail }) })
}

beforeAll(async () => {
  await reset(pool)
  // Whatever is installed (nothing, in this repository) has been looked at.
  await loadUpstreamErrors()
})

afterEach(() => useUpstreamErrors(undefined))

afterAll(async () => {
  await pool.end()
})

describe('one error family', () => {
  it('every row of the generated table translates to its code, its hint and the class of its family', () => {
    // error_codes.ts and the upstream-named classes are generated from src/errors.h
    // (scripts/gen_error_codes.sh); this is what translateError makes of them.
    const upstreamNamed: Record<string, Function> = {
      SANDBOX_SNAPSHOT_STALE_HEAD: SandboxCheckpointConflictError,
      SANDBOX_SNAPSHOT_PARENT_MISMATCH: SandboxCheckpointParentMismatchError,
      SANDBOX_SNAPSHOT_DUPLICATE_ID: SandboxCheckpointDuplicateIdError,
      SANDBOX_SNAPSHOT_NOT_HEAD: SandboxCheckpointNotHeadError,
      SANDBOX_SNAPSHOT_WRITER_CONFLICT: SandboxCheckpointWriterConflictError,
      SANDBOX_SNAPSHOT_WRITER_LOST: SandboxCheckpointWriterLostError,
      SANDBOX_SNAPSHOT_INVALID_ID: SandboxCheckpointInvalidIdError,
      SANDBOX_SNAPSHOT_INVALID_ENTRY: SandboxCheckpointInvalidEntryError,
    }
    for (const [sqlstate, { code, hint }] of Object.entries(SP_ERRORS)) {
      const error = translateError(pgError(sqlstate, 'x', 'A sentence.')) as SandboxPersistError
      expect(error, sqlstate).toBeInstanceOf(SandboxPersistError)
      expect(error, sqlstate).toMatchObject({ code, sqlstate, hint })
      const Named = upstreamNamed[code]
      if (Named !== undefined) {
        expect(error, sqlstate).toBeInstanceOf(Named)
        expect(error.name, sqlstate).toBe(Named.name)
        expect(new (Named as new (m: string) => SandboxPersistError)('m').code, sqlstate).toBe(code)
      }
      expect(error instanceof SandboxCheckpointError, sqlstate).toBe(code.startsWith('SANDBOX_SNAPSHOT_'))
      expect(error instanceof InterruptBatchError, sqlstate).toBe(code.startsWith('INTERRUPT_BATCH_'))
      expect(error instanceof EventLogOffsetDivergedError, sqlstate).toBe(code === 'EVENT_LOG_OFFSET_DIVERGED')
      expect(error instanceof LeaseRowBusyError, sqlstate).toBe(code === 'LEASE_ROW_BUSY')
    }
  })

  it('ER1 every error class derives from SandboxPersistError, with the five fields enumerable', () => {
    const samples: Error[] = [
      translateError(pgError('SP001', 'stale', 'Expected head "1".')) as Error,
      translateError(pgError('SP102', 'x', 'Interrupt batch references missing id: a.')) as Error,
      translateError(pgError('SP405', 'diverged', 'No entry there.')) as Error,
      translateError(pgError('SP501', 'busy', 'Row held.')) as Error,
      translateError(pgError('SP302', 'no upload', 'No open upload.')) as Error,
      translateError(pgError('22023', 'bad', 'Bad.')) as Error,
      translateError(pgError('22003', 'range')) as Error,
      translateError(pgError('3F000', 'schema "sandbox_persist" does not exist')) as Error,
      new LockAcquireTimeoutError('k', 10),
      new LockLostError('k', 'lost'),
      new SandboxPersistConnectionError('connect_failed', false, 1, new Error('ECONNREFUSED')),
      new SandboxCheckpointInvalidIdError('bad id'),
    ]
    for (const error of samples) {
      expect(error, error.name).toBeInstanceOf(SandboxPersistError)
      expect(error, error.name).toBeInstanceOf(Error)
      expect(Object.keys(error), error.name).toEqual(expect.arrayContaining(FIELDS))
      expect(typeof (error as SandboxPersistError).code, error.name).toBe('string')
    }
    expect(samples[0]).toBeInstanceOf(SandboxCheckpointConflictError)
    expect(samples[1]).toBeInstanceOf(InterruptBatchError)
    expect(samples[2]).toBeInstanceOf(EventLogOffsetDivergedError)
    expect(samples[3]).toBeInstanceOf(LeaseRowBusyError)
    expect(samples[5]).toBeInstanceOf(SandboxPersistInputError)
    expect(samples[7]).toBeInstanceOf(SandboxPersistSetupError)
    // Not everything is one of ours.
    expect(new Error('x')).not.toBeInstanceOf(SandboxPersistError)
    expect(new TypeError('x')).not.toBeInstanceOf(SandboxPersistError)
    expect(samples[5]).not.toBeInstanceOf(SandboxCheckpointError)
  })

  it('ER2 the fields survive JSON and carry the server detail, hint and driver error', () => {
    const driver = Object.assign(pgError('SP006', 'writer lost', 'The lease of thread "t" was taken over.'), {
      hint: 'Acquire again.',
    })
    const error = translateError(driver) as SandboxCheckpointWriterLostError
    expect(error.cause).toBe(driver)
    const plain = JSON.parse(JSON.stringify(error)) as Record<string, unknown>
    expect(plain).toMatchObject({
      code: 'SANDBOX_SNAPSHOT_WRITER_LOST',
      sqlstate: 'SP006',
      detail: 'The lease of thread "t" was taken over.',
      hint: 'Acquire again.',
      name: 'SandboxCheckpointWriterLostError',
    })
    // Without a server hint, the table's (generated from src/errors.h).
    const fromTable = translateError(pgError('SP006', 'writer lost', 'Lost.')) as SandboxPersistError
    expect(fromTable.hint).toBe(SP_ERRORS.SP006.hint)
  })

  it('ER3 the 0.3 constructor form of SandboxPersistError still works', () => {
    const cause = new Error('driver')
    const error = new SandboxPersistError('BLOB_UPLOAD_NOT_FOUND', 'gone', 'SP302', 'No upload.', { cause })
    expect(error).toMatchObject({ code: 'BLOB_UPLOAD_NOT_FOUND', sqlstate: 'SP302', detail: 'No upload.', cause })
    const modern = new SandboxPersistError('BLOB_UPLOAD_NOT_FOUND', 'gone', { sqlstate: 'SP302', hint: 'Begin again.' })
    expect(modern).toMatchObject({ sqlstate: 'SP302', hint: 'Begin again.', detail: undefined })
  })
})

describe('interop with @tanstack/ai-sandbox error classes', () => {
  it('ER4 with the classes loaded, translated and local checkpoint errors are instances of upstream classes too', () => {
    useUpstreamErrors(standin as unknown as Record<string, unknown>)
    const lost = translateError(pgError('SP006', 'lost', 'Lost.'))
    expect(lost).toBeInstanceOf(standin.SandboxCheckpointWriterLostError)
    expect(lost).toBeInstanceOf(standin.SandboxCheckpointError)
    expect(lost).toBeInstanceOf(SandboxCheckpointWriterLostError)
    expect(lost).toBeInstanceOf(SandboxCheckpointError)
    expect(lost).toBeInstanceOf(SandboxPersistError)
    expect(lost).toBeInstanceOf(Error)
    expect(lost).not.toBeInstanceOf(standin.SandboxCheckpointConflictError)
    expect(lost).not.toBeInstanceOf(SandboxCheckpointConflictError)
    expect(lost).toMatchObject({ code: 'SANDBOX_SNAPSHOT_WRITER_LOST', sqlstate: 'SP006', name: 'SandboxCheckpointWriterLostError' })
    // A code upstream has no class for: upstream's base.
    const fork = translateError(pgError('SP011', 'x', 'Destination has state.'))
    expect(fork).toBeInstanceOf(standin.SandboxCheckpointError)
    expect(fork).toBeInstanceOf(SandboxCheckpointError)
    // Raised by the adapter itself, before any call.
    expect(new SandboxCheckpointInvalidIdError('bad')).toBeInstanceOf(standin.SandboxCheckpointInvalidIdError)
    // Other families stay out of upstream's.
    expect(translateError(pgError('SP302', 'x', 'No upload.'))).not.toBeInstanceOf(standin.SandboxCheckpointError)
    useUpstreamErrors(undefined)
    expect(translateError(pgError('SP006', 'lost', 'Lost.'))).not.toBeInstanceOf(standin.SandboxCheckpointWriterLostError)
  })

  it('ER5 the checkpoint store: a writer conflict from the server is upstream\'s SandboxCheckpointWriterConflictError', async () => {
    useUpstreamErrors(standin as unknown as Record<string, unknown>)
    const store = postgresCheckpoints(pool)
    const first = await store.acquireWriter('interop-thread')
    try {
      const error = await rejection(store.acquireWriter('interop-thread'))
      expect(error).toBeInstanceOf(standin.SandboxCheckpointWriterConflictError)
      expect(error).toBeInstanceOf(SandboxCheckpointWriterConflictError)
      expect(error).toMatchObject({ code: 'SANDBOX_SNAPSHOT_WRITER_CONFLICT', sqlstate: 'SP005', hint: SP_ERRORS.SP005.hint })
      const invalid = await rejection(store.getHead(''))
      expect(invalid).toBeInstanceOf(standin.SandboxCheckpointInvalidIdError)
    } finally {
      await first.release()
    }
  })

  it('ER6 the built package finds an installed @tanstack/ai-sandbox by a dynamic import, and works without one', async () => {
    const root = mkdtempSync(join(tmpdir(), 'sp-interop-'))
    try {
      const dist = fileURLToPath(new URL('../dist/', import.meta.url))
      const fixture = fileURLToPath(new URL('./fixtures/ai-sandbox-errors-standin', import.meta.url))
      for (const app of ['with', 'without']) {
        mkdirSync(join(root, app, 'dist'), { recursive: true })
        for (const file of ['errors.js', 'error_codes.js']) cpSync(join(dist, file), join(root, app, 'dist', file))
      }
      mkdirSync(join(root, 'with', 'node_modules', '@tanstack'), { recursive: true })
      symlinkSync(fixture, join(root, 'with', 'node_modules', '@tanstack', 'ai-sandbox'), 'dir')
      const script = (app: string) => `
        const errors = await import(${JSON.stringify(new URL(`file://${join(root, app, 'dist', 'errors.js')}`).href)})
        await errors.loadUpstreamErrors()
        const e = errors.translateError(Object.assign(new Error('lost'), { code: 'SP006', detail: 'Lost.' }))
        let upstream = null
        try { upstream = await import('@tanstack/ai-sandbox') } catch {}
        console.log(JSON.stringify({
          ours: e instanceof errors.SandboxCheckpointWriterLostError,
          upstream: upstream === null ? null : e instanceof upstream.SandboxCheckpointWriterLostError,
        }))`
      const run = (app: string) =>
        new Promise<string>((resolve, reject) => {
          execFile(process.execPath, ['--input-type=module', '-e', script(app)], { cwd: join(root, app), timeout: 60_000 },
            (error, stdout, stderr) => (error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(stdout.trim())))
        })
      expect(JSON.parse(await run('with'))).toEqual({ ours: true, upstream: true })
      expect(JSON.parse(await run('without'))).toEqual({ ours: true, upstream: null })
    } finally {
      rmSync(root, { recursive: true, force: true })
    }
  })
})
