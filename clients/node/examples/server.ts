/**
 * A TanStack AI app server whose state lives in PostgreSQL (sandbox_persist).
 *
 *   POST /chat            run the agent; SSE, durable (X-Run-Id names the run)
 *   GET  /chat?runId=...  resume a run from Last-Event-ID / ?offset on any replica
 *
 * Run several copies behind a load balancer: a client that loses its
 * connection resumes on whichever replica it reaches, and gets the rest of the
 * stream exactly once. Start with DATABASE_URL set (or PGHOST/PGPORT/...);
 * it listens on 127.0.0.1:$PORT (3000) unless HOST says otherwise. On Node 20,
 * from clients/node: `npm run example` (compiles the examples, then runs this).
 */
import http from 'node:http'
import pg from 'pg'
import {
  chat,
  resumeServerSentEventsResponse,
  toServerSentEventsResponse,
  type ChatMiddleware,
  type DefaultMessageMetadataByModality,
  type ModelMessage,
  type StreamChunk,
  type TextAdapter,
} from '@tanstack/ai'
import {
  httpStatusOf,
  postgresCheckpoints,
  postgresDurability,
  postgresLocks,
  postgresMaintenance,
  postgresPersistence,
  postgresSandboxInstances,
  sseHeartbeats,
  type PostgresPersistenceStores,
} from '@sandbox-persist/tanstack-ai'
import { nodeHandler } from './node-http.js'

// ------------------------------------------------------------------ wiring

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 20 })

/** messages, runs, interrupts, metadata, generationRuns, artifacts, blobs */
export const persistence = postgresPersistence(pool)
/** withSandbox({ instances, snapshots: { persistence, checkpoints } }) */
export const instances = postgresSandboxInstances(pool)
export const checkpoints = postgresCheckpoints(pool)
/**
 * Distributed, lease-backed locks woken by LISTEN/NOTIFY: `locks.withLock(key, fn)`
 * for your own critical sections, and `withSandbox` run claims once that middleware
 * is installable (nothing in the published @tanstack/ai 0.58 reads `withLocks`).
 */
// The LISTEN connection: a direct URL to the primary (LISTEN_DATABASE_URL when
// the pool goes through a transaction pooler), given explicitly, since the
// adapter does not read the pool's settings.
const listener = { listenerConnectionString: process.env.LISTEN_DATABASE_URL ?? process.env.DATABASE_URL }
export const locks = postgresLocks(pool, { ttlMs: 15_000, renewEveryMs: 4_000, logger: console, ...listener })
/** durability: { adapter: durability(request) }; one factory, one adapter per request */
export const durability = postgresDurability(pool, { logger: console, ...listener })
export const maintenance = postgresMaintenance(pool, { logger: console, ...listener })

// Replace with a real provider adapter, e.g. openaiText('gpt-5.5') from @tanstack/ai-openai.
function echoAdapter(): TextAdapter<'echo', Record<string, never>, readonly ['text'], DefaultMessageMetadataByModality> {
  return {
    kind: 'text',
    name: 'echo',
    model: 'echo',
    '~types': undefined as never,
    async *chatStream(options) {
      const runId = options.runId ?? 'run'
      const threadId = options.threadId ?? 'thread'
      const messageId = `${runId}-0`
      const last = options.messages.at(-1)
      const text = typeof last?.content === 'string' ? last.content : '...'
      yield { type: 'RUN_STARTED', runId, threadId, timestamp: Date.now() } as StreamChunk
      yield { type: 'TEXT_MESSAGE_START', messageId, role: 'assistant', timestamp: Date.now() } as StreamChunk
      for (const word of text.split(/(?<= )/)) {
        yield { type: 'TEXT_MESSAGE_CONTENT', messageId, delta: word, timestamp: Date.now() } as StreamChunk
      }
      yield { type: 'TEXT_MESSAGE_END', messageId, timestamp: Date.now() } as StreamChunk
      yield { type: 'RUN_FINISHED', runId, threadId, finishReason: 'stop', timestamp: Date.now() } as StreamChunk
    },
    async structuredOutput() {
      throw new Error('not supported by the echo adapter')
    },
  }
}

/**
 * Run bookkeeping. With @tanstack/ai-persistence installed, use
 * `withPersistence(persistence)` instead: it does this and much more
 * (interrupts, usage, metadata, artifacts).
 */
function recordRun(stores: PostgresPersistenceStores): ChatMiddleware {
  return {
    name: 'record-run',
    async onStart(ctx) {
      await stores.runs.createOrResume({ runId: ctx.runId, threadId: ctx.threadId, startedAt: Date.now() })
    },
    async onFinish(ctx, info) {
      // ctx.messages already ends with the assistant's reply.
      await stores.messages.saveThread(ctx.threadId, [...ctx.messages])
      await stores.runs.update(ctx.runId, { status: 'completed', finishedAt: Date.now(), usage: info.usage })
    },
    async onError(ctx, info) {
      const message = info.error instanceof Error ? info.error.message : String(info.error)
      await stores.runs.update(ctx.runId, { status: 'failed', finishedAt: Date.now(), error: { message } })
    },
  }
}

// ------------------------------------------------------------------ handlers (fetch style)

/** Coded adapter errors as 4xx/503 (see the README's "Errors"); anything else is a 500. */
function errorResponse(error: unknown): Response {
  const status = httpStatusOf(error)
  if (status === undefined) throw error
  const { code, message } = error as { code: string; message: string }
  return Response.json({ code, message }, { status })
}

export async function handleChat(request: Request): Promise<Response> {
  const body = (await request.json()) as { threadId: string; messages: Array<ModelMessage> }
  let log
  try {
    log = await durability.start(request) // X-Run-Id names the run (409 if it already ran); a fresh id otherwise
  } catch (error) {
    return errorResponse(error)
  }
  const history = await persistence.stores.messages.loadThread(body.threadId)
  const stream = chat({
    adapter: echoAdapter(),
    messages: [...history, ...body.messages],
    threadId: body.threadId,
    runId: log.runId,
    middleware: [recordRun(persistence.stores)],
  })
  return sseHeartbeats(
    toServerSentEventsResponse(stream, {
      headers: { 'X-Run-Id': log.runId },
      // batch: chunks per append (default 32); 1 streams every token as it comes.
      durability: { adapter: log, batch: 1 },
    }),
  )
}

export function handleResume(request: Request): Response {
  // Needs ?runId (or X-Run-Id) and Last-Event-ID (or ?offset); 400 without either.
  try {
    return sseHeartbeats(resumeServerSentEventsResponse({ adapter: durability(request) }))
  } catch (error) {
    return errorResponse(error)
  }
}

// ------------------------------------------------------------------ node:http

export function startServer(port = Number(process.env.PORT ?? 3000), host = process.env.HOST ?? '127.0.0.1'): http.Server {
  const server = http.createServer(
    nodeHandler((request) => {
      const url = new URL(request.url)
      if (url.pathname !== '/chat') return new Response('not found', { status: 404 })
      return request.method === 'POST' ? handleChat(request) : handleResume(request)
    }),
  )
  server.listen(port, host, () => console.log(`listening on http://${host}:${port}/chat`))
  // Stop accepting, drain (open logs end with SERVER_SHUTDOWN, leases are released),
  // end the responses still open (their clients resume elsewhere), then end the pool.
  const stop = async () => {
    server.close()
    await Promise.all([locks.close(), durability.close(), maintenance.close()])
    server.closeAllConnections()
    await pool.end()
  }
  process.once('SIGTERM', () => void stop())
  process.once('SIGINT', () => void stop())
  return server
}

if (import.meta.url === `file://${process.argv[1]}`) {
  startServer()
  // Wake the app's reaper when maintenance (pg_cron) sees detached runs.
  void maintenance.onReaperWake(({ detached, due }) => {
    console.log(`reaper wake-up: ${detached} detached, ${due} due`)
  })
}
