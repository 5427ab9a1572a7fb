/**
 * Wake-ups for live readers (long-poll and SSE) from the shared LISTEN
 * connection: one subscription to `sandbox_persist_stream` (payload: the
 * stream id, docs/contract/streams.md §4 rule 5) and one to
 * `sandbox_persist_event_log` (payload: the log id, then maybe its entries;
 * event-log.md §2.1 rule 7) feed every parked reader of this handler; a run's
 * log read at `run-logs/<run_id>` has the stream id `eventLog:<logId>`
 * (streams.md §1.1), so an append to the log wakes its readers, who read
 * it again (the entries in the payload are not used: the read is the one
 * path). A reader follows one stream id once its first read told it
 * the id; before that it is woken by every notification, so a notification
 * racing that first read is never lost. After a reconnect (anything may have
 * been missed) every reader is woken. While the listener is down, readers
 * re-read every `fallbackPollMs`; with it up there is no polling.
 */
import { EVENT_LOG_CHANNEL, STREAM_CHANNEL, Waker, type SharedListener } from '../listener.js'

export type WaitOutcome = 'wake' | 'timeout' | 'abort' | 'shutdown'

/** The stream id stream_read reports for a run's log (streams.md §1.1): this prefix and the log id. */
export const RUN_LOG_STREAM_ID_PREFIX = 'eventLog:'

export class StreamFollower {
  readonly waker = new Waker()
  streamId: string | undefined
  shutdown = false
  constructor(private readonly owner: StreamWaiters) {}

  /** Forget wakes from before the read about to be made. */
  reset(): void {
    this.waker.reset()
  }

  /** From now on only notifications for `streamId` wake this reader. */
  place(streamId: string | number): void {
    this.owner.place(this, String(streamId))
  }

  /** Wait for a notification, the timeout, the abort signal or shutdown. */
  async wait(ms: number, signal?: AbortSignal): Promise<WaitOutcome> {
    if (this.shutdown) return 'shutdown'
    const listener = this.owner.listener
    let how: 'wake' | 'timeout' | 'abort'
    if (listener.connected) {
      how = await this.waker.wait(ms, signal)
    } else {
      void listener.ready()
      how = await this.waker.wait(Math.min(ms, this.owner.fallbackPollMs), signal)
      if (how === 'timeout' && ms > this.owner.fallbackPollMs) how = 'wake'
    }
    if (this.shutdown) return 'shutdown'
    return how
  }

  leave(): void {
    this.owner.remove(this)
  }
}

export class StreamWaiters {
  private readonly byStream = new Map<string, Set<StreamFollower>>()
  private readonly unplaced = new Set<StreamFollower>()
  private unsubscribe: Array<() => void> | undefined
  private closed = false

  constructor(
    readonly listener: SharedListener,
    readonly fallbackPollMs: number,
  ) {}

  /** A new reader, woken by every notification until it is placed. */
  follow(): StreamFollower {
    this.unsubscribe ??= [
      this.listener.subscribe(STREAM_CHANNEL, (payload) => this.dispatch(payload)),
      this.listener.subscribe(EVENT_LOG_CHANNEL, (payload) => this.dispatch(payload === null ? null : runLogStreamId(payload))),
    ]
    const follower = new StreamFollower(this)
    if (this.closed) follower.shutdown = true
    this.unplaced.add(follower)
    void this.listener.ready()
    return follower
  }

  /** How many readers are parked or reading. */
  get size(): number {
    let n = this.unplaced.size
    for (const set of this.byStream.values()) n += set.size
    return n
  }

  place(follower: StreamFollower, streamId: string): void {
    if (follower.streamId === streamId) return
    this.unplace(follower)
    follower.streamId = streamId
    let set = this.byStream.get(streamId)
    if (set === undefined) this.byStream.set(streamId, (set = new Set()))
    set.add(follower)
  }

  private unplace(follower: StreamFollower): void {
    this.unplaced.delete(follower)
    const id = follower.streamId
    if (id === undefined) return
    follower.streamId = undefined
    const set = this.byStream.get(id)
    set?.delete(follower)
    if (set?.size === 0) this.byStream.delete(id)
  }

  remove(follower: StreamFollower): void {
    this.unplace(follower)
    if (this.unplaced.size === 0 && this.byStream.size === 0) {
      for (const stop of this.unsubscribe ?? []) stop()
      this.unsubscribe = undefined
    }
  }

  private dispatch(payload: string | null): void {
    for (const f of [...this.unplaced]) f.waker.wake()
    if (payload === null) {
      for (const set of [...this.byStream.values()]) for (const f of [...set]) f.waker.wake()
      return
    }
    const set = this.byStream.get(payload.trim())
    if (set !== undefined) for (const f of [...set]) f.waker.wake()
  }

  /** Wake every reader for good (graceful shutdown): their waits answer 'shutdown'. */
  shutdownAll(): void {
    this.closed = true
    const all = [...this.unplaced]
    for (const set of this.byStream.values()) all.push(...set)
    for (const f of all) {
      f.shutdown = true
      f.waker.wake()
    }
  }
}

/** The stream id of the log an event log notification names: the text before its first space. */
function runLogStreamId(payload: string): string {
  const space = payload.indexOf(' ')
  return RUN_LOG_STREAM_ID_PREFIX + (space < 0 ? payload : payload.slice(0, space)).trim()
}
