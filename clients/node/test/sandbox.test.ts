/**
 * The sandbox-side stores through the adapter: the upstream instance suite
 * (I1-I7), checkpoint suite (C1-C18) and fork suite (F1-F10), each case on an
 * emptied database, plus R23, S17 and the rule-4 encoding traps.
 */
import { beforeEach, describe, expect, it } from 'vitest'
import {
  postgresCheckpoints,
  postgresPersistence,
  postgresSandboxInstances,
  SandboxCheckpointError,
  SandboxCheckpointInvalidIdError,
  type ForkCapableSandboxCheckpointStore,
  type SandboxCheckpoint,
  type SandboxCheckpointStoreOptions,
  type SandboxCheckpointWriterLease,
  type SandboxInstanceRecord,
} from '../src/index.js'
import { countingPool, hex64, makePool, rejection, reset } from './helpers.js'

const pool = makePool()

beforeEach(async () => {
  await reset(pool)
})

// ---------------------------------------------------------------- instances

describe('sandbox instances', () => {
  const instances = postgresSandboxInstances(pool)
  const base: SandboxInstanceRecord = { key: 'thread-1', provider: 'fake', providerSandboxId: 'sb-1', threadId: 'thread-1', updatedAt: 1 }

  it('I1 get of an absent key is null', async () => {
    expect(await instances.get('absent')).toBeNull()
  })

  it('I2 a record with both optionals deep-equals after upsert', async () => {
    const full = { ...base, latestSnapshotId: 'snap-1', latestRunId: 'run-1' }
    await instances.upsert(full)
    expect(await instances.get('thread-1')).toEqual(full)
  })

  it('I3 a record without optionals reads back without the keys', async () => {
    await instances.upsert(base)
    const got = await instances.get('thread-1')
    expect(got).toEqual(base)
    expect(got && 'latestSnapshotId' in got).toBe(false)
    expect(got && 'latestRunId' in got).toBe(false)
  })

  it('I4 a re-upsert without latestSnapshotId replaces the row (also as an own undefined)', async () => {
    await instances.upsert({ ...base, latestSnapshotId: 'snap-1' })
    await instances.upsert({ ...base, providerSandboxId: 'sb-2', updatedAt: 2 })
    const got = await instances.get('thread-1')
    expect(got).toEqual({ ...base, providerSandboxId: 'sb-2', updatedAt: 2 })
    await instances.upsert({ ...base, latestSnapshotId: 'snap-2', latestRunId: 'r' })
    await instances.upsert({ ...base, latestSnapshotId: undefined, latestRunId: 'r', updatedAt: 3 })
    const cleared = await instances.get('thread-1')
    expect(cleared && 'latestSnapshotId' in cleared).toBe(false)
    // '' is a value, not absence
    await instances.upsert({ ...base, latestSnapshotId: '' })
    expect((await instances.get('thread-1'))?.latestSnapshotId).toBe('')
  })

  it('I5 keys a and b are independent', async () => {
    await instances.upsert({ ...base, key: 'a', providerSandboxId: 'sb-a' })
    await instances.upsert({ ...base, key: 'b', providerSandboxId: 'sb-b' })
    expect((await instances.get('a'))?.providerSandboxId).toBe('sb-a')
    expect((await instances.get('b'))?.providerSandboxId).toBe('sb-b')
  })

  it('I6 delete removes the record', async () => {
    await instances.upsert(base)
    await instances.delete('thread-1')
    expect(await instances.get('thread-1')).toBeNull()
  })

  it('I7 deleting a missing key resolves undefined', async () => {
    await expect(instances.delete('missing')).resolves.toBeUndefined()
  })

  it('the library write-back {...existing, latestRunId, updatedAt} is accepted; an unknown key is a TypeError', async () => {
    await instances.upsert(base)
    const existing = await instances.get('thread-1')
    await instances.upsert({ ...existing!, latestRunId: 'run-2', updatedAt: 5 })
    expect(await instances.get('thread-1')).toEqual({ ...base, latestRunId: 'run-2', updatedAt: 5 })
    await expect(instances.upsert({ ...base, extra: 1 } as never)).rejects.toBeInstanceOf(TypeError)
  })
})

// ---------------------------------------------------------------- checkpoint fixtures

function digits(id: string): string {
  const d = id.replace(/\D/g, '')
  return d === '' ? '1' : d
}

function fixture(id: string, parent: string | null, threadId = 'thread-a'): SandboxCheckpoint {
  const d = digits(id)
  return {
    id,
    threadId,
    parentCheckpointId: parent,
    createdAt: Number(d),
    reason: 'automatic',
    files: [{ path: `${id}.txt`, kind: 'file', blobKey: `sandbox-files/sha256/${d.padStart(64, '0').slice(-64)}`, size: 1 }],
    conversation: [{ role: 'user', content: id }],
    artifacts: [],
  }
}

function harness(options?: SandboxCheckpointStoreOptions) {
  const store = postgresCheckpoints(pool, options)
  const writers = new Map<string, SandboxCheckpointWriterLease>()
  const writer = async (threadId = 'thread-a') => {
    let w = writers.get(threadId)
    if (w === undefined) {
      w = await store.acquireWriter(threadId)
      writers.set(threadId, w)
    }
    return w
  }
  const append = async (checkpoint: SandboxCheckpoint, expectedHeadId: string | null) =>
    store.append({ checkpoint, expectedHeadId, writer: await writer(checkpoint.threadId) })
  const state = async (threadId = 'thread-a') => ({
    head: await store.getHead(threadId),
    list: (await store.list(threadId)).map((c) => c.id),
    refs: await store.listBlobReferences(),
  })
  return { store, writer, append, state }
}

async function expectCode(promise: Promise<unknown>, code: string): Promise<SandboxCheckpointError> {
  const error = await rejection(promise)
  expect(error).toBeInstanceOf(SandboxCheckpointError)
  expect(error).toMatchObject({ code })
  return error as unknown as SandboxCheckpointError
}

// ---------------------------------------------------------------- checkpoints

describe('checkpoints', () => {
  it('C1 unknown checkpoint and thread', async () => {
    const { store } = harness()
    expect(await store.get('missing')).toBeNull()
    expect(await store.getHead('thread-missing')).toBeNull()
    expect(await store.list('thread-missing')).toEqual([])
  })

  it('C2 appending a chain returns the heads and lists in order', async () => {
    const { store, append } = harness()
    expect(await append(fixture('1', null), null)).toEqual({ headId: '1' })
    expect(await append(fixture('2', '1'), '1')).toEqual({ headId: '2' })
    expect(await store.getHead('thread-a')).toBe('2')
    expect((await store.list('thread-a')).map((c) => c.id)).toEqual(['1', '2'])
    expect(await store.get('2')).toEqual(fixture('2', '1'))
  })

  it('C3 stale head and parent mismatch', async () => {
    const { append, state } = harness()
    await append(fixture('1', null), null)
    const before = await state()
    const stale = await expectCode(append(fixture('2', null), null), 'SANDBOX_SNAPSHOT_STALE_HEAD')
    expect(stale.name).toBe('SandboxCheckpointConflictError')
    await expectCode(append(fixture('3', null), '1'), 'SANDBOX_SNAPSHOT_PARENT_MISMATCH')
    expect(await state()).toEqual(before)
  })

  it('C4 a duplicate id is reported before the parent check', async () => {
    const { append } = harness()
    await append(fixture('1', null), null)
    await expectCode(append(fixture('1', null), '1'), 'SANDBOX_SNAPSHOT_DUPLICATE_ID')
  })

  it('C5 threads are independent', async () => {
    const { store, append } = harness()
    await append(fixture('1', null, 'thread-a'), null)
    await append(fixture('2', null, 'thread-b'), null)
    expect(await store.getHead('thread-a')).toBe('1')
    expect(await store.getHead('thread-b')).toBe('2')
    expect((await store.list('thread-b')).map((c) => c.id)).toEqual(['2'])
  })

  it('C6 list orders by createdAt, then id', async () => {
    const { store, append } = harness()
    await append({ ...fixture('z', null), createdAt: 2 }, null)
    await append({ ...fixture('a', 'z'), createdAt: 1 }, 'z')
    await append({ ...fixture('b', 'a'), createdAt: 1 }, 'a')
    expect((await store.list('thread-a')).map((c) => c.id)).toEqual(['a', 'b', 'z'])
  })

  it('C7 ties list in UTF-8 byte order; blob references come back in key order', async () => {
    const { store, append } = harness()
    let parent: string | null = null
    const keys = ['sandbox-files/sha256/' + hex64('c'), 'sandbox-files/sha256/' + hex64('a'), 'sandbox-files/sha256/' + hex64('b'), 'sandbox-files/sha256/' + hex64('0')]
    for (const [i, id] of ['é', 'a', 'B', '😀'].entries()) {
      const cp = { ...fixture(id, parent), createdAt: 1, files: [{ path: 'f.txt', kind: 'file' as const, blobKey: keys[i]!, size: 1 }] }
      await append(cp, parent)
      parent = id
    }
    expect((await store.list('thread-a')).map((c) => c.id)).toEqual(['B', 'a', 'é', '😀'])
    const refs = (await store.listBlobReferences()).map((r) => r.key)
    expect(refs).toEqual([...keys].sort())
  })

  it('C8 a lone-surrogate checkpoint id is INVALID_ID; inside a file key INVALID_ENTRY (via JSON escapes)', async () => {
    const { append, state } = harness()
    const before = await state()
    await expectCode(append(fixture('\ud800', null), null), 'SANDBOX_SNAPSHOT_INVALID_ID')
    const badKey = fixture('1', null)
    const entry = badKey.files[0]! as { blobKey: string }
    const withSurrogate = { ...badKey, files: [{ ...badKey.files[0]!, blobKey: entry.blobKey.slice(0, -1) + '\ud800' }] }
    await expectCode(append(withSurrogate as SandboxCheckpoint, null), 'SANDBOX_SNAPSHOT_INVALID_ENTRY')
    expect(await state()).toEqual(before)
  })

  for (const [id, value] of [['C9', NaN], ['C10', Infinity], ['C11', -Infinity]] as const) {
    it(`${id} createdAt ${String(value)} is INVALID_ENTRY and changes nothing`, async () => {
      const { append, state } = harness()
      await append(fixture('1', null), null)
      const before = await state()
      await expectCode(append({ ...fixture('2', '1'), createdAt: value }, '1'), 'SANDBOX_SNAPSHOT_INVALID_ENTRY')
      expect(await state()).toEqual(before)
    })
  }

  it('C12 stored data is independent of inputs and outputs; a key shared by two files counts once', async () => {
    const { store, append } = harness()
    const cp = fixture('1', null)
    const key = (cp.files[0] as { blobKey: string }).blobKey
    const input = { ...cp, files: [cp.files[0]!, { path: 'other.txt', kind: 'file' as const, blobKey: key, size: 1 }] }
    await append(input, null)
    ;(input.files as Array<{ path: string }>)[0]!.path = 'mutated'
    ;(input.conversation as unknown as Array<{ content: string }>)[0]!.content = 'mutated'
    const got = (await store.get('1'))!
    ;(got.files as unknown as Array<{ path: string }>)[0]!.path = 'mutated-output'
    const again = (await store.get('1'))!
    expect(again.files[0]!.path).toBe('1.txt')
    expect(again.conversation).toEqual([{ role: 'user', content: '1' }])
    expect(await store.listBlobReferences()).toEqual([{ key, references: 1 }])
  })

  it('C13 two checkpoints sharing a key count 2; deleting the head leaves 1', async () => {
    const { store, append, writer } = harness()
    const one = fixture('1', null)
    await append(one, null)
    await append({ ...fixture('2', '1'), files: one.files }, '1')
    const key = (one.files[0] as { blobKey: string }).blobKey
    expect(await store.listBlobReferences()).toEqual([{ key, references: 2 }])
    await store.deleteHead({ threadId: 'thread-a', checkpointId: '2', writer: await writer() })
    expect(await store.listBlobReferences()).toEqual([{ key, references: 1 }])
  })

  it('C14 a second acquire conflicts; another thread is free; after release it can be acquired again', async () => {
    const { store } = harness()
    const lease = await store.acquireWriter('thread-a')
    await expectCode(store.acquireWriter('thread-a'), 'SANDBOX_SNAPSHOT_WRITER_CONFLICT')
    await store.acquireWriter('thread-b')
    await lease.release()
    const again = await store.acquireWriter('thread-a')
    expect(again.fence).toBeGreaterThan(lease.fence)
  })

  it('C15 renew after renewAfterMs returns exactly {expiresAt: now + lease} and the live expiresAt grows', async () => {
    let now = 1000
    const { store } = harness({ now: () => now })
    const lease = await store.acquireWriter('thread-a')
    expect(lease.expiresAt).toBe(1000 + 120_000)
    expect(lease.renewAfterMs).toBe(45_000)
    const before = lease.expiresAt
    now += lease.renewAfterMs
    const renewed = await lease.renew()
    expect(renewed).toEqual({ expiresAt: now + 120_000 })
    expect(lease.expiresAt).toBe(now + 120_000)
    expect(lease.expiresAt).toBeGreaterThan(before)
  })

  it('C16 after expiry and a replacement, the old release does not free the thread', async () => {
    let now = 1000
    const { store } = harness({ now: () => now })
    const old = await store.acquireWriter('thread-a')
    now += 120_000 + 1
    const replacement = await store.acquireWriter('thread-a')
    expect(replacement.fence).toBeGreaterThan(old.fence)
    await old.release()
    await expectCode(store.acquireWriter('thread-a'), 'SANDBOX_SNAPSHOT_WRITER_CONFLICT')
  })

  it('C17 after expiry, before and after takeover, the old lease fails with WRITER_LOST and changes nothing', async () => {
    let now = Date.now()
    const { store } = harness({ now: () => now })
    const old = await store.acquireWriter('thread-a')
    await store.append({ checkpoint: fixture('1', null), expectedHeadId: null, writer: old })
    now += 120_000 + 1
    const snapshot = async () => ({ head: await store.getHead('thread-a'), list: (await store.list('thread-a')).map((c) => c.id), refs: await store.listBlobReferences() })
    const before = await snapshot()
    const attempts = () => [
      () => old.renew(),
      () => store.append({ checkpoint: fixture('2', '1'), expectedHeadId: '1', writer: old }),
      () => store.deleteHead({ threadId: 'thread-a', checkpointId: '1', writer: old }),
    ]
    for (const call of attempts()) await expectCode(call(), 'SANDBOX_SNAPSHOT_WRITER_LOST')
    expect(await snapshot()).toEqual(before)
    const takeover = await store.acquireWriter('thread-a')
    expect(takeover.fence).toBeGreaterThan(old.fence)
    for (const call of attempts()) await expectCode(call(), 'SANDBOX_SNAPSHOT_WRITER_LOST')
    expect(await snapshot()).toEqual(before)
    await old.release()
    await expectCode(store.acquireWriter('thread-a'), 'SANDBOX_SNAPSHOT_WRITER_CONFLICT')
    await store.append({ checkpoint: fixture('2', '1'), expectedHeadId: '1', writer: takeover })
  })

  it('C18 deleteHead of a non-head is NOT_HEAD; deleting walks the head back to none', async () => {
    const { store, append, writer } = harness()
    await append(fixture('1', null), null)
    await append(fixture('2', '1'), '1')
    const w = await writer()
    await expectCode(store.deleteHead({ threadId: 'thread-a', checkpointId: '1', writer: w }), 'SANDBOX_SNAPSHOT_NOT_HEAD')
    await store.deleteHead({ threadId: 'thread-a', checkpointId: '2', writer: w })
    expect(await store.getHead('thread-a')).toBe('1')
    await store.deleteHead({ threadId: 'thread-a', checkpointId: '1', writer: w })
    expect(await store.getHead('thread-a')).toBeNull()
    expect(await store.listBlobReferences()).toEqual([])
  })

  it('R14 an absent or own-undefined parent is a root; undefined label/sourceRunId are unset (rule 4)', async () => {
    const { store, append } = harness()
    const { parentCheckpointId: _p, ...noParent } = fixture('1', null)
    await append(noParent as SandboxCheckpoint, null)
    expect((await store.get('1'))?.parentCheckpointId).toBeNull()
    await append({ ...fixture('2', '1'), label: undefined, sourceRunId: undefined }, '1')
    const two = (await store.get('2'))!
    expect('label' in two || 'sourceRunId' in two).toBe(false)
    await append({ ...fixture('3', null, 'thread-c'), parentCheckpointId: undefined as never }, null)
    expect((await store.get('3'))?.parentCheckpointId).toBeNull()
  })

  it('rule 4: a directory entry with an own blobKey: undefined is rejected (S7, R17)', async () => {
    const { append, state } = harness()
    const before = await state()
    const dir = { ...fixture('1', null), files: [{ path: 'dir', kind: 'dir', blobKey: undefined } as never] }
    await expectCode(append(dir, null), 'SANDBOX_SNAPSHOT_INVALID_ENTRY')
    const fine = { ...fixture('1', null), files: [{ path: 'dir', kind: 'dir' } as const] }
    await append(fine, null)
    expect(before.head).toBeNull()
  })

  it('rule 8: the whole lease is passed as writer and only its three fields are sent', async () => {
    const { store } = harness()
    const lease = await store.acquireWriter('thread-a')
    // A lease with extra enumerable members (getter, functions) is accepted.
    await store.append({ checkpoint: fixture('1', null), expectedHeadId: null, writer: lease })
    // expectedHeadId absent (undefined) is INVALID_ID, not "no head".
    await expectCode(store.append({ checkpoint: fixture('2', '1'), expectedHeadId: undefined as never, writer: lease }), 'SANDBOX_SNAPSHOT_INVALID_ID')
  })

  it('the conversation travels verbatim, U+0000 and lone surrogates included', async () => {
    const { store, append } = harness()
    const conversation = [{ role: 'tool', content: 'a\u0000b\udc00', toolCallId: 'x' }] as never
    await append({ ...fixture('1', null), conversation }, null)
    expect((await store.get('1'))?.conversation).toEqual(conversation)
  })

  it('S17 list({}) throws SandboxCheckpointInvalidIdError without a server call', async () => {
    const counted = countingPool(pool)
    const store = postgresCheckpoints(counted.db)
    for (const call of [
      () => store.list({} as never),
      () => store.get(7 as never),
      () => store.getHead('a\ud800'),
      () => store.acquireWriter('nul\u0000'),
    ]) {
      const error = await rejection(call())
      expect(error).toBeInstanceOf(SandboxCheckpointInvalidIdError)
      expect(error.code).toBe('SANDBOX_SNAPSHOT_INVALID_ID')
    }
    expect(counted.count()).toBe(0)
  })

  it('S16 an empty thread id is INVALID_ID from the server', async () => {
    const { store } = harness()
    await expectCode(store.acquireWriter(''), 'SANDBOX_SNAPSHOT_INVALID_ID')
  })

  it('R23 invalid lease options throw a plain Error at construction', () => {
    const bad: SandboxCheckpointStoreOptions[] = [
      { leaseDurationMs: 0 },
      { leaseDurationMs: -1 },
      { leaseDurationMs: Infinity },
      { leaseDurationMs: NaN },
      { renewAfterMs: 0 },
      { renewAfterMs: -5 },
      { renewAfterMs: Infinity },
      { renewAfterMs: NaN },
      { leaseDurationMs: 1000, renewAfterMs: 1000 },
      { leaseDurationMs: 1000, renewAfterMs: 2000 },
    ]
    for (const options of bad) {
      let thrown: unknown
      try {
        postgresCheckpoints(pool, options)
      } catch (error) {
        thrown = error
      }
      expect(thrown, JSON.stringify(options)).toBeInstanceOf(Error)
      expect(Object.getPrototypeOf(thrown)).toBe(Error.prototype)
    }
    expect(() => postgresCheckpoints(pool, { leaseDurationMs: 1000, renewAfterMs: 999 })).not.toThrow()
  })

  it('leaseDurationMs travels to the server; now_ms is sent only when options.now is given', async () => {
    const store = postgresCheckpoints(pool, { leaseDurationMs: 5_000, renewAfterMs: 1_000 })
    const before = Date.now()
    const lease = await store.acquireWriter('thread-a')
    expect(lease.expiresAt).toBeGreaterThanOrEqual(before + 5_000)
    expect(lease.expiresAt).toBeLessThan(Date.now() + 5_000 + 1_000)
    // Without the setting the server refuses a client clock (SP901); with it, the clock is used.
    const client = await pool.connect()
    try {
      await client.query('SET sandbox_persist.allow_client_clock = off')
      const clocked = postgresCheckpoints({ query: client.query.bind(client) as never }, { now: () => 42 })
      const error = await rejection(clocked.acquireWriter('thread-b'))
      expect(error.code).toBe('CLIENT_CLOCK_NOT_ALLOWED')
      const plain = postgresCheckpoints({ query: client.query.bind(client) as never })
      await expect(plain.acquireWriter('thread-b')).resolves.toMatchObject({ threadId: 'thread-b', fence: 1 })
    } finally {
      await client.query('RESET sandbox_persist.allow_client_clock')
      client.release()
    }
  })
})

// ---------------------------------------------------------------- fork

describe('forkFromCheckpoint', () => {
  let store: ForkCapableSandboxCheckpointStore
  const messages = postgresPersistence(pool).stores.messages
  const sourceRoot: SandboxCheckpoint = {
    id: 'source-root',
    threadId: 'source',
    parentCheckpointId: null,
    createdAt: 10,
    reason: 'named',
    label: 'v1',
    sourceRunId: 'run-1',
    files: [{ path: 'a.txt', kind: 'file', blobKey: `sandbox-files/sha256/${hex64('a')}`, size: 1 }],
    conversation: [{ role: 'user', content: 'hello' }],
    artifacts: [],
  }
  let sourceLease: SandboxCheckpointWriterLease

  beforeEach(async () => {
    store = postgresCheckpoints(pool)
    sourceLease = await store.acquireWriter('source')
    await store.append({ checkpoint: sourceRoot, expectedHeadId: null, writer: sourceLease })
  })

  const destination = async () => ({
    transcript: await messages.loadThread('destination'),
    head: await store.getHead('destination'),
    list: await store.list('destination'),
    refs: await store.listBlobReferences(),
  })
  const input = (writer: unknown, overrides: Record<string, unknown> = {}) => ({
    sourceThreadId: 'source',
    sourceCheckpointId: 'source-root',
    destinationThreadId: 'destination',
    destinationCheckpointId: 'fork-root',
    createdAt: 20,
    writer: writer as SandboxCheckpointWriterLease,
    ...overrides,
  })

  it('F1 forks a historical checkpoint exactly; the destination transcript is its conversation', async () => {
    await store.append({
      checkpoint: { ...sourceRoot, id: 'source-next', parentCheckpointId: 'source-root', label: undefined, createdAt: 11 },
      expectedHeadId: 'source-root',
      writer: sourceLease,
    })
    await messages.saveThread('source', [{ role: 'user', content: 'overwritten' }])
    const lease = await store.acquireWriter('destination')
    const result = await store.forkFromCheckpoint(input(lease))
    expect(result).toEqual({
      checkpoint: {
        id: 'fork-root',
        threadId: 'destination',
        parentCheckpointId: null,
        createdAt: 20,
        reason: 'fork-root',
        files: sourceRoot.files,
        conversation: sourceRoot.conversation,
        artifacts: [],
      },
    })
    expect(await messages.loadThread('destination')).toEqual(sourceRoot.conversation)
    expect(await store.getHead('destination')).toBe('fork-root')
    expect(await store.getHead('source')).toBe('source-next')
  })

  it('F2 fork is a capability the adapter exposes', () => {
    expect(typeof store.forkFromCheckpoint).toBe('function')
  })

  it('F3 a missing source checkpoint is FORK_SOURCE_NOT_FOUND', async () => {
    const lease = await store.acquireWriter('destination')
    const before = await destination()
    await expectCode(store.forkFromCheckpoint(input(lease, { sourceCheckpointId: 'nope' })), 'SANDBOX_SNAPSHOT_FORK_SOURCE_NOT_FOUND')
    expect(await destination()).toEqual(before)
  })

  it('F4 a source thread that does not own the checkpoint is FORK_SOURCE_THREAD_MISMATCH', async () => {
    const lease = await store.acquireWriter('destination')
    const before = await destination()
    await expectCode(store.forkFromCheckpoint(input(lease, { sourceThreadId: 'elsewhere' })), 'SANDBOX_SNAPSHOT_FORK_SOURCE_THREAD_MISMATCH')
    expect(await destination()).toEqual(before)
  })

  it('F5 destination = source with the source lease is FORK_SOURCE_THREAD_MISMATCH; source unchanged', async () => {
    await messages.saveThread('source', [{ role: 'user', content: 'kept' }])
    const source = async () => ({
      transcript: await messages.loadThread('source'),
      head: await store.getHead('source'),
      list: await store.list('source'),
      refs: await store.listBlobReferences(),
    })
    const before = await source()
    await expectCode(
      store.forkFromCheckpoint(input(sourceLease, { destinationThreadId: 'source' })),
      'SANDBOX_SNAPSHOT_FORK_SOURCE_THREAD_MISMATCH',
    )
    expect(await source()).toEqual(before)
  })

  it('F6 a fabricated writer is WRITER_LOST', async () => {
    const before = await destination()
    await expectCode(
      store.forkFromCheckpoint(input({ threadId: 'destination', ownerToken: 'missing-owner', fence: 1 })),
      'SANDBOX_SNAPSHOT_WRITER_LOST',
    )
    expect(await destination()).toEqual(before)
  })

  it("F7 another thread's lease is WRITER_LOST", async () => {
    const other = await store.acquireWriter('other')
    const before = await destination()
    await expectCode(store.forkFromCheckpoint(input(other)), 'SANDBOX_SNAPSHOT_WRITER_LOST')
    expect(await destination()).toEqual(before)
  })

  it('F8 a released destination lease is WRITER_LOST', async () => {
    const lease = await store.acquireWriter('destination')
    await lease.release()
    const before = await destination()
    await expectCode(store.forkFromCheckpoint(input(lease)), 'SANDBOX_SNAPSHOT_WRITER_LOST')
    expect(await destination()).toEqual(before)
  })

  it('F9 a destination with a saved transcript is FORK_DESTINATION_NOT_EMPTY', async () => {
    await messages.saveThread('destination', [])
    const lease = await store.acquireWriter('destination')
    const before = await destination()
    await expectCode(store.forkFromCheckpoint(input(lease)), 'SANDBOX_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY')
    expect(await destination()).toEqual(before)
  })

  it('F10 a destination checkpoint id used in another thread is FORK_DESTINATION_NOT_EMPTY', async () => {
    const lease = await store.acquireWriter('destination')
    const before = await destination()
    await expectCode(
      store.forkFromCheckpoint(input(lease, { destinationCheckpointId: 'source-root' })),
      'SANDBOX_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY',
    )
    expect(await destination()).toEqual(before)
  })
})
