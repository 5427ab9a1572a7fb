/**
 * A fresh app using the packed adapter as a user would: a node:http server
 * with a durable SSE chat endpoint, driven once through fetch, then shut down
 * cleanly. Exits 0 only when the whole round trip worked.
 */
import http from 'node:http'
import { randomUUID } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import pg from 'pg'
import {
  chat,
  toServerSentEventsResponse,
  type ChatMiddleware,
  type DefaultMessageMetadataByModality,
  type StreamChunk,
  type TextAdapter,
} from '@tanstack/ai'
import {
  closeSharedListeners,
  postgresDurability,
  postgresLocks,
  postgresPersistence,
  type PostgresPersistenceStores,
} from '@sandbox-persist/tanstack-ai'

const pool: pg.Pool = new pg.Pool({ max: 4 })
const persistence = postgresPersistence(pool)
const durability = postgresDurability(pool)
const locks = postgresLocks(pool)

const WORDS = ['packed ', 'and ', 'installed']

function wordsAdapter(): TextAdapter<'words', Record<string, never>, readonly ['text'], DefaultMessageMetadataByModality> {
  return {
    kind: 'text',
    name: 'words',
    model: 'words',
    '~types': undefined as never,
    async *chatStream(options) {
      const runId = options.runId ?? 'run'
      const threadId = options.threadId ?? 'thread'
      const messageId = `${runId}-0`
      yield { type: 'RUN_STARTED', runId, threadId, timestamp: Date.now() } as StreamChunk
      yield { type: 'TEXT_MESSAGE_START', messageId, role: 'assistant', timestamp: Date.now() } as StreamChunk
      for (const delta of WORDS) {
        yield { type: 'TEXT_MESSAGE_CONTENT', messageId, delta, timestamp: Date.now() } as StreamChunk
      }
      yield { type: 'TEXT_MESSAGE_END', messageId, timestamp: Date.now() } as StreamChunk
      yield { type: 'RUN_FINISHED', runId, threadId, finishReason: 'stop', timestamp: Date.now() } as StreamChunk
    },
    async structuredOutput() {
      throw new Error('not supported')
    },
  }
}

function saveTranscript(stores: PostgresPersistenceStores): ChatMiddleware {
  return {
    name: 'save-transcript',
    async onFinish(ctx) {
      await stores.messages.saveThread(ctx.threadId, [...ctx.messages])
    },
  }
}

const server = http.createServer((req, res) => {
  void (async () => {
    const threadId = String(req.headers['x-thread-id'])
    const log = durability({ runId: randomUUID() })
    // An optional signal passed as is (exactOptionalPropertyTypes: WithLockOptions.signal takes undefined).
    const callerSignal: AbortSignal | undefined = req.headers['x-no-signal'] === undefined ? undefined : AbortSignal.timeout(60_000)
    const response = await locks.withLock(`thread:${threadId}`, async () =>
      toServerSentEventsResponse(
        chat({
          adapter: wordsAdapter(),
          messages: [{ role: 'user', content: 'hello' }],
          threadId,
          runId: log.runId,
          middleware: [saveTranscript(persistence.stores)],
        }),
        { durability: { adapter: log, batch: 1 } },
      ),
      { signal: callerSignal },
    )
    res.writeHead(response.status, Object.fromEntries(response.headers))
    res.flushHeaders()
    const reader = response.body!.getReader()
    res.on('close', () => void reader.cancel().catch(() => undefined))
    for (;;) {
      const { value, done } = await reader.read()
      if (done) break
      res.write(value)
    }
    res.end()
  })().catch((error: unknown) => {
    console.error(error)
    res.destroy()
  })
})

function fail(message: string): never {
  console.error(`pack app: ${message}`)
  process.exit(1)
}

await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
const { port } = server.address() as AddressInfo
const threadId = `pack-${randomUUID()}`
const answer = await fetch(`http://127.0.0.1:${port}/chat`, { method: 'POST', headers: { 'X-Thread-Id': threadId } })
const body = await answer.text()
const text = [...body.matchAll(/^data: (.*)$/gm)]
  .map((m) => JSON.parse(m[1]!) as { type: string; delta?: string })
  .filter((c) => c.type === 'TEXT_MESSAGE_CONTENT')
  .map((c) => c.delta)
  .join('')
if (text !== WORDS.join('')) fail(`streamed text was ${JSON.stringify(text)}`)
// the SSE ids are the adapter's resume tokens: v2.<run tag>.<seq>.<digest>
if (!/^id: v2\.[0-9a-f]{12}\.[1-9][0-9]*\.[0-9a-f]{16}$/m.test(body)) fail('events carry no durable offsets')
// The transcript is saved once the stream has ended: wait for it (the 30 s
// ceiling only turns a hang into a failure; a busy machine needs far less).
let transcript = await persistence.stores.messages.loadThread(threadId)
const savedBy = Date.now() + 30_000
while (transcript.length < 2 && Date.now() < savedBy) {
  await new Promise((r) => setTimeout(r, 20))
  transcript = await persistence.stores.messages.loadThread(threadId)
}
const roles = transcript.map((m) => ({ role: m.role, content: m.content }))
if (JSON.stringify(roles) !== JSON.stringify([
  { role: 'user', content: 'hello' },
  { role: 'assistant', content: WORDS.join('') },
])) fail(`transcript was ${JSON.stringify(transcript)} (each message once)`)

await new Promise<void>((resolve) => server.close(() => resolve()))
await locks.close()
await durability[Symbol.asyncDispose]()
await pool.end()
await closeSharedListeners()
console.log('pack app: streamed, stored and shut down cleanly')
