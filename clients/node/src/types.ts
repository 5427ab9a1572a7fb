/**
 * Store contracts that the published packages do not export.
 *
 * `@tanstack/ai` exports `RunStore`, `RunRecord`, `MetadataStore`,
 * `LockStore`, `StreamDurability`, `ModelMessage`, `TokenUsage` and
 * `PersistedArtifactRef`; those are imported, never redefined. The persistence
 * stores of `@tanstack/ai-persistence` (not on the npm registry) are typed here
 * exactly as `docs/contract/` gives them; the sandbox instance and
 * checkpoint stores exactly as `@tanstack/ai-sandbox`'s current sources type
 * them (the published 0.2.x predates them).
 */
import type {
  MetadataStore,
  ModelMessage,
  PersistedArtifactRef,
  RunStatus,
  RunStore,
  TokenUsage,
} from '@tanstack/ai'
import type { LockStore } from '@tanstack/ai/locks'

// ---------------------------------------------------------------- messages

export interface MessageStore {
  loadThread: (threadId: string) => Promise<Array<ModelMessage>>
  saveThread: (threadId: string, messages: Array<ModelMessage>) => Promise<void>
}

// ---------------------------------------------------------------- runs

/** The run store with both optional methods present. */
export type PostgresRunStore = RunStore & Required<Pick<RunStore, 'listByThread' | 'listReclaimable'>>

// ---------------------------------------------------------------- interrupts

export type InterruptStatus = 'pending' | 'resolved' | 'cancelled'

export interface InterruptRecord {
  interruptId: string
  runId: string
  threadId: string
  status: InterruptStatus
  requestedAt: number
  resolvedAt?: number
  payload: Record<string, unknown>
  response?: unknown
}

export type InterruptCommitEntry =
  | { interruptId: string; status: 'resolved'; response?: unknown }
  | { interruptId: string; status: 'cancelled' }

export interface InterruptStore {
  create: (record: Omit<InterruptRecord, 'status' | 'resolvedAt'>) => Promise<void>
  resolve: (interruptId: string, response?: unknown) => Promise<void>
  cancel: (interruptId: string) => Promise<void>
  commitBatch?: (entries: ReadonlyArray<InterruptCommitEntry>) => Promise<void>
  get: (interruptId: string) => Promise<InterruptRecord | null>
  list: (threadId: string) => Promise<Array<InterruptRecord>>
  listPending: (threadId: string) => Promise<Array<InterruptRecord>>
  listByRun: (runId: string) => Promise<Array<InterruptRecord>>
  listPendingByRun: (runId: string) => Promise<Array<InterruptRecord>>
}

/** The interrupt store with `commitBatch` present. */
export type PostgresInterruptStore = InterruptStore & Required<Pick<InterruptStore, 'commitBatch'>>

// ---------------------------------------------------------------- metadata

export type { MetadataStore }

// ---------------------------------------------------------------- generation runs

export interface GenerationRunRecord {
  runId: string
  threadId: string
  activity: string
  provider: string
  model: string
  status: RunStatus
  startedAt: number
  finishedAt?: number
  error?: { message: string; code?: string }
  result?: unknown
  artifacts?: Array<PersistedArtifactRef>
  usage?: TokenUsage
}

export interface GenerationRunStore {
  createOrResume: (
    input: Pick<GenerationRunRecord, 'runId' | 'threadId' | 'activity' | 'provider' | 'model' | 'startedAt'> & {
      status?: RunStatus
    },
  ) => Promise<GenerationRunRecord>
  update: (
    runId: string,
    patch: Partial<Pick<GenerationRunRecord, 'status' | 'finishedAt' | 'error' | 'result' | 'artifacts' | 'usage'>>,
  ) => Promise<void>
  get: (runId: string) => Promise<GenerationRunRecord | null>
  findLatestForThread: (threadId: string) => Promise<GenerationRunRecord | null>
}

// ---------------------------------------------------------------- artifacts

export interface ArtifactRecord {
  artifactId: string
  runId: string
  threadId: string
  blobKey?: string
  name: string
  mimeType: string
  size: number
  sourceUrl?: string
  createdAt: number
}

export interface ArtifactStore {
  save: (record: ArtifactRecord) => Promise<void>
  get: (artifactId: string) => Promise<ArtifactRecord | null>
  list: (runId: string) => Promise<Array<ArtifactRecord>>
  listForThread: (threadId: string) => Promise<Array<ArtifactRecord>>
  delete: (artifactId: string) => Promise<void>
  deleteForRun: (runId: string) => Promise<void>
}

// ---------------------------------------------------------------- blobs

export type BlobBody = ReadableStream<Uint8Array> | ArrayBuffer | ArrayBufferView | string | Blob

export interface BlobRecord {
  key: string
  size?: number
  etag?: string
  contentType?: string
  customMetadata?: Record<string, string>
  createdAt?: number
  updatedAt?: number
}

export interface BlobObject extends BlobRecord {
  arrayBuffer: () => Promise<ArrayBuffer>
  text: () => Promise<string>
  body?: ReadableStream<Uint8Array>
  range?: { offset: number; length: number }
}

export interface BlobPutOptions {
  contentType?: string
  customMetadata?: Record<string, string>
  expectedLength?: number
  /** Stops a streamed upload between pieces (the upload is aborted, the old object kept); never sent. */
  signal?: AbortSignal
}

export interface BlobRange {
  offset: number
  length?: number
}

export interface BlobGetOptions {
  range?: BlobRange
  /** Rejects the call, and errors the body and `arrayBuffer()`/`text()` with the signal's reason; no further pieces are read. */
  signal?: AbortSignal
}

export interface BlobListOptions {
  prefix?: string
  cursor?: string
  limit?: number
}

export interface BlobListPage {
  objects: Array<BlobRecord>
  cursor?: string
  truncated?: boolean
}

export interface BlobStore {
  put: (key: string, body: BlobBody, options?: BlobPutOptions) => Promise<BlobRecord>
  get: (key: string, options?: BlobGetOptions) => Promise<BlobObject | null>
  head: (key: string) => Promise<BlobRecord | null>
  delete: (key: string) => Promise<void>
  list: (options?: BlobListOptions) => Promise<BlobListPage>
}

// ---------------------------------------------------------------- the persistence object

export interface AIPersistenceStores {
  messages?: MessageStore
  runs?: RunStore
  interrupts?: InterruptStore
  metadata?: MetadataStore
  generationRuns?: GenerationRunStore
  artifacts?: ArtifactStore
  blobs?: BlobStore
}

export interface PostgresPersistenceStores {
  messages: MessageStore
  runs: PostgresRunStore
  interrupts: PostgresInterruptStore
  metadata: MetadataStore
  generationRuns: GenerationRunStore
  artifacts: ArtifactStore
  blobs: BlobStore
}

export interface AIPersistence<TStores extends AIPersistenceStores = AIPersistenceStores> {
  stores: TStores
}

// ---------------------------------------------------------------- sandbox instances

export interface SandboxInstanceRecord {
  key: string
  provider: string
  providerSandboxId: string
  latestSnapshotId?: string
  threadId: string
  latestRunId?: string
  updatedAt: number
}

export interface SandboxInstanceStore {
  get: (key: string) => Promise<SandboxInstanceRecord | null>
  upsert: (record: SandboxInstanceRecord) => Promise<void>
  delete: (key: string) => Promise<void>
}

// ---------------------------------------------------------------- checkpoints

export interface SandboxSnapshotFileEntry {
  path: string
  kind: 'file'
  blobKey: string
  size: number
}

export interface SandboxSnapshotDirectoryEntry {
  path: string
  kind: 'dir'
}

export type SandboxSnapshotEntry = SandboxSnapshotFileEntry | SandboxSnapshotDirectoryEntry

export interface SandboxSnapshotArtifact {
  artifactId: string
  name: string
  mimeType: string
  size: number
  blobKey: string
  createdAt: number
}

export interface SandboxCheckpoint {
  id: string
  threadId: string
  parentCheckpointId: string | null
  createdAt: number
  reason: 'automatic' | 'named' | 'fork-root'
  label?: string
  sourceRunId?: string
  files: ReadonlyArray<SandboxSnapshotEntry>
  conversation: ReadonlyArray<ModelMessage>
  artifacts: ReadonlyArray<SandboxSnapshotArtifact>
}

export interface SandboxCheckpointWriter {
  threadId: string
  ownerToken: string
  /**
   * `(timeline − 1) · 2^40 + counter` (docs/contract/failover.md §1): grows on
   * every acquire, past every earlier timeline's after a failover; the server
   * keeps it at most 2^53 − 1, so a JS number holds it exactly.
   */
  fence: number
}

export interface SandboxCheckpointWriterLease extends SandboxCheckpointWriter {
  /** Live: reflects every successful `renew()`. */
  readonly expiresAt: number
  renewAfterMs: number
  renew: () => Promise<{ expiresAt: number }>
  release: () => Promise<void>
}

export interface SandboxCheckpointForkInput {
  sourceThreadId: string
  sourceCheckpointId: string
  destinationThreadId: string
  destinationCheckpointId: string
  createdAt: number
  writer: SandboxCheckpointWriter
}

export interface SandboxCheckpointStore {
  get: (id: string) => Promise<SandboxCheckpoint | null>
  list: (threadId: string) => Promise<Array<SandboxCheckpoint>>
  getHead: (threadId: string) => Promise<string | null>
  append: (input: {
    checkpoint: SandboxCheckpoint
    expectedHeadId: string | null
    writer: SandboxCheckpointWriter
  }) => Promise<{ headId: string }>
  deleteHead: (input: { threadId: string; checkpointId: string; writer: SandboxCheckpointWriter }) => Promise<void>
  acquireWriter: (threadId: string) => Promise<SandboxCheckpointWriterLease>
  listBlobReferences: () => Promise<Array<{ key: string; references: number }>>
  forkFromCheckpoint?: SandboxCheckpointForkCapability['forkFromCheckpoint']
}

export interface SandboxCheckpointForkCapability {
  forkFromCheckpoint: (input: SandboxCheckpointForkInput) => Promise<{ checkpoint: SandboxCheckpoint }>
}

export type ForkCapableSandboxCheckpointStore = SandboxCheckpointStore & SandboxCheckpointForkCapability

export interface SandboxCheckpointStoreOptions {
  now?: () => number
  leaseDurationMs?: number
  renewAfterMs?: number
}

// ---------------------------------------------------------------- portable snapshots

/*
 * `createSandboxSnapshots` and its object, as `@tanstack/ai-sandbox`'s
 * sources type them (`snapshot-operations`, `snapshots`); the published 0.2.x
 * has neither, so they are declared here and the package is loaded only when
 * `postgresSandboxSnapshots` is called (snapshots.ts).
 */

/** Which files a checkpoint keeps, and how their bytes are redacted. */
export interface SandboxSnapshotPolicy {
  /** The exact workspace projection hash, when known. */
  workspaceHash?: string
  include?: (path: string, kind: 'file' | 'dir') => boolean
  exclude?: (path: string, kind: 'file' | 'dir') => boolean
  redact?: (input: { path: string; bytes: Uint8Array; resolvedSecrets: Readonly<Record<string, string>> }) => Uint8Array
}

/**
 * What this package needs of upstream's `SandboxDefinition` (`defineSandbox(...)`):
 * it is only passed through to `createSandboxSnapshots`, so any definition fits.
 */
export interface SandboxDefinition {
  readonly id: string
  readonly provider: { readonly name: string }
}

/** The persistence stores the snapshot methods read: messages, artifacts (by thread) and blobs. */
export interface SnapshotPersistence {
  stores: {
    messages: { loadThread: (threadId: string) => Promise<ReadonlyArray<ModelMessage>> }
    artifacts: { listForThread: (threadId: string) => Promise<ReadonlyArray<ArtifactRecord>> }
    blobs: {
      get: (key: string) => Promise<{ arrayBuffer: () => Promise<ArrayBuffer> } | null>
      head: (key: string) => Promise<unknown>
      put: (key: string, body: Uint8Array) => Promise<unknown>
    }
  }
}

/** The tenant a named save computes its sandbox key with. */
export interface SandboxSnapshotTenant {
  userId?: string
  orgId?: string
}

export interface CreateSandboxSnapshotsInput<
  TPersistence extends SnapshotPersistence = SnapshotPersistence,
  TCheckpoints extends SandboxCheckpointStore = SandboxCheckpointStore,
> {
  persistence: TPersistence
  checkpoints: TCheckpoints
  policy?: SandboxSnapshotPolicy
  sandbox?: SandboxDefinition
  instances?: SandboxInstanceStore
  tenant?: SandboxSnapshotTenant
  locks?: LockStore
}

export interface SaveSandboxSnapshotInput {
  threadId: string
  runId: string
  label: string
  sandbox?: SandboxDefinition
  instances?: SandboxInstanceStore
  tenant?: SandboxSnapshotTenant
  locks?: LockStore
  signal?: AbortSignal
  adapterName?: string
}

export interface ForkSandboxSnapshotInput {
  threadId: string
  checkpointId: string
  destinationThreadId: string
  destinationCheckpointId?: string
  createdAt?: number
}

export interface ReadSandboxSnapshotArtifactInput {
  threadId: string
  checkpointId: string
  artifactId: string
}

/** The object `createSandboxSnapshots` returns: the stores it was given and the three snapshot methods. */
export interface SandboxSnapshots<
  TPersistence extends SnapshotPersistence = SnapshotPersistence,
  TCheckpoints extends SandboxCheckpointStore = SandboxCheckpointStore,
> {
  persistence: TPersistence
  checkpoints: TCheckpoints
  policy?: SandboxSnapshotPolicy
  save: (input: SaveSandboxSnapshotInput) => Promise<SandboxCheckpoint>
  fork: (input: ForkSandboxSnapshotInput) => Promise<SandboxCheckpoint>
  readArtifact: (input: ReadSandboxSnapshotArtifactInput) => Promise<{
    artifact: SandboxCheckpoint['artifacts'][number]
    bytes: Uint8Array
  }>
}

/** The signature of `@tanstack/ai-sandbox`'s `createSandboxSnapshots`. */
export type CreateSandboxSnapshots = <
  TPersistence extends SnapshotPersistence,
  TCheckpoints extends SandboxCheckpointStore,
>(
  input: CreateSandboxSnapshotsInput<TPersistence, TCheckpoints>,
) => SandboxSnapshots<TPersistence, TCheckpoints>
