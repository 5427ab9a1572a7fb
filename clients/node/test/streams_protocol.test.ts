/**
 * The official Durable Streams conformance suite
 * (@durable-streams/server-conformance-tests 0.3.6) against serveStreams on
 * the test database (docs/contract/streams.md §6), its 6 subscription tests
 * (PROTOCOL.md §6-7) included. The server's public URL (the base of
 * callback_url and jwks_url) is not given: it is the origin of the requests it
 * serves, which is the suite's baseUrl (the port is only known once it listens).
 */
import { runConformanceTests, type ConformanceTestOptions } from '@durable-streams/server-conformance-tests'
import { afterAll, beforeAll } from 'vitest'
import { serveStreams, type StreamServer } from '../src/index.js'
import { makePool, reset } from './helpers.js'

const pool = makePool({ max: 16 })
let server: StreamServer | undefined

// The suite reads baseUrl when each test runs: it is filled in once the server listens.
const options: ConformanceTestOptions = { baseUrl: 'http://127.0.0.1:0', longPollTimeoutMs: 500, subscriptions: true }

beforeAll(async () => {
  await reset(pool)
  server = await serveStreams({ pool, port: 0, host: '127.0.0.1', longPollTimeoutMs: 500, subscriptions: true })
  options.baseUrl = server.url
})

afterAll(async () => {
  await server?.close()
})

runConformanceTests(options)
