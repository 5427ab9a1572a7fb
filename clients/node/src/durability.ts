/**
 * `StreamDurability` over the durable event log (docs/contract/event-log.md).
 *
 * Offsets are resume tokens `v2.<first 12 hex of sha256(runId)>.<seq>.<digest>`
 * (docs/contract/failover.md §2): the digest is the server's running digest of
 * the log up to that entry, and every read passes the last one back, so a
 * reader resuming on a promoted standby that lost or rewrote those entries
 * gets `EventLogOffsetDivergedError` (SP405), never a different stream.
 * `v1.<tag>.<seq>` offsets of 0.3.0 are still read, unverified for their
 * first page. `'-1'` reads from the start and `'now'` from the current tail. `read` replays strictly after
 * the offset, then parks until the log is closed (and fully read) or the signal
 * aborts, woken by `NOTIFY sandbox_persist_event_log` (payload: the log id) on
 * the shared listener connection, with a fallback poll. It never ends because
 * of the chunks it saw (agent loops emit several RUN_FINISHED chunks).
 * Every `append` carries this instance's producer id and an increasing
 * producer sequence number, so a retry after an unknown outcome is idempotent.
 *
 * Shutdown (`close()`) drains: new adapters and appends are refused with
 * `ADAPTER_CLOSED`, appends in flight finish (within `drainTimeoutMs`), every
 * log this factory's producers left open gets a terminal `RUN_ERROR` chunk
 * (`code: 'SERVER_SHUTDOWN'`) and is closed, a non-terminal run record of it
 * is marked `failed`, and parked readers read once more (so they see those
 * chunks), then stop with `ADAPTER_CLOSED`. Only then may the app end its pool.
 *
 * The log is append-only: an adapter is a `StreamDurability`, not an
 * `UpsertableStreamDurability` (nothing that uses this package needs `upsert`,
 * and replacing stored entries would break exactly-once resumption).
 */
import { createHash, randomUUID } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import { resolveResumeRunId, type StreamChunk, type StreamDurability } from '@tanstack/ai'
import { SandboxPersistError } from './errors.js'
import { checkNumberOption, checkTextId, json, run, value, type Queryable } from './internal.js'
import { acquireListener, EVENT_LOG_CHANNEL, Waker, type ListenerOptions } from './listener.js'

const SP = 'sandbox_persist'

export interface PostgresDurabilityOptions extends ListenerOptions {
  /**
   * How often a parked reader re-reads the log when no notification came, in
   * ms (default 1500): a fixed safety net under the LISTEN wake-ups.
   */
  fallbackPollMs?: number
  /** @deprecated The old name of `fallbackPollMs`. */
  pollMs?: number
  /** Entries fetched per `event_log_read` call (default 1000). */
  pageSize?: number
  /**
   * How long a from-start (`'-1'`/`'now'`) read of a run with no log yet waits
   * for the first chunk before failing (default 10 s) ...
   */
  firstChunkDeadlineMs?: number
  /** ... or, when the run record exists and is not terminal, this long (default 120 s). */
  activeRunFirstChunkDeadlineMs?: number
  /**
   * How long `close()` waits for appends in flight, for ending the open logs
   * and for parked readers' last read (default 5000 ms); what is not done by
   * then is reported as `shutdown.incomplete`.
   */
  drainTimeoutMs?: number
}

/** Where a durability adapter comes from: a run id, a request, or an explicit init. */
export type PostgresDurabilitySource = string | Request | { runId: string; offset?: string | null }

export interface PostgresStreamDurability extends StreamDurability<string> {
  /** The run this adapter reads and writes (generated for a producer request without one). */
  readonly runId: string
  /** This instance's producer id (one UUID per adapter instance). */
  readonly producerId: string
}

/**
 * What `postgresDurability(pool)` returns: a function from a source to an
 * adapter (where core's `memoryStream(request)` returns the adapter itself:
 * call it per request, `durability(request)`), plus `close()`.
 */
export interface PostgresDurabilityFactory extends AsyncDisposable {
  /**
   * The adapter for a request, a run id or `{ runId, offset }`, synchronously.
   * Throws `SandboxPersistError` with `code` `RUN_ID_REQUIRED` (a resume
   * request names no run), `INVALID_RUN_ID`, `EVENT_LOG_INVALID_OFFSET` (the
   * request's offset is malformed or another run's) or `ADAPTER_CLOSED`.
   */
  (source: PostgresDurabilitySource): PostgresStreamDurability
  /**
   * The adapter for a producer (a POST that runs the agent). Like calling the
   * factory, and when the source names its run (`X-Run-Id`, `?runId`, a run
   * id) that run must not exist yet: a run whose log is closed or whose record
   * is terminal rejects with `RUN_ALREADY_FINISHED`, a run whose log is open
   * with `RUN_ALREADY_STARTED` (both: answer 409; the client resumes with GET
   * or starts a new run without the id). One round trip; a source without a
   * run id gets a fresh one and none.
   */
  start: (source: PostgresDurabilitySource) => Promise<PostgresStreamDurability>
  /**
   * Drain, then release this factory's share of the listener connection (it
   * closes when nothing else uses it): new adapters and appends are refused
   * (`ADAPTER_CLOSED`), appends in flight finish, logs this factory's
   * producers left open are ended with a `RUN_ERROR` chunk (`code`
   * `SERVER_SHUTDOWN`) and closed, their non-terminal runs marked `failed`,
   * parked readers stop with `ADAPTER_CLOSED` after one last read. Bounded by
   * `drainTimeoutMs`. The pool stays open: end it after this. Idempotent.
   */
  close: () => Promise<void>
}

/** What `close()` does to one producer whose log is still open. */
interface Producer {
  readonly runId: string
  /** Appends and closes of this adapter that have not settled. */
  readonly inFlight: Set<Promise<unknown>>
  /** The log was closed (by the adapter or by the drain). */
  ended(): boolean
  /** Append the shutdown chunk and close the log. */
  terminate(chunk: StreamChunk): Promise<void>
}

/** The terminal chunk a drain appends to a log left open (a `RUN_ERROR`, as core writes them). */
export const SERVER_SHUTDOWN = 'SERVER_SHUTDOWN'
const SHUTDOWN_MESSAGE = 'The server shut down while this run was streaming; the run did not finish.'

interface ReadResult {
  logId?: number
  exists: boolean
  closed: boolean
  tail: number
  tailDigest: string
  entries: Array<{ seq: number; digest: string; chunk: StreamChunk }>
}

/** A parsed offset: the entry it follows and, for a v2 token, that entry's digest. */
interface Position {
  seq: number
  digest: string | null
}

const TERMINAL = new Set(['completed', 'failed', 'aborted'])

/** The run tag of an offset: the first 12 hex digits of sha256(runId). */
export function runTag(runId: string): string {
  return createHash('sha256').update(runId, 'utf8').digest('hex').slice(0, 12)
}

function readResumeOffset(request: Request): string | null {
  const header = request.headers.get('Last-Event-ID')
  if (header) return header
  try {
    return new URL(request.url).searchParams.get('offset')
  } catch {
    return null
  }
}

/** A fetch `Request` (duck-typed: frameworks may bring their own Request class). */
function isRequestLike(source: unknown): source is Request {
  if (source instanceof Request) return true
  return (
    typeof source === 'object' &&
    source !== null &&
    typeof (source as { url?: unknown }).url === 'string' &&
    typeof (source as { headers?: { get?: unknown } }).headers?.get === 'function'
  )
}

function checkRunId(runId: unknown): string {
  checkTextId(runId, 'runId', (message) => new SandboxPersistError('INVALID_RUN_ID', `Invalid runId: ${message}`))
  if ((runId as string).length === 0 || /[\r\n]/.test(runId as string)) {
    throw new SandboxPersistError(
      'INVALID_RUN_ID',
      `Invalid runId (must be non-empty and contain no CR/LF): ${JSON.stringify(runId)}`,
    )
  }
  return runId as string
}

function closedError(ended = false): SandboxPersistError {
  return new SandboxPersistError(
    'ADAPTER_CLOSED',
    ended
      ? `This durability factory was closed (the server is shutting down): this run's log was already ended with a ${SERVER_SHUTDOWN} chunk.`
      : 'This durability factory was closed (close() was called: the server is shutting down).',
  )
}

/** Settle when `promise` does or after `ms`, whichever is first; true when it settled in time. */
async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), Math.max(0, ms))
  })
  try {
    return await Promise.race([promise.then(() => true, () => true), late])
  } finally {
    clearTimeout(timer)
  }
}

/**
 * The durability factory. Pass its result as `durability.adapter` of
 * `toServerSentEventsResponse` (producer), `resumeServerSentEventsResponse`
 * (resume), or to `replayRunStream`.
 *
 * A request names its run with `X-Run-Id` or `?runId` (a producer request
 * without one gets a random run id, exposed as `.runId`); the resume offset
 * comes from `Last-Event-ID`, then `?offset`. Offsets do not carry the run id,
 * so a resume request must name its run.
 */
export function postgresDurability(pool: Queryable, options: PostgresDurabilityOptions = {}): PostgresDurabilityFactory {
  const pollMs = checkNumberOption(
    options.fallbackPollMs ?? options.pollMs ?? 1_500,
    'fallbackPollMs',
    (n) => Number.isFinite(n) && n > 0,
    `fallbackPollMs must be > 0, got ${options.fallbackPollMs ?? options.pollMs}.`,
  )
  const pageSize = checkNumberOption(
    options.pageSize ?? 1_000,
    'pageSize',
    (n) => Number.isSafeInteger(n) && n > 0 && n <= 2_147_483_647,
    `pageSize must be a positive integer, got ${options.pageSize}.`,
  )
  const firstChunkDeadlineMs = checkNumberOption(
    options.firstChunkDeadlineMs ?? 10_000,
    'firstChunkDeadlineMs',
    (n) => n >= 0,
    'first-chunk deadlines must be >= 0.',
  )
  const activeRunFirstChunkDeadlineMs = checkNumberOption(
    options.activeRunFirstChunkDeadlineMs ?? 120_000,
    'activeRunFirstChunkDeadlineMs',
    (n) => n >= 0,
    'first-chunk deadlines must be >= 0.',
  )
  const drainTimeoutMs = checkNumberOption(
    options.drainTimeoutMs ?? 5_000,
    'drainTimeoutMs',
    (n) => Number.isFinite(n) && n >= 0,
    `drainTimeoutMs must be >= 0, got ${options.drainTimeoutMs}.`,
  )
  const handle = acquireListener(pool, options)
  const listener = handle.listener
  /** Set by close(): no new adapter, append or park. */
  let closing = false
  /** Set once the drain has ended the open logs: parked readers stop after one more read. */
  let readersReleased = false
  let drained: Promise<void> | undefined
  const producers = new Set<Producer>()
  /** The wakers of parked readers, and the promises that settle when each read ends. */
  const readers = new Map<Waker, Promise<void>>()
  const close = () => (drained ??= drain())
  return Object.assign(makeAdapter, { start, close, [Symbol.asyncDispose]: close })

  function makeAdapter(source: PostgresDurabilitySource): PostgresStreamDurability {
    return resolveSource(source).adapter
  }

  function resolveSource(source: PostgresDurabilitySource): { adapter: PostgresStreamDurability; named: boolean } {
    if (closing) throw closedError()
    let runId: string
    let resumeOffset: string | null
    let named = true
    if (typeof source === 'string') {
      runId = checkRunId(source)
      resumeOffset = null
    } else if (isRequestLike(source)) {
      resumeOffset = readResumeOffset(source)
      const fromRequest = resolveResumeRunId(source)
      if (fromRequest === null) {
        if (resumeOffset !== null) {
          throw new SandboxPersistError(
            'RUN_ID_REQUIRED',
            'A resume request must name its run with the X-Run-Id header or ?runId: sandbox_persist offsets do not carry the run id.',
          )
        }
        runId = randomUUID()
        named = false
      } else {
        runId = checkRunId(fromRequest)
      }
    } else {
      const init = source as { runId: string; offset?: string | null }
      runId = checkRunId(init?.runId)
      resumeOffset = init.offset ?? null
    }
    return { adapter: createDurability(runId, resumeOffset), named }
  }

  async function start(source: PostgresDurabilitySource): Promise<PostgresStreamDurability> {
    const { adapter, named } = resolveSource(source)
    if (!named) return adapter
    const state = await run(
      pool,
      `SELECT ${SP}.event_log_read($1::text, 0::bigint, 0) AS log, ${SP}.run_get($1::text) AS run`,
      [adapter.runId],
    )
    const row = state.rows[0] as { log: ReadResult | null; run: { status?: string } | null } | undefined
    const log = row?.log ?? null
    const record = row?.run ?? null
    const id = JSON.stringify(adapter.runId)
    if ((log?.exists && log.closed) || (record !== null && TERMINAL.has(String(record.status)))) {
      throw new SandboxPersistError(
        'RUN_ALREADY_FINISHED',
        `Run ${id} has already finished: a new message starts a new run (send no X-Run-Id, or a new one); to read this run again, resume it (GET with Last-Event-ID or ?offset).`,
      )
    }
    if (log?.exists) {
      throw new SandboxPersistError(
        'RUN_ALREADY_STARTED',
        `Run ${id} is already streaming from another request: resume it (GET with Last-Event-ID or ?offset) instead of starting it again.`,
      )
    }
    return adapter
  }

  /** close(): see PostgresDurabilityFactory.close. */
  async function drain(): Promise<void> {
    closing = true
    const deadline = performance.now() + drainTimeoutMs
    const left = () => deadline - performance.now()
    const unfinished: Array<string> = []
    try {
      const pending = [...producers].flatMap((p) => [...p.inFlight])
      if (!(await within(Promise.allSettled(pending), left()))) unfinished.push('appends in flight')
      const open = [...producers].filter((p) => !p.ended())
      const chunk = (): StreamChunk =>
        ({
          type: 'RUN_ERROR',
          timestamp: Date.now(),
          message: SHUTDOWN_MESSAGE,
          code: SERVER_SHUTDOWN,
          error: { message: SHUTDOWN_MESSAGE, code: SERVER_SHUTDOWN },
        }) as StreamChunk
      const ended = open.map(async (p) => {
        try {
          await p.terminate(chunk())
        } catch (error) {
          unfinished.push(`run ${JSON.stringify(p.runId)}`)
          handle.report('shutdown.incomplete', `ending the log of run ${JSON.stringify(p.runId)} at shutdown failed; its resumers wait for maintenance to end it`, {
            runId: p.runId,
            error,
          })
        }
      })
      if (!(await within(Promise.all(ended), left()))) unfinished.push('ending open logs')
      readersReleased = true
      for (const waker of readers.keys()) waker.wake()
      if (!(await within(Promise.allSettled([...readers.values()]), left()))) unfinished.push('parked readers')
      if (unfinished.length > 0) {
        handle.report(
          'shutdown.incomplete',
          `close() did not finish within drainTimeoutMs (${drainTimeoutMs} ms) or failed: ${unfinished.join(', ')}`,
          { drainTimeoutMs, unfinished },
        )
      }
    } finally {
      await handle.release()
    }
  }

  /** JSON drops members whose value is `undefined`: say so, once per adapter. */
  function reportUndefinedMembers(runId: string, chunks: ReadonlyArray<unknown>): boolean {
    for (const chunk of chunks) {
      const path = undefinedMember(chunk, '')
      if (path !== null) {
        handle.report(
          'chunk.undefined_member',
          `a ${String((chunk as { type?: unknown }).type)} chunk has the member ${path} = undefined; JSON cannot store it (a key is dropped, an array element becomes null), so readers and replays do not see it (live SSE drops it too)`,
          { runId, path },
        )
        return true
      }
    }
    return false
  }

  function createDurability(runId: string, resumeOffset: string | null): PostgresStreamDurability {
    const tag = runTag(runId)
    const producerId = randomUUID()
    let producerSeq = 0
    let reportedUndefined = false
    let ended = false
    const inFlight = new Set<Promise<unknown>>()
    const format = (seq: number, digest: string) => `v2.${tag}.${seq}.${digest}`

    /** Run one write of this producer, visible to the drain while it is in flight. */
    const track = async <T>(write: Promise<T>): Promise<T> => {
      inFlight.add(write)
      try {
        return await write
      } finally {
        inFlight.delete(write)
      }
    }
    const appendRaw = (chunks: ReadonlyArray<unknown>) => {
      producerSeq += 1
      return value<Array<{ seq: number; digest: string }>>(
        pool,
        `SELECT ${SP}.event_log_append($1::text, $2::json, $3::json) AS r`,
        [runId, json(chunks), JSON.stringify({ producerId, producerSeq, withDigests: true })],
        // Same producerId/producerSeq: the server returns the same tokens.
        { retryUnknownOutcome: true },
      )
    }
    const closeLog = () => run(pool, `SELECT ${SP}.event_log_close($1::text)`, [runId], { retryUnknownOutcome: true })
    const producer: Producer = {
      runId,
      inFlight,
      ended: () => ended,
      async terminate(chunk) {
        const record = await value<{ status?: string; detachedSince?: number } | null>(
          pool,
          `SELECT ${SP}.run_get($1::text) AS r`,
          [runId],
        )
        // A detached run was handed off (a driver elsewhere may take it over): not ours to end.
        if (record?.detachedSince !== undefined && record.detachedSince !== null) {
          producers.delete(producer)
          return
        }
        await appendRaw([chunk])
        await closeLog()
        ended = true
        producers.delete(producer)
        if (record !== null && !TERMINAL.has(String(record.status))) {
          await run(pool, `SELECT ${SP}.run_update($1::text, $2::json)`, [
            runId,
            JSON.stringify({ status: 'failed', finishedAt: Date.now(), error: { message: SHUTDOWN_MESSAGE, code: SERVER_SHUTDOWN } }),
          ])
        }
      },
    }
    if (resumeOffset !== null && resumeOffset !== '-1' && resumeOffset !== 'now') parseOffset(resumeOffset)

    function parseOffset(offset: string): Position {
      const match = /^(?:v1\.([0-9a-f]{12})\.([1-9][0-9]*)|v2\.([0-9a-f]{12})\.([1-9][0-9]*)\.([0-9a-f]{16}))$/.exec(offset)
      const runPart = match?.[1] ?? match?.[3]
      const seq = Number(match?.[2] ?? match?.[4])
      if (match === null || !Number.isSafeInteger(seq)) {
        throw new SandboxPersistError('EVENT_LOG_INVALID_OFFSET', `Invalid sandbox_persist event-log offset: ${JSON.stringify(offset)}`)
      }
      if (runPart !== tag) {
        throw new SandboxPersistError(
          'EVENT_LOG_INVALID_OFFSET',
          `Offset ${JSON.stringify(offset)} belongs to another run, not ${JSON.stringify(runId)}.`,
        )
      }
      return { seq, digest: match[5] ?? null }
    }

    // The digest of the entry read last travels with every page, so the
    // server vouches for the stream across a failover between two pages too.
    const readPage = (after: number, digest: string | null, rows: number) =>
      value<ReadResult>(pool, `SELECT ${SP}.event_log_read_verified($1::text, $2::bigint, $3::text, $4::integer) AS r`, [
        runId,
        after,
        digest,
        rows,
      ])

    return {
      runId,
      producerId,
      resumeFrom: () => resumeOffset,

      async append(chunks) {
        if (!Array.isArray(chunks)) throw new TypeError('append expects an array of chunks.')
        // Draining: nothing may follow the shutdown chunk the drain appends.
        if (closing) throw closedError(ended)
        if (chunks.length === 0) return []
        if (!reportedUndefined) reportedUndefined = reportUndefinedMembers(runId, chunks)
        producers.add(producer)
        const tokens = await track(appendRaw(chunks))
        if (!Array.isArray(tokens) || tokens.length !== chunks.length) {
          throw new Error(`event_log_append returned ${Array.isArray(tokens) ? tokens.length : 'no'} sequence numbers for ${chunks.length} chunks.`)
        }
        return tokens.map((t) => format(t.seq, t.digest))
      },

      read(offset, signal) {
        return read(offset, signal)
      },

      async close() {
        // Draining: the drain ends every open log of this factory, behind its
        // shutdown chunk (closing it here first would end readers before it).
        if (closing) return
        await track(closeLog())
        ended = true
        producers.delete(producer)
      },

      async snapshot() {
        // One verified read of every entry: one snapshot, with the digests.
        const page = await readPage(0, null, 2_147_483_647)
        return page.entries.map((e) => ({ offset: format(e.seq, e.digest), chunk: e.chunk }))
      },
    }

    async function* read(
      offset: string,
      signal?: AbortSignal,
    ): AsyncGenerator<{ offset: string; chunk: StreamChunk }> {
      const fromStart = offset === '-1' || offset === 'now'
      const start: Position = fromStart ? { seq: 0, digest: null } : parseOffset(offset)
      let after = start.seq
      let afterDigest = start.digest
      let logId: number | undefined
      const waker = new Waker()
      // LISTEN before the first query the wait depends on.
      const unsubscribe = listener.subscribe(EVENT_LOG_CHANNEL, (payload) => {
        if (payload === null || logId === undefined || payload === String(logId)) waker.wake()
      })
      let exited!: () => void
      readers.set(waker, new Promise<void>((resolve) => (exited = resolve)))
      try {
        await listener.ready()
        if (offset === 'now') {
          waker.reset()
          const head = await readPage(0, null, 0)
          if (head.logId !== undefined) logId = head.logId
          after = head.tail
          afterDigest = head.tailDigest
        }
        let firstChunkDeadline: number | undefined
        for (;;) {
          if (signal?.aborted) return
          waker.reset()
          const page = await readPage(after, afterDigest, pageSize)
          if (page.logId !== undefined) logId = page.logId
          for (const entry of page.entries) {
            after = entry.seq
            afterDigest = entry.digest
            yield { offset: format(entry.seq, entry.digest), chunk: entry.chunk }
            if (signal?.aborted) return
          }
          if (page.entries.length >= pageSize) continue
          if (page.closed && after >= page.tail) return
          // Shutting down: this was the last read (it saw the drain's chunks).
          if (readersReleased) throw closedError()
          if (!page.exists && fromStart) {
            if (firstChunkDeadline === undefined) {
              const record = await value<{ status?: string } | null>(pool, `SELECT ${SP}.run_get($1::text) AS r`, [runId])
              const active = record !== null && !TERMINAL.has(String(record.status))
              firstChunkDeadline = performance.now() + (active ? activeRunFirstChunkDeadlineMs : firstChunkDeadlineMs)
            }
            const left = firstChunkDeadline - performance.now()
            if (left <= 0) {
              throw new SandboxPersistError(
                'EVENT_LOG_NOT_FOUND',
                `Run ${JSON.stringify(runId)} produced no event log within the first-chunk deadline.`,
              )
            }
            const how = await waker.wait(Math.min(pollMs, left), signal)
            if (how === 'abort') return
            continue
          }
          const how = await waker.wait(pollMs, signal)
          if (how === 'abort') return
          if (!listener.connected) void listener.ready()
        }
      } finally {
        unsubscribe()
        readers.delete(waker)
        exited()
      }
    }
  }
}

/** The path of the first member (at any depth) whose value is `undefined`, or null. */
function undefinedMember(input: unknown, path: string): string | null {
  if (typeof input !== 'object' || input === null) return null
  if (typeof (input as { toJSON?: unknown }).toJSON === 'function') return null
  if (Array.isArray(input)) {
    for (let i = 0; i < input.length; i++) {
      const found = undefinedMember(input[i], `${path}[${i}]`)
      if (found !== null) return found
    }
    return null
  }
  for (const [key, member] of Object.entries(input)) {
    const here = path === '' ? key : `${path}.${key}`
    if (member === undefined) return here
    const found = undefinedMember(member, here)
    if (found !== null) return found
  }
  return null
}
