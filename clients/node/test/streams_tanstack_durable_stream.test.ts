/**
 * TanStack's `durableStream({ server })` (`@tanstack/ai-durable-stream` 0.1.6,
 * in the TanStack/ai repository, not on npm, so not installable here) against
 * our stream server. `RunStreamPeer` below is our own client that makes the
 * requests that package makes, as its source and tests describe them, and
 * checks every answer as strictly as it does:
 *
 * - the stream of a run is `<server>/streams/<encodeURIComponent('runs/' + runId)>`
 *   (one path segment with an encoded slash), created by a PUT with
 *   `Content-Type: application/json`; 201 means "created here" (no seeding
 *   read), 200 "it existed"; every answer carries a non-empty Stream-Next-Offset;
 * - an append is a POST of a JSON array of records `{v: 1, seq, chunk}` (seq
 *   one per-run counter from 1) with Producer-Id (a fresh UUID per host),
 *   Producer-Epoch (the run's driver epoch) and Producer-Seq (from 0);
 * - close is a POST with `Stream-Closed: true` and no body, answered with
 *   `Stream-Closed: true`;
 * - reads are SSE windows (`offset`, `live=sse`, `cursor`): only `data` and
 *   `control` events; each data event a JSON array of records with strictly
 *   increasing seqs, followed by a control event; control carries
 *   `streamNextOffset` and, while the stream is open, `streamCursor`; a
 *   window must advance the offset or the cursor; a snapshot stops at
 *   `upToDate`, a live read at `streamClosed`.
 *
 * Each host has its own Producer-Id, so the protocol's per-producer epochs
 * cannot fence a host that lost its run; the server's stream-wide fence at
 * `runs/` does (docs/contract/streams.md §4, `streamFencePrefixes`). Cases DSD1-DSD6.
 */
import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createStreamHandler, serveStreams, type StreamServer } from '../src/index.js'
import { makePool, reset, rows } from './helpers.js'

interface WireRecord {
  v: 1
  seq: number
  chunk: { type: string; [k: string]: unknown }
}

interface Control {
  streamNextOffset: string
  streamCursor?: string
  upToDate?: boolean
  streamClosed?: boolean
}

const pool = makePool({ max: 16 })
let server: StreamServer
let unfenced: StreamServer

beforeAll(async () => {
  await reset(pool)
  server = await serveStreams({ pool, port: 0, basePath: '/streams/', sseLifetimeMs: 300, sseHeartbeatMs: 100 })
  unfenced = await serveStreams({ pool, port: 0, basePath: '/streams/', streamFencePrefixes: [] })
})

afterAll(async () => {
  await server?.close()
  await unfenced?.close()
})

/** The SSE events of a response body: [event, data] pairs (comments skipped). */
async function* sseEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<[string | undefined, string | undefined]> {
  const decoder = new TextDecoder()
  let buffer = ''
  let event: string | undefined
  let data: string | undefined
  let any = false
  for await (const bytes of body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(bytes, { stream: true })
    let nl: number
    while ((nl = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, nl).replace(/\r$/, '')
      buffer = buffer.slice(nl + 1)
      if (line === '') {
        if (any) yield [event, data]
        event = data = undefined
        any = false
      } else if (!line.startsWith(':')) {
        const colon = line.indexOf(':')
        const field = colon < 0 ? line : line.slice(0, colon)
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '')
        if (field === 'event') event = value
        if (field === 'data') data = data === undefined ? value : `${data}\n${value}`
        any = true
      }
    }
  }
  if (any) yield [event, data]
}

/** One host's view of a run's stream, speaking as durableStream 0.1.6 does. */
class RunStreamPeer {
  readonly producerId = randomUUID()
  readonly url: string
  private producerSeq = 0
  nextSeq = 1
  created = false
  /** Every window read: its request offset and cursor, and the control that ended it. */
  readonly windows: Array<{ offset: string; cursor: string | undefined; control: Control | undefined }> = []

  constructor(base: StreamServer, runId: string, readonly epoch: number) {
    this.url = `${base.url}/streams/${encodeURIComponent(`runs/${runId}`)}`
  }

  async create(): Promise<string> {
    const res = await fetch(this.url, { method: 'PUT', headers: { 'Content-Type': 'application/json' } })
    expect(res.ok, await res.clone().text()).toBe(true)
    this.created = res.status === 201
    return nextOffsetOf(res)
  }

  /** POST one batch; the raw response (the caller decides what it expects). */
  post(chunks: WireRecord['chunk'][], producerSeq = this.producerSeq++): Promise<Response> {
    const records: WireRecord[] = chunks.map((chunk, i) => ({ v: 1, seq: this.nextSeq + i, chunk }))
    return fetch(this.url, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        'Producer-Id': this.producerId,
        'Producer-Epoch': String(this.epoch),
        'Producer-Seq': String(producerSeq),
      },
      body: JSON.stringify(records),
    })
  }

  async append(chunks: WireRecord['chunk'][]): Promise<string> {
    const res = await this.post(chunks)
    expect(res.ok, await res.clone().text()).toBe(true)
    this.nextSeq += chunks.length
    return nextOffsetOf(res)
  }

  async close(): Promise<void> {
    const res = await fetch(this.url, { method: 'POST', headers: { 'Stream-Closed': 'true' } })
    expect(res.ok, await res.clone().text()).toBe(true)
    nextOffsetOf(res)
    expect(res.headers.get('Stream-Closed')?.toLowerCase()).toBe('true')
  }

  /** Pull SSE windows from `offset` until upToDate (snapshot) or streamClosed (live), checking each window. */
  async read(offset: string, until: 'upToDate' | 'closed', maxWindows = 200): Promise<WireRecord[]> {
    const out: WireRecord[] = []
    let cursor: string | undefined
    for (let w = 0; w < maxWindows; w++) {
      const url = new URL(this.url)
      url.searchParams.set('offset', offset)
      url.searchParams.set('live', 'sse')
      if (cursor !== undefined) url.searchParams.set('cursor', cursor)
      const res = await fetch(url)
      expect(res.status).toBe(200)
      const window: (typeof this.windows)[number] = { offset, cursor, control: undefined }
      this.windows.push(window)
      let previous = 0
      let dataAwaitingControl = false
      for await (const [event, data] of sseEvents(res.body!)) {
        expect(['data', 'control']).toContain(event)
        if (event === 'data') {
          const records = JSON.parse(data!) as WireRecord[]
          expect(Array.isArray(records)).toBe(true)
          for (const r of records) {
            expect(r.v).toBe(1)
            expect(r.seq).toBeGreaterThan(previous)
            previous = r.seq
            if (r.seq >= this.nextSeq) this.nextSeq = r.seq + 1
            out.push(r)
          }
          dataAwaitingControl = true
          continue
        }
        const control = JSON.parse(data!) as Control
        expect(typeof control.streamNextOffset).toBe('string')
        expect(control.streamNextOffset.trim()).not.toBe('')
        if (control.streamClosed !== true) expect(typeof control.streamCursor).toBe('string')
        if (control.upToDate !== undefined) expect(typeof control.upToDate).toBe('boolean')
        window.control = control
        dataAwaitingControl = false
        offset = control.streamNextOffset
        cursor = control.streamCursor
        if (control.streamClosed === true) return out
        if (until === 'upToDate' && control.upToDate === true) {
          await res.body!.cancel().catch(() => undefined)
          return out
        }
      }
      // The window ended: it was paired, and it moved the reader on.
      expect(dataAwaitingControl).toBe(false)
      expect(window.control).toBeDefined()
      expect(offset !== window.offset || cursor !== window.cursor).toBe(true)
    }
    throw new Error(`no ${until} within ${maxWindows} windows`)
  }
}

function nextOffsetOf(res: Response): string {
  const offset = res.headers.get('Stream-Next-Offset')
  expect(offset).not.toBeNull()
  expect(offset!.trim()).not.toBe('')
  expect(offset).not.toMatch(/[\r\n]/)
  return offset!
}

const text = (delta: string) => ({ type: 'TEXT_MESSAGE_CONTENT', messageId: 'm1', delta })

describe("TanStack's durableStream against the stream server", () => {
  it('DSD1 a fresh run: created here (201), a second host sees it exists (200), a snapshot returns every record in order and stops at upToDate', async () => {
    const run = 'dsd1'
    const host = new RunStreamPeer(server, run, 0)
    await host.create()
    expect(host.created).toBe(true)
    await host.append([text('a'), text('b')])
    await host.append([text('c')])
    const other = new RunStreamPeer(server, run, 0)
    await other.create()
    expect(other.created).toBe(false)
    const records = await other.read('-1', 'upToDate')
    expect(records.map((r) => [r.seq, r.chunk.delta])).toEqual([[1, 'a'], [2, 'b'], [3, 'c']])
    expect(other.windows.length).toBe(1)
    expect(other.nextSeq).toBe(4) // the seeding read taught it the run's tail
    // The run lives at the path runs/dsd1: the encoded slash is a path separator in the stream's name.
    expect(await rows(pool, `SELECT path FROM sandbox_persist.streams WHERE path LIKE 'runs/%'`)).toEqual([{ path: 'runs/dsd1' }])
  })

  it('DSD2 a live reader started before the producer: windows roll over on an idle stream by advancing the cursor, every record arrives once, the read ends at close', async () => {
    const run = 'dsd2'
    const host = new RunStreamPeer(server, run, 0)
    await host.create()
    const reader = new RunStreamPeer(server, run, 0)
    const reading = reader.read('-1', 'closed')
    // Let at least two SSE windows (300 ms each) end on an idle stream first.
    while (reader.windows.filter((w) => w.control !== undefined).length < 2) await new Promise((r) => setTimeout(r, 50))
    for (let i = 0; i < 5; i++) await host.append([text(`x${i}`), text(`y${i}`)])
    await host.close()
    const records = await reading
    expect(records.map((r) => r.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    expect(records.map((r) => r.chunk.delta)).toEqual(['x0', 'y0', 'x1', 'y1', 'x2', 'y2', 'x3', 'y3', 'x4', 'y4'])
    expect(reader.windows.at(-1)!.control!.streamClosed).toBe(true)
  })

  it('DSD3 a takeover fences the host that lost the run: its next append is 403 with the new epoch, whatever its Producer-Id, and nothing is stored', async () => {
    const run = 'dsd3'
    const first = new RunStreamPeer(server, run, 1)
    await first.create()
    await first.append([text('first-1')])
    const second = new RunStreamPeer(server, run, 2)
    await second.create()
    await second.read('-1', 'upToDate') // seeds nextSeq as a takeover does
    await second.append([text('second-2')])
    const zombie = await first.post([text('zombie')])
    expect(zombie.status).toBe(403)
    expect(zombie.headers.get('Producer-Epoch')).toBe('2')
    const check = new RunStreamPeer(server, run, 2)
    expect((await check.read('-1', 'upToDate')).map((r) => r.chunk.delta)).toEqual(['first-1', 'second-2'])
    // A later host at the same epoch as the fence (the run's claim, not the producer, decides who that is) writes on.
    const third = new RunStreamPeer(server, run, 2)
    await third.read('-1', 'upToDate')
    await third.append([text('third-3')])
    const head = await fetch(first.url, { method: 'HEAD' })
    expect(head.status).toBe(200)
  })

  it('DSD4 a retried append (the answer was lost) is answered as a duplicate and stored once', async () => {
    const run = 'dsd4'
    const host = new RunStreamPeer(server, run, 3)
    await host.create()
    const first = await host.post([text('once')], 0)
    expect(first.status).toBe(200)
    const again = await host.post([text('once')], 0)
    expect(again.status).toBe(204)
    expect(again.headers.get('Stream-Next-Offset')).toBe(first.headers.get('Stream-Next-Offset'))
    expect((await new RunStreamPeer(server, run, 3).read('-1', 'upToDate')).map((r) => r.chunk.delta)).toEqual(['once'])
  })

  it('DSD5 the fence is scoped: outside runs/, and with streamFencePrefixes [] at runs/, producers keep the protocol\'s independent epochs; a bad list is a TypeError', async () => {
    const outside = `${server.url}/streams/other%2Fdsd5`
    expect((await fetch(outside, { method: 'PUT', headers: { 'Content-Type': 'application/json' } })).status).toBe(201)
    const post = (url: string, id: string, epoch: number) => fetch(url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Producer-Id': id, 'Producer-Epoch': String(epoch), 'Producer-Seq': '0' },
      body: JSON.stringify([{ id, epoch }]),
    })
    expect((await post(outside, 'A', 1)).status).toBe(200)
    expect((await post(outside, 'B', 0)).status).toBe(200)
    const inside = `${unfenced.url}/streams/runs%2Fdsd5`
    expect((await fetch(inside, { method: 'PUT', headers: { 'Content-Type': 'application/json' } })).status).toBe(201)
    expect((await post(inside, 'A', 1)).status).toBe(200)
    expect((await post(inside, 'B', 0)).status).toBe(200)
    expect(await rows(pool, `SELECT path, producer_fence FROM sandbox_persist.streams WHERE path IN ('other/dsd5', 'runs/dsd5') ORDER BY path`))
      .toEqual([{ path: 'other/dsd5', producer_fence: null }, { path: 'runs/dsd5', producer_fence: null }])
    for (const bad of [[''], ['runs/', 7], 'runs/']) {
      expect(() => createStreamHandler({ pool, streamFencePrefixes: bad as string[] })).toThrow(/streamFencePrefixes must be an array of non-empty strings/)
    }
  })

  it('DSD6 resume from a record\'s batch offset (what durableStream puts in its cursor) gives the records from that batch on', async () => {
    const run = 'dsd6'
    const host = new RunStreamPeer(server, run, 0)
    const start = await host.create()
    const afterFirst = await host.append([text('a'), text('b')])
    await host.append([text('c')])
    await host.append([text('d')])
    expect(start).not.toBe(afterFirst)
    const reader = new RunStreamPeer(server, run, 0)
    expect((await reader.read(afterFirst, 'upToDate')).map((r) => r.chunk.delta)).toEqual(['c', 'd'])
  })
})
