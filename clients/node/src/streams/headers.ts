/**
 * Request header parsing and validation for the Durable Streams protocol
 * (PROTOCOL.md §4.1, §5.1, §5.2, §5.2.1, §4.2) and the header names the
 * server sends. Everything here is pure: a bad header is an HttpError(400).
 */

export const H = {
  nextOffset: 'Stream-Next-Offset',
  upToDate: 'Stream-Up-To-Date',
  closed: 'Stream-Closed',
  cursor: 'Stream-Cursor',
  ttl: 'Stream-TTL',
  expiresAt: 'Stream-Expires-At',
  seq: 'Stream-Seq',
  forkedFrom: 'Stream-Forked-From',
  forkOffset: 'Stream-Fork-Offset',
  forkSubOffset: 'Stream-Fork-Sub-Offset',
  sseEncoding: 'Stream-SSE-Data-Encoding',
  producerId: 'Producer-Id',
  producerEpoch: 'Producer-Epoch',
  producerSeq: 'Producer-Seq',
  producerExpectedSeq: 'Producer-Expected-Seq',
  producerReceivedSeq: 'Producer-Received-Seq',
} as const

/** Every header a client of the protocol may send (CORS preflight). */
export const REQUEST_HEADERS = [
  'Content-Type', 'Authorization', 'If-None-Match', H.seq, H.ttl, H.expiresAt, H.closed,
  H.forkedFrom, H.forkOffset, H.forkSubOffset, H.producerId, H.producerEpoch, H.producerSeq,
]

/** Every header the server sends that a browser client must be able to read (CORS). */
export const EXPOSED_HEADERS = [
  H.nextOffset, H.upToDate, H.closed, H.cursor, H.ttl, H.expiresAt, H.sseEncoding,
  H.producerEpoch, H.producerSeq, H.producerExpectedSeq, H.producerReceivedSeq,
  'ETag', 'Location', 'Content-Type', 'Retry-After',
]

/** A refusal the server answers itself, before or instead of a database call. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message)
    this.name = 'HttpError'
  }
}

const bad = (message: string) => new HttpError(400, message)

/** A non-negative decimal integer without sign, leading zeros, point or exponent. */
const CANONICAL_UINT = /^(0|[1-9][0-9]*)$/
/** RFC 3339 date-time (a `T`/`t`/space separator, `Z` or a numeric offset). */
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/
/** A stream offset the server issued, or a sentinel. */
const OFFSET = /^(-1|now|\d{16}_\d{16})$/

/** `Stream-Closed` counts only when it is `true`, compared case-insensitively (§4.1). */
export function closedHeader(headers: Headers): boolean {
  return headers.get(H.closed)?.trim().toLowerCase() === 'true'
}

/** `Stream-TTL` in seconds, or undefined when absent. */
export function parseTtl(value: string | null): number | undefined {
  if (value === null) return undefined
  const n = CANONICAL_UINT.test(value) ? Number(value) : NaN
  if (!Number.isSafeInteger(n)) throw bad(`Stream-TTL must be a non-negative integer without leading zeros, got ${JSON.stringify(value)}.`)
  return n
}

/** `Stream-Expires-At` (RFC 3339) as ms since the epoch, or undefined when absent. */
export function parseExpiresAt(value: string | null): number | undefined {
  if (value === null) return undefined
  const m = RFC3339.exec(value.trim())
  const ms = m === null ? NaN : Date.parse(value.trim().replace(' ', 'T').toUpperCase())
  if (m === null || !Number.isFinite(ms)) throw bad(`Stream-Expires-At must be an RFC 3339 timestamp, got ${JSON.stringify(value)}.`)
  const [, , month, day, hour, minute, second] = m.map(Number) as number[]
  if (month! < 1 || month! > 12 || day! < 1 || day! > 31 || hour! > 23 || minute! > 59 || second! > 60) {
    throw bad(`Stream-Expires-At is not a valid date-time: ${JSON.stringify(value)}.`)
  }
  return ms
}

/** ms since the epoch as the RFC 3339 text sent in `Stream-Expires-At`. */
export function formatExpiresAt(ms: number): string {
  return new Date(ms).toISOString()
}

/** The media type of a Content-Type (lower case, no parameters). */
export function mediaType(contentType: string): string {
  return contentType.split(';', 1)[0]!.trim().toLowerCase()
}

/** JSON mode: media type `application/json` (§9.1). */
export function isJsonType(contentType: string): boolean {
  return mediaType(contentType) === 'application/json'
}

/** SSE data events carry text for `text/*` and `application/json`, base64 for anything else (§5.8). */
export function isTextType(contentType: string): boolean {
  const media = mediaType(contentType)
  return media.startsWith('text/') || media === 'application/json'
}

/** The idempotent producer headers: all three or none (§5.2.1). */
export interface ProducerHeaders {
  producerId: string
  producerEpoch: number
  producerSeq: number
}

function producerInteger(name: string, value: string): number {
  const n = /^[0-9]+$/.test(value) ? Number(value) : NaN
  if (!Number.isSafeInteger(n)) throw bad(`${name} must be an integer from 0 to 2^53-1, got ${JSON.stringify(value)}.`)
  return n
}

export function parseProducer(headers: Headers): ProducerHeaders | undefined {
  const id = headers.get(H.producerId)
  const epoch = headers.get(H.producerEpoch)
  const seq = headers.get(H.producerSeq)
  if (id === null && epoch === null && seq === null) return undefined
  if (id === null || epoch === null || seq === null) {
    throw bad('Producer-Id, Producer-Epoch and Producer-Seq must be sent together.')
  }
  if (id === '') throw bad('Producer-Id must not be empty.')
  return {
    producerId: id,
    producerEpoch: producerInteger(H.producerEpoch, epoch),
    producerSeq: producerInteger(H.producerSeq, seq),
  }
}

/** The fork headers of a PUT; `sourcePath` relative to the base path. */
export interface ForkHeaders {
  forkedFrom: string
  forkOffset?: string
  forkSubOffset?: number
}

export function parseFork(headers: Headers, toStreamPath: (p: string) => string): ForkHeaders | undefined {
  const from = headers.get(H.forkedFrom)
  const offset = headers.get(H.forkOffset)
  const sub = headers.get(H.forkSubOffset)
  if (from === null) {
    if (offset !== null || sub !== null) throw bad('Stream-Fork-Offset and Stream-Fork-Sub-Offset need Stream-Forked-From.')
    return undefined
  }
  if (from.trim() === '') throw bad('Stream-Forked-From must name a stream.')
  if (offset !== null && !OFFSET.test(offset)) throw bad(`Malformed Stream-Fork-Offset ${JSON.stringify(offset)}.`)
  if (offset === '-1' || offset === 'now') throw bad('Stream-Fork-Offset must be an offset the server issued.')
  let forkSubOffset: number | undefined
  if (sub !== null) {
    forkSubOffset = CANONICAL_UINT.test(sub) ? Number(sub) : NaN
    if (!Number.isSafeInteger(forkSubOffset)) throw bad(`Malformed Stream-Fork-Sub-Offset ${JSON.stringify(sub)}.`)
    if (forkSubOffset > 0 && offset === null) throw bad('Stream-Fork-Sub-Offset > 0 needs Stream-Fork-Offset.')
  }
  let forkedFrom: string
  try {
    forkedFrom = toStreamPath(from.trim())
  } catch {
    throw bad('Stream-Forked-From is not valid percent-encoding.')
  }
  return {
    forkedFrom,
    ...(offset === null ? {} : { forkOffset: offset }),
    ...(forkSubOffset === undefined ? {} : { forkSubOffset }),
  }
}

/** What a GET asked for: `offset` (at most once, never empty), `live`, `cursor`. */
export interface ReadQuery {
  offset: string
  offsetGiven: boolean
  live: 'long-poll' | 'sse' | undefined
  cursor: string | null
}

export function parseReadQuery(params: URLSearchParams): ReadQuery {
  const offsets = params.getAll('offset')
  if (offsets.length > 1) throw bad('Give offset at most once.')
  const offset = offsets[0]
  if (offset !== undefined && !OFFSET.test(offset)) throw bad(`Malformed offset ${JSON.stringify(offset)}.`)
  const liveValue = params.get('live')
  let live: ReadQuery['live']
  if (liveValue === 'long-poll' || liveValue === 'sse') live = liveValue
  else if (liveValue !== null && liveValue !== '' && liveValue !== 'false') throw bad(`Unknown live mode ${JSON.stringify(liveValue)}.`)
  if (live !== undefined && offset === undefined) throw bad(`live=${live} needs an offset.`)
  return { offset: offset ?? '-1', offsetGiven: offset !== undefined, live, cursor: params.get('cursor') }
}
