/**
 * A failed request as its HTTP response: an HttpError as is; a stream
 * function's SQLSTATE through the contract's status table (§5: HTTP_STATUS,
 * generated from SP_HTTP_STATUS_TABLE in the extension's src/errors.h), with the
 * extra headers of SP704 / SP706 / SP707 read by a `stream_head(path,
 * producer_id)` after the refusal; a database that cannot be reached (down,
 * restarting, failing over) a 503 with Retry-After, as a client should retry
 * it; anything else a 500. Both reported.
 */
import { HTTP_STATUS } from '../error_codes.js'
import { isDatabaseError } from '../errors.js'
import { connectionLost } from '../failover.js'
import { report } from '../log.js'
import { errorResponse, type HandlerContext } from './context.js'
import { streamHead } from './db.js'
import { H, HttpError, type ProducerHeaders } from './headers.js'

export async function refusal(
  ctx: HandlerContext,
  error: unknown,
  path: string | undefined,
  producer?: ProducerHeaders,
): Promise<Response> {
  if (error instanceof HttpError) return errorResponse(error.status, error.message, error.headers)
  const sqlstate = isDatabaseError(error) ? error.code : undefined
  const status = sqlstate === undefined ? undefined : HTTP_STATUS[sqlstate]
  const message = error instanceof Error ? error.message : String(error)
  if (status === undefined && connectionLost(error, 'query', 1) !== null) {
    report([ctx.options.logger], 'streams.database_unavailable', `stream request refused, the database is unavailable: ${message}`, { error, sqlstate, path })
    return errorResponse(503, 'The database is unavailable; retry later.', { 'Retry-After': String(ctx.options.retryAfterSeconds) })
  }
  if (status === undefined) {
    report([ctx.options.logger], 'streams.request_failed', `stream request failed: ${message}`, { error, sqlstate, path })
    return errorResponse(500, 'Internal server error.')
  }
  const extra = path === undefined ? {} : await extraHeaders(ctx, sqlstate!, path, producer)
  return errorResponse(status, message, extra)
}

async function extraHeaders(
  ctx: HandlerContext,
  sqlstate: string,
  path: string,
  producer: ProducerHeaders | undefined,
): Promise<Record<string, string>> {
  if (sqlstate !== 'SP704' && sqlstate !== 'SP706' && sqlstate !== 'SP707') return {}
  let head
  try {
    head = await streamHead(ctx.pool, path, producer?.producerId ?? null)
  } catch {
    // The stream changed under us (deleted, expired): the status alone still says what happened.
    return sqlstate === 'SP704' ? { [H.closed]: 'true' } : {}
  }
  if (sqlstate === 'SP704') return { [H.closed]: 'true', [H.nextOffset]: head.nextOffset }
  if (sqlstate === 'SP706' && producer !== undefined) {
    // The epoch that refused it: the stream's fence or the producer's own, the higher.
    const epoch = Math.max(head.producerFence ?? -1, head.producer?.epoch ?? -1)
    return epoch < 0 ? {} : { [H.producerEpoch]: String(epoch) }
  }
  if (head.producer === undefined || producer === undefined) return {}
  return {
    [H.producerExpectedSeq]: String(head.producer.lastSeq + 1),
    [H.producerReceivedSeq]: String(producer.producerSeq),
  }
}
