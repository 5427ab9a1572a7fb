/**
 * Portable snapshots in one call: `postgresSandboxSnapshots(pool, options)`
 * returns what upstream's `memorySandboxSnapshots(...)` returns (persistence,
 * a checkpoint store, and the snapshot methods `save`, `fork`, `readArtifact`),
 * over this package's stores. The methods are `@tanstack/ai-sandbox`'s own:
 * the object is built by its `createSandboxSnapshots`, from the copy the app
 * installed (an optional peer dependency, imported when the function is
 * called, so apps that do not use it never load it).
 */
import { SandboxPersistPeerError } from './errors.js'
import type { Queryable } from './internal.js'
import { postgresPersistence, type PostgresPersistenceOptions } from './persistence.js'
import { postgresCheckpoints, postgresSandboxInstances, type PostgresCheckpointOptions } from './sandbox.js'
import type {
  AIPersistence,
  CreateSandboxSnapshots,
  CreateSandboxSnapshotsInput,
  ForkCapableSandboxCheckpointStore,
  PostgresPersistenceStores,
  SandboxSnapshots,
} from './types.js'

/** The optional peer the snapshot methods come from. */
export const SANDBOX_PACKAGE = '@tanstack/ai-sandbox'
/** The export of that package this function builds on. */
export const CREATE_SANDBOX_SNAPSHOTS = 'createSandboxSnapshots'

/** The object `postgresSandboxSnapshots` resolves to. */
export type PostgresSandboxSnapshots = SandboxSnapshots<
  AIPersistence<PostgresPersistenceStores>,
  ForkCapableSandboxCheckpointStore
>

/**
 * What `createSandboxSnapshots` binds at create time (`sandbox`, `instances`,
 * `tenant`, `locks`, `policy`; a `save` call can override the first four),
 * plus the options of this package's checkpoint store (`leaseDurationMs`,
 * `renewAfterMs`, `now`) and of its persistence (`blobs`). `instances`
 * defaults to `postgresSandboxInstances(pool)`: the instance store is the
 * database, so every process sees the same records.
 */
export interface PostgresSandboxSnapshotsOptions
  extends Omit<CreateSandboxSnapshotsInput, 'persistence' | 'checkpoints'>,
    PostgresCheckpointOptions,
    PostgresPersistenceOptions {}

/**
 * Persistence, a fork-capable checkpoint store and the snapshot methods, as
 * one object, like upstream's `memorySandboxSnapshots(...)`: pass
 * `snapshots.persistence` to `withPersistence` and `snapshots` to
 * `withSandbox(sandbox, { instances, snapshots })`. Rejects with a
 * `SandboxPersistPeerError` when `@tanstack/ai-sandbox` is not installed
 * (`PEER_NOT_INSTALLED`) or has no `createSandboxSnapshots` (`PEER_EXPORT_MISSING`).
 */
export async function postgresSandboxSnapshots(
  pool: Queryable,
  options: PostgresSandboxSnapshotsOptions = {},
): Promise<PostgresSandboxSnapshots> {
  return buildSandboxSnapshots(pool, options, importSandboxPackage)
}

/** Import the peer as the app installed it (a variable specifier: TypeScript never needs its types). */
function importSandboxPackage(): Promise<unknown> {
  const specifier: string = SANDBOX_PACKAGE
  return import(specifier)
}

/**
 * The body of `postgresSandboxSnapshots`, with the package loader as a
 * parameter (the tests give it the stand-in packages in test/fixtures/).
 */
export async function buildSandboxSnapshots(
  pool: Queryable,
  options: PostgresSandboxSnapshotsOptions,
  load: () => Promise<unknown>,
): Promise<PostgresSandboxSnapshots> {
  const createSandboxSnapshots = await loadCreateSandboxSnapshots(load)
  const { leaseDurationMs, renewAfterMs, now, blobs, instances, ...bound } = options
  const checkpointOptions: PostgresCheckpointOptions = {}
  if (leaseDurationMs !== undefined) checkpointOptions.leaseDurationMs = leaseDurationMs
  if (renewAfterMs !== undefined) checkpointOptions.renewAfterMs = renewAfterMs
  if (now !== undefined) checkpointOptions.now = now
  const persistence = postgresPersistence(pool, blobs === undefined ? {} : { blobs })
  const checkpoints = postgresCheckpoints(pool, checkpointOptions)
  return createSandboxSnapshots({
    ...bound,
    instances: instances ?? postgresSandboxInstances(pool),
    persistence,
    checkpoints,
  })
}

/** `createSandboxSnapshots` from the loaded package, or the error that says what is missing. */
async function loadCreateSandboxSnapshots(load: () => Promise<unknown>): Promise<CreateSandboxSnapshots> {
  let loaded: unknown
  try {
    loaded = await load()
  } catch (error) {
    if (isPackageNotFound(error)) {
      throw new SandboxPersistPeerError(
        'PEER_NOT_INSTALLED',
        SANDBOX_PACKAGE,
        CREATE_SANDBOX_SNAPSHOTS,
        `postgresSandboxSnapshots builds on ${SANDBOX_PACKAGE}'s ${CREATE_SANDBOX_SNAPSHOTS}, and ${SANDBOX_PACKAGE} is not installed.`,
        `npm install ${SANDBOX_PACKAGE} (a release that exports ${CREATE_SANDBOX_SNAPSHOTS}) in the app.`,
        { cause: error },
      )
    }
    throw error
  }
  const found = exportOf(loaded, CREATE_SANDBOX_SNAPSHOTS)
  if (typeof found !== 'function') {
    throw new SandboxPersistPeerError(
      'PEER_EXPORT_MISSING',
      SANDBOX_PACKAGE,
      CREATE_SANDBOX_SNAPSHOTS,
      `The installed ${SANDBOX_PACKAGE} does not export ${CREATE_SANDBOX_SNAPSHOTS}, which postgresSandboxSnapshots builds on` +
        (found === undefined ? '.' : ` (it exports a ${typeof found} by that name).`),
      `install a ${SANDBOX_PACKAGE} release with portable snapshots (it exports ${CREATE_SANDBOX_SNAPSHOTS}); ` +
        'without one, use postgresPersistence and postgresCheckpoints as separate stores.',
    )
  }
  return found as CreateSandboxSnapshots
}

/** A named export of an ES module, or of a CommonJS module's `default`. */
function exportOf(loaded: unknown, name: string): unknown {
  if (loaded === null || (typeof loaded !== 'object' && typeof loaded !== 'function')) return undefined
  const module = loaded as Record<string, unknown>
  if (name in module) return module[name]
  const fallback = module.default
  if (fallback !== null && (typeof fallback === 'object' || typeof fallback === 'function')) {
    return (fallback as Record<string, unknown>)[name]
  }
  return undefined
}

/** Node's "cannot find the package itself" (not a module the package in turn imports). */
function isPackageNotFound(error: unknown): boolean {
  if (error === null || typeof error !== 'object') return false
  const { code, message } = error as { code?: unknown; message?: unknown }
  return (
    (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') &&
    typeof message === 'string' &&
    message.includes(`'${SANDBOX_PACKAGE}'`)
  )
}
