/** The Durable Streams server over the extension's stream functions (docs/contract/streams.md §6). */
export {
  createStreamHandler,
  type StreamHandler,
  type StreamHandlerOptions,
  type StreamOperation,
  type AuthorizeResult,
  type SubscriptionOptions,
} from './handler.js'
export { serveStreams, type ServeStreamsOptions, type StreamServer } from './node_http.js'
export { bearerAuthorizer, type BearerOptions } from './auth.js'
export { nextCursor, CURSOR_EPOCH_MS, CURSOR_INTERVAL_MS } from './cursor.js'
