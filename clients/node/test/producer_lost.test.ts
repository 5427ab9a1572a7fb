/**
 * Issue 11 item 8: a run whose producer died must end. A producer process
 * appends to a run's event log and is killed (SIGKILL) mid-run; a client
 * resumes on another replica (its own pool) with Last-Event-ID. maintain()
 * (called every 250 ms here, as pg_cron would every minute) with
 * sandbox_persist.event_log_idle_close = 4s ends the log with a RUN_ERROR chunk,
 * code PRODUCER_LOST, and the resumed response delivers it and ends.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { resumeServerSentEventsResponse } from '@tanstack/ai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { postgresDurability, postgresMaintenance } from '../src/index.js'
import { makePool, reset, sleep, until } from './helpers.js'

// 40 times the producer's 100 ms interval: a live producer stalled by a busy
// machine is not taken for a dead one.
const IDLE_MS = 4_000
// The resumed reader's fallback poll: far above the ceiling below, so only the
// notification of the RUN_ERROR append can end the read in time.
const READER_POLL_MS = 30_000
const MAINTAIN_EVERY_MS = 250
const replicaB = makePool({ max: 3 })
// The setting is superuser-only: the maintenance session sets it for itself.
const maintenancePool = makePool({ max: 1, options: `-c sandbox_persist.event_log_idle_close=${IDLE_MS}ms` })

beforeAll(async () => {
  await reset(replicaB)
})
afterAll(async () => {
  await replicaB.end()
  await maintenancePool.end()
})

interface SseEvent {
  id?: string
  data: Record<string, unknown>
  at: number
}

/** The SSE events of a response as they arrive. */
async function* events(response: Response): AsyncGenerator<SseEvent> {
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
  let buffer = ''
  for (;;) {
    const { value, done } = await reader.read()
    if (done) return
    buffer += value
    let end: number
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end)
      buffer = buffer.slice(end + 2)
      let id: string | undefined
      const data: string[] = []
      for (const line of block.split('\n')) {
        if (line.startsWith('id:')) id = line.slice(3).trim()
        else if (line.startsWith('data:')) data.push(line.slice(5).trim())
      }
      if (data.length > 0) yield { ...(id !== undefined ? { id } : {}), data: JSON.parse(data.join('\n')), at: performance.now() }
    }
  }
}

/** Lines the child prints, as they come. */
function lines(child: ChildProcess): { all: string[] } {
  const out = { all: [] as string[] }
  let partial = ''
  child.stdout!.setEncoding('utf8')
  child.stdout!.on('data', (text: string) => {
    partial += text
    const parts = partial.split('\n')
    partial = parts.pop()!
    out.all.push(...parts)
  })
  return out
}

describe('a run whose producer died ends (issue 11, item 8)', () => {
  it('SIGKILL the producer; the resumed reader on another replica gets RUN_ERROR PRODUCER_LOST within the idle limit', async () => {
    const runId = 'dead-producer-run'
    const producer = spawn(process.execPath, [fileURLToPath(new URL('./fixtures/dying-producer.mjs', import.meta.url)), runId], {
      env: process.env,
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    const produced = lines(producer)
    const maintenance = postgresMaintenance(maintenancePool)
    let maintaining = true
    const summaries: Array<Record<string, unknown>> = []
    const cron = (async () => {
      while (maintaining) {
        summaries.push(await maintenance.maintain())
        await sleep(MAINTAIN_EVERY_MS)
      }
    })()
    try {
      // The producer is alive for a while: maintenance leaves its log alone.
      await until(() => produced.all.length >= 12)
      expect(produced.all.length).toBeGreaterThanOrEqual(12)
      const lastSeen = produced.all[5]!
      expect(summaries.length).toBeGreaterThan(0)

      producer.kill('SIGKILL')
      await new Promise((resolve) => producer.once('exit', resolve))
      const killedAt = performance.now()
      const appended = produced.all.length

      // The client resumes on replica B from the last event it saw.
      const request = new Request(`http://replica-b/chat?runId=${runId}`, { headers: { 'Last-Event-ID': lastSeen } })
      const response = resumeServerSentEventsResponse({ adapter: postgresDurability(replicaB, { pollMs: READER_POLL_MS })(request) })
      const seen: SseEvent[] = []
      const reading = (async () => {
        for await (const event of events(response)) seen.push(event)
      })()
      const ended = await Promise.race([reading.then(() => true), sleep(IDLE_MS + READER_POLL_MS / 2).then(() => false)])
      expect(ended).toBe(true)

      const error = seen.at(-1)!
      const killToError = error.at - killedAt
      console.log(`kill -> RUN_ERROR on the resumed reader: ${killToError.toFixed(0)} ms (event_log_idle_close ${IDLE_MS} ms, maintain every ${MAINTAIN_EVERY_MS} ms)`)
      // On the wire (AG-UI): type, message, code; runId and the nested error stay in the stored chunk.
      expect(error.data).toMatchObject({ type: 'RUN_ERROR', code: 'PRODUCER_LOST' })
      expect(String(error.data.message)).toMatch(/^The producer of this run stopped: no chunk was appended for 4 s/)
      const stored = (await postgresDurability(replicaB)(runId).snapshot()).at(-1)!
      expect(stored.offset).toBe(error.id)
      expect(stored.chunk).toMatchObject({ type: 'RUN_ERROR', code: 'PRODUCER_LOST', runId, error: { code: 'PRODUCER_LOST' } })
      // Everything the producer appended after lastSeen came first, exactly once, in order.
      const before = seen.slice(0, -1)
      expect(before.map((e) => e.id)).toEqual(produced.all.slice(6, appended))
      expect(before.every((e) => e.data.type === 'TEXT_MESSAGE_CONTENT')).toBe(true)
      // Not before the idle limit, on the one clock both ends share: the last
      // producer chunk was stamped before its append, the RUN_ERROR chunk by the
      // maintain() that wrote it (a client-side gap would include however late
      // a busy machine delivers the kill's exit event).
      const lastProduced = (await postgresDurability(replicaB)(runId).snapshot()).at(-2)!.chunk as { timestamp: number }
      expect(Number(stored.chunk.timestamp) - lastProduced.timestamp).toBeGreaterThanOrEqual(IDLE_MS)
      // Within the limit plus two maintenance intervals and a busy machine's
      // slack, and well before the reader's fallback poll: woken by the notification.
      expect(killToError).toBeLessThan(IDLE_MS + 2 * MAINTAIN_EVERY_MS + READER_POLL_MS / 3)
      // The reader is woken by the commit's notification, which can overtake the
      // maintain() call's own reply on a busy machine: let the loop's call in
      // flight finish before looking at the summaries.
      maintaining = false
      await cron
      expect(summaries.some((s) => s.logsProducerLost === 1)).toBe(true)
    } finally {
      maintaining = false
      producer.kill('SIGKILL')
      await cron
    }
  })
})
