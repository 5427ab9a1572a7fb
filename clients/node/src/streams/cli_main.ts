/**
 * `sandbox-persist-streams`: the Durable Streams server over a database.
 *
 *   sandbox-persist-streams --database-url URL --port N [--host H]
 *                           [--token T | --insecure-local] [--public-reads]
 *                           [--base-path /v1/stream/]
 *                           [--public-url URL] [--webhook-signing-key FILE]
 *
 * Without a token it refuses to start, unless `--insecure-local`, which
 * serves without access control on loopback only. With a token, PUT, POST and
 * DELETE need `Authorization: Bearer <token>`, and so do reads unless
 * `--public-reads`. The token may also come from SANDBOX_PERSIST_STREAMS_TOKEN.
 *
 * The subscription APIs (PROTOCOL.md §6-7) are served, and webhooks delivered.
 * `--public-url` is the origin receivers reach this server at (the base of
 * callback and JWKS URLs; default: with `--insecure-local` the server's own
 * loopback address, else the origin of the latest authorized request).
 * `--webhook-signing-key` is a PEM Ed25519 private key file (make one with
 * `openssl genpkey -algorithm ed25519 -out key.pem`); without it a new key is
 * made at every start, so receivers must refetch the JWKS after a restart.
 */
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import pg from 'pg'
import { closeSharedListeners } from '../listener.js'
import { bearerAuthorizer } from './auth.js'
import { serveStreams, type StreamServer } from './node_http.js'

export class CliUsageError extends Error {
  override name = 'CliUsageError'
}

export interface CliConfig {
  databaseUrl: string
  port: number
  host: string
  token: string | undefined
  insecureLocal: boolean
  publicReads: boolean
  basePath: string | undefined
  /** Origin webhook receivers reach this server at. */
  publicUrl: string | undefined
  /** Path of the PEM Ed25519 private key webhooks are signed with. */
  webhookSigningKey: string | undefined
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '::1'])

export const USAGE =
  'usage: sandbox-persist-streams --database-url URL --port N [--host H] (--token T | --insecure-local) [--public-reads] [--base-path P]' +
  ' [--public-url URL] [--webhook-signing-key FILE]'

export function parseCliArgs(argv: string[], env: NodeJS.ProcessEnv = process.env): CliConfig {
  let values
  try {
    ;({ values } = parseArgs({
      args: argv,
      options: {
        'database-url': { type: 'string' },
        port: { type: 'string' },
        host: { type: 'string' },
        token: { type: 'string' },
        'insecure-local': { type: 'boolean', default: false },
        'public-reads': { type: 'boolean', default: false },
        'base-path': { type: 'string' },
        'public-url': { type: 'string' },
        'webhook-signing-key': { type: 'string' },
      },
      strict: true,
      allowPositionals: false,
    }))
  } catch (error) {
    throw new CliUsageError(`${(error as Error).message}\n${USAGE}`)
  }
  const databaseUrl = values['database-url'] ?? env.DATABASE_URL
  if (databaseUrl === undefined || databaseUrl === '') throw new CliUsageError(`--database-url is required.\n${USAGE}`)
  const port = Number(values.port)
  if (values.port === undefined || !/^\d+$/.test(values.port) || port > 65535) throw new CliUsageError(`--port must be a port number.\n${USAGE}`)
  const token = values.token ?? (env.SANDBOX_PERSIST_STREAMS_TOKEN || undefined)
  const insecureLocal = values['insecure-local'] === true
  if (token === undefined && !insecureLocal) {
    throw new CliUsageError(
      'Refusing to start without access control: give --token T (or SANDBOX_PERSIST_STREAMS_TOKEN), ' +
        `or --insecure-local to serve without a token on loopback only.\n${USAGE}`,
    )
  }
  if (token !== undefined && insecureLocal) throw new CliUsageError(`Give --token or --insecure-local, not both.\n${USAGE}`)
  const host = values.host ?? '127.0.0.1'
  if (insecureLocal && !LOOPBACK.has(host)) {
    throw new CliUsageError(`--insecure-local binds loopback only; --host ${host} is not a loopback address.\n${USAGE}`)
  }
  let publicUrl = values['public-url']
  if (publicUrl !== undefined && !/^https?:\/\/[^/]/.test(publicUrl)) throw new CliUsageError(`--public-url must be an http(s) URL.\n${USAGE}`)
  // On loopback the server's own address is where local receivers call back.
  if (publicUrl === undefined && insecureLocal) publicUrl = `http://${host.includes(':') ? `[${host}]` : host}:${port}`
  return {
    databaseUrl, port, host, token, insecureLocal, publicReads: values['public-reads'] === true, basePath: values['base-path'],
    publicUrl, webhookSigningKey: values['webhook-signing-key'],
  }
}

/** Start the server for `config`; the returned stop() closes server, listener and pool. */
export async function startCli(config: CliConfig): Promise<{ server: StreamServer; stop: () => Promise<void> }> {
  const signingKey = config.webhookSigningKey === undefined ? undefined : readKeyFile(config.webhookSigningKey)
  const pool = new pg.Pool({ connectionString: config.databaseUrl })
  pool.on('error', () => undefined)
  const server = await serveStreams({
    pool,
    port: config.port,
    host: config.host,
    listener: { listenerConnectionString: config.databaseUrl },
    logger: { warn: (message) => console.error(`sandbox-persist-streams: ${message}`) },
    ...(config.basePath === undefined ? {} : { basePath: config.basePath }),
    ...(config.token === undefined ? {} : { authorize: bearerAuthorizer(config.token, { publicReads: config.publicReads }) }),
    subscriptions: {
      ...(config.publicUrl === undefined ? {} : { publicUrl: config.publicUrl }),
      ...(signingKey === undefined ? {} : { signingKey }),
    },
  })
  const stop = async () => {
    await server.close()
    await closeSharedListeners()
    await pool.end()
  }
  return { server, stop }
}

/** The PEM text of the webhook signing key file. */
function readKeyFile(path: string): string {
  try {
    return readFileSync(path, 'utf8')
  } catch (error) {
    throw new Error(`cannot read --webhook-signing-key ${path}: ${(error as Error).message}`)
  }
}

/** The bin's body: parse, start, stop on SIGINT/SIGTERM. Returns the exit code on a usage error. */
export async function main(argv: string[] = process.argv.slice(2)): Promise<number | undefined> {
  let config
  try {
    config = parseCliArgs(argv)
  } catch (error) {
    if (error instanceof CliUsageError) {
      console.error(`sandbox-persist-streams: ${error.message}`)
      return 2
    }
    throw error
  }
  const { server, stop } = await startCli(config)
  console.error(`sandbox-persist-streams: serving ${server.url}${config.basePath ?? '/v1/stream/'}${config.insecureLocal ? ' (insecure-local: no token)' : ''}`)
  const onSignal = () => {
    void stop().then(() => process.exit(0), () => process.exit(1))
  }
  process.once('SIGINT', onSignal)
  process.once('SIGTERM', onSignal)
  return undefined
}
