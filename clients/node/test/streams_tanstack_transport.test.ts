/**
 * The Durable Streams project's TanStack AI connection adapter
 * (@durable-streams/tanstack-ai-transport, `durableStreamConnection`: the
 * `connection` a TanStack AI chat client subscribes to) reading a run's event
 * log from our stream server as `run-logs/<run_id>` (docs/contract/streams.md
 * §1.1). The log is written the way an application writes it: a chat() run
 * served by toServerSentEventsResponse with postgresDurability as its durable
 * log (so the stored chunks are @tanstack/ai's own: CUSTOM run.accepted,
 * RUN_STARTED, TEXT_MESSAGE_*, RUN_FINISHED), and the connection must hand
 * back exactly the stored chunks. Cases DSC10-DSC13: a finished run read the
 * way the transport's README prescribes (materialize, then subscribe from the
 * offset), a live run, resumption; DSC11 pins a defect of transport 0.0.9 (a
 * subscribe() that starts on an already closed log loses its last catch-up
 * page), so an upgrade that fixes it fails DSC11 on purpose.
 *
 * The transport reads with `stream({ live: 'sse', json: true })` of its own
 * @durable-streams/client and takes no fetch for reads, so requests are
 * observed by a recording global fetch. The server's SSE and long-poll
 * connections outlast the test: live data can only come by the event log's
 * notification, never by a reconnect.
 */
import { durableStreamConnection, materializeSnapshotFromDurableStream, type TanStackChunk } from '@durable-streams/tanstack-ai-transport'
import { chat, toServerSentEventsResponse, type DefaultMessageMetadataByModality, type StreamChunk, type TextAdapter } from '@tanstack/ai'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { postgresDurability, serveStreams, type StreamServer } from '../src/index.js'
import { makePool, reset, until } from './helpers.js'

const pool = makePool({ max: 16 })
const durability = postgresDurability(pool, { fallbackPollMs: 20_000 })
let server: StreamServer

const SCRIPT = Array.from({ length: 30 }, (_, i) => `w${i} ${'é✓"\\'.repeat(i % 3)}`)

/** Every request to a run's stream (method, URL, status), whoever made it. */
const requests: Array<{ method: string; url: string; status: number }> = []
const realFetch = globalThis.fetch

beforeAll(async () => {
  await reset(pool)
  server = await serveStreams({ pool, port: 0, host: '127.0.0.1', longPollTimeoutMs: 60_000, sseLifetimeMs: 60_000, sseHeartbeatMs: 30_000 })
  vi.stubGlobal('fetch', async (input: string | URL | Request, init?: RequestInit) => {
    const response = await realFetch(input, init)
    const url = input instanceof Request ? input.url : String(input)
    if (url.includes('/v1/stream/run-logs/')) requests.push({ method: init?.method ?? (input instanceof Request ? input.method : 'GET'), url, status: response.status })
    return response
  })
})

afterAll(async () => {
  vi.unstubAllGlobals()
  await server?.close()
  await durability.close()
})

const urlOf = (runId: string) => `${server.url}/v1/stream/run-logs/${encodeURIComponent(runId)}`
const requestsOf = (runId: string) => requests.filter((r) => r.url.startsWith(`${urlOf(runId)}?`) || r.url === urlOf(runId))

/** An offline TextAdapter yielding a scripted AG-UI stream; before word i it waits for gates[i] when there is one. */
function scriptedAdapter(gates: Record<number, Promise<void>> = {}): TextAdapter<'scripted-1', Record<string, never>, readonly ['text'], DefaultMessageMetadataByModality> {
  return {
    kind: 'text',
    name: 'scripted',
    model: 'scripted-1',
    '~types': undefined as never,
    async *chatStream(options) {
      const runId = options.runId ?? 'run'
      const threadId = options.threadId ?? 'thread'
      const messageId = `${runId}-0`
      yield { type: 'RUN_STARTED', runId, threadId, timestamp: Date.now() } as StreamChunk
      yield { type: 'TEXT_MESSAGE_START', messageId, role: 'assistant', timestamp: Date.now() } as StreamChunk
      for (const [i, delta] of SCRIPT.entries()) {
        if (gates[i]) await gates[i]
        yield { type: 'TEXT_MESSAGE_CONTENT', messageId, delta, timestamp: Date.now() } as StreamChunk
      }
      yield { type: 'TEXT_MESSAGE_END', messageId, timestamp: Date.now() } as StreamChunk
      yield { type: 'RUN_FINISHED', runId, threadId, finishReason: 'stop', timestamp: Date.now() } as StreamChunk
    },
    async structuredOutput() {
      throw new Error('structured output is not scripted')
    },
  }
}

function gate(): { opened: Promise<void>; open: () => void } {
  let open!: () => void
  const opened = new Promise<void>((resolve) => (open = resolve))
  return { opened, open }
}

/**
 * Start a chat() run whose durable log is postgresDurability (one append per
 * chunk), served as SSE to a POSTing client that reads it to the end; resolves
 * (`done`) when the response ends, after @tanstack/ai closed the log.
 */
function startRun(runId: string, gates: Record<number, Promise<void>> = {}): { done: Promise<number> } {
  const adapter = durability({ runId })
  const stream = chat({ adapter: scriptedAdapter(gates), messages: [{ role: 'user', content: 'count for me' }], threadId: `${runId}-thread`, runId })
  const response = toServerSentEventsResponse(stream, { durability: { adapter, batch: 1 } })
  const done = (async () => {
    const text = await response.text()
    return text.split('\n\n').filter((event) => event.includes('data: ')).length
  })()
  return { done }
}

/** The run's stored chunks (event_log_snapshot), in append order. */
async function logOf(runId: string): Promise<StreamChunk[]> {
  return (await durability(runId).snapshot()).map((e) => e.chunk)
}

/** The stream's tail offset and closed flag (HEAD). */
async function headOf(runId: string): Promise<{ tail: string; closed: boolean }> {
  const head = await realFetch(urlOf(runId), { method: 'HEAD' })
  expect(head.status).toBe(200)
  return { tail: head.headers.get('Stream-Next-Offset')!, closed: head.headers.get('Stream-Closed') === 'true' }
}

/** Drain a subscription in the background; `ended` resolves when its iteration ends by itself. */
function consume(source: AsyncIterable<TanStackChunk>): { items: TanStackChunk[]; ended: Promise<void> } {
  const items: TanStackChunk[] = []
  const ended = (async () => {
    for await (const chunk of source) items.push(chunk)
  })()
  return { items, ended }
}

const textOf = (chunks: ReadonlyArray<StreamChunk | TanStackChunk>) =>
  chunks
    .filter((c) => c.type === 'TEXT_MESSAGE_CONTENT')
    .map((c) => (c as { delta: string }).delta)
    .join('')


const offsetAt = (seq: number) => `${'0'.repeat(16)}_${String(seq).padStart(16, '0')}`
const seqOf = (offset: string | null) => Number(offset!.split('_')[1])
const param = (url: string, name: string) => new URL(url).searchParams.get(name)
const CHUNKS = 1 + 2 + SCRIPT.length + 2 // run.accepted, RUN_STARTED, TEXT_MESSAGE_START, words, TEXT_MESSAGE_END, RUN_FINISHED

/**
 * A run's GETs as [offset, live, status]. A close that reaches a parked SSE
 * reader after its last data event ends with a `streamClosed` control event,
 * so the client never reconnects at the tail to learn it.
 */
function readsOf(runId: string): Array<[string | null, string | null, number]> {
  const made = requestsOf(runId)
    .filter((r) => r.method === 'GET')
    .map((r): [string | null, string | null, number] => [param(r.url, 'offset'), param(r.url, 'live'), r.status])
  return made
}

describe('@durable-streams/tanstack-ai-transport reading run-logs/<run_id>', () => {
  it('DSC10: a finished run: materializeSnapshotFromDurableStream gives the assistant message and the tail; subscribe() from that offset ends at once with nothing', async () => {
    const runId = 'dsc10'
    const sseEvents = await startRun(runId).done
    const log = await logOf(runId)
    expect(log).toHaveLength(CHUNKS)
    expect(sseEvents).toBe(CHUNKS)
    expect(log.map((c) => c.type)).toEqual(['CUSTOM', 'RUN_STARTED', 'TEXT_MESSAGE_START', ...SCRIPT.map(() => 'TEXT_MESSAGE_CONTENT'), 'TEXT_MESSAGE_END', 'RUN_FINISHED'])
    expect(log[0]).toMatchObject({ type: 'CUSTOM', name: 'run.accepted' })
    expect(log.at(-1)).toMatchObject({ type: 'RUN_FINISHED', runId, threadId: `${runId}-thread` })
    expect(textOf(log)).toBe(SCRIPT.join(''))
    expect(await headOf(runId)).toEqual({ tail: offsetAt(CHUNKS), closed: true })

    const materialized = await materializeSnapshotFromDurableStream({ readUrl: urlOf(runId) })
    expect(materialized).toEqual({
      messages: [{ id: `${runId}-0`, role: 'assistant', parts: [{ type: 'text', content: SCRIPT.join('') }] }],
      offset: offsetAt(CHUNKS),
    })

    const got = consume(durableStreamConnection({ sendUrl: urlOf(runId), initialOffset: materialized.offset }).subscribe())
    await got.ended // the log is closed: nothing after the tail, and the iteration ends by itself
    expect(got.items).toEqual([])
    expect(
      requestsOf(runId)
        .filter((r) => r.method === 'GET')
        .map((r) => [param(r.url, 'offset'), param(r.url, 'live'), r.status]),
    ).toEqual([
      ['-1', null, 200], // materialize: one catch-up read of the whole log
      [offsetAt(CHUNKS), null, 200], // subscribe: the catch-up read answers closed at once, no live request
    ])
  })

  it('DSC11: upstream defect pinned (transport 0.0.9): subscribe() from the start of a closed run drops the last catch-up page, here everything', async () => {
    // readJsonBatchesFromStream (dist/index.js) ends its queue when streamResponse.closed
    // resolves; the client resolves `closed` in the same pull that enqueues the
    // last catch-up response (#createResponseStream: enqueue, then #markClosed when
    // upToDate && !shouldContinueLive), before subscribeJson has read that
    // response's body and handed its batch over. The server answered correctly.
    const runId = 'dsc11'
    await startRun(runId).done
    const log = await logOf(runId)
    expect(log).toHaveLength(CHUNKS)

    for (const emitSnapshotOnSubscribe of [true, false]) {
      const got = consume(durableStreamConnection({ sendUrl: urlOf(runId), emitSnapshotOnSubscribe }).subscribe())
      await got.ended
      expect(got.items).toEqual([])
    }
    const made = requestsOf(runId).filter((r) => r.method === 'GET')
    expect(made.map((r) => [param(r.url, 'offset'), param(r.url, 'live'), r.status])).toEqual([
      ['-1', null, 200],
      ['-1', null, 200],
    ])
    // What that request was answered: the whole log, closed.
    const answer = await realFetch(made[0]!.url)
    expect(answer.headers.get('Stream-Closed')).toBe('true')
    expect(answer.headers.get('Stream-Next-Offset')).toBe(offsetAt(CHUNKS))
    expect(await answer.json()).toEqual(log)

    // Over several pages (maxReadBytes 1000), exactly the pages before the last one arrive.
    const paged = await serveStreams({ pool, port: 0, host: '127.0.0.1', maxReadBytes: 1000 })
    try {
      const url = `${paged.url}/v1/stream/run-logs/${runId}`
      const got = consume(durableStreamConnection({ sendUrl: url, emitSnapshotOnSubscribe: false }).subscribe())
      await got.ended
      const reads = requests.filter((r) => r.url.startsWith(`${url}?`))
      expect(reads.length).toBeGreaterThan(2)
      const lastPageFrom = seqOf(param(reads.at(-1)!.url, 'offset'))
      expect(lastPageFrom).toBeGreaterThan(0)
      expect(lastPageFrom).toBeLessThan(CHUNKS)
      expect(got.items).toEqual(log.slice(0, lastPageFrom))
      const lastPage = await realFetch(reads.at(-1)!.url)
      expect(lastPage.headers.get('Stream-Closed')).toBe('true')
      expect(await lastPage.json()).toEqual(log.slice(lastPageFrom)) // RUN_FINISHED among them
    } finally {
      await paged.close()
    }
  })

  it('DSC12: a live run: the connection subscribes mid-run, gets the snapshot so far, then every later chunk once, in order, over one SSE request, and ends at close', async () => {
    const runId = 'dsc12'
    const BEFORE = 6
    const g = gate()
    const run = startRun(runId, { [BEFORE]: g.opened })
    await until(async () => (await logOf(runId)).length === 3 + BEFORE)
    const head = await logOf(runId)

    const got = consume(durableStreamConnection({ sendUrl: urlOf(runId) }).subscribe())
    // Caught up and parked on the server before anything else is written.
    await until(() => got.items.length === 1 && server.handler.liveReaders >= 1)
    expect(got.items[0]).toEqual({
      type: 'MESSAGES_SNAPSHOT',
      messages: [{ id: `${runId}-0`, role: 'assistant', parts: [{ type: 'text', content: SCRIPT.slice(0, BEFORE).join('') }] }],
    })

    g.open()
    await run.done
    await got.ended // the run's close ends the live read
    const log = await logOf(runId)
    expect(log).toHaveLength(CHUNKS)
    expect(log.slice(0, head.length)).toEqual(head)
    expect(got.items.slice(1)).toEqual(log.slice(head.length))
    expect(textOf(got.items.slice(1))).toBe(SCRIPT.slice(BEFORE).join(''))
    expect(got.items.at(-1)).toMatchObject({ type: 'RUN_FINISHED', runId })
    await until(() => server.handler.liveReaders === 0)

    // A catch-up read, then one SSE request from its tail that carried the rest
    // (the server holds it for 60 s): no reconnect, no polling.
    expect(readsOf(runId)).toEqual([
      ['-1', null, 200],
      [offsetAt(head.length), 'sse', 200],
    ])
  })

  it('DSC13: resume: initialOffset from materializeSnapshotFromDurableStream starts after it; an aborted subscribe() resumes from the last offset it saw', async () => {
    const runId = 'dsc13'
    const [FIRST, SECOND, THIRD] = [5, 12, 20]
    const [g1, g2, g3] = [gate(), gate(), gate()]
    const run = startRun(runId, { [FIRST]: g1.opened, [SECOND]: g2.opened, [THIRD]: g3.opened })
    await until(async () => (await logOf(runId)).length === 3 + FIRST)

    // SSR-style: materialize the messages so far and the offset to resume from.
    const materialized = await materializeSnapshotFromDurableStream({ readUrl: urlOf(runId) })
    expect(materialized).toEqual({
      messages: [{ id: `${runId}-0`, role: 'assistant', parts: [{ type: 'text', content: SCRIPT.slice(0, FIRST).join('') }] }],
      offset: offsetAt(3 + FIRST),
    })

    // A connection from that offset emits no snapshot: only the chunks after it, live.
    const connection = durableStreamConnection({ sendUrl: urlOf(runId), initialOffset: materialized.offset })
    const abort = new AbortController()
    const first = consume(connection.subscribe(abort.signal))
    await until(() => server.handler.liveReaders >= 1)
    g1.open()
    await until(async () => first.items.length >= SECOND - FIRST && (await logOf(runId)).length === 3 + SECOND) // the producer waits at g2
    abort.abort()
    await first.ended // the abort ends the iteration without an error
    await until(() => server.handler.liveReaders === 0) // and closes its SSE connection
    expect(first.items).toEqual((await logOf(runId)).slice(3 + FIRST, 3 + SECOND))

    // Written while nobody reads; the same connection resumes where it stopped:
    // the missed chunks by catch-up, then the rest live, to the close.
    g2.open()
    await until(async () => (await logOf(runId)).length === 3 + THIRD)
    const second = consume(connection.subscribe())
    await until(() => second.items.length >= THIRD - SECOND && server.handler.liveReaders >= 1)
    g3.open()
    await run.done
    await second.ended
    const log = await logOf(runId)
    expect(log).toHaveLength(CHUNKS)
    expect(second.items).toEqual(log.slice(3 + SECOND))
    expect(textOf([...first.items, ...second.items])).toBe(SCRIPT.slice(FIRST).join(''))
    expect(second.items.at(-1)).toMatchObject({ type: 'RUN_FINISHED', runId })

    expect(readsOf(runId)).toEqual([
      ['-1', null, 200], // materialize
      [offsetAt(3 + FIRST), null, 200], // first subscribe: catch-up at the materialized offset ...
      [offsetAt(3 + FIRST), 'sse', 200], // ... then live
      [offsetAt(3 + SECOND), null, 200], // second subscribe: from the last offset the first one saw
      [offsetAt(3 + THIRD), 'sse', 200],
    ])
  })
})
