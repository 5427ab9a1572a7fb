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
  (source: PostgresDurabilitySource): PostgresStreamDurability
  /**
   * Release this factory's share of the listener connection (it closes when
   * nothing else uses it). The pool stays open; adapters already made keep
   * working (parked readers poll). Idempotent.
   */
  close: () => Promise<void>
}

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
  checkTextId(runId, 'runId')
  if ((runId as string).length === 0 || /[\r\n]/.test(runId as string)) {
    throw new Error(`Invalid runId (must be non-empty and contain no CR/LF): ${JSON.stringify(runId)}`)
  }
  return runId as string
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
  const handle = acquireListener(pool, options)
  const listener = handle.listener
  const close = () => handle.release()
  return Object.assign(makeAdapter, { close, [Symbol.asyncDispose]: close })

  function makeAdapter(source: PostgresDurabilitySource): PostgresStreamDurability {
    let runId: string
    let resumeOffset: string | null
    if (typeof source === 'string') {
      runId = checkRunId(source)
      resumeOffset = null
    } else if (isRequestLike(source)) {
      resumeOffset = readResumeOffset(source)
      const named = resolveResumeRunId(source)
      if (named === null) {
        if (resumeOffset !== null) {
          throw new Error('A resume request must name its run with the X-Run-Id header or ?runId: sandbox_persist offsets do not carry the run id.')
        }
        runId = randomUUID()
      } else {
        runId = checkRunId(named)
      }
    } else {
      const init = source as { runId: string; offset?: string | null }
      runId = checkRunId(init?.runId)
      resumeOffset = init.offset ?? null
    }
    return createDurability(runId, resumeOffset)
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
    const format = (seq: number, digest: string) => `v2.${tag}.${seq}.${digest}`

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
        if (chunks.length === 0) return []
        if (!reportedUndefined) reportedUndefined = reportUndefinedMembers(runId, chunks)
        producerSeq += 1
        const tokens = await value<Array<{ seq: number; digest: string }>>(
          pool,
          `SELECT ${SP}.event_log_append($1::text, $2::json, $3::json) AS r`,
          [runId, json(chunks), JSON.stringify({ producerId, producerSeq, withDigests: true })],
          // Same producerId/producerSeq: the server returns the same tokens.
          { retryUnknownOutcome: true },
        )
        if (!Array.isArray(tokens) || tokens.length !== chunks.length) {
          throw new Error(`event_log_append returned ${Array.isArray(tokens) ? tokens.length : 'no'} sequence numbers for ${chunks.length} chunks.`)
        }
        return tokens.map((t) => format(t.seq, t.digest))
      },

      read(offset, signal) {
        return read(offset, signal)
      },

      async close() {
        await run(pool, `SELECT ${SP}.event_log_close($1::text)`, [runId], { retryUnknownOutcome: true })
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
