/**
 * One dedicated, unpooled LISTEN connection per connection source
 * (docs/contract/README.md §6 rule 14), shared by every lock store,
 * durability adapter and maintenance helper made with that source: the same
 * `listenerClient` factory, the same `listenerConnectionString`, or, with
 * neither, the connection settings the pool was given (`connectionString`,
 * host, port, user, password, database, ssl, options), or with none of those
 * node-postgres's defaults (the PG* environment, as `new pg.Pool()` without
 * settings does).
 * Only public node-postgres API is used: `new pg.Client(config)` with the
 * documented `stream` factory for the clients made here, `connect()`,
 * `query()`, `end()` and the `error`, `end` and `notification` events. The
 * registry of open listeners is this module's only state; `closeSharedListeners()`
 * closes and forgets all of it, `sharedListenerCount()` shows it.
 *
 * Notifications are wake-up hints only: they are lost while the connection is
 * down, so every waiter also polls. After a (re)connect every subscriber is
 * woken once, since anything may have been missed. The socket of a client made
 * here is unreferenced, so an idle listener never keeps the process alive (a
 * client from `listenerClient` is the app's: it stays referenced); it keeps
 * reading (draining the server's notification queue) for as long as it is open.
 *
 * After every LISTEN the listener checks that notifications really arrive: it
 * sends one NOTIFY through the pool (the path the extension's own NOTIFYs
 * take) and expects it back on the LISTEN connection within `listenerCheckMs`.
 * Behind a transaction pooler LISTEN "succeeds" on a pooled server connection
 * whose notifications never reach this client; the check turns that silent
 * fallback to polling into a `listener.not_delivering` report with the fix.
 *
 * A degradation is never silent: without any `logger` it is written once to
 * `console.warn`, and `health()` answers `ok: false` with the reason while
 * waiters poll.
 */
import { randomUUID } from 'node:crypto'
import net from 'node:net'
import pg from 'pg'
import { checkNumberOption, type Queryable } from './internal.js'
import { report, type SandboxPersistEvent, type SandboxPersistLogger } from './log.js'

export const LOCK_CHANNEL = 'sandbox_persist_lock'
export const EVENT_LOG_CHANNEL = 'sandbox_persist_event_log'
export const REAPER_CHANNEL = 'sandbox_persist_reaper'
export const ATTENTION_CHANNEL = 'sandbox_persist_attention'
/** Appends and closes of protocol streams (docs/contract/streams.md §4 rule 5); payload: the stream id. */
export const STREAM_CHANNEL = 'sandbox_persist_stream'
/** A webhook wake issued or falling due (PROTOCOL.md §7.1); payload: the subscription id. */
export const SUBSCRIPTION_CHANNEL = 'sandbox_persist_subscription'
const CHANNELS = [LOCK_CHANNEL, EVENT_LOG_CHANNEL, REAPER_CHANNEL, ATTENTION_CHANNEL, STREAM_CHANNEL, SUBSCRIPTION_CHANNEL]

/** `null` means "reconnected: you may have missed notifications". */
export type NotificationHandler = (payload: string | null) => void

/** How the adapter obtains its dedicated listener connection, and where it reports. */
export interface ListenerOptions {
  /** Connection string for the listener; it must reach the primary directly (no transaction pooler). */
  listenerConnectionString?: string
  /** Or a factory for a new, unconnected, unpooled `pg.Client`. */
  listenerClient?: () => pg.Client
  /**
   * Where degradations and callback failures are reported (`console` fits).
   * They are also published on the diagnostics channel `sandbox-persist:adapter`.
   */
  logger?: SandboxPersistLogger
  /**
   * How long a NOTIFY sent through the pool may take to come back on the LISTEN
   * connection before `listener.not_delivering` is reported (default 2000 ms;
   * 0 turns the check off). The first factory of a listener decides.
   */
  listenerCheckMs?: number
}

/** What `health()` answers: whether notifications wake waiters now, and why not. */
export interface ListenerHealth {
  /** The LISTEN connection is open and a NOTIFY sent through the pool arrived on it. */
  ok: boolean
  /** The LISTEN connection is open. */
  listening: boolean
  /** Why waiters poll instead (absent when ok). */
  problem?: string
}

/** The degradations that make waiters poll: written to the console once when nobody logs them. */
const POLLING_EVENTS = new Set<SandboxPersistEvent>(['listener.connect_failed', 'listener.lost', 'listener.not_delivering'])

const RETRY_AFTER_FAILURE_MS = 1000
const DEFAULT_CHECK_MS = 2000
/** Payload prefix of the delivery check; lock payloads are MD5 hex, so they never collide. */
const CHECK_PAYLOAD_PREFIX = 'check.'
/** How long `close()` waits for the server to acknowledge the end before it drops the socket. */
const END_TIMEOUT_MS = 1000

/** The sockets of the clients made here (the `stream` factory hands them to node-postgres). */
const ownSockets = new WeakMap<pg.Client, net.Socket>()

/**
 * A new listener client for `config`, whose socket this module creates through
 * node-postgres's documented `stream` option, so it can unreference it (an
 * idle listener never keeps the process alive) and destroy it when the server
 * does not answer an end.
 */
function ownClient(config: pg.ClientConfig): pg.Client {
  let socket: net.Socket | undefined
  const client = new pg.Client({
    ...config,
    stream: () => {
      socket = new net.Socket()
      return socket
    },
  })
  // node-postgres calls the factory in its constructor.
  if (socket !== undefined) ownSockets.set(client, socket)
  return client
}

/**
 * End a client and settle, whatever state it is in: a socket made here is
 * referenced again (an unreferenced socket would let Node exit with the end
 * pending), and destroyed when the server does not answer in time; any other
 * client is left to node-postgres once the wait is over.
 */
async function endClient(client: pg.Client): Promise<void> {
  const socket = ownSockets.get(client)
  socket?.ref()
  let timer: ReturnType<typeof setTimeout> | undefined
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      socket?.destroy()
      resolve()
    }, END_TIMEOUT_MS)
  })
  try {
    await Promise.race([client.end().catch(() => undefined), timeout])
  } finally {
    clearTimeout(timer)
  }
}

/** One factory's share of a shared listener; `release()` gives it back. */
export class ListenerHandle {
  private released = false
  constructor(
    readonly listener: SharedListener,
    readonly logger: SandboxPersistLogger | undefined,
  ) {}

  /** Report to this handle's logger (and the diagnostics channel). */
  report(event: SandboxPersistEvent, message: string, fields?: Record<string, unknown>): void {
    report([this.logger], event, message, fields)
  }

  /** Whether notifications wake waiters now (connecting first when needed), and why not. */
  health(): Promise<ListenerHealth> {
    return this.listener.health()
  }

  /** Give this share back; the connection closes when the last share is released. Idempotent. */
  async release(): Promise<void> {
    if (this.released) return
    this.released = true
    await this.listener.release(this)
  }
}

export class SharedListener {
  private client: pg.Client | undefined
  private pending: pg.Client | undefined
  private abortConnect: (() => void) | undefined
  private connecting: Promise<boolean> | undefined
  private lastFailure = 0
  private degraded = false
  private closed = false
  private readonly handlers = new Map<string, Set<NotificationHandler>>()
  private readonly handles = new Set<ListenerHandle>()
  /** Where the delivery check sends its NOTIFY: the pool of a factory using this listener. */
  private via: Queryable | undefined
  private checkMs = DEFAULT_CHECK_MS
  private checkToken: string | undefined
  private checkArrived: (() => void) | undefined
  private check: Promise<boolean> = Promise.resolve(true)
  /** The last degradation's message, until the connection is back and delivering. */
  private problem: string | undefined
  /** Polling degradations already written to the console (when no share has a logger). */
  private readonly warned = new Set<SandboxPersistEvent>()

  constructor(
    private readonly factory: () => pg.Client,
    private readonly onEmpty: (listener: SharedListener) => void = () => undefined,
  ) {}

  /** A share of this listener for one factory result; `via` is that factory's pool. */
  acquire(logger: SandboxPersistLogger | undefined, via?: Queryable, checkMs?: number): ListenerHandle {
    const handle = new ListenerHandle(this, logger)
    if (this.handles.size === 0 && checkMs !== undefined) this.checkMs = checkMs
    this.handles.add(handle)
    if (via !== undefined && typeof via.query === 'function') this.via ??= via
    return handle
  }

  /**
   * Whether the last delivery check saw its NOTIFY come back (true also when
   * the check is off or could not be sent). Connects first when needed;
   * resolves once that check is over.
   */
  async delivering(): Promise<boolean> {
    await this.ready()
    return this.check
  }

  /** Whether notifications wake waiters now: connected, and the last delivery check passed. */
  async health(): Promise<ListenerHealth> {
    const listening = await this.ready()
    const delivering = listening && (await this.check)
    if (listening && delivering) return { ok: true, listening }
    return { ok: false, listening, problem: this.problem ?? 'the LISTEN connection is not open: waiters poll' }
  }

  /** Send one NOTIFY through the pool and wait for it on `client` (see the module comment). */
  private async verify(client: pg.Client): Promise<boolean> {
    const via = this.via
    if (via === undefined || this.checkMs <= 0) return true
    const token = `${CHECK_PAYLOAD_PREFIX}${randomUUID()}`
    let timer: ReturnType<typeof setTimeout> | undefined
    const arrived = new Promise<boolean>((resolve) => {
      this.checkToken = token
      this.checkArrived = () => resolve(true)
      timer = setTimeout(() => resolve(false), this.checkMs)
      timer.unref?.()
    })
    try {
      await via.query('SELECT pg_catalog.pg_notify($1, $2)', [LOCK_CHANNEL, token])
    } catch {
      // The pool is down or ended: nothing to conclude about the listener.
      clearTimeout(timer)
      return true
    }
    const ok = await arrived
    clearTimeout(timer)
    if (this.checkToken === token) {
      this.checkToken = undefined
      this.checkArrived = undefined
    }
    if (!ok && this.client === client && !this.closed) {
      this.report(
        'listener.not_delivering',
        `a NOTIFY sent through the pool did not arrive on the LISTEN connection within ${this.checkMs} ms, so lock and ` +
          'stream hand-offs fall back to polling (resumers lag up to fallbackPollMs, lock waiters up to maxPollMs). ' +
          'The listener most likely goes through a transaction pooler such as PgBouncer, which accepts LISTEN on a ' +
          "pooled server connection and never forwards its notifications (PgBouncer logs \"got packet 'A' from server " +
          'when not linked"), or it reaches another database than the pool. ' +
          'Fix: pass listenerConnectionString (a ' +
          'direct URL to the primary, not through the pooler) or listenerClient to postgresLocks / postgresDurability / ' +
          'postgresMaintenance.',
        { checkMs: this.checkMs },
      )
    }
    return ok
  }

  /** Remove this listener from the registry (closeSharedListeners): a later store opens a new one. */
  forgetEverywhere(): void {
    this.onEmpty(this)
  }

  /** Drop a share; closes the connection when none is left. */
  async release(handle: ListenerHandle): Promise<void> {
    if (!this.handles.delete(handle) || this.handles.size > 0) return
    this.onEmpty(this)
    await this.close()
  }

  private report(event: SandboxPersistEvent, message: string, fields?: Record<string, unknown>): void {
    const loggers = [...this.handles].map((h) => h.logger)
    report(loggers, event, message, fields)
    if (POLLING_EVENTS.has(event)) this.problem = message
    if (event === 'listener.restored') this.problem = undefined
    if (POLLING_EVENTS.has(event) && loggers.every((l) => l === undefined) && !this.warned.has(event)) {
      this.warned.add(event)
      console.warn(`sandbox-persist: ${message} (written once; pass a logger to see every report)`)
    }
  }

  /**
   * Connect (once) and LISTEN on every channel. Resolves false when the
   * connection cannot be made now; callers then rely on polling alone.
   */
  ready(): Promise<boolean> {
    if (this.closed) return Promise.resolve(false)
    if (this.client !== undefined) return Promise.resolve(true)
    if (this.connecting !== undefined) return this.connecting
    if (Date.now() - this.lastFailure < RETRY_AFTER_FAILURE_MS) return Promise.resolve(false)
    this.connecting = this.connect().finally(() => {
      this.connecting = undefined
    })
    return this.connecting
  }

  private async connect(): Promise<boolean> {
    const client = this.factory()
    this.pending = client
    const drop = (error?: unknown) => {
      client.removeAllListeners('notification')
      if (this.client !== client) return
      this.client = undefined
      if (this.closed) return
      this.degraded = true
      this.report('listener.lost', 'the LISTEN connection was lost; waiters poll until it is back', {
        ...(error === undefined ? {} : { error }),
      })
    }
    client.on('error', drop)
    client.on('end', () => drop())
    client.on('notification', (message) => this.dispatch(message.channel, message.payload ?? ''))
    // node-postgres never settles connect() for a client ended while connecting: race it with close().
    const aborted = new Promise<never>((_, reject) => {
      this.abortConnect = () => reject(new Error('The listener was closed while connecting.'))
    })
    aborted.catch(() => undefined)
    try {
      await Promise.race([client.connect(), aborted])
      await client.query(CHANNELS.map((c) => `LISTEN ${c}`).join('; '))
      ownSockets.get(client)?.unref()
      if (this.closed) {
        await endClient(client)
        return false
      }
      this.client = client
      if (this.degraded) {
        this.degraded = false
        this.report('listener.restored', 'the LISTEN connection is back; wake-ups are immediate again')
      }
      // Anything sent while we were not listening is lost: wake everyone once.
      for (const set of this.handlers.values()) for (const handler of [...set]) handler(null)
      this.check = this.verify(client).catch(() => true)
      return true
    } catch (error) {
      this.lastFailure = Date.now()
      client.removeAllListeners('notification')
      await endClient(client)
      if (this.closed) return false
      if (!this.degraded) {
        this.degraded = true
        this.report(
          'listener.connect_failed',
          'could not open the LISTEN connection; waiters fall back to polling (slower hand-offs) and it is retried. ' +
            connectFailureHint(error),
          { error },
        )
      }
      return false
    } finally {
      if (this.pending === client) {
        this.pending = undefined
        this.abortConnect = undefined
      }
    }
  }

  private dispatch(channel: string, payload: string): void {
    if (channel === LOCK_CHANNEL && payload.startsWith(CHECK_PAYLOAD_PREFIX)) {
      // A delivery check (ours or another process's): never a lock hand-off.
      if (payload === this.checkToken) this.checkArrived?.()
      return
    }
    const set = this.handlers.get(channel)
    if (set === undefined) return
    for (const handler of [...set]) {
      try {
        handler(payload)
      } catch {
        // a handler's failure must not stop the others
      }
    }
  }

  subscribe(channel: string, handler: NotificationHandler): () => void {
    let set = this.handlers.get(channel)
    if (set === undefined) {
      set = new Set()
      this.handlers.set(channel, set)
    }
    set.add(handler)
    return () => {
      set.delete(handler)
    }
  }

  get connected(): boolean {
    return this.client !== undefined
  }

  /** Close the connection (also one being opened); settles in every state. */
  async close(): Promise<void> {
    this.closed = true
    const client = this.client
    this.client = undefined
    const pending = this.pending
    this.abortConnect?.()
    // Ending a client that is still connecting drops its socket: connect() then fails and returns.
    if (pending !== undefined && pending !== client) await endClient(pending)
    if (client !== undefined) await endClient(client)
    if (this.connecting !== undefined) await this.connecting.catch(() => false)
  }
}

/**
 * What a failed listener connect most likely means, from the error: the
 * PgBouncer advice only when a pooler is plausible (it answered, or refused a
 * feature), not when the server is down or the address is wrong.
 */
export function connectFailureHint(error: unknown): string {
  const code = typeof (error as { code?: unknown })?.code === 'string' ? (error as { code: string }).code : ''
  const message = error instanceof Error ? error.message : String(error)
  if (/^(ECONNREFUSED|ENOENT|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|ECONNRESET)$/.test(code)) {
    return 'Nothing answered at that address: is the database up, and are the host and port (of listenerConnectionString, when given) right?'
  }
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') {
    return 'The host name does not resolve: check the host of listenerConnectionString (or of the PG* environment the listener uses without it).'
  }
  if (/^28/.test(code)) return 'The server refused the credentials: check the user and password the listener connects with.'
  if (code === '3D000') return 'That database does not exist: check the database name the listener connects to.'
  if (/^57P0/.test(code)) return 'The server is starting up or shutting down; the connection is retried.'
  if (code === '08P01' || code === '0A000' || /pgbouncer|pooler|pgcat|odyssey/i.test(message)) {
    return 'The server refused LISTEN as a pooler does: pass listenerConnectionString (a direct URL to the primary) or listenerClient.'
  }
  return 'Check the listener\'s connection settings: listenerConnectionString or listenerClient when given, else the PG* environment.'
}

/**
 * The open listeners, by source: a `listenerClient` factory, a
 * `listenerConnectionString`, a pool's connection settings, or the default
 * (node-postgres's defaults, the PG* environment). This is the module's only
 * state (with the ids of password functions); `closeSharedListeners()`
 * empties it.
 */
const byFactory = new WeakMap<() => pg.Client, SharedListener>()
const byConnectionString = new Map<string, SharedListener>()
const bySettings = new Map<string, SharedListener>()
let byDefault: SharedListener | undefined
const open = new Set<SharedListener>()

/** The pool settings a listener connects with (the rest, such as `max`, are the pool's own). */
const POOL_SETTINGS = ['connectionString', 'host', 'port', 'user', 'password', 'database', 'ssl', 'options'] as const

/** The connection settings of a pg.Pool given in code (none for a pool made from the PG* environment). */
function poolSettings(pool: unknown): pg.ClientConfig | undefined {
  const given = (pool as { options?: Record<string, unknown> } | null)?.options
  if (given === undefined || given === null || typeof given !== 'object') return undefined
  const picked: Record<string, unknown> = {}
  for (const key of POOL_SETTINGS) if (given[key] !== undefined) picked[key] = given[key]
  return Object.keys(picked).length === 0 ? undefined : (picked as pg.ClientConfig)
}

/** The registry key of pool settings: equal settings share one listener (a password function by identity). */
const passwordFunctions = new WeakMap<object, number>()
let nextFunctionId = 0
function settingsKey(settings: pg.ClientConfig): string {
  return JSON.stringify(POOL_SETTINGS.map((key) => {
    const value = (settings as Record<string, unknown>)[key]
    if (typeof value !== 'function') return value ?? null
    if (!passwordFunctions.has(value)) passwordFunctions.set(value, nextFunctionId++)
    return `function#${passwordFunctions.get(value)}`
  }))
}

/** Where the listener for `options` (and the pool's settings) lives, and how it connects. */
function listenerSource(options: ListenerOptions, pool: unknown): {
  get: () => SharedListener | undefined
  set: (l: SharedListener) => void
  forget: (l: SharedListener) => void
  factory: () => pg.Client
} {
  if (options.listenerClient !== undefined) {
    const given = options.listenerClient
    return {
      get: () => byFactory.get(given),
      set: (l) => void byFactory.set(given, l),
      forget: (l) => void (byFactory.get(given) === l && byFactory.delete(given)),
      factory: given,
    }
  }
  if (options.listenerConnectionString !== undefined) {
    const connectionString = options.listenerConnectionString
    return {
      get: () => byConnectionString.get(connectionString),
      set: (l) => void byConnectionString.set(connectionString, l),
      forget: (l) => void (byConnectionString.get(connectionString) === l && byConnectionString.delete(connectionString)),
      factory: () => ownClient({ connectionString }),
    }
  }
  // Neither: the settings the pool was given, so a pool configured in code
  // gets a listener on the same database.
  const settings = poolSettings(pool)
  if (settings !== undefined) {
    const key = settingsKey(settings)
    return {
      get: () => bySettings.get(key),
      set: (l) => void bySettings.set(key, l),
      forget: (l) => void (bySettings.get(key) === l && bySettings.delete(key)),
      factory: () => ownClient(settings),
    }
  }
  // None: node-postgres's own defaults (the PG* environment), the same
  // connection for every such pool, so one listener for all.
  return {
    get: () => byDefault,
    set: (l) => void (byDefault = l),
    forget: (l) => void (byDefault === l && (byDefault = undefined)),
    factory: () => ownClient({}),
  }
}

/**
 * The shared listener for `options` (its `listenerClient`, or its
 * `listenerConnectionString`, or with neither the connection settings `pool`
 * was given, or with none the default one): stores made with the same source
 * share one LISTEN connection. Besides its settings, `pool` is where the
 * delivery check sends its NOTIFY (`acquireListener`).
 */
export function sharedListener(pool: unknown, options: ListenerOptions = {}): SharedListener {
  const source = listenerSource(options, pool)
  let listener = source.get()
  if (listener === undefined) {
    const created = new SharedListener(source.factory, (l) => {
      source.forget(l)
      open.delete(l)
    })
    source.set(created)
    open.add(created)
    listener = created
  }
  return listener
}

/** A share of the shared listener for one factory result (see `ListenerHandle.release`). */
export function acquireListener(pool: unknown, options: ListenerOptions = {}): ListenerHandle {
  const checkMs =
    options.listenerCheckMs === undefined
      ? undefined
      : checkNumberOption(options.listenerCheckMs, 'listenerCheckMs', (n) => Number.isFinite(n) && n >= 0,
          `listenerCheckMs must be >= 0, got ${options.listenerCheckMs}.`)
  return sharedListener(pool, options).acquire(options.logger, pool as Queryable, checkMs)
}

/** How many shared listeners are open (made and not yet closed): the module's state, for an app to see. */
export function sharedListenerCount(): number {
  return open.size
}

/**
 * Close every shared listener connection and forget them (graceful shutdown,
 * tests). Settles in any order with `pool.end()`, also when the listener is
 * idle or was never opened. Stores keep working afterwards, by polling alone;
 * a store made afterwards opens a new listener.
 */
export async function closeSharedListeners(): Promise<void> {
  const all = [...open]
  open.clear()
  byConnectionString.clear()
  bySettings.clear()
  byDefault = undefined
  for (const l of all) l.forgetEverywhere()
  await Promise.all(all.map((l) => l.close()))
}

/**
 * A one-shot wake-up flag with a bounded wait. A wake that arrives while no one
 * waits is remembered, so a notification racing the preceding query is not lost.
 */
export class Waker {
  private pending = false
  private resolve: (() => void) | undefined

  wake(): void {
    this.pending = true
    const r = this.resolve
    this.resolve = undefined
    r?.()
  }

  /** Forget wakes that happened before the query about to be sent. */
  reset(): void {
    this.pending = false
  }

  wait(ms: number, signal?: AbortSignal): Promise<'wake' | 'timeout' | 'abort'> {
    if (signal?.aborted) return Promise.resolve('abort')
    if (this.pending) {
      this.pending = false
      return Promise.resolve('wake')
    }
    return new Promise((resolve) => {
      let timer: ReturnType<typeof setTimeout> | undefined
      const finish = (how: 'wake' | 'timeout' | 'abort') => {
        if (timer !== undefined) clearTimeout(timer)
        signal?.removeEventListener('abort', onAbort)
        this.resolve = undefined
        if (how === 'wake') this.pending = false
        resolve(how)
      }
      const onAbort = () => finish('abort')
      this.resolve = () => finish('wake')
      timer = setTimeout(() => finish('timeout'), Math.max(0, ms))
      signal?.addEventListener('abort', onAbort, { once: true })
    })
  }
}
