/** Bearer-token access control for the stream server (the CLI's `--token`). */
import { createHash, timingSafeEqual } from 'node:crypto'
import type { AuthorizeResult, StreamOperation } from './context.js'

export interface BearerOptions {
  /** Let reads (GET, HEAD) through without a token; writes always need it. */
  publicReads?: boolean
}

const digest = (s: string) => createHash('sha256').update(s).digest()

/** The token of an `Authorization: Bearer <token>` header; undefined when the header is missing or malformed. */
export function bearerToken(request: Request): string | undefined {
  return /^Bearer\s+(\S+)$/i.exec((request.headers.get('authorization') ?? '').trim())?.[1]
}

/** An `authorize` that wants `Authorization: Bearer <token>` on writes (PUT, POST, DELETE), and on reads unless `publicReads`. */
export function bearerAuthorizer(token: string, options: BearerOptions = {}) {
  if (typeof token !== 'string' || !/^\S+$/.test(token)) throw new TypeError('The bearer token must be a non-empty string without whitespace.')
  const expected = digest(token)
  return (request: Request, context: { path: string; operation: StreamOperation }): AuthorizeResult => {
    const read = context.operation === 'read' || context.operation === 'head'
    if (read && options.publicReads === true) return true
    const given = bearerToken(request)
    return given !== undefined && timingSafeEqual(digest(given), expected)
  }
}
