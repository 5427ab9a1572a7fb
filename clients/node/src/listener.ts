/**
 * One dedicated, unpooled LISTEN connection per process and database
 * (sql-api.md rule 14), shared by every lock store and durability adapter.
 *
 * Notifications are wake-up hints only: they are lost while the connection is
 * down, so every waiter also polls. After a (re)connect every subscriber is
 * woken once, since anything may have been missed. The connection's socket is
 * unreferenced, so an idle listener never keeps the process alive; it keeps
 * reading (draining the server's notification queue) for as long as it is open.
 */
import pg from 'pg'

export const LOCK_CHANNEL = 'sandbox_persist_lock'
export const EVENT_LOG_CHANNEL = 'sandbox_persist_event_log'
export const REAPER_CHANNEL = 'sandbox_persist_reaper'
export const ATTENTION_CHANNEL = 'sandbox_persist_attention'
const CHANNELS = [LOCK_CHANNEL, EVENT_LOG_CHANNEL, REAPER_CHANNEL, ATTENTION_CHANNEL]

/** `null` means "reconnected: you may have missed notifications". */
export type NotificationHandler = (payload: string | null) => void

/** How the adapter obtains its dedicated listener connection. */
export interface ListenerOptions {
  /** Connection string for the listener; it must reach the primary directly (no transaction pooler). */
  listenerConnectionString?: string
  /** Or a factory for a new, unconnected, unpooled `pg.Client`. */
  listenerClient?: () => pg.Client
}

const RETRY_AFTER_FAILURE_MS = 1000

export class SharedListener {
  private client: pg.Client | undefined
  private connecting: Promise<boolean> | undefined
  private lastFailure = 0
  private closed = false
  private readonly handlers = new Map<string, Set<NotificationHandler>>()

  constructor(private readonly factory: () => pg.Client) {}

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
    const drop = () => {
      if (this.client === client) this.client = undefined
      client.removeAllListeners('notification')
    }
    client.on('error', drop)
    client.on('end', drop)
    client.on('notification', (message) => this.dispatch(message.channel, message.payload ?? ''))
    try {
      await client.connect()
      await client.query(CHANNELS.map((c) => `LISTEN ${c}`).join('; '))
      const stream = (client as unknown as { connection?: { stream?: { unref?: () => void } } }).connection?.stream
      stream?.unref?.()
      if (this.closed) {
        await client.end().catch(() => undefined)
        return false
      }
      this.client = client
      // Anything sent while we were not listening is lost: wake everyone once.
      for (const set of this.handlers.values()) for (const handler of [...set]) handler(null)
      return true
    } catch {
      this.lastFailure = Date.now()
      client.removeAllListeners('notification')
      await client.end().catch(() => undefined)
      return false
    }
  }

  private dispatch(channel: string, payload: string): void {
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

  async close(): Promise<void> {
    this.closed = true
    const client = this.client
    this.client = undefined
    if (this.connecting !== undefined) await this.connecting.catch(() => false)
    if (client !== undefined) await client.end().catch(() => undefined)
  }
}

const listeners = new Map<string, SharedListener>()
const factoryKeys = new WeakMap<() => pg.Client, string>()
let factoryCounter = 0

function poolConfig(pool: unknown): pg.ClientConfig {
  const options = (pool as { options?: pg.PoolConfig }).options ?? {}
  // Drop the pool-only settings; keep everything that describes the connection.
  const {
    max: _max,
    min: _min,
    idleTimeoutMillis: _idle,
    allowExitOnIdle: _exit,
    maxUses: _uses,
    maxLifetimeSeconds: _life,
    log: _log,
    Promise: _promise,
    Client: _client,
    ...config
  } = options as pg.PoolConfig & Record<string, unknown>
  return config as pg.ClientConfig
}

/**
 * The process-wide listener for the database `pool` talks to (or the one named
 * by `options`). Two pools to the same database share one listener.
 */
export function sharedListener(pool: unknown, options: ListenerOptions = {}): SharedListener {
  let key: string
  let factory: () => pg.Client
  if (options.listenerClient !== undefined) {
    const given = options.listenerClient
    let k = factoryKeys.get(given)
    if (k === undefined) {
      k = `factory:${++factoryCounter}`
      factoryKeys.set(given, k)
    }
    key = k
    factory = given
  } else if (options.listenerConnectionString !== undefined) {
    const connectionString = options.listenerConnectionString
    key = `url:${connectionString}`
    factory = () => new pg.Client({ connectionString })
  } else {
    const config = poolConfig(pool)
    key = `pool:${JSON.stringify({
      connectionString: config.connectionString,
      host: config.host ?? process.env.PGHOST,
      port: config.port ?? process.env.PGPORT,
      database: config.database ?? process.env.PGDATABASE,
      user: config.user ?? process.env.PGUSER,
    })}`
    factory = () => new pg.Client(config)
  }
  let listener = listeners.get(key)
  if (listener === undefined) {
    listener = new SharedListener(factory)
    listeners.set(key, listener)
  }
  return listener
}

/** Close every shared listener connection (graceful shutdown, tests). */
export async function closeSharedListeners(): Promise<void> {
  const all = [...listeners.values()]
  listeners.clear()
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
