/**
 * Delta appends through the adapter (docs/contract/checkpoint-store.md §3.1,
 * cases CD8-CD15): the store sends only the new messages when the
 * conversation extends its last append on the thread, falls back to the
 * whole conversation when the server refuses the claim (SP016), and the
 * stored result equals the whole form's.
 */
import { beforeEach, describe, expect, it } from 'vitest'
import pg from 'pg'
import { postgresCheckpoints, type SandboxCheckpoint } from '../src/index.js'
import { makePool, rejection, reset, rows } from './helpers.js'

const pool = makePool()

beforeEach(async () => {
  await reset(pool)
})

/** A pool whose statements are recorded by the function they call. */
function recordingPool(onCall?: (fn: string) => void): {
  db: { query: pg.Pool['query'] }
  calls: Array<{ fn: string; values: unknown[] }>
} {
  const calls: Array<{ fn: string; values: unknown[] }> = []
  const db = {
    query: ((text: unknown, values?: unknown) => {
      const m = typeof text === 'string' ? /sandbox_persist\.(checkpoint_append\w*)\(/.exec(text) : null
      if (m) {
        calls.push({ fn: m[1] as string, values: values as unknown[] })
        onCall?.(m[1] as string)
      }
      return (pool.query as (...a: unknown[]) => unknown)(text, values)
    }) as pg.Pool['query'],
  }
  return { db, calls }
}

const message = (i: number) => ({ role: i % 2 ? 'assistant' : 'user', content: `message ${i} ${'x'.repeat(200)} "é\\u0000"` })
const turn = (n: number) => Array.from({ length: n }, (_, i) => message(i))

function checkpoint(id: string, parent: string | null, threadId: string, conversation: unknown[]): SandboxCheckpoint {
  return {
    id,
    threadId,
    parentCheckpointId: parent,
    createdAt: 1,
    reason: 'automatic',
    files: [],
    conversation: conversation as SandboxCheckpoint['conversation'],
    artifacts: [],
  }
}

/** The stored conversation columns of a checkpoint, for comparing two threads. */
async function stored(id: string): Promise<Record<string, unknown>> {
  const [r] = await rows(
    pool,
    `SELECT conv_ranges::text AS ranges, conv_block::text AS block, conv_len, encode(conv_digest, 'hex') AS digest
       FROM sandbox_persist.checkpoints WHERE checkpoint_id = $1`,
    [id],
  )
  return r as Record<string, unknown>
}

describe('delta appends', () => {
  it('CD8 an extending conversation ships only its tail; the stored result equals the whole form', async () => {
    const { db, calls } = recordingPool()
    const delta = postgresCheckpoints(db)
    const whole = postgresCheckpoints(pool, { deltaAppends: 'off' })
    const wd = await delta.acquireWriter('d')
    const ww = await whole.acquireWriter('w')
    let headD: string | null = null
    let headW: string | null = null
    for (let k = 1; k <= 5; k++) {
      const conv = turn(2 * k)
      headD = (await delta.append({ checkpoint: checkpoint(`d${k}`, headD, 'd', conv), expectedHeadId: headD, writer: wd })).headId
      headW = (await whole.append({ checkpoint: checkpoint(`w${k}`, headW, 'w', conv), expectedHeadId: headW, writer: ww })).headId
      expect((await delta.get(`d${k}`))?.conversation).toEqual((await whole.get(`w${k}`))?.conversation)
      const sd = await stored(`d${k}`)
      const sw = await stored(`w${k}`)
      expect(sd).toEqual(sw)
    }
    expect(calls.map((c) => c.fn)).toEqual([
      'checkpoint_append',
      'checkpoint_append_delta',
      'checkpoint_append_delta',
      'checkpoint_append_delta',
      'checkpoint_append_delta',
    ])
    // the last call carried the two new messages and the claim about the eight before
    const last = calls[4] as { values: unknown[] }
    expect(JSON.parse(last.values[1] as string)).toEqual([message(8), message(9)])
    expect(last.values[2]).toBe(8)
  })

  it('CD9 a refused claim (the parent was replaced behind the store) falls back to the whole conversation', async () => {
    const { db, calls } = recordingPool()
    const store = postgresCheckpoints(db)
    const other = postgresCheckpoints(pool, { deltaAppends: 'off' })
    const w = await store.acquireWriter('t')
    await store.append({ checkpoint: checkpoint('c1', null, 't', turn(2)), expectedHeadId: null, writer: w })
    // another process with the same lease replaces c1 by a checkpoint of the same id and another conversation
    await other.deleteHead({ threadId: 't', checkpointId: 'c1', writer: w })
    const changed = [{ role: 'user', content: 'another start' }, message(1)]
    await other.append({ checkpoint: checkpoint('c1', null, 't', changed), expectedHeadId: null, writer: w })
    const conv = [...turn(2), message(2)]
    expect(await store.append({ checkpoint: checkpoint('c2', 'c1', 't', conv), expectedHeadId: 'c1', writer: w })).toEqual({ headId: 'c2' })
    expect(calls.map((c) => c.fn)).toEqual(['checkpoint_append', 'checkpoint_append_delta', 'checkpoint_append'])
    expect((await store.get('c2'))?.conversation).toEqual(conv)
    // and the next append is a delta again, on the conversation now stored
    await store.append({ checkpoint: checkpoint('c3', 'c2', 't', [...conv, message(3)]), expectedHeadId: 'c2', writer: w })
    expect(calls.map((c) => c.fn).slice(3)).toEqual(['checkpoint_append_delta'])
    expect((await store.get('c3'))?.conversation).toEqual([...conv, message(3)])
  })

  it('CD10 another writer, another parent or a changed prefix is sent whole', async () => {
    const { db, calls } = recordingPool()
    const store = postgresCheckpoints(db)
    let w = await store.acquireWriter('t')
    await store.append({ checkpoint: checkpoint('c1', null, 't', turn(2)), expectedHeadId: null, writer: w })
    await w.release()
    w = await store.acquireWriter('t')
    await store.append({ checkpoint: checkpoint('c2', 'c1', 't', turn(3)), expectedHeadId: 'c1', writer: w })
    const edited = turn(4)
    edited[0] = { role: 'user', content: 'edited' }
    await store.append({ checkpoint: checkpoint('c3', 'c2', 't', edited), expectedHeadId: 'c2', writer: w })
    // a message changed in place is seen in the default ('verified') mode
    edited.push(message(4))
    ;(edited[1] as { content: string }).content = 'changed in place'
    await store.append({ checkpoint: checkpoint('c4', 'c3', 't', edited), expectedHeadId: 'c3', writer: w })
    expect(calls.map((c) => c.fn)).toEqual(['checkpoint_append', 'checkpoint_append', 'checkpoint_append', 'checkpoint_append'])
    expect((await store.get('c4'))?.conversation).toEqual(edited)
    expect((await store.get('c3'))?.conversation?.[1]).toEqual(message(1))
  })

  it('CD11 identity mode compares message objects, not their text', async () => {
    const { db, calls } = recordingPool()
    const store = postgresCheckpoints(db, { deltaAppends: 'identity' })
    const w = await store.acquireWriter('t')
    const conv: unknown[] = turn(2)
    await store.append({ checkpoint: checkpoint('c1', null, 't', conv), expectedHeadId: null, writer: w })
    conv.push(message(2))
    await store.append({ checkpoint: checkpoint('c2', 'c1', 't', conv), expectedHeadId: 'c1', writer: w })
    const copy = conv.map((m) => ({ ...(m as object) }))
    copy.push(message(3))
    await store.append({ checkpoint: checkpoint('c3', 'c2', 't', copy), expectedHeadId: 'c2', writer: w })
    expect(calls.map((c) => c.fn)).toEqual(['checkpoint_append', 'checkpoint_append_delta', 'checkpoint_append'])
    expect((await store.get('c3'))?.conversation).toEqual(turn(4))
    expect(() => postgresCheckpoints(pool, { deltaAppends: 'sometimes' as 'off' })).toThrow(/deltaAppends/)
  })

  it('CD12 a delta append fails as the whole form would and changes nothing', async () => {
    const { db, calls } = recordingPool()
    const store = postgresCheckpoints(db)
    const w = await store.acquireWriter('t')
    await store.append({ checkpoint: checkpoint('c1', null, 't', turn(2)), expectedHeadId: null, writer: w })
    await store.append({ checkpoint: checkpoint('c2', 'c1', 't', turn(3)), expectedHeadId: 'c1', writer: w })
    // a second store (its cache is empty) moves the head; ours still thinks c2 is the head and is right
    const stale = await rejection(
      store.append({ checkpoint: checkpoint('c1', 'c2', 't', turn(4)), expectedHeadId: 'c2', writer: w }),
    )
    expect(stale.code).toBe('SANDBOX_SNAPSHOT_DUPLICATE_ID')
    expect(calls.map((c) => c.fn)).toEqual(['checkpoint_append', 'checkpoint_append_delta', 'checkpoint_append_delta'])
    expect(await store.getHead('t')).toBe('c2')
    expect((await store.list('t')).length).toBe(2)
  })

  it('CD13 holes and undefined messages are sent as null, as JSON.stringify of the array sends them', async () => {
    const store = postgresCheckpoints(pool)
    const w = await store.acquireWriter('t')
    // eslint-disable-next-line no-sparse-arrays
    const conv: unknown[] = [message(0), , undefined, message(3)]
    await store.append({ checkpoint: checkpoint('c1', null, 't', conv), expectedHeadId: null, writer: w })
    expect((await store.get('c1'))?.conversation).toEqual([message(0), null, null, message(3)])
    await store.append({ checkpoint: checkpoint('c2', 'c1', 't', [...conv, undefined]), expectedHeadId: 'c1', writer: w })
    expect((await store.get('c2'))?.conversation).toEqual([message(0), null, null, message(3), null])
    // a hole in the tail of a delta append
    const holed: unknown[] = [...conv, undefined]
    holed.length = 7
    holed[6] = message(6)
    await store.append({ checkpoint: checkpoint('c3', 'c2', 't', holed), expectedHeadId: 'c2', writer: w })
    expect((await store.get('c3'))?.conversation).toEqual([message(0), null, null, message(3), null, null, message(6)])
  })
  it('CD14 verified mode sees every change made in place, at any depth, and sends the conversation whole', async () => {
    const { db, calls } = recordingPool()
    const store = postgresCheckpoints(db)
    const w = await store.acquireWriter('t')
    const conv: Array<Record<string, unknown>> = [
      { role: 'user', parts: [{ type: 'text', content: 'a' }], meta: { n: 1, ok: true, none: null } },
      { role: 'assistant', parts: [{ type: 'text', content: 'b' }] },
    ]
    let head: string | null = null
    let k = 0
    /** Append the conversation plus one new message; the name of the function called. */
    const step = async (): Promise<string> => {
      conv.push(message(100 + k))
      k += 1
      const id = `c${k}`
      head = (await store.append({ checkpoint: checkpoint(id, head, 't', conv), expectedHeadId: head, writer: w })).headId
      expect((await store.get(id))?.conversation).toEqual(JSON.parse(JSON.stringify(conv)))
      return (calls[calls.length - 1] as { fn: string }).fn
    }
    expect(await step()).toBe('checkpoint_append')
    expect(await step()).toBe('checkpoint_append_delta')
    const changes: Array<() => void> = [
      () => (((conv[0]?.parts as Array<Record<string, unknown>>)[0] as Record<string, unknown>).content = 'a2'),
      () => ((conv[0]?.meta as Record<string, unknown>).n = 2),
      () => ((conv[0]?.meta as Record<string, unknown>).ok = 'true'),
      () => ((conv[0]?.meta as Record<string, unknown>).none = 0),
      () => (conv[1] = { parts: conv[1]?.parts, role: conv[1]?.role }), // the same members in another order
      () => (conv[0]?.parts as unknown[]).push({ type: 'text', content: '' }),
      () => ((conv[0]?.meta as Record<string, unknown>).gone = undefined), // JSON drops it: the same text, sent whole all the same
      () => ((conv[0] as Record<string, unknown>).meta = [1, 2]),
    ]
    for (const change of changes) {
      change()
      expect(await step()).toBe('checkpoint_append')
      expect(await step()).toBe('checkpoint_append_delta')
    }
  })

  it('CD15 verified mode compares what is not plain JSON data by its text, and sees a change made while the append is in flight', async () => {
    let inFlight: (() => void) | undefined
    const { db, calls } = recordingPool(() => {
      inFlight?.()
      inFlight = undefined
    })
    const store = postgresCheckpoints(db)
    const w = await store.acquireWriter('t')
    class Note {
      constructor(public text: string) {}
    }
    const at = { toJSON: () => 'fixed' }
    const conv: unknown[] = [{ at: new Date(0) }, new Note('n'), at, { n: Number.NaN }]
    await store.append({ checkpoint: checkpoint('c1', null, 't', conv), expectedHeadId: null, writer: w })
    conv.push(message(1))
    await store.append({ checkpoint: checkpoint('c2', 'c1', 't', conv), expectedHeadId: 'c1', writer: w })
    ;(conv[1] as Note).text = 'changed'
    conv.push(message(2))
    await store.append({ checkpoint: checkpoint('c3', 'c2', 't', conv), expectedHeadId: 'c2', writer: w })
    expect(calls.map((c) => c.fn)).toEqual(['checkpoint_append', 'checkpoint_append_delta', 'checkpoint_append'])
    expect((await store.get('c3'))?.conversation?.slice(0, 4)).toEqual([
      { at: '1970-01-01T00:00:00.000Z' },
      { text: 'changed' },
      'fixed',
      { n: null },
    ])
    // a message changed while its append is in flight: stored as it was sent, and the next append sees the change
    const last = message(3) as { content: string }
    conv.push(last)
    inFlight = () => (last.content = 'changed after sending')
    await store.append({ checkpoint: checkpoint('c4', 'c3', 't', conv), expectedHeadId: 'c3', writer: w })
    expect((await store.get('c4'))?.conversation?.[6]).toEqual(message(3))
    conv.push(message(4))
    await store.append({ checkpoint: checkpoint('c5', 'c4', 't', conv), expectedHeadId: 'c4', writer: w })
    expect(calls.map((c) => c.fn).slice(3)).toEqual(['checkpoint_append_delta', 'checkpoint_append'])
    expect((await store.get('c5'))?.conversation?.[6]).toEqual({ ...message(3), content: 'changed after sending' })
  })
})
