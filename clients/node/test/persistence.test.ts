/**
 * The upstream persistence suite's cases (P01-P24), run again through the
 * adapter on one shared instance over an emptied database, plus the
 * durable-run-fields case (D1), the reference cases the adapter must show
 * (R1-R3, R28, S20), and the encoding traps of docs/contract/README.md §6.
 */
import type { ModelMessage } from '@tanstack/ai'
import { beforeAll, describe, expect, it } from 'vitest'
import { InterruptBatchError, postgresPersistence, postgresRunStore, SandboxPersistError, type ArtifactRecord } from '../src/index.js'
import { countingPool, makePool, rejection, reset, rows } from './helpers.js'

const pool = makePool()
const persistence = postgresPersistence(pool)
const { messages, runs, interrupts, metadata, generationRuns, artifacts } = persistence.stores

beforeAll(async () => {
  await reset(pool)
})

describe('shape', () => {
  it('exposes exactly the seven store keys with every optional method', () => {
    expect(Object.keys(persistence.stores).sort()).toEqual(
      ['artifacts', 'blobs', 'generationRuns', 'interrupts', 'messages', 'metadata', 'runs'],
    )
    expect(typeof runs.listByThread).toBe('function')
    expect(typeof runs.listReclaimable).toBe('function')
    expect(typeof interrupts.commitBatch).toBe('function')
    expect(typeof artifacts.listForThread).toBe('function')
  })
})

describe('messages', () => {
  it('P01 unknown thread loads [], a save round-trips and a second save replaces', async () => {
    expect(await messages.loadThread('thread-unknown')).toEqual([])
    const two: ModelMessage[] = [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'hello' },
    ]
    await messages.saveThread('thread-msg', two)
    expect(await messages.loadThread('thread-msg')).toEqual(two)
    await messages.saveThread('thread-msg', [{ role: 'user', content: 'redo' }])
    expect(await messages.loadThread('thread-msg')).toEqual([{ role: 'user', content: 'redo' }])
  })

  it('P02 rich message shapes round-trip with deep equality', async () => {
    const rich: ModelMessage[] = [
      { role: 'user', content: 'plain string' },
      {
        role: 'assistant',
        content: '',
        toolCalls: [{ id: 'call-1', type: 'function', function: { name: 'search', arguments: '{"query":"weather in Paris"}' } }],
      },
      { role: 'tool', content: '{"temperature":21,"unit":"C"}', toolCallId: 'call-1' },
      {
        role: 'user',
        content: [
          { type: 'text', content: 'What is in this image?' },
          { type: 'image', source: { type: 'url', value: 'https://example.com/cat.png', mimeType: 'image/png' } },
        ],
      },
      { role: 'assistant', content: 'Here is my answer.', thinking: [{ content: 'The user asks.', signature: 'sig-1' }] },
    ] as ModelMessage[]
    await messages.saveThread('thread-rich', rich)
    expect(await messages.loadThread('thread-rich')).toEqual(rich)
  })

  it('messages keep U+0000, lone surrogates, key order and nested undefined-free shapes exactly', async () => {
    const tricky = [
      { role: 'tool', content: 'bin\u0000ary \ud800 tail', toolCallId: 'c' },
      { z: 1, a: 2, role: 'user', content: 'order' },
    ] as unknown as ModelMessage[]
    await messages.saveThread('thread-tricky', tricky)
    const back = await messages.loadThread('thread-tricky')
    expect(back).toEqual(tricky)
    expect(Object.keys(back[1] as object)).toEqual(['z', 'a', 'role', 'content'])
  })

  it('an array transcript is sent as JSON text, not a PostgreSQL array literal (rule 2)', async () => {
    await messages.saveThread('thread-array', [])
    expect(await messages.loadThread('thread-array')).toEqual([])
    const [row] = await rows<{ t: string }>(pool, `SELECT transcript::text AS t FROM sandbox_persist.messages WHERE thread_id = 'thread-array'`)
    expect(row?.t).toBe('[]')
  })
})

describe('runs', () => {
  it('P03 creates, resumes idempotently, updates and gets', async () => {
    expect(await runs.get('run-missing')).toBeNull()
    const created = await runs.createOrResume({ runId: 'run-1', threadId: 'thread-1', startedAt: 1000 })
    expect(created).toEqual({ runId: 'run-1', threadId: 'thread-1', status: 'running', startedAt: 1000 })
    const resumed = await runs.createOrResume({ runId: 'run-1', threadId: 'thread-different', startedAt: 9999 })
    expect(resumed).toEqual(created)
    await runs.update('run-1', {
      status: 'completed',
      finishedAt: 2000,
      usage: { promptTokens: 3, completionTokens: 4, totalTokens: 7 },
    })
    expect(await runs.get('run-1')).toMatchObject({
      runId: 'run-1',
      status: 'completed',
      finishedAt: 2000,
      usage: { promptTokens: 3, completionTokens: 4, totalTokens: 7 },
    })
    expect(await runs.createOrResume({ runId: 'run-1', threadId: 'x', startedAt: 1 })).toEqual(await runs.get('run-1'))
    await runs.update('run-1', { status: 'failed', error: { message: 'boom', code: 'provider_overloaded' } })
    const failed = await runs.get('run-1')
    expect(failed?.status).toBe('failed')
    expect(failed?.error).toEqual({ message: 'boom', code: 'provider_overloaded' })
    await expect(runs.update('run-absent', { status: 'completed' })).resolves.toBeUndefined()
    expect(await runs.get('run-absent')).toBeNull()
  })

  it('P04 createOrResume never resurrects a finished run', async () => {
    await runs.createOrResume({ runId: 'nc-1', threadId: 'nc-t', startedAt: 10 })
    await runs.update('nc-1', { status: 'completed', finishedAt: 20 })
    const resumed = await runs.createOrResume({ runId: 'nc-1', threadId: 'nc-t', startedAt: 999, status: 'running' })
    expect(resumed).toMatchObject({ runId: 'nc-1', status: 'completed', startedAt: 10, finishedAt: 20 })
    expect(await runs.get('nc-1')).toMatchObject({ status: 'completed', startedAt: 10, finishedAt: 20 })
  })

  it('P05 findActiveRun returns the most recent running run of the thread', async () => {
    const thread = 'thread-active'
    expect(await runs.findActiveRun(thread)).toBeNull()
    await runs.createOrResume({ runId: 'active-1', threadId: thread, startedAt: 1000 })
    await runs.createOrResume({ runId: 'active-2', threadId: thread, startedAt: 2000 })
    expect(await runs.findActiveRun(thread)).toMatchObject({ runId: 'active-2', status: 'running' })
    await runs.createOrResume({ runId: 'other-1', threadId: 'thread-other', startedAt: 3000 })
    expect(await runs.findActiveRun(thread)).toMatchObject({ runId: 'active-2' })
    await runs.update('active-2', { status: 'completed', finishedAt: 2500 })
    expect(await runs.findActiveRun(thread)).toMatchObject({ runId: 'active-1', status: 'running' })
    await runs.update('active-1', { status: 'completed', finishedAt: 1500 })
    expect(await runs.findActiveRun(thread)).toBeNull()
  })

  it('P06 listByThread orders by startedAt', async () => {
    await runs.createOrResume({ runId: 'lt-b', threadId: 'lt', startedAt: 2 })
    await runs.createOrResume({ runId: 'lt-a', threadId: 'lt', startedAt: 1 })
    expect((await runs.listByThread('lt')).map((r) => r.runId)).toEqual(['lt-a', 'lt-b'])
    expect(await runs.listByThread('lt-none')).toEqual([])
  })

  it('P07 listReclaimable: running, detached, detachedSince <= now - ttl (inclusive); clears and statuses', async () => {
    const now = 10_000
    const ttlMs = 5_000
    const cutoff = now - ttlMs
    await runs.createOrResume({ runId: 'rc-included', threadId: 'rc-t', startedAt: 1 })
    await runs.update('rc-included', { detachedSince: 1_000 })
    await runs.createOrResume({ runId: 'rc-boundary', threadId: 'rc-t', startedAt: 1 })
    await runs.update('rc-boundary', { detachedSince: cutoff })
    await runs.createOrResume({ runId: 'rc-too-recent', threadId: 'rc-t', startedAt: 1 })
    await runs.update('rc-too-recent', { detachedSince: cutoff + 1 })
    await runs.createOrResume({ runId: 'rc-completed', threadId: 'rc-t', startedAt: 1 })
    await runs.update('rc-completed', { detachedSince: 1_000, status: 'completed', finishedAt: 2_000 })
    await runs.createOrResume({ runId: 'rc-never-detached', threadId: 'rc-t', startedAt: 1 })
    const listed = await runs.listReclaimable({ now, ttlMs })
    expect(listed.map((r) => r.runId).filter((id) => id.startsWith('rc-')).sort()).toEqual(['rc-boundary', 'rc-included'])
    // oldest detachedSince first (sandbox_persist's order)
    expect(listed.map((r) => r.runId)).toEqual(['rc-included', 'rc-boundary'])

    await runs.createOrResume({ runId: 'rc-zero', threadId: 'rc-t', startedAt: 1 })
    await runs.update('rc-zero', { detachedSince: now })
    expect((await runs.listReclaimable({ now, ttlMs: 0 })).find((r) => r.runId === 'rc-zero')?.detachedSince).toBe(now)

    await runs.createOrResume({ runId: 'rc-reattached', threadId: 'rc-t', startedAt: 1 })
    await runs.update('rc-reattached', { detachedSince: 1_000 })
    await runs.update('rc-reattached', { detachedSince: undefined })
    expect((await runs.listReclaimable({ now, ttlMs })).some((r) => r.runId === 'rc-reattached')).toBe(false)
    expect(await runs.get('rc-reattached')).not.toHaveProperty('detachedSince')

    const terminal = await Promise.all(
      (['completed', 'failed', 'aborted'] as const).map(async (status) => {
        const runId = `rc-${status}-x`
        await runs.createOrResume({ runId, threadId: 'rc-t', startedAt: 1 })
        await runs.update(runId, { status, detachedSince: 1_000, finishedAt: 2_000 })
        return runId
      }),
    )
    await runs.createOrResume({ runId: 'rc-interrupted', threadId: 'rc-t', startedAt: 1 })
    await runs.update('rc-interrupted', { status: 'interrupted', detachedSince: 1_000 })
    const after = (await runs.listReclaimable({ now, ttlMs })).map((r) => r.runId)
    expect(after.some((id) => terminal.includes(id) || id === 'rc-interrupted')).toBe(false)
  })

  it('S20 a run never detached is not reclaimable for ttlMs 0, -1 and 2^53 - 1', async () => {
    await runs.createOrResume({ runId: 's20-run', threadId: 's20', startedAt: 1 })
    for (const ttlMs of [0, -1, Number.MAX_SAFE_INTEGER]) {
      const listed = await runs.listReclaimable({ now: Number.MAX_SAFE_INTEGER, ttlMs })
      expect(listed.some((r) => r.runId === 's20-run')).toBe(false)
    }
  })

  it('V12 a non-finite number in a patch is a TypeError before sending', async () => {
    const counted = countingPool(pool)
    const store = postgresRunStore(counted.db)
    for (const bad of [NaN, Infinity, -Infinity]) {
      const error = await rejection(store.update('run-1', { finishedAt: bad }))
      expect(error).toBeInstanceOf(TypeError)
    }
    await expect(store.listReclaimable({ now: 1.5, ttlMs: 0 })).rejects.toBeInstanceOf(TypeError)
    await expect(store.listReclaimable({ now: 1, ttlMs: NaN })).rejects.toBeInstanceOf(TypeError)
    expect(counted.count()).toBe(0)
    // In a record the server sees the null and rejects it (22004 -> TypeError).
    const error = await rejection(runs.createOrResume({ runId: 'v12', threadId: 't', startedAt: NaN }))
    expect(error).toBeInstanceOf(TypeError)
    expect(error.sqlstate).toBe('22004')
    expect(await runs.get('v12')).toBeNull()
  })

  it('rule 3: explicit undefined clears top-level fields only; status: undefined is dropped; nested undefined is untouched', async () => {
    await runs.createOrResume({ runId: 'r3', threadId: 't3', startedAt: 5 })
    await runs.update('r3', {
      finishedAt: 9,
      error: { message: 'x', code: 'c' },
      usage: { promptTokens: 1, completionTokens: 2, totalTokens: 3, durationSeconds: undefined } as never,
    })
    const stored = await rows<{ u: string }>(pool, `SELECT usage::text AS u FROM sandbox_persist.runs WHERE run_id = 'r3'`)
    expect(stored[0]?.u).not.toContain('null')
    await runs.update('r3', { status: undefined, finishedAt: undefined, error: undefined, usage: undefined })
    expect(await runs.get('r3')).toEqual({ runId: 'r3', threadId: 't3', status: 'running', startedAt: 5 })
    // A new error without code replaces the whole error.
    await runs.update('r3', { error: { message: 'a', code: 'b' } })
    await runs.update('r3', { error: { message: 'c' } })
    expect((await runs.get('r3'))?.error).toEqual({ message: 'c' })
  })

  it('errors: an unknown patch key is a TypeError naming it; SP201 keeps its code', async () => {
    const error = await rejection(runs.update('r3', { detached_since: 1 } as never))
    expect(error).toBeInstanceOf(TypeError)
    expect(error.message).toContain('detached_since')
    await runs.update('r3', { driverEpoch: 2 })
    const stale = await rejection(runs.update('r3', { driverEpoch: 2 }))
    expect(stale.code).toBe('RUN_EPOCH_NOT_INCREASING')
  })

  it('S17-style: a non-string or ill-formed id is refused before any server call', async () => {
    const counted = countingPool(pool)
    const store = postgresRunStore(counted.db)
    for (const bad of [{}, 7, null, undefined, 'a\ud800b', 'nul\u0000']) {
      const error = await rejection(store.get(bad as never))
      expect(error).toBeInstanceOf(TypeError)
    }
    expect(counted.count()).toBe(0)
    // A lone surrogate cannot alias its U+FFFD replacement.
    await runs.createOrResume({ runId: 'alias-\ufffd', threadId: 't', startedAt: 1 })
    await expect(runs.get('alias-\ud800')).rejects.toBeInstanceOf(TypeError)
  })
})

describe('D1 durable run fields', () => {
  it('D1 round-trips the four durable fields, overwrites driverEpoch and clears each on explicit undefined', async () => {
    const fresh = await runs.createOrResume({ runId: 'fc-1', threadId: 'fc-t', startedAt: 1 })
    for (const key of ['sandboxKey', 'detachedSince', 'cancelRequested', 'driverEpoch']) {
      expect(key in fresh).toBe(false)
    }
    await runs.update('fc-1', { sandboxKey: 'sandbox-abc', detachedSince: 500, cancelRequested: true, driverEpoch: 1 })
    expect(await runs.get('fc-1')).toMatchObject({ sandboxKey: 'sandbox-abc', detachedSince: 500, cancelRequested: true, driverEpoch: 1 })
    await runs.update('fc-1', { driverEpoch: 2 })
    expect(await runs.get('fc-1')).toMatchObject({ sandboxKey: 'sandbox-abc', cancelRequested: true, driverEpoch: 2 })
    await runs.update('fc-1', { detachedSince: undefined })
    const d13 = await runs.get('fc-1')
    expect(d13 && 'detachedSince' in d13).toBe(false)
    expect(d13).toMatchObject({ sandboxKey: 'sandbox-abc', cancelRequested: true, driverEpoch: 2 })
    await runs.update('fc-1', { cancelRequested: false })
    expect((await runs.get('fc-1'))?.cancelRequested).toBe(false)
    await runs.update('fc-1', { sandboxKey: 'sandbox-xyz', detachedSince: 900, cancelRequested: true, driverEpoch: 3 })
    await runs.update('fc-1', { sandboxKey: undefined, detachedSince: undefined, cancelRequested: undefined, driverEpoch: undefined })
    expect(await runs.get('fc-1')).toEqual({ runId: 'fc-1', threadId: 'fc-t', status: 'running', startedAt: 1 })
  })
})

describe('interrupts', () => {
  it('P08 creates, resolves, cancels and lists by thread and run', async () => {
    expect(await interrupts.get('int-missing')).toBeNull()
    await interrupts.create({ interruptId: 'int-1', runId: 'run-i', threadId: 'thread-i', requestedAt: 10, payload: { tool: 'search', args: { q: 'x' } } })
    await interrupts.create({ interruptId: 'int-2', runId: 'run-i', threadId: 'thread-i', requestedAt: 20, payload: { tool: 'write' } })
    await interrupts.create({ interruptId: 'int-3', runId: 'run-other', threadId: 'thread-i', requestedAt: 30, payload: {} })
    expect(await interrupts.get('int-1')).toEqual({
      interruptId: 'int-1',
      runId: 'run-i',
      threadId: 'thread-i',
      status: 'pending',
      requestedAt: 10,
      payload: { tool: 'search', args: { q: 'x' } },
    })
    expect((await interrupts.list('thread-i')).map((r) => r.interruptId)).toEqual(['int-1', 'int-2', 'int-3'])
    expect((await interrupts.listByRun('run-i')).map((r) => r.interruptId)).toEqual(['int-1', 'int-2'])
    expect((await interrupts.listPending('thread-i')).map((r) => r.interruptId)).toEqual(['int-1', 'int-2', 'int-3'])
    await interrupts.resolve('int-1', { ok: true })
    const resolved = await interrupts.get('int-1')
    expect(resolved?.status).toBe('resolved')
    expect(resolved?.response).toEqual({ ok: true })
    expect(typeof resolved?.resolvedAt).toBe('number')
    await interrupts.cancel('int-2')
    const cancelled = await interrupts.get('int-2')
    expect(cancelled?.status).toBe('cancelled')
    expect(typeof cancelled?.resolvedAt).toBe('number')
    expect((await interrupts.listPending('thread-i')).map((r) => r.interruptId)).toEqual(['int-3'])
    expect(await interrupts.listPendingByRun('run-i')).toEqual([])
  })

  it('P09 re-creating a resolved id is a no-op', async () => {
    await interrupts.create({ interruptId: 'int-dup', runId: 'run-dup', threadId: 'thread-dup', requestedAt: 100, payload: { attempt: 1 } })
    await interrupts.resolve('int-dup', { answer: 42 })
    await interrupts.create({ interruptId: 'int-dup', runId: 'run-dup', threadId: 'thread-dup', requestedAt: 200, payload: { attempt: 2 } })
    const after = await interrupts.get('int-dup')
    expect(after).toMatchObject({ status: 'resolved', response: { answer: 42 }, payload: { attempt: 1 }, requestedAt: 100 })
  })

  it('P10 lists order by requestedAt whatever the insertion order', async () => {
    for (const [id, at] of [['int-late', 300], ['int-early', 100], ['int-mid', 200]] as const) {
      await interrupts.create({ interruptId: id, runId: 'run-order', threadId: 'thread-order', requestedAt: at, payload: {} })
    }
    const order = ['int-early', 'int-mid', 'int-late']
    expect((await interrupts.list('thread-order')).map((r) => r.interruptId)).toEqual(order)
    expect((await interrupts.listPending('thread-order')).map((r) => r.interruptId)).toEqual(order)
    expect((await interrupts.listByRun('run-order')).map((r) => r.interruptId)).toEqual(order)
  })

  it('R28 resolve(id, null) stores null (key present); an own response: undefined reads back absent', async () => {
    await interrupts.create({ interruptId: 'r28', runId: 'r', threadId: 't', requestedAt: 1, payload: {}, response: undefined })
    const created = await interrupts.get('r28')
    expect(created && 'response' in created).toBe(false)
    await interrupts.resolve('r28', null)
    const resolved = await interrupts.get('r28')
    expect(resolved && 'response' in resolved).toBe(true)
    expect(resolved?.response).toBeNull()
    // resolve without a response clears it
    await interrupts.resolve('r28')
    const cleared = await interrupts.get('r28')
    expect(cleared && 'response' in cleared).toBe(false)
  })

  it('R1 commitBatch with a missing id: an InterruptBatchError (an Error) with the upstream text, nothing applied', async () => {
    await interrupts.create({ interruptId: 'pending-1', runId: 'rb', threadId: 'tb', requestedAt: 1, payload: {} })
    const error = await rejection(
      interrupts.commitBatch([
        { interruptId: 'pending-1', status: 'resolved', response: 1 },
        { interruptId: 'missing-1', status: 'cancelled' },
      ]),
    )
    // One error family (issue 21): no longer a bare Error, but still exactly upstream's text.
    expect(error).toBeInstanceOf(InterruptBatchError)
    expect(error).toBeInstanceOf(SandboxPersistError)
    expect(error).toMatchObject({ code: 'INTERRUPT_BATCH_MISSING_ID', sqlstate: 'SP102' })
    expect(error.message).toBe('Interrupt batch references missing id: missing-1.')
    expect((await interrupts.get('pending-1'))?.status).toBe('pending')
  })

  it('R2 commitBatch with a duplicate id: an InterruptBatchError with the upstream text, unchanged', async () => {
    const error = await rejection(
      interrupts.commitBatch([
        { interruptId: 'pending-1', status: 'resolved' },
        { interruptId: 'pending-1', status: 'cancelled' },
      ]),
    )
    expect(error).toBeInstanceOf(InterruptBatchError)
    expect(error).toMatchObject({ code: 'INTERRUPT_BATCH_DUPLICATE_ID', sqlstate: 'SP101' })
    expect(error.message).toBe('Interrupt batch contains duplicate id: pending-1.')
    expect((await interrupts.get('pending-1'))?.status).toBe('pending')
  })

  it('R3 commitBatch over a non-pending id: plain Error, both unchanged; a valid batch applies atomically', async () => {
    await interrupts.create({ interruptId: 'pending-2', runId: 'rb', threadId: 'tb', requestedAt: 2, payload: {} })
    await interrupts.create({ interruptId: 'terminal-1', runId: 'rb', threadId: 'tb', requestedAt: 3, payload: {} })
    await interrupts.resolve('terminal-1', 'yes')
    const error = await rejection(
      interrupts.commitBatch([
        { interruptId: 'pending-2', status: 'resolved' },
        { interruptId: 'terminal-1', status: 'cancelled' },
      ]),
    )
    expect(error.message).toBe('Interrupt batch references non-pending id: terminal-1.')
    expect((await interrupts.get('pending-2'))?.status).toBe('pending')
    expect((await interrupts.get('terminal-1'))?.status).toBe('resolved')
    await interrupts.commitBatch([
      { interruptId: 'pending-1', status: 'resolved', response: { ok: 1 } },
      { interruptId: 'pending-2', status: 'cancelled' },
    ])
    const [a, b] = [await interrupts.get('pending-1'), await interrupts.get('pending-2')]
    expect(a).toMatchObject({ status: 'resolved', response: { ok: 1 } })
    expect(b).toMatchObject({ status: 'cancelled' })
    expect(a?.resolvedAt).toBe(b?.resolvedAt)
    await expect(interrupts.commitBatch([])).resolves.toBeUndefined()
  })
})

describe('generation runs', () => {
  it('P11 creates, resumes idempotently, updates and gets', async () => {
    expect(await generationRuns.get('gen-missing')).toBeNull()
    const base = { activity: 'image', provider: 'openai', model: 'gpt-image-1' }
    const created = await generationRuns.createOrResume({ runId: 'gen-1', threadId: 'gen-thread-1', startedAt: 1000, ...base })
    expect(created).toEqual({ runId: 'gen-1', threadId: 'gen-thread-1', status: 'running', startedAt: 1000, ...base })
    const resumed = await generationRuns.createOrResume({
      runId: 'gen-1', threadId: 'thread-late', activity: 'video', provider: 'google', model: 'veo-3', startedAt: 9999,
    })
    expect(resumed).toEqual(created)
    const ref = {
      role: 'output', artifactId: 'art-1', runId: 'gen-1', threadId: 'thread-gen', name: 'a.png', mimeType: 'image/png',
      size: 3, createdAt: '2024-01-01T00:00:00.000Z',
      source: { activity: 'image', path: 'images.0', provider: 'openai', model: 'gpt-image-1' },
    }
    await generationRuns.update('gen-1', {
      status: 'completed', finishedAt: 2000,
      result: { images: [{ url: 'https://example.com/a.png' }] },
      artifacts: [ref] as never,
      usage: { promptTokens: 1, completionTokens: 2, totalTokens: 3 },
    })
    const done = await generationRuns.get('gen-1')
    expect(done).toMatchObject({ status: 'completed', finishedAt: 2000, result: { images: [{ url: 'https://example.com/a.png' }] } })
    expect(done?.artifacts).toEqual([ref])
    await generationRuns.update('gen-1', { status: 'failed', error: { message: 'boom', code: 'provider_error' } })
    expect((await generationRuns.get('gen-1'))?.error).toEqual({ message: 'boom', code: 'provider_error' })
    await generationRuns.update('gen-absent', { status: 'completed' })
    expect(await generationRuns.get('gen-absent')).toBeNull()
  })

  it('P12 findLatestForThread returns the latest started run, whatever its status', async () => {
    const thread = 'thread-gen-latest'
    const base = { activity: 'image', provider: 'openai', model: 'm' }
    expect(await generationRuns.findLatestForThread(thread)).toBeNull()
    await generationRuns.createOrResume({ runId: 'gen-late', threadId: thread, startedAt: 3000, ...base })
    await generationRuns.createOrResume({ runId: 'gen-early', threadId: thread, startedAt: 1000, ...base })
    expect(await generationRuns.findLatestForThread(thread)).toMatchObject({ runId: 'gen-late' })
    await generationRuns.createOrResume({ runId: 'gen-other', threadId: 'thread-gen-other', startedAt: 9000, ...base })
    await generationRuns.update('gen-late', { status: 'completed', finishedAt: 3500 })
    expect(await generationRuns.findLatestForThread(thread)).toMatchObject({ runId: 'gen-late', status: 'completed' })
    expect(await generationRuns.findLatestForThread('thread-unlinked')).toBeNull()
  })

  it('result: null is stored as a value; result: undefined clears it through the clear list', async () => {
    await generationRuns.update('gen-early', { result: null })
    const withNull = await generationRuns.get('gen-early')
    expect(withNull && 'result' in withNull).toBe(true)
    expect(withNull?.result).toBeNull()
    await generationRuns.update('gen-early', { result: undefined, status: undefined })
    const cleared = await generationRuns.get('gen-early')
    expect(cleared && 'result' in cleared).toBe(false)
    expect(cleared?.status).toBe('running')
  })
})

describe('artifacts', () => {
  const artifact = (o: Partial<ArtifactRecord> & { artifactId: string }): ArtifactRecord => ({
    runId: 'run-art', threadId: 'thread-art', name: 'image.png', mimeType: 'image/png', size: 3, createdAt: 100, ...o,
  })

  it('P13 saves as full replace, gets and lists by run in byte order', async () => {
    expect(await artifacts.get('art-missing')).toBeNull()
    expect(await artifacts.list('run-unknown')).toEqual([])
    const astral = '\u{10000}'
    const pua = '\u{e000}'
    await artifacts.save(artifact({ artifactId: astral, blobKey: 'artifacts/run-art/x', createdAt: 100 }))
    await artifacts.save(artifact({ artifactId: pua, sourceUrl: 'https://provider.example/e.png', createdAt: 100 }))
    await artifacts.save(artifact({ artifactId: 'art-c', runId: 'run-art-other' }))
    expect(await artifacts.get(astral)).toEqual(artifact({ artifactId: astral, blobKey: 'artifacts/run-art/x' }))
    expect(await artifacts.get(pua)).toMatchObject({ sourceUrl: 'https://provider.example/e.png' })
    expect((await artifacts.list('run-art')).map((r) => r.artifactId)).toEqual([pua, astral])
    await artifacts.save(artifact({ artifactId: astral, name: 'renamed.png', size: 9, blobKey: undefined }))
    const updated = await artifacts.get(astral)
    expect(updated).toMatchObject({ name: 'renamed.png', size: 9 })
    expect(updated && 'blobKey' in updated).toBe(false)
    expect((await artifacts.list('run-art')).map((r) => r.artifactId)).toEqual([pua, astral])
  })

  it('P14 listForThread returns the whole thread history by createdAt', async () => {
    await artifacts.save(artifact({ artifactId: 'thread-b', runId: 'r-2', threadId: 'lt-thread', createdAt: 2 }))
    await artifacts.save(artifact({ artifactId: 'thread-a', runId: 'r-1', threadId: 'lt-thread', createdAt: 2 }))
    await artifacts.save(artifact({ artifactId: 'thread-early', runId: 'r-1', threadId: 'lt-thread', createdAt: 1 }))
    await artifacts.save(artifact({ artifactId: 'thread-other', runId: 'r-1', threadId: 'lt-other', createdAt: 0 }))
    expect((await artifacts.listForThread('lt-thread')).map((r) => r.artifactId)).toEqual(['thread-early', 'thread-a', 'thread-b'])
  })

  it('P15 equal createdAt lists ids in UTF-8 byte order', async () => {
    for (const id of ['\u{10000}-t', '\u{e000}-t', 'a-t']) {
      await artifacts.save(artifact({ artifactId: id, threadId: 'order-thread', createdAt: 5 }))
    }
    expect((await artifacts.listForThread('order-thread')).map((r) => r.artifactId)).toEqual(['a-t', '\u{e000}-t', '\u{10000}-t'])
  })

  it('P16 delete and deleteForRun are scoped and silent', async () => {
    await artifacts.save(artifact({ artifactId: 'art-d1', runId: 'run-del' }))
    await artifacts.save(artifact({ artifactId: 'art-d2', runId: 'run-del' }))
    await artifacts.save(artifact({ artifactId: 'art-keep', runId: 'run-keep' }))
    await expect(artifacts.delete('art-d1')).resolves.toBeUndefined()
    expect(await artifacts.get('art-d1')).toBeNull()
    expect((await artifacts.list('run-del')).map((r) => r.artifactId)).toEqual(['art-d2'])
    await expect(artifacts.delete('art-d1')).resolves.toBeUndefined()
    await expect(artifacts.deleteForRun('run-del')).resolves.toBeUndefined()
    expect(await artifacts.list('run-del')).toEqual([])
    expect((await artifacts.list('run-keep')).map((r) => r.artifactId)).toEqual(['art-keep'])
    await expect(artifacts.deleteForRun('run-del')).resolves.toBeUndefined()
  })

  it('a fractional createdAt round-trips exactly; a negative size is a RangeError', async () => {
    await artifacts.save(artifact({ artifactId: 'frac', createdAt: 100.25 }))
    expect((await artifacts.get('frac'))?.createdAt).toBe(100.25)
    await expect(artifacts.save(artifact({ artifactId: 'neg', size: -1 }))).rejects.toBeInstanceOf(RangeError)
  })
})

describe('metadata', () => {
  it('P24 namespaces are independent and composite keys never collide', async () => {
    expect(await metadata.get('scope-a', 'k')).toBeNull()
    await metadata.set('scope-a', 'k', { n: 1 })
    await metadata.set('scope-b', 'k', { n: 2 })
    expect(await metadata.get('scope-a', 'k')).toEqual({ n: 1 })
    expect(await metadata.get('scope-b', 'k')).toEqual({ n: 2 })
    await metadata.set('scope-a', 'k', { n: 3 })
    expect(await metadata.get('scope-a', 'k')).toEqual({ n: 3 })
    await metadata.delete('scope-a', 'k')
    expect(await metadata.get('scope-a', 'k')).toBeNull()
    expect(await metadata.get('scope-b', 'k')).toEqual({ n: 2 })
    await metadata.set('a:b', 'c', 'left')
    await metadata.set('a', 'b:c', 'right')
    expect(await metadata.get('a:b', 'c')).toBe('left')
    expect(await metadata.get('a', 'b:c')).toBe('right')
    await metadata.delete('a:b', 'c')
    expect(await metadata.get('a:b', 'c')).toBeNull()
    expect(await metadata.get('a', 'b:c')).toBe('right')
  })

  it('V17 a null or undefined value is a TypeError with the server text; scalars and arrays round-trip', async () => {
    for (const bad of [null, undefined]) {
      const error = await rejection(metadata.set('ns', 'nullish', bad))
      expect(error).toBeInstanceOf(TypeError)
      expect(error.message).toContain('use delete')
    }
    expect(await metadata.get('ns', 'nullish')).toBeNull()
    await metadata.set('ns', 'arr', [1, 'two', null])
    expect(await metadata.get('ns', 'arr')).toEqual([1, 'two', null])
    await metadata.set('ns', 'zero', 0)
    expect(await metadata.get('ns', 'zero')).toBe(0)
    await metadata.set('ns', 'false', false)
    expect(await metadata.get('ns', 'false')).toBe(false)
  })
})
