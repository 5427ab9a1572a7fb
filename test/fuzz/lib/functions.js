'use strict';
// Argument knowledge for every function of the extension: SQL type, JSON
// fields read, and where valid values come from. A function of the catalog
// that is missing here is still fuzzed, by its SQL argument types alone.

const { J } = require('./json');
const { S } = require('./shapes');

const STATUS = ['running', 'interrupted', 'completed', 'failed', 'aborted'];
const FILE_PREFIX = 'sandbox-files/sha256/';
const ART_PREFIX = 'sandbox-artifacts/sha256/';

// scalar argument kinds: what a valid value is
const A = {
  id: (pool) => ({ t: 'text', kind: 'id', pool }),
  key: (pool) => ({ t: 'text', kind: 'key', pool }),
  token: (pool) => ({ t: 'text', kind: 'uuid', pool }),
  ms: () => ({ t: 'bigint', kind: 'ms' }),
  big: (valid) => ({ t: 'bigint', kind: 'big', valid }),
  int: (valid) => ({ t: 'integer', kind: 'int', valid }),
  bytes: () => ({ t: 'bytea', kind: 'bytes' }),
  json: (s) => ({ t: 'json', kind: 'json', s }),
  role: () => ({ t: 'regrole', kind: 'role' }),
  text: (valid) => ({ t: 'text', kind: 'text', valid }),
};

const errorShape = S.obj({ message: { s: S.str(), req: true }, code: { s: S.str() } });
const usageShape = S.anyObj();

const fileEntry = S.obj({
  path: { s: S.path(), req: true },
  kind: { s: S.enumOf(['file']), req: true },
  blobKey: { s: S.blobHashKey(FILE_PREFIX), req: true },
  size: { s: S.int((c) => String(c.rng.int(100000))), req: true },
});
const cpArtifact = S.obj({
  artifactId: { s: S.id('artifact'), req: true },
  name: { s: S.str(), req: true },
  mimeType: { s: S.str(() => 'text/plain'), req: true },
  blobKey: { s: S.blobHashKey(ART_PREFIX), req: true },
  size: { s: S.int((c) => String(c.rng.int(1000))), req: true },
  createdAt: { s: S.num(), req: true },
});

// The checkpoint object of an append (header, files, artifacts).
function checkpointShape() {
  return S.obj({
    id: { s: S.id('checkpoint:new'), req: true },
    threadId: { s: S.id('cpthread'), req: true },
    parentCheckpointId: { s: S.id('checkpoint') },
    createdAt: { s: S.num((c) => String(c.now())), req: true },
    reason: { s: S.str(() => 'automatic'), req: true },
    label: { s: S.str() },
    sourceRunId: { s: S.str() },
    files: { s: S.arrOf(fileEntry, 0, 3), req: true },
    artifacts: { s: S.arrOf(cpArtifact, 0, 2), req: true },
  });
}
const writerShape = S.obj({
  threadId: { s: S.id('cpthread'), req: true },
  ownerToken: { s: S.uuid('wtoken'), req: true },
  fence: { s: S.int((c) => '1'), req: true },
});

// Valid writer/head of a seeded thread, so calls get past the writer check.
function writerTree(ctx, thread) {
  const w = ctx.state.writers[thread];
  return w ? J.obj(Object.entries(w).map(([k, v]) => [k, typeof v === 'number' ? J.num(v) : J.str(v)]))
    : writerShape.valid(ctx);
}

const F = {
  // sandbox instances
  instance_get: [A.id('instance')],
  instance_upsert: [A.json(S.obj({
    key: { s: S.id('instance'), req: true },
    provider: { s: S.str(), req: true },
    providerSandboxId: { s: S.str(), req: true },
    latestSnapshotId: { s: S.str() },
    threadId: { s: S.id('thread'), req: true },
    latestRunId: { s: S.id('run') },
    updatedAt: { s: S.int(), req: true },
  }))],
  instance_delete: [A.id('instance')],
  instance_gc_candidates: [A.big(['0', '1000', '86400000']), A.int(['100', '0', '1']), A.ms()],

  // runs
  run_create_or_resume: [A.json(S.obj({
    runId: { s: S.id('run:new'), req: true },
    threadId: { s: S.id('thread'), req: true },
    startedAt: { s: S.int(), req: true },
    status: { s: S.enumOf(STATUS) },
  }))],
  run_update: [A.id('run'), A.json(S.obj({
    status: { s: S.enumOf(STATUS) },
    finishedAt: { s: S.int() },
    error: { s: errorShape },
    usage: { s: usageShape },
    sandboxKey: { s: S.str() },
    detachedSince: { s: S.int() },
    cancelRequested: { s: S.bool() },
    driverEpoch: { s: S.int((c) => String(c.rng.int(50))) },
  }))],
  run_get: [A.id('run')],
  run_find_active_run: [A.id('thread')],
  run_list_by_thread: [A.id('thread')],
  run_list_reclaimable: [A.ms(), A.big(['1000', '0', '60000'])],
  run_claim: [A.id('run')],

  // messages
  message_load_thread: [A.id('thread')],
  message_save_thread: [A.id('thread'), A.json(S.arrOf(S.any(), 0, 4))],

  // interrupts
  interrupt_create: [A.json(S.obj({
    interruptId: { s: S.id('interrupt:new'), req: true },
    runId: { s: S.id('run'), req: true },
    threadId: { s: S.id('thread'), req: true },
    requestedAt: { s: S.int(), req: true },
    payload: { s: S.anyObj(), req: true },
    response: { s: S.any() },
  }))],
  interrupt_resolve: [A.id('interrupt'), A.json(S.any()), A.ms()],
  interrupt_cancel: [A.id('interrupt'), A.ms()],
  interrupt_commit_batch: [A.json(S.arrOf(S.obj({
    interruptId: { s: S.id('interrupt'), req: true },
    status: { s: S.enumOf(['resolved', 'cancelled']), req: true },
    response: { s: S.any() },
  }), 0, 3)), A.ms()],
  interrupt_get: [A.id('interrupt')],
  interrupt_list: [A.id('thread')],
  interrupt_list_pending: [A.id('thread')],
  interrupt_list_by_run: [A.id('run')],
  interrupt_list_pending_by_run: [A.id('run')],

  // metadata
  metadata_get: [A.id('ns'), A.id('metakey')],
  metadata_set: [A.id('ns'), A.id('metakey'), A.json(S.any())],
  metadata_delete: [A.id('ns'), A.id('metakey')],

  // generation runs
  generation_run_create_or_resume: [A.json(S.obj({
    runId: { s: S.id('genrun:new'), req: true },
    threadId: { s: S.id('thread'), req: true },
    activity: { s: S.str(), req: true },
    provider: { s: S.str(), req: true },
    model: { s: S.str(), req: true },
    startedAt: { s: S.int(), req: true },
    status: { s: S.enumOf(STATUS) },
  }))],
  generation_run_update: [A.id('genrun'), A.json(S.obj({
    status: { s: S.enumOf(STATUS) },
    finishedAt: { s: S.int() },
    error: { s: errorShape },
    result: { s: S.any() },
    artifacts: { s: S.arrOf(S.any(), 0, 2) },
    usage: { s: usageShape },
  })), A.json(S.arrOf(S.enumOf(['finishedAt', 'error', 'result', 'artifacts', 'usage']), 0, 2))],
  generation_run_get: [A.id('genrun')],
  generation_run_find_latest_for_thread: [A.id('thread')],

  // artifacts
  artifact_save: [A.json(S.obj({
    artifactId: { s: S.id('artifact'), req: true },
    runId: { s: S.id('run'), req: true },
    threadId: { s: S.id('thread'), req: true },
    blobKey: { s: S.key('blob') },
    name: { s: S.str(), req: true },
    mimeType: { s: S.str(() => 'text/plain'), req: true },
    size: { s: S.int((c) => String(c.rng.int(5000))), req: true },
    sourceUrl: { s: S.str() },
    createdAt: { s: S.num(), req: true },
  }))],
  artifact_get: [A.id('artifact')],
  artifact_list: [A.id('run')],
  artifact_list_for_thread: [A.id('thread')],
  artifact_delete: [A.id('artifact')],
  artifact_delete_for_run: [A.id('run')],

  // blobs
  blob_put: [A.key('blob'), A.bytes(), A.json(S.obj({
    contentType: { s: S.str(() => 'application/octet-stream') },
    customMetadata: { s: S.strMap() },
    expectedLength: { s: S.int((c) => '5') },
  })), A.ms()],
  blob_get: [A.key('blob'), A.big(['0', '1', '4096', '8191', '8192']), A.big(['0', '1', '100', '4096', '8192'])],
  blob_head: [A.key('blob'), A.ms()],
  blob_delete: [A.key('blob')],
  blob_list: [A.text(['fz', 'fz/', '', 'sandbox-files/']), A.key('blob'), A.int(['1', '2', '0', '100'])],
  blob_upload_begin: [A.key('blob'), A.json(S.obj({
    contentType: { s: S.str() },
    customMetadata: { s: S.strMap() },
    expectedLength: { s: S.int((c) => '5') },
  })), A.ms()],
  blob_upload_append: [A.token('upload'), A.big(['0', 'received']), A.bytes(), A.ms()],
  blob_upload_commit: [A.token('upload'), A.ms()],
  blob_upload_abort: [A.token('upload')],

  // locks
  lock_acquire: [A.key('lock'), A.big(['1000', '60000', '600000']), A.ms()],
  lock_renew: [A.key('lock'), A.token('ltoken'), A.big(['1000', '60000']), A.ms()],
  lock_renew_many: [A.json(S.arrOf(S.obj({
    key: { s: S.key('lock'), req: true },
    ownerToken: { s: S.uuid('ltoken'), req: true },
  }), 0, 3)), A.big(['1000', '60000']), A.ms()],
  lock_release: [A.key('lock'), A.token('ltoken')],
  lock_check: [A.key('lock'), A.token('ltoken'), A.big(['1', '2', '3']), A.ms()],
  lock_holder: [A.key('lock'), A.ms()],

  // event log
  // each chunk is an object
  event_log_append: [A.id('run'), A.json(S.arrOf(S.anyObj(), 1, 3)), A.json(S.obj({
    producerId: { s: S.uuid() },
    producerSeq: { s: S.int((c) => String(c.rng.int(10))) },
    fenceEpoch: { s: S.int((c) => String(c.rng.int(5))) },
    withDigests: { s: S.bool() },
  }))],
  event_log_read: [A.id('run'), A.big(['0', '1', '2', '5']), A.int(['1000', '1', '0'])],
  // a resume token's digest: 16 lowercase hex digits (0 is position 0's)
  event_log_read_verified: [A.id('run'), A.big(['0', '1', '2', '5']),
    A.text(['0000000000000000', '605fa742c71b8d95', 'ffffffffffffffff']), A.int(['1000', '1', '0'])],
  event_log_read_pieces: [A.id('run'), A.big(['0', '1', '2', '5']),
    A.text(['0000000000000000', '605fa742c71b8d95', 'ffffffffffffffff']), A.int(['1000', '1', '0'])],
  event_log_close: [A.id('run')],
  event_log_snapshot: [A.id('run')],

  // maintenance and administration
  maintain: [A.int(['1000', '10', '0']), A.ms()],
  attention_list: [],
  reaper_heartbeat: [A.id('replica'), A.json(S.any()), A.ms()],
  schedule_maintenance: [A.text(['* * * * *', '*/5 * * * *', 'bogus']), A.int(['1000', '-1'])],
  unschedule_maintenance: [],
  grant_app_role: [A.role()],
  _reset_for_tests: [],
  _reaper_ttl_ms: [],
  _watchdog_items: [A.ms(), A.big(['0', '60000']), A.big(['0', '60000']), A.big(['600000', '0'])],

  // checkpoints
  checkpoint_acquire_writer: [A.id('cpthread:new'), A.big(['120000', '1', '1000']), A.ms()],
  checkpoint_renew_writer: [A.json(writerShape), A.big(['120000', '1000']), A.ms()],
  checkpoint_release_writer: [A.json(writerShape)],
  checkpoint_append: [A.json(S.obj({
    checkpoint: { s: checkpointShape(), req: true },
    expectedHeadId: { s: S.id('checkpoint'), req: true },
    writer: { s: writerShape, req: true },
  })), A.json(S.arrOf(S.any(), 0, 3)), A.ms()],
  checkpoint_delete_head: [A.json(S.obj({
    threadId: { s: S.id('cpthread'), req: true },
    checkpointId: { s: S.id('checkpoint'), req: true },
    writer: { s: writerShape, req: true },
  })), A.ms()],
  checkpoint_get: [A.id('checkpoint')],
  checkpoint_get_parts: [A.id('checkpoint')],
  checkpoint_list: [A.id('cpthread')],
  checkpoint_get_head: [A.id('cpthread')],
  checkpoint_list_blob_references: [],
  checkpoint_fork_from_checkpoint: [A.json(S.obj({
    sourceThreadId: { s: S.id('cpthread'), req: true },
    sourceCheckpointId: { s: S.id('checkpoint'), req: true },
    destinationThreadId: { s: S.id('cpthread:new'), req: true },
    destinationCheckpointId: { s: S.id('checkpoint:new'), req: true },
    createdAt: { s: S.num((c) => String(c.now())), req: true },
    writer: { s: writerShape, req: true },
  })), A.ms()],
};

// Functions whose structural errors are SP007/SP008 instead of 22xxx.
const CHECKPOINT_FNS = new Set(['checkpoint_append', 'checkpoint_delete_head', 'checkpoint_fork_from_checkpoint',
  'checkpoint_renew_writer', 'checkpoint_release_writer', 'checkpoint_acquire_writer', 'checkpoint_get',
  'checkpoint_get_parts', 'checkpoint_list', 'checkpoint_get_head']);

// Make a coherent valid JSON argument for state-dependent inputs.
function validJson(ctx, fn, argIndex, shape) {
  const r = ctx.rng;
  const th = ctx.state.cpThread;
  if (fn === 'checkpoint_append' && argIndex === 0) {
    const head = ctx.state.heads[th];
    const id = ctx.fresh('cp');
    const cp = shape.fields.checkpoint.s.valid(ctx);
    const entries = cp.o.filter(([k]) => !['id', 'threadId', 'parentCheckpointId'].includes(k));
    entries.unshift(['id', J.str(id)], ['threadId', J.str(th)], ['parentCheckpointId', head ? J.str(head) : J.nul()]);
    // file paths must be unique and not nested: number them
    const files = entries.find(([k]) => k === 'files');
    if (files) files[1] = J.arr(files[1].a.map((f, i) => J.obj(f.o.map(([k, v]) => [k, k === 'path' ? J.str(`f${i}/${id}.txt`) : v]))));
    return J.obj([['checkpoint', J.obj(entries)], ['expectedHeadId', head ? J.str(head) : J.nul()],
      ['writer', writerTree(ctx, th)]]);
  }
  if (fn === 'checkpoint_delete_head' && argIndex === 0) {
    const head = ctx.state.heads[th];
    return J.obj([['threadId', J.str(th)], ['checkpointId', J.str(head || 'none')], ['writer', writerTree(ctx, th)]]);
  }
  if ((fn === 'checkpoint_renew_writer' || fn === 'checkpoint_release_writer') && argIndex === 0) {
    return writerTree(ctx, r.pick(Object.keys(ctx.state.writers).concat([th])));
  }
  if (fn === 'checkpoint_fork_from_checkpoint' && argIndex === 0) {
    // the source thread is never the target of a valid delete_head
    const d = ctx.state.forkDests[0] || { thread: ctx.fresh('fork-thread'), writer: null };
    const src = ctx.state.cpSource;
    const w = d.writer ? J.obj(Object.entries(d.writer).map(([k, v]) => [k, typeof v === 'number' ? J.num(v) : J.str(v)])) : writerTree(ctx, th);
    return J.obj([['sourceThreadId', J.str(src.thread)], ['sourceCheckpointId', J.str(src.id)],
      ['destinationThreadId', J.str(d.thread)], ['destinationCheckpointId', J.str(ctx.fresh('fork-cp'))],
      ['createdAt', J.num(String(ctx.now()))], ['writer', w]]);
  }
  if (fn === 'interrupt_commit_batch' && argIndex === 0 && ctx.state.pending.length) {
    // distinct pending ids
    const ids = ctx.state.pending.slice(0, r.range(1, ctx.state.pending.length));
    return J.arr(ids.map((id) => (r.chance(0.5)
      ? J.obj([['interruptId', J.str(id)], ['status', J.str('cancelled')]])
      : J.obj([['interruptId', J.str(id)], ['status', J.str('resolved')], ['response', J.obj([['ok', J.bool(true)]])]]))));
  }
  if (fn === 'event_log_append' && argIndex === 2) {
    // producerId and producerSeq go together
    const e = [];
    if (r.chance(0.5)) e.push(['producerId', J.str(r.uuid())], ['producerSeq', J.num(String(r.int(10)))]);
    if (r.chance(0.3)) e.push(['fenceEpoch', J.num(String(r.int(5)))]);
    if (r.chance(0.3)) e.push(['withDigests', J.bool(r.chance(0.5))]);
    return J.obj(e);
  }
  return shape.valid(ctx);
}

module.exports = { F, A, CHECKPOINT_FNS, validJson, STATUS };
