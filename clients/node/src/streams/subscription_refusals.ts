/**
 * Responses of the subscription routes (PROTOCOL.md §6-7): JSON bodies, and
 * errors as `{ "error": { "code", "message" } }` with the protocol's codes.
 * A subscription function's SQLSTATE maps through its contract code name
 * (SP_ERRORS) to the protocol's code, its status through the generated
 * HTTP_STATUS table; an unreachable database or an unexpected failure goes
 * through the stream server's own refusal (503 / 500, reported).
 */
import { HTTP_STATUS, SP_ERRORS } from '../error_codes.js'
import { isDatabaseError } from '../errors.js'
import { respond, type HandlerContext } from './context.js'
import { HttpError } from './headers.js'
import { refusal } from './refusals.js'

/** A subscription error's protocol code and status, by the extension's contract code name. */
const BY_NAME: Record<string, { code: string; status: number }> = {
  SUBSCRIPTION_NOT_FOUND: { code: 'SUBSCRIPTION_NOT_FOUND', status: 404 },
  SUBSCRIPTION_ALREADY_EXISTS: { code: 'SUBSCRIPTION_ALREADY_EXISTS', status: 409 },
  SUBSCRIPTION_CONFLICT: { code: 'SUBSCRIPTION_ALREADY_EXISTS', status: 409 },
  WEBHOOK_URL_REJECTED: { code: 'WEBHOOK_URL_REJECTED', status: 400 },
  TOKEN_INVALID: { code: 'TOKEN_INVALID', status: 401 },
  SUBSCRIPTION_TOKEN_INVALID: { code: 'TOKEN_INVALID', status: 401 },
}

/** A JSON response with the base headers, never cached. */
export function jsonResponse(status: number, body: unknown, headers: Record<string, string | undefined> = {}): Response {
  return respond(status, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store', ...headers }, JSON.stringify(body))
}

/** `{ error: { code, message, ...extra } }` with `status`. */
export function jsonError(
  status: number, code: string, message: string, extra: Record<string, unknown> = {}, headers: Record<string, string | undefined> = {},
): Response {
  const auth = status === 401 ? { 'WWW-Authenticate': 'Bearer' } : {}
  return jsonResponse(status, { error: { code, message, ...extra } }, { ...auth, ...headers })
}

/** The protocol's code for a status without a more specific one. */
function codeForStatus(status: number): string {
  if (status === 400) return 'INVALID_REQUEST'
  if (status === 401) return 'TOKEN_INVALID'
  if (status === 413) return 'PAYLOAD_TOO_LARGE'
  if (status === 503) return 'UNAVAILABLE'
  return status >= 500 ? 'INTERNAL_ERROR' : 'REQUEST_REFUSED'
}

/** A failed subscription request as its JSON error response. */
export async function subscriptionRefusal(ctx: HandlerContext, error: unknown): Promise<Response> {
  if (error instanceof HttpError) return jsonError(error.status, codeForStatus(error.status), error.message, {}, error.headers)
  const sqlstate = isDatabaseError(error) ? error.code : undefined
  if (sqlstate !== undefined) {
    const name = (SP_ERRORS as Record<string, { code: string } | undefined>)[sqlstate]?.code
    const known = name === undefined ? undefined : BY_NAME[name]
    const status = HTTP_STATUS[sqlstate] ?? known?.status
    if (status !== undefined) {
      const message = error instanceof Error ? error.message : String(error)
      return jsonError(status, known?.code ?? (status === 400 ? 'INVALID_REQUEST' : name ?? codeForStatus(status)), message)
    }
  }
  const plain = await refusal(ctx, error, undefined)
  const headers: Record<string, string> = {}
  const retryAfter = plain.headers.get('retry-after')
  if (retryAfter !== null) headers['Retry-After'] = retryAfter
  return jsonError(plain.status, codeForStatus(plain.status), await plain.text(), {}, headers)
}
