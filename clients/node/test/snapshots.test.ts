/**
 * `postgresSandboxSnapshots(pool, options)` (docs/contract/checkpoint-store.md
 * §11, cases SN1-SN8): the object upstream's `memorySandboxSnapshots` returns,
 * built by `createSandboxSnapshots` of the installed `@tanstack/ai-sandbox`
 * over this package's stores. The package is a stand-in here
 * (test/fixtures/ai-sandbox-standin: a small `createSandboxSnapshots` of the
 * documented shape; ai-sandbox-standin-0.2: a release without it). SN1-SN7
 * give the stand-ins to the function's body directly; SN8 runs the built
 * package in a child Node whose resolution of the bare specifier
 * `@tanstack/ai-sandbox` is pointed at each stand-in in turn.
 */
import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { beforeEach, describe, expect, it } from 'vitest'
import {
  SandboxCheckpointWriterConflictError,
  SandboxPersistPeerError,
  SandboxPersistSetupError,
  type SandboxDefinition,
} from '../src/index.js'
import { buildSandboxSnapshots, type PostgresSandboxSnapshotsOptions } from '../src/snapshots.js'
import { makePool, rejection, reset } from './helpers.js'

const pool = makePool()
const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url))
const STANDIN = fixture('ai-sandbox-standin')
const STANDIN_OLD = fixture('ai-sandbox-standin-0.2')

interface StandInModule {
  calls: Array<{ fn: string; keys?: string[]; threadId?: string; tenant?: unknown }>
}
const loadStandin = (): Promise<unknown> => import(`${STANDIN}/index.js`)
const standinCalls = async () => ((await loadStandin()) as StandInModule).calls

const build = (options: PostgresSandboxSnapshotsOptions = {}) => buildSandboxSnapshots(pool, options, loadStandin)

const sandbox: SandboxDefinition = { id: 'app-builder', provider: { name: 'stand-in-provider' } }
const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex')

/** A pool that fails the test if it is ever queried. */
const untouchable = {
  query: () => {
    throw new Error('the pool must not be queried')
  },
}

beforeEach(async () => {
  await reset(pool)
})

describe('postgresSandboxSnapshots', () => {
  it('SN1 returns persistence, a fork-capable checkpoint store and save, fork, readArtifact, built by createSandboxSnapshots', async () => {
    const before = (await standinCalls()).length
    const snapshots = await build({ sandbox, tenant: { userId: 'u1' }, leaseDurationMs: 5_000, renewAfterMs: 1_000 })
    expect(Object.keys(snapshots).sort()).toEqual(['checkpoints', 'fork', 'persistence', 'readArtifact', 'save'])
    expect(Object.keys(snapshots.persistence.stores).sort()).toEqual(
      ['artifacts', 'blobs', 'generationRuns', 'interrupts', 'messages', 'metadata', 'runs'],
    )
    expect(typeof snapshots.checkpoints.forkFromCheckpoint).toBe('function')
    for (const method of ['save', 'fork', 'readArtifact'] as const) expect(typeof snapshots[method]).toBe('function')
    // createSandboxSnapshots got the stores, our instance store and the bound
    // values; the checkpoint store's own options went to the store, not to it.
    const created = (await standinCalls()).slice(before).filter((c) => c.fn === 'createSandboxSnapshots')
    expect(created).toEqual([{ fn: 'createSandboxSnapshots', keys: ['checkpoints', 'instances', 'persistence', 'sandbox', 'tenant'] }])
    const lease = await snapshots.checkpoints.acquireWriter('sn1-thread')
    expect(lease.renewAfterMs).toBe(1_000)
    await lease.release()
    // A policy is passed through and comes back on the object, as upstream's does.
    const policy = { exclude: (path: string) => path.startsWith('tmp/') }
    const withPolicy = await build({ policy })
    expect(withPolicy.policy).toBe(policy)
  })

  it('SN2 save appends a named checkpoint on the head through our stores, with the transcript and the artifacts as blobs', async () => {
    const snapshots = await build({ sandbox })
    const { messages, artifacts, blobs } = snapshots.persistence.stores
    const transcript = [
      { role: 'user' as const, content: 'Create a landing page.' },
      { role: 'assistant' as const, content: 'Done: index.html.' },
    ]
    await messages.saveThread('sn-src', transcript)
    const bytes = new TextEncoder().encode('<h1>landing</h1>\n')
    await blobs.put('uploads/run-1/index.html', bytes)
    await artifacts.save({
      artifactId: 'art-1', runId: 'run-1', threadId: 'sn-src', blobKey: 'uploads/run-1/index.html',
      name: 'index.html', mimeType: 'text/html', size: bytes.byteLength, createdAt: 1_700_000_000_000,
    })

    const saved = await snapshots.save({ threadId: 'sn-src', runId: 'run-1', label: 'v1', tenant: { userId: 'u1' } })
    expect(saved).toMatchObject({ threadId: 'sn-src', parentCheckpointId: null, reason: 'named', label: 'v1', sourceRunId: 'run-1' })
    expect(await snapshots.checkpoints.getHead('sn-src')).toBe(saved.id)
    // What the store kept is what save returned.
    expect(await snapshots.checkpoints.get(saved.id)).toEqual(saved)
    expect(saved.conversation).toEqual(transcript)
    expect(saved.artifacts).toHaveLength(1)
    const key = saved.artifacts[0]!.blobKey
    expect(key).toMatch(/^sandbox-artifacts\/sha256\/[0-9a-f]{64}$/)
    expect(await snapshots.checkpoints.listBlobReferences()).toEqual([{ key, references: 1 }])
    // A second save is the new head, its parent the first; the lease was released.
    const second = await snapshots.save({ threadId: 'sn-src', runId: 'run-2', label: 'v2' })
    expect(second.parentCheckpointId).toBe(saved.id)
    expect((await snapshots.checkpoints.list('sn-src')).map((c) => c.id)).toEqual([saved.id, second.id])
  })

  it('SN3 readArtifact gives back the artifact and its exact bytes from the blob store', async () => {
    const snapshots = await build({ sandbox })
    const { artifacts, blobs } = snapshots.persistence.stores
    const bytes = Uint8Array.from({ length: 70_000 }, (_, i) => (i * 31 + 7) % 256)
    await blobs.put('uploads/run-1/app.bin', bytes)
    await artifacts.save({
      artifactId: 'art-bin', runId: 'run-1', threadId: 'sn-read', blobKey: 'uploads/run-1/app.bin',
      name: 'app.bin', mimeType: 'application/octet-stream', size: bytes.byteLength, createdAt: 5,
    })
    const saved = await snapshots.save({ threadId: 'sn-read', runId: 'run-1', label: 'with a file' })
    const read = await snapshots.readArtifact({ threadId: 'sn-read', checkpointId: saved.id, artifactId: 'art-bin' })
    expect(read.artifact).toEqual(saved.artifacts[0])
    expect(read.bytes.byteLength).toBe(bytes.byteLength)
    expect(hex(read.bytes)).toBe(hex(bytes))
  })

  it('SN4 fork makes a fork root in the destination thread (transcript copied, references counted) that readArtifact reads', async () => {
    const snapshots = await build({ sandbox })
    const { messages, artifacts, blobs } = snapshots.persistence.stores
    const transcript = [{ role: 'user' as const, content: 'Branch me.' }]
    await messages.saveThread('sn-a', transcript)
    await blobs.put('uploads/r/a.txt', 'kept in both threads')
    await artifacts.save({
      artifactId: 'art-a', runId: 'r', threadId: 'sn-a', blobKey: 'uploads/r/a.txt',
      name: 'a.txt', mimeType: 'text/plain', size: 20, createdAt: 9,
    })
    const saved = await snapshots.save({ threadId: 'sn-a', runId: 'r', label: 'base' })

    const forked = await snapshots.fork({
      threadId: 'sn-a', checkpointId: saved.id, destinationThreadId: 'sn-b', destinationCheckpointId: 'sn-b-root', createdAt: 42,
    })
    expect(forked).toMatchObject({ id: 'sn-b-root', threadId: 'sn-b', parentCheckpointId: null, reason: 'fork-root', createdAt: 42 })
    expect(forked.conversation).toEqual(transcript)
    expect(forked.artifacts).toEqual(saved.artifacts)
    expect(await snapshots.checkpoints.getHead('sn-b')).toBe('sn-b-root')
    expect(await messages.loadThread('sn-b')).toEqual(transcript)
    expect(await snapshots.checkpoints.listBlobReferences()).toEqual([{ key: saved.artifacts[0]!.blobKey, references: 2 }])
    const read = await snapshots.readArtifact({ threadId: 'sn-b', checkpointId: 'sn-b-root', artifactId: 'art-a' })
    expect(new TextDecoder().decode(read.bytes)).toBe('kept in both threads')
    // The source is unchanged, and its writer lease was released by the fork.
    expect(await snapshots.checkpoints.getHead('sn-a')).toBe(saved.id)
    const lease = await snapshots.checkpoints.acquireWriter('sn-b')
    await lease.release()
  })

  it('SN5 save under a live writer lease of the thread fails with the store\'s SP005 and appends nothing', async () => {
    const snapshots = await build({ sandbox })
    await snapshots.persistence.stores.messages.saveThread('sn-busy', [{ role: 'user', content: 'x' }])
    const holder = await snapshots.checkpoints.acquireWriter('sn-busy')
    try {
      const error = await rejection(snapshots.save({ threadId: 'sn-busy', runId: 'r', label: 'blocked' }))
      expect(error).toBeInstanceOf(SandboxCheckpointWriterConflictError)
      expect(await snapshots.checkpoints.getHead('sn-busy')).toBeNull()
    } finally {
      await holder.release()
    }
  })

  it('SN6 a package without createSandboxSnapshots: SandboxPersistPeerError PEER_EXPORT_MISSING naming the export, nothing queried', async () => {
    const error = await rejection(buildSandboxSnapshots(untouchable, {}, () => import(`${STANDIN_OLD}/index.js`)))
    expect(error).toBeInstanceOf(SandboxPersistPeerError)
    expect(error).toBeInstanceOf(SandboxPersistSetupError)
    expect(error).toMatchObject({ code: 'PEER_EXPORT_MISSING', peer: '@tanstack/ai-sandbox', missingExport: 'createSandboxSnapshots' })
    expect(error.message).toContain("The installed @tanstack/ai-sandbox does not export createSandboxSnapshots")
    expect(String(error.hint)).toContain('createSandboxSnapshots')
    // Present but not a function is the same error, saying what it is.
    const notAFunction = await rejection(buildSandboxSnapshots(untouchable, {}, async () => ({ createSandboxSnapshots: 1 })))
    expect(notAFunction).toMatchObject({ code: 'PEER_EXPORT_MISSING' })
    expect(notAFunction.message).toContain('(it exports a number by that name)')
  })

  it('SN7 the package not installed: PEER_NOT_INSTALLED with the install hint; a module missing inside the package is not that', async () => {
    const absent = Object.assign(new Error("Cannot find package '@tanstack/ai-sandbox' imported from /app/x.js"), {
      code: 'ERR_MODULE_NOT_FOUND',
    })
    const error = await rejection(buildSandboxSnapshots(untouchable, {}, () => Promise.reject(absent)))
    expect(error).toBeInstanceOf(SandboxPersistPeerError)
    expect(error).toMatchObject({ code: 'PEER_NOT_INSTALLED', peer: '@tanstack/ai-sandbox', missingExport: 'createSandboxSnapshots' })
    expect(String(error.hint)).toContain('npm install @tanstack/ai-sandbox')
    expect(error.cause).toBe(absent)
    const inner = Object.assign(new Error("Cannot find package '@tanstack/ai-persistence' imported from /app/node_modules/@tanstack/ai-sandbox/x.js"), {
      code: 'ERR_MODULE_NOT_FOUND',
    })
    expect(await rejection(buildSandboxSnapshots(untouchable, {}, () => Promise.reject(inner)))).toBe(inner)
  })

  it('SN8 the built package imports @tanstack/ai-sandbox itself: the stand-in, the release without the export, none', async () => {
    const run = (standin: string) =>
      new Promise<Record<string, unknown>>((resolve, reject) => {
        execFile(
          process.execPath,
          ['--import', fixture('resolve-ai-sandbox.mjs'), fixture('snapshots-resolve.mjs')],
          { env: { ...process.env, SP_AI_SANDBOX_STANDIN: standin }, encoding: 'utf8' },
          (error, stdout, stderr) => {
            if (error !== null) return reject(new Error(`${error.message}\n${stderr}`))
            resolve(JSON.parse(stdout.trim().split('\n').pop()!) as Record<string, unknown>)
          },
        )
      })
    const found = await run(STANDIN)
    expect(found).toMatchObject({
      ok: true,
      keys: ['checkpoints', 'fork', 'persistence', 'readArtifact', 'save'],
      stores: ['artifacts', 'blobs', 'generationRuns', 'interrupts', 'messages', 'metadata', 'runs'],
      forkCapable: true,
      standinCalls: [{ fn: 'createSandboxSnapshots', keys: ['checkpoints', 'instances', 'persistence'] }],
    })
    expect(await run(STANDIN_OLD)).toMatchObject({
      ok: false, name: 'SandboxPersistPeerError', code: 'PEER_EXPORT_MISSING', missingExport: 'createSandboxSnapshots', isSetupError: true,
    })
    expect(await run('none')).toMatchObject({ ok: false, name: 'SandboxPersistPeerError', code: 'PEER_NOT_INSTALLED' })
  })
})
