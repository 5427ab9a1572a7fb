/**
 * TanStack AI stores over the sandbox_persist PostgreSQL extension.
 *
 *   postgresPersistence(pool)        messages, runs, interrupts, metadata,
 *                                    generationRuns, artifacts, blobs
 *   postgresSandboxInstances(pool)   sandbox instance store
 *   postgresCheckpoints(pool, opts)  fork-capable checkpoint store with writer leases
 *   postgresSandboxSnapshots(pool, opts)  persistence + checkpoints + save/fork/readArtifact,
 *                                    built by @tanstack/ai-sandbox's createSandboxSnapshots
 *   postgresLocks(pool, opts)        LockStore (lease table, LISTEN/NOTIFY wake-ups)
 *   postgresDurability(pool, opts)   StreamDurability factory over the event log
 *   sseHeartbeats(response, opts)    SSE comment heartbeats for idle streams
 *   createStreamHandler(opts)        Durable Streams protocol server (fetch handler)
 *   serveStreams(opts)               the same on node:http
 */
export {
  postgresPersistence,
  postgresMessageStore,
  postgresRunStore,
  postgresInterruptStore,
  postgresMetadataStore,
  postgresGenerationRunStore,
  postgresArtifactStore,
  type PostgresPersistenceOptions,
} from './persistence.js'
export { postgresBlobStore, type PostgresBlobStoreOptions } from './blobs.js'
export { postgresSandboxInstances, postgresCheckpoints, type PostgresCheckpointOptions } from './sandbox.js'
export {
  postgresSandboxSnapshots,
  type PostgresSandboxSnapshots,
  type PostgresSandboxSnapshotsOptions,
} from './snapshots.js'
export { postgresLocks, type PostgresLockOptions, type PostgresLockStore, type WithLockOptions } from './locks.js'
export {
  postgresDurability,
  runTag,
  SERVER_SHUTDOWN,
  type DurableEntry,
  type PostgresDurabilityFactory,
  type PostgresDurabilityOptions,
  type PostgresDurabilitySource,
  type PostgresStreamDurability,
} from './durability.js'
export {
  createStreamHandler,
  serveStreams,
  bearerAuthorizer,
  nextCursor,
  CURSOR_EPOCH_MS,
  CURSOR_INTERVAL_MS,
  type StreamHandler,
  type StreamHandlerOptions,
  type StreamOperation,
  type AuthorizeResult,
  type ServeStreamsOptions,
  type StreamServer,
  type BearerOptions,
  type SubscriptionOptions,
} from './streams/index.js'
export { sseHeartbeats, DEFAULT_HEARTBEAT_MS, type SseHeartbeatOptions } from './heartbeat.js'
export { postgresMaintenance, type PostgresMaintenance, type ReaperWakeup, type MaintenanceHealth } from './maintenance.js'
export { closeSharedListeners, sharedListenerCount, type ListenerHealth, type ListenerOptions } from './listener.js'
export {
  DIAGNOSTICS_CHANNEL,
  type SandboxPersistEvent,
  type SandboxPersistLogger,
  type SandboxPersistReport,
} from './log.js'
export {
  SandboxCheckpointError,
  SandboxCheckpointConflictError,
  SandboxCheckpointParentMismatchError,
  SandboxCheckpointDuplicateIdError,
  SandboxCheckpointNotHeadError,
  SandboxCheckpointWriterConflictError,
  SandboxCheckpointWriterLostError,
  SandboxCheckpointInvalidIdError,
  SandboxCheckpointInvalidEntryError,
  SandboxPersistError,
  SandboxPersistSetupError,
  SandboxPersistInputError,
  SandboxPersistRangeError,
  InterruptBatchError,
  SandboxPersistPeerError,
  EventLogOffsetDivergedError,
  LockAcquireTimeoutError,
  LockLostError,
  LeaseRowBusyError,
  translateError,
  httpStatusOf,
  type SandboxCheckpointErrorCode,
  type SandboxPersistErrorCode,
  type SandboxPersistSetupErrorCode,
  type SandboxPersistErrorFields,
} from './errors.js'
export { SP_ERRORS, type SpSqlState, type SpCodeName } from './error_codes.js'
export {
  SandboxPersistConnectionError,
  FAILOVER_RETRY_MS,
  IDEMPOTENT as IDEMPOTENT_FUNCTIONS,
  type ConnectionLostReason,
} from './failover.js'
export { ADAPTER_VERSION, compatibleRange, isCompatible } from './version.js'
export type { Queryable } from './internal.js'
export type * from './types.js'
