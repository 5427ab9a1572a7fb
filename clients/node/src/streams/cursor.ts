/**
 * Stream-Cursor values (PROTOCOL.md §10.1): the number of 20 s intervals since
 * 2024-10-09T00:00:00Z; when the client echoes a cursor at or past the current
 * interval, a cursor strictly greater than the echoed one (1-3600 s of jitter).
 */
import { randomInt } from 'node:crypto'

export const CURSOR_EPOCH_MS = Date.UTC(2024, 9, 9, 0, 0, 0)
export const CURSOR_INTERVAL_MS = 20_000

/** The cursor to send, given the one the client echoed (the `cursor` query parameter) and the time. */
export function nextCursor(echoed: string | null | undefined, nowMs: number = Date.now()): string {
  const current = Math.floor((nowMs - CURSOR_EPOCH_MS) / CURSOR_INTERVAL_MS)
  if (echoed == null || !/^\d{1,15}$/.test(echoed)) return String(current)
  const client = Number(echoed)
  if (client < current) return String(current)
  const jitterSeconds = 1 + randomInt(3600)
  return String(client + Math.max(1, Math.ceil((jitterSeconds * 1000) / CURSOR_INTERVAL_MS)))
}
