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
 * aborts, woken by `NOTIFY sandbox_persist_event_log` on the shared listener
 * connection, with a fallback poll; a notification that carries the appended
 * entries and continues what the reader holds hands them on without a read. It never ends because
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
import { checkNumberOption, checkTextId, json, run, SP, value, type Queryable } from './internal.js'
import { acquireListener, EVENT_LOG_CHANNEL, Waker, type ListenerHandle, type ListenerHealth, type ListenerOptions, type SharedListener } from './listener.js'

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
  /**
   * Producer micro-batching, in ms (default 0: off; measured in bench/suites/streams.sh
   * it gains at 1-8 concurrent streams and loses at 32, so it is opt-in): an append
   * waits at most this long for appends of other streams of this factory,
   * then all of them go to the server in one statement, one round trip and
   * one transaction. It goes at once when every other open stream of the
   * factory is already waiting (no company can come), when it carries a
   * terminal chunk (`RUN_FINISHED`, `RUN_ERROR`) and when a stream closes.
   * Each append still resolves with its own offsets, after its chunks are
   * committed; a batch that fails is retried append by append, so one
   * stream's error (a fence, a bad chunk) fails only its own append.
   */
  microBatchMs?: number
}

/** Where a durability adapter comes from: a run id, a request, or an explicit init. */
export type PostgresDurabilitySource = string | Request | { runId: string; offset?: string | null }

/** One entry of a read: its resume token and chunk. */
export interface DurableEntry {
  offset: string
  chunk: StreamChunk
}

export interface PostgresStreamDurability extends StreamDurability<string> {
  /**
   * `read` by whole pages: each array is one page of the log (`event_log_read_pieces`)
   * (up to `pageSize` entries), for consumers that hand entries on in bulk.
   * Same offsets, verification, parking and ending as `read`.
   */
  readPages: (offset: string, signal?: AbortSignal) => AsyncIterable<Array<DurableEntry>>
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
   * Whether the LISTEN connection wakes waiters now: `{ ok, listening, problem? }`.
   * `ok: false` (with the reason) while they fall back to polling; for a health endpoint.
   */
  health: () => Promise<ListenerHealth>
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

const READ_PIECES = `SELECT r FROM ${SP}.event_log_read_pieces($1::text, $2::bigint, $3::text, $4::integer) r`

/**
 * One page of a log as event_log_read_verified returns it, read as the rows
 * of event_log_read_pieces: the log's fields, then its entries in pieces of
 * about 16 kB. node-postgres parses each row as it arrives, where one json
 * value of a whole page was received whole, then decoded and parsed at once
 * (a late reader's page of 1 000 chunks read in about half the time).
 */
async function readPieces(
  pool: Queryable,
  runId: string,
  after: number,
  digest: string | null,
  rows: number,
): Promise<ReadResult> {
  const result = await run(pool, READ_PIECES, [runId, after, digest, rows])
  const head = result.rows[0].r as Omit<ReadResult, 'entries'>
  const entries: ReadResult['entries'] = []
  for (let i = 1; i < result.rows.length; i++) {
    for (const entry of result.rows[i].r as ReadResult['entries']) entries.push(entry)
  }
  return { ...head, entries }
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

/** The factory's options, checked once. */
interface DurabilitySettings {
  pollMs: number
  pageSize: number
  firstChunkDeadlineMs: number
  activeRunFirstChunkDeadlineMs: number
  drainTimeoutMs: number
  microBatchMs: number
}

function durabilitySettings(options: PostgresDurabilityOptions): DurabilitySettings {
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
  const microBatchMs = checkNumberOption(
    options.microBatchMs ?? 0,
    'microBatchMs',
    (n) => Number.isFinite(n) && n >= 0,
    `microBatchMs must be >= 0, got ${options.microBatchMs}.`,
  )
  return { pollMs, pageSize, firstChunkDeadlineMs, activeRunFirstChunkDeadlineMs, drainTimeoutMs, microBatchMs }
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
  const hub = new DurabilityHub(pool, durabilitySettings(options), options)
  const makeAdapter = (source: PostgresDurabilitySource): PostgresStreamDurability => hub.resolveSource(source).adapter
  const start = (source: PostgresDurabilitySource) => hub.start(source)
  const close = () => hub.close()
  return Object.assign(makeAdapter, { start, close, health: () => hub.handle.health(), [Symbol.asyncDispose]: close })
}

/**
 * One factory's shared state: the append batcher, the listener share, the
 * followers of parked readers, the producers with open logs and the readers
 * parked now (both for the drain of close()).
 */
class DurabilityHub {
  /** Set by close(): no new adapter, append or park. */
  closing = false
  /** Set once the drain has ended the open logs: parked readers stop after one more read. */
  readersReleased = false
  readonly producers = new Set<Producer>()
  /** The wakers of parked readers, and the promises that settle when each read ends. */
  readonly readers = new Map<Waker, Promise<void>>()
  readonly batcher: AppendBatcher
  readonly handle: ListenerHandle
  readonly listener: SharedListener
  readonly followers: LogFollowers
  private drained: Promise<void> | undefined

  constructor(
    readonly pool: Queryable,
    readonly settings: DurabilitySettings,
    options: PostgresDurabilityOptions,
  ) {
    this.batcher = new AppendBatcher(pool, settings.microBatchMs)
    this.handle = acquireListener(pool, options)
    this.listener = this.handle.listener
    this.followers = new LogFollowers(this.listener)
  }

  close(): Promise<void> {
    return (this.drained ??= this.drain())
  }

  /** A producer with a log open (counted by the batcher). */
  join(producer: Producer): void {
    if (!this.producers.has(producer)) {
      this.producers.add(producer)
      this.batcher.streams += 1
    }
  }

  /** A producer whose log is ended or no longer its own. */
  leave(producer: Producer): void {
    if (this.producers.delete(producer)) this.batcher.streams -= 1
  }

  resolveSource(source: PostgresDurabilitySource): { adapter: PostgresStreamDurability; named: boolean } {
    if (this.closing) throw closedError()
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
    return { adapter: new RunProducer(this, runId, resumeOffset).adapter(), named }
  }

  async start(source: PostgresDurabilitySource): Promise<PostgresStreamDurability> {
    const { adapter, named } = this.resolveSource(source)
    if (!named) return adapter
    const state = await run(
      this.pool,
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
  private async drain(): Promise<void> {
    this.closing = true
    const drainTimeoutMs = this.settings.drainTimeoutMs
    const deadline = performance.now() + drainTimeoutMs
    const left = () => deadline - performance.now()
    const unfinished: Array<string> = []
    try {
      const pending = [...this.producers].flatMap((p) => [...p.inFlight])
      if (!(await within(Promise.allSettled(pending), left()))) unfinished.push('appends in flight')
      if (!(await within(this.endOpenLogs(unfinished), left()))) unfinished.push('ending open logs')
      this.readersReleased = true
      for (const waker of this.readers.keys()) waker.wake()
      if (!(await within(Promise.allSettled([...this.readers.values()]), left()))) unfinished.push('parked readers')
      if (unfinished.length > 0) {
        this.handle.report(
          'shutdown.incomplete',
          `close() did not finish within drainTimeoutMs (${drainTimeoutMs} ms) or failed: ${unfinished.join(', ')}`,
          { drainTimeoutMs, unfinished },
        )
      }
    } finally {
      await this.handle.release()
    }
  }

  /** The drain's second step: a shutdown chunk and a close for every log left open. */
  private endOpenLogs(unfinished: Array<string>): Promise<unknown> {
    const open = [...this.producers].filter((p) => !p.ended())
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
        this.handle.report('shutdown.incomplete', `ending the log of run ${JSON.stringify(p.runId)} at shutdown failed; its resumers wait for maintenance to end it`, {
          runId: p.runId,
          error,
        })
      }
    })
    return Promise.all(ended)
  }

  /** JSON drops members whose value is `undefined`: say so, once per adapter. */
  reportUndefinedMembers(runId: string, chunks: ReadonlyArray<unknown>): boolean {
    for (const chunk of chunks) {
      const path = undefinedMember(chunk, '')
      if (path !== null) {
        this.handle.report(
          'chunk.undefined_member',
          `a ${String((chunk as { type?: unknown }).type)} chunk has the member ${path} = undefined; JSON cannot store it (a key is dropped, an array element becomes null), so readers and replays do not see it (live SSE drops it too)`,
          { runId, path },
        )
        return true
      }
    }
    return false
  }
}

/**
 * One adapter: the producer of one run's log (appends with this instance's
 * producer id and sequence, close, the drain's terminate) and the factory of
 * its readers.
 */
class RunProducer implements Producer {
  readonly producerId = randomUUID()
  /** Appends and closes of this adapter that have not settled. */
  readonly inFlight = new Set<Promise<unknown>>()
  private readonly tag: string
  private producerSeq = 0
  private reportedUndefined = false
  private isEnded = false

  constructor(
    readonly hub: DurabilityHub,
    readonly runId: string,
    private readonly resumeOffset: string | null,
  ) {
    this.tag = runTag(runId)
    if (resumeOffset !== null && resumeOffset !== '-1' && resumeOffset !== 'now') this.parseOffset(resumeOffset)
  }

  adapter(): PostgresStreamDurability {
    return {
      runId: this.runId,
      producerId: this.producerId,
      resumeFrom: () => this.resumeOffset,
      append: (chunks) => this.append(chunks),
      read: (offset, signal) => flatten(this.readPages(offset, signal), signal),
      readPages: (offset, signal) => this.readPages(offset, signal),
      close: () => this.close(),
      snapshot: () => this.snapshot(),
    }
  }

  ended(): boolean {
    return this.isEnded
  }

  format(seq: number, digest: string): string {
    return `v2.${this.tag}.${seq}.${digest}`
  }

  /** Run one write of this producer, visible to the drain while it is in flight. */
  private async track<T>(write: Promise<T>): Promise<T> {
    this.inFlight.add(write)
    try {
      return await write
    } finally {
      this.inFlight.delete(write)
    }
  }

  private appendRaw(chunks: ReadonlyArray<unknown>, batched = false): Promise<Tokens> {
    this.producerSeq += 1
    const part: AppendPart = {
      runId: this.runId,
      chunks: json(chunks),
      options: JSON.stringify({ producerId: this.producerId, producerSeq: this.producerSeq, withDigests: true }),
    }
    return batched ? this.hub.batcher.add(part, chunks.some(isTerminal)) : appendOne(this.hub.pool, part)
  }

  private closeLog() {
    this.hub.batcher.flushNow()
    return run(this.hub.pool, `SELECT ${SP}.event_log_close($1::text)`, [this.runId], { retryUnknownOutcome: true })
  }

  async terminate(chunk: StreamChunk): Promise<void> {
    const { hub, runId } = this
    const record = await value<{ status?: string; detachedSince?: number } | null>(
      hub.pool,
      `SELECT ${SP}.run_get($1::text) AS r`,
      [runId],
    )
    // A detached run was handed off (a driver elsewhere may take it over): not ours to end.
    if (record?.detachedSince !== undefined && record.detachedSince !== null) {
      hub.leave(this)
      return
    }
    await this.appendRaw([chunk])
    await this.closeLog()
    this.isEnded = true
    hub.leave(this)
    if (record !== null && !TERMINAL.has(String(record.status))) {
      await run(hub.pool, `SELECT ${SP}.run_update($1::text, $2::json)`, [
        runId,
        JSON.stringify({ status: 'failed', finishedAt: Date.now(), error: { message: SHUTDOWN_MESSAGE, code: SERVER_SHUTDOWN } }),
      ])
    }
  }

  async append(chunks: Array<StreamChunk>): Promise<Array<string>> {
    if (!Array.isArray(chunks)) throw new TypeError('append expects an array of chunks.')
    // Draining: nothing may follow the shutdown chunk the drain appends.
    if (this.hub.closing) throw closedError(this.isEnded)
    if (chunks.length === 0) return []
    if (!this.reportedUndefined) this.reportedUndefined = this.hub.reportUndefinedMembers(this.runId, chunks)
    this.hub.join(this)
    const tokens = await this.track(this.appendRaw(chunks, true))
    if (!Array.isArray(tokens) || tokens.length !== chunks.length) {
      throw new Error(`event_log_append returned ${Array.isArray(tokens) ? tokens.length : 'no'} sequence numbers for ${chunks.length} chunks.`)
    }
    return tokens.map((t) => this.format(t.seq, t.digest))
  }

  async close(): Promise<void> {
    // Draining: the drain ends every open log of this factory, behind its
    // shutdown chunk (closing it here first would end readers before it).
    if (this.hub.closing) return
    await this.track(this.closeLog())
    this.isEnded = true
    this.hub.leave(this)
  }

  async snapshot(): Promise<Array<{ offset: string; chunk: StreamChunk }>> {
    // One verified read of every entry: one snapshot, with the digests.
    const page = await this.readPage(0, null, 2_147_483_647)
    return page.entries.map((e) => ({ offset: this.format(e.seq, e.digest), chunk: e.chunk }))
  }

  // The digest of the entry read last travels with every page, so the
  // server vouches for the stream across a failover between two pages too.
  readPage(after: number, digest: string | null, rows: number): Promise<ReadResult> {
    return readPieces(this.hub.pool, this.runId, after, digest, rows)
  }

  parseOffset(offset: string): Position {
    const match = /^(?:v1\.([0-9a-f]{12})\.([1-9][0-9]*)|v2\.([0-9a-f]{12})\.([1-9][0-9]*)\.([0-9a-f]{16}))$/.exec(offset)
    const runPart = match?.[1] ?? match?.[3]
    const seq = Number(match?.[2] ?? match?.[4])
    if (match === null || !Number.isSafeInteger(seq)) {
      throw new SandboxPersistError('EVENT_LOG_INVALID_OFFSET', `Invalid sandbox_persist event-log offset: ${JSON.stringify(offset)}`)
    }
    if (runPart !== this.tag) {
      throw new SandboxPersistError(
        'EVENT_LOG_INVALID_OFFSET',
        `Offset ${JSON.stringify(offset)} belongs to another run, not ${JSON.stringify(this.runId)}.`,
      )
    }
    return { seq, digest: match[5] ?? null }
  }

  readPages(offset: string, signal?: AbortSignal): AsyncGenerator<Array<DurableEntry>> {
    return new LogReader(this, offset, signal).pages()
  }
}

/**
 * One read of a log: replay strictly after the offset, then park until the
 * log is closed (and fully read) or the signal aborts, woken by the
 * followers' notifications (which hand on the entries they carry when they
 * continue what this reader holds) or the fallback poll.
 */
class LogReader {
  private after = 0
  private afterDigest: string | null = null
  private readonly waker = new Waker()
  // Entries the notifications carried, not yet handed on; a read is due
  // first, and again after any wake that carried none (a close, a
  // reconnect, a poll, the drain), so only a notification that continues
  // what this reader holds replaces a read.
  private notified: Array<{ entry: ReadEntry; prev: string }> = []
  private mustRead = true
  private firstChunkDeadline: number | undefined
  private readonly follower: LogFollower = { notify: (appended) => this.notify(appended) }

  constructor(
    private readonly producer: RunProducer,
    private readonly offset: string,
    private readonly signal: AbortSignal | undefined,
  ) {}

  private notify(appended: Appended | undefined | null): void {
    if (appended === null) this.notified = []
    if (appended === null || appended === undefined) this.mustRead = true
    else {
      let prev = appended.prev
      for (const entry of appended.entries) {
        this.notified.push({ entry, prev })
        prev = entry.digest
      }
    }
    this.waker.wake()
  }

  async *pages(): AsyncGenerator<Array<DurableEntry>> {
    const { producer, offset, signal, waker } = this
    const hub = producer.hub
    const pageSize = hub.settings.pageSize
    const pollMs = hub.settings.pollMs
    const fromStart = offset === '-1' || offset === 'now'
    const start: Position = fromStart ? { seq: 0, digest: null } : producer.parseOffset(offset)
    this.after = start.seq
    this.afterDigest = start.digest
    // Subscribed before the first query the wait depends on.
    const leave = hub.followers.add(this.follower)
    let exited!: () => void
    hub.readers.set(waker, new Promise<void>((resolve) => (exited = resolve)))
    try {
      await hub.listener.ready()
      if (offset === 'now') await this.fromTail()
      for (;;) {
        if (signal?.aborted) return
        waker.reset()
        const fresh = this.mustRead || hub.readersReleased ? 'read' : this.takeNotified()
        if (fresh !== 'read') {
          if (fresh.length > 0) {
            yield this.hand(fresh)
            if (signal?.aborted) return
            continue
          }
        } else {
          this.mustRead = false
          const page = await producer.readPage(this.after, this.afterDigest, pageSize)
          if (page.logId !== undefined) hub.followers.place(this.follower, page.logId)
          if (page.entries.length > 0) {
            yield this.hand(page.entries)
            if (signal?.aborted) return
          }
          if (page.closed && this.after >= page.tail) return
          // A full page may have more behind it; one that reached the tail has not.
          if (page.entries.length >= pageSize && this.after < page.tail) {
            this.mustRead = true
            continue
          }
          // Shutting down: this was the last read (it saw the drain's chunks).
          if (hub.readersReleased) throw closedError()
          if (!page.exists && fromStart) {
            if ((await this.waitForFirstChunk()) === 'abort') return
            this.mustRead = true
            continue
          }
        }
        const how = await waker.wait(pollMs, signal)
        if (how === 'abort') return
        if (how === 'timeout') this.mustRead = true
        if (!hub.listener.connected) void hub.listener.ready()
      }
    } finally {
      leave()
      hub.readers.delete(waker)
      exited()
    }
  }

  /** Offset 'now': start after the log's current tail. */
  private async fromTail(): Promise<void> {
    this.waker.reset()
    const head = await this.producer.readPage(0, null, 0)
    if (head.logId !== undefined) this.producer.hub.followers.place(this.follower, head.logId)
    this.after = head.tail
    this.afterDigest = head.tailDigest
  }

  /** No log yet: wait for it within the first-chunk deadline (longer for a run that is active). */
  private async waitForFirstChunk(): Promise<'wake' | 'timeout' | 'abort'> {
    const { hub, runId } = this.producer
    if (this.firstChunkDeadline === undefined) {
      const record = await value<{ status?: string } | null>(hub.pool, `SELECT ${SP}.run_get($1::text) AS r`, [runId])
      const active = record !== null && !TERMINAL.has(String(record.status))
      this.firstChunkDeadline =
        performance.now() + (active ? hub.settings.activeRunFirstChunkDeadlineMs : hub.settings.firstChunkDeadlineMs)
    }
    const left = this.firstChunkDeadline - performance.now()
    if (left <= 0) {
      throw new SandboxPersistError(
        'EVENT_LOG_NOT_FOUND',
        `Run ${JSON.stringify(runId)} produced no event log within the first-chunk deadline.`,
      )
    }
    return this.waker.wait(Math.min(hub.settings.pollMs, left), this.signal)
  }

  /** Entries as handed out, remembering the last one as the position. */
  private hand(entries: Array<ReadEntry>): Array<DurableEntry> {
    const out = new Array<DurableEntry>(entries.length)
    for (let i = 0; i < entries.length; i++) {
      const entry = entries[i]!
      out[i] = { offset: this.producer.format(entry.seq, entry.digest), chunk: entry.chunk }
    }
    const last = entries[entries.length - 1]!
    this.after = last.seq
    this.afterDigest = last.digest
    return out
  }

  // The notified entries that continue the stream this reader holds (the
  // entry after `after`, chained to `afterDigest`): [] when they are all
  // behind it (a read already gave them), 'read' when one is missing or
  // the chain differs (the log was rewritten: the read reports SP405).
  private takeNotified(): Array<ReadEntry> | 'read' {
    const notified = this.notified
    const after = this.after
    let i = 0
    while (i < notified.length && notified[i]!.entry.seq <= after) i++
    if (i === notified.length) {
      this.notified = []
      return []
    }
    const held = this.afterDigest ?? (after === 0 ? ZERO_DIGEST : null)
    if (notified[i]!.entry.seq !== after + 1 || notified[i]!.prev !== held) return 'read'
    let j = i + 1
    while (j < notified.length && notified[j]!.entry.seq === after + 1 + j - i && notified[j]!.prev === notified[j - 1]!.entry.digest) j++
    const run = notified.slice(i, j).map((n) => n.entry)
    this.notified = notified.slice(j)
    return run
  }
}

/** An entry as a read page or a notification carries it. */
type ReadEntry = ReadResult['entries'][number]

/** What an append's notification carries: the digest of the entry before them, and the entries. */
interface Appended {
  prev: string
  entries: Array<ReadEntry>
}

/** The digest of position 0 (before the first entry). */
const ZERO_DIGEST = '0000000000000000'

/**
 * A parked reader as LogFollowers sees it. `notify` gets what an append's
 * notification carried, `undefined` for one that carried nothing (read the
 * log) and `null` after a reconnect (anything may have been missed).
 */
interface LogFollower {
  notify(appended: Appended | undefined | null): void
}

/**
 * One factory's parked readers by log id, fed by one subscription to the
 * event-log channel: a notification goes only to the readers of its log
 * (payload: the log id, then optionally a space and the appended entries,
 * docs/contract/event-log.md §2.1). A reader whose log id is not known yet
 * (no log when it last read) is woken by every notification.
 */
class LogFollowers {
  private readonly byLog = new Map<string, Set<LogFollower>>()
  private readonly unplaced = new Set<LogFollower>()
  private readonly where = new Map<LogFollower, string>()
  private unsubscribe: (() => void) | undefined

  constructor(private readonly listener: SharedListener) {}

  /** Follow (unplaced until `place`); returns the function that stops it. */
  add(follower: LogFollower): () => void {
    this.unsubscribe ??= this.listener.subscribe(EVENT_LOG_CHANNEL, (payload) => this.dispatch(payload))
    this.unplaced.add(follower)
    return () => this.remove(follower)
  }

  /** The follower reads log `logId` (its last read said so): from now on only that log's notifications reach it. */
  place(follower: LogFollower, logId: number): void {
    const id = String(logId)
    if (this.where.get(follower) === id) return
    this.unplace(follower)
    this.where.set(follower, id)
    let set = this.byLog.get(id)
    if (set === undefined) this.byLog.set(id, (set = new Set()))
    set.add(follower)
  }

  /** Take the follower out of its log's set (or out of the unplaced ones). */
  private unplace(follower: LogFollower): void {
    this.unplaced.delete(follower)
    const id = this.where.get(follower)
    if (id === undefined) return
    this.where.delete(follower)
    const set = this.byLog.get(id)!
    set.delete(follower)
    if (set.size === 0) this.byLog.delete(id)
  }

  private remove(follower: LogFollower): void {
    this.unplace(follower)
    if (this.unplaced.size === 0 && this.byLog.size === 0) {
      this.unsubscribe?.()
      this.unsubscribe = undefined
    }
  }

  private dispatch(payload: string | null): void {
    if (payload === null) {
      for (const f of [...this.unplaced]) f.notify(null)
      for (const set of [...this.byLog.values()]) for (const f of [...set]) f.notify(null)
      return
    }
    const space = payload.indexOf(' ')
    for (const f of [...this.unplaced]) f.notify(undefined)
    const set = this.byLog.get(space < 0 ? payload : payload.slice(0, space))
    if (set === undefined) return
    // Each reader gets chunk objects of its own, as a read would give it: a
    // consumer that changes a chunk must not change what another reader holds.
    for (const f of [...set]) f.notify(space < 0 ? undefined : parseAppended(payload.slice(space + 1)))
  }
}

/** The entries part of an append's notification, or undefined when it is not one (the reader reads instead). */
function parseAppended(text: string): Appended | undefined {
  try {
    const parsed = JSON.parse(text) as Partial<Appended> | null
    if (typeof parsed?.prev === 'string' && Array.isArray(parsed.entries)) return parsed as Appended
  } catch {
    // not ours to judge: the readers read the log instead
  }
  return undefined
}

/** One append as the server takes it: the run, the chunks' JSON and the options' JSON. */
interface AppendPart {
  runId: string
  chunks: string | null
  options: string
}

type Tokens = Array<{ seq: number; digest: string }>

const isTerminal = (chunk: unknown) => {
  const type = (chunk as { type?: unknown } | null)?.type
  return type === 'RUN_FINISHED' || type === 'RUN_ERROR'
}

/** One append, one statement (also the fallback of a failed batch). */
function appendOne(pool: Queryable, part: AppendPart): Promise<Tokens> {
  return value<Tokens>(pool, `SELECT ${SP}.event_log_append($1::text, $2::json, $3::json) AS r`, [part.runId, part.chunks, part.options], {
    // Same producerId/producerSeq: the server returns the same tokens.
    retryUnknownOutcome: true,
  })
}

/**
 * The appends of several streams in one statement: event_log_append_many
 * makes each part exactly as the single append would (idempotency ledger,
 * fencing, digests, NOTIFY), all in one transaction, and takes each step once
 * for the whole batch. It locks the logs in run id order itself, so two
 * batches cannot deadlock on each other's logs.
 */
const APPEND_MANY = `SELECT ${SP}.event_log_append_many($1::json) AS r`

/** The JSON of a batch: [{runId, chunks, options}, ...] from texts already serialised. */
function batchJson(parts: ReadonlyArray<AppendPart>): string {
  return `[${parts.map((p) => `{"runId":${JSON.stringify(p.runId)},"chunks":${p.chunks},"options":${p.options}}`).join(',')}]`
}

interface Waiting {
  part: AppendPart
  resolve: (tokens: Tokens) => void
  reject: (error: unknown) => void
}

/**
 * Producer micro-batching (`microBatchMs`). Core awaits each append of a
 * stream before the next, so company only comes from other streams: a batch
 * goes when the wait is over, or at once when every open stream not in a
 * batch in flight is already waiting, or for a terminal chunk or a close.
 */
class AppendBatcher {
  /** Open producer streams of the factory (have appended, not closed). */
  streams = 0
  private waiting: Array<Waiting> = []
  private inFlight = 0
  private timer: ReturnType<typeof setTimeout> | undefined
  constructor(
    private readonly pool: Queryable,
    private readonly ms: number,
  ) {}

  add(part: AppendPart, terminal: boolean): Promise<Tokens> {
    if (this.ms === 0) return appendOne(this.pool, part)
    return new Promise<Tokens>((resolve, reject) => {
      this.waiting.push({ part, resolve, reject })
      if (terminal || this.waiting.length >= this.streams - this.inFlight) this.flushNow()
      else this.timer ??= setTimeout(() => this.flushNow(), this.ms)
    })
  }

  /** Send what waits, now. */
  flushNow(): void {
    if (this.timer !== undefined) {
      clearTimeout(this.timer)
      this.timer = undefined
    }
    const batch = this.waiting
    if (batch.length === 0) return
    this.waiting = []
    this.inFlight += batch.length
    void this.send(batch).finally(() => (this.inFlight -= batch.length))
  }

  private async send(batch: Array<Waiting>): Promise<void> {
    if (batch.length === 1) {
      const only = batch[0]!
      await appendOne(this.pool, only.part).then(only.resolve, only.reject)
      return
    }
    let results: Array<Tokens>
    try {
      // Every part is idempotent (producerId/producerSeq): so is the batch.
      results = await value<Array<Tokens>>(this.pool, APPEND_MANY, [batchJson(batch.map((w) => w.part))], {
        retryUnknownOutcome: true,
      })
    } catch {
      // The batch is one transaction: nothing of it is committed. Each append
      // again on its own, so only the failing one reports its error.
      await Promise.all(batch.map((w) => appendOne(this.pool, w.part).then(w.resolve, w.reject)))
      return
    }
    batch.forEach((w, i) => w.resolve(results[i]!))
  }
}

/**
 * One entry at a time out of pages, without an async generator's per-item
 * queue and awaits: a buffered entry costs one resolved promise, so a resume
 * of a page hands on its entries at about the cost of the page's JSON parse.
 * The abort signal is checked before every entry, as the page reader does
 * between pages.
 */
function flatten(pages: AsyncGenerator<Array<DurableEntry>>, signal?: AbortSignal): AsyncIterableIterator<DurableEntry> {
  let page: Array<DurableEntry> = []
  let at = 0
  let done = false
  const end = (): IteratorResult<DurableEntry> => ({ value: undefined, done: true })
  const iterator: AsyncIterableIterator<DurableEntry> = {
    next() {
      if (done) return Promise.resolve(end())
      if (signal?.aborted) return iterator.return!()
      if (at < page.length) return Promise.resolve({ value: page[at++]!, done: false })
      return pages.next().then(
        (r) => {
          if (r.done) {
            done = true
            return end()
          }
          page = r.value
          at = 1
          return { value: page[0]!, done: false }
        },
        (error: unknown) => {
          done = true
          throw error
        },
      )
    },
    async return() {
      done = true
      page = []
      await pages.return(undefined)
      return end()
    },
    [Symbol.asyncIterator]() {
      return iterator
    },
  }
  return iterator
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
