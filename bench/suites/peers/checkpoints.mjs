// bench/suites/peers/checkpoints.mjs: our checkpoint store through the Node
// adapter against LangGraph's PostgreSQL checkpointer
// (@langchain/langgraph-checkpoint-postgres), in the same cluster, one turn at
// a time (called by bench/suites/peers.sh, which installs the packages and
// prints nothing itself; this script prints the suite's lines).
//
// A thread grows by two ~1 KB messages a turn (user, assistant) and takes one
// checkpoint a turn. Ours: postgresCheckpoints(...).append of the whole
// conversation, once per adapter mode (deltaAppends 'identity', 'verified'
// and 'off', each on its own thread). LangGraph as a graph with a `messages`
// channel writes it: putWrites of the turn's two messages against the current
// checkpoint, then put of the new checkpoint whose channel_values hold the
// full message list (LangChain HumanMessage/AIMessage objects). The four
// systems take their turn in rotating order, so they share the load, and
// each timed call starts after a full garbage collection (node --expose-gc),
// so no system pays for the garbage another one left in this process.
//
// At each K in KS: append ms (median of the last turns up to K), latest
// checkpoint load ms (median of LOADS reads: ours get(head), LangGraph
// getTuple), stored bytes (pg_total_relation_size of each system's tables,
// indexes and TOAST included; our identity thread and LangGraph are alone in
// database DB_A, the other two modes run in DB_B).
//
// Environment: PGHOST/PGPORT/PGUSER, DB_A, DB_B, KS (e.g. "10 100 1000"),
// BENCH_SYNC, ADAPTER (path of clients/node/dist/index.js).
import pg from 'pg'
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres'
import { emptyCheckpoint, uuid6 } from '@langchain/langgraph-checkpoint'
import { AIMessage, HumanMessage } from '@langchain/core/messages'
import { median } from '../_common.mjs'

const { postgresCheckpoints } = await import(process.env.ADAPTER)
const KS = (process.env.KS ?? '10 100 1000').trim().split(/\s+/).map(Number)
const MAXK = Math.max(...KS)
const WINDOW = 15
const LOADS = 7
const sync = process.env.BENCH_SYNC ?? 'off'
const options = `-c synchronous_commit=${sync} -c statement_timeout=600s`
const poolA = new pg.Pool({ database: process.env.DB_A, max: 2, options })
const poolB = new pg.Pool({ database: process.env.DB_B, max: 2, options })
const log = (...a) => console.error('peers:', ...a)
const out = (...f) => console.log(f.join('\t'))
const f3 = (x) => (Math.round(x * 1000) / 1000).toString()
const ratio = (a, b) => (b > 0 ? (Math.round((a / b) * 1000) / 1000).toString() : 'nan')

// ~1 KB of text per message, distinct per turn and role
const WORDS = 'the of and to in is that for it as with was on be at by this had not are but from or have an they which one you were all we her she there would their will when who him been has more if no out so said what up its about into than them can only other time new some could these two may first then do any like my now over such our man me even most made after also did many off before must well back through years much where your way down should because each just those people how too little state good very make world still own see men work long get here between both life being under never day same another know while last might us great old year come since against go came right used take three'.split(' ')
let seed = 7
const word = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return WORDS[seed % WORDS.length] }
function text(turn, role) {
  let s = `${role} turn ${turn}:`
  while (s.length < 1000) s += ' ' + word()
  return s
}

// ----------------------------------------------------------------- ours
const MODES = ['identity', 'verified', 'off']
const ours = {}
for (const mode of MODES) {
  const pool = mode === 'identity' ? poolA : poolB
  const store = postgresCheckpoints(pool, { deltaAppends: mode, leaseDurationMs: 3_600_000, renewAfterMs: 1_000_000 })
  const threadId = `ours-${mode}`
  ours[mode] = { pool, store, threadId, writer: await store.acquireWriter(threadId), head: null, conversation: [], times: [] }
}
async function oursTurn(o, turn, user, assistant) {
  // a new array each turn, as an app's state update makes it; earlier message objects are kept
  o.conversation = [...o.conversation, user, assistant]
  const t0 = performance.now()
  const r = await o.store.append({
    checkpoint: {
      id: `${o.threadId}-${turn}`, threadId: o.threadId, parentCheckpointId: o.head, createdAt: Date.now(),
      reason: 'automatic', files: [], conversation: o.conversation, artifacts: [],
    },
    expectedHeadId: o.head,
    writer: o.writer,
  })
  o.times.push(performance.now() - t0)
  o.head = r.headId
}

// ------------------------------------------------------------ LangGraph
const saver = new PostgresSaver(poolA, undefined, { schema: 'langgraph' })
await saver.setup()
const lg = { threadId: 'langgraph', messages: [], version: undefined, config: null, put: [], writes: [] }
{
  const c = emptyCheckpoint()
  lg.version = saver.getNextVersion(undefined)
  c.channel_values = { messages: [] }
  c.channel_versions = { messages: lg.version }
  lg.config = await saver.put({ configurable: { thread_id: lg.threadId, checkpoint_ns: '' } }, c,
    { source: 'input', step: -1, parents: {} }, { messages: lg.version })
}
async function langgraphTurn(turn, user, assistant) {
  const fresh = [new HumanMessage({ content: user.content, id: `u${turn}` }), new AIMessage({ content: assistant.content, id: `a${turn}` })]
  const t0 = performance.now()
  await saver.putWrites(lg.config, [['messages', fresh]], `task-${turn}`)
  const t1 = performance.now()
  lg.messages = [...lg.messages, ...fresh]
  const previous = lg.version
  lg.version = saver.getNextVersion(previous)
  const c = {
    v: 4, id: uuid6(turn), ts: new Date().toISOString(),
    channel_values: { messages: lg.messages },
    channel_versions: { messages: lg.version },
    versions_seen: { agent: { messages: previous } },
  }
  lg.config = await saver.put(lg.config, c, { source: 'loop', step: turn, parents: {} }, { messages: lg.version })
  const t2 = performance.now()
  lg.writes.push(t1 - t0)
  lg.put.push(t2 - t1)
}

// ------------------------------------------------------------ the turns
const sizeA = async (sql) => Number((await poolA.query(sql)).rows[0].n)
const OURS_SIZE = `SELECT sum(pg_total_relation_size(c.oid)) AS n FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
  WHERE s.nspname = 'sandbox_persist' AND c.relkind = 'r'
    AND c.relname IN ('checkpoints', 'checkpoint_threads', 'conversation_blocks', 'checkpoint_blob_refs')`
const LG_SIZE = `SELECT sum(pg_total_relation_size(c.oid)) AS n FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
  WHERE s.nspname = 'langgraph' AND c.relkind = 'r'`
const oursBase = await sizeA(OURS_SIZE)
const lgBase = await sizeA(LG_SIZE)
const results = []
const started = performance.now()
for (let turn = 1; turn <= MAXK; turn++) {
  const user = { role: 'user', content: text(turn, 'user') }
  const assistant = { role: 'assistant', content: text(turn, 'assistant') }
  const systems = [...MODES.map((m) => () => oursTurn(ours[m], turn, user, assistant)), () => langgraphTurn(turn, user, assistant)]
  for (let j = 0; j < systems.length; j++) {
    globalThis.gc?.()
    await systems[(turn + j) % systems.length]()
  }
  if (!KS.includes(turn)) continue
  const w = Math.min(WINDOW, Math.max(5, Math.floor(turn / 2)), turn)
  const last = (xs) => xs.slice(-w)
  const r = { K: turn, transcript: Buffer.byteLength(JSON.stringify(ours.identity.conversation)) }
  for (const m of MODES) r[`append_${m}`] = median(last(ours[m].times))
  r.lg_put = median(last(lg.put))
  r.lg_writes_put = median(last(lg.put).map((p, i) => p + last(lg.writes)[i]))
  // the latest checkpoint, read back whole, both ways interleaved
  const lo = [], ll = []
  for (let i = 0; i < LOADS; i++) {
    let t0 = performance.now()
    const got = await ours.identity.store.get(ours.identity.head)
    lo.push(performance.now() - t0)
    if (i === 0 && got.conversation.length !== 2 * turn) throw new Error(`ours: ${got.conversation.length} messages at K = ${turn}`)
    t0 = performance.now()
    const tuple = await saver.getTuple({ configurable: { thread_id: lg.threadId, checkpoint_ns: '' } })
    ll.push(performance.now() - t0)
    if (i === 0 && tuple.checkpoint.channel_values.messages.length !== 2 * turn) throw new Error(`LangGraph: wrong message count at K = ${turn}`)
  }
  r.load_ours = median(lo)
  r.load_lg = median(ll)
  // every mode stored the same conversation
  const heads = await Promise.all(MODES.map((m) => ours[m].store.get(ours[m].head)))
  for (const h of heads) {
    if (JSON.stringify(h.conversation) !== JSON.stringify(ours.identity.conversation)) throw new Error(`ours: a mode stored another conversation at K = ${turn}`)
  }
  r.stored_ours = (await sizeA(OURS_SIZE)) - oursBase
  r.stored_lg = (await sizeA(LG_SIZE)) - lgBase
  results.push(r)
  log(`K=${turn} after ${Math.round((performance.now() - started) / 1000)} s: ${JSON.stringify(r)}`)
}

// ------------------------------------------------------------- the lines
const S = 'peers: checkpoints against LangGraph PostgresSaver, synchronous_commit on'
const LG = 'LangGraph put'
const LGW = 'LangGraph putWrites + put'
const label = { identity: "deltaAppends 'identity'", verified: "deltaAppends 'verified'", off: "deltaAppends 'off' (whole)" }
for (const r of results) {
  for (const m of MODES) {
    out('row', S, `append, K = ${r.K}, ${label[m]}`, 'ms/op', f3(r[`append_${m}`]), LG, f3(r.lg_put), ratio(r[`append_${m}`], r.lg_put), 'lower')
    out('row', S, `append, K = ${r.K}, ${label[m]}`, 'ms/op', f3(r[`append_${m}`]), LGW, f3(r.lg_writes_put), ratio(r[`append_${m}`], r.lg_writes_put), 'lower')
  }
  out('row', S, `load the latest checkpoint, K = ${r.K}`, 'ms/op', f3(r.load_ours), 'LangGraph getTuple', f3(r.load_lg), ratio(r.load_ours, r.load_lg), 'lower')
  out('row', S, `stored / transcript, K = ${r.K}`, 'ratio', ratio(r.stored_ours, r.transcript), 'LangGraph', ratio(r.stored_lg, r.transcript), ratio(r.stored_ours, r.stored_lg), 'lower')
  out('fact', `transcript bytes, K = ${r.K}`, String(r.transcript))
  out('fact', `stored bytes ours / LangGraph, K = ${r.K}`, `${r.stored_ours} / ${r.stored_lg}`)
}
const first = results[0]
const lastR = results[results.length - 1]
for (const m of MODES) {
  out('row', S, `append at K = ${lastR.K} / at K = ${first.K}, ${label[m]}`, 'growth', ratio(lastR[`append_${m}`], first[`append_${m}`]),
    LG, ratio(lastR.lg_put, first.lg_put), ratio(ratio(lastR[`append_${m}`], first[`append_${m}`]), ratio(lastR.lg_put, first.lg_put)), 'lower')
}
out('plot', 'peers_append', 'Checkpoint append against turns K, ours (Node adapter) and LangGraph, sync on', 'turns K', 'ms per append (median)', '1')
out('plot', 'peers_storage', 'Stored bytes against turns K (two ~1 KB messages, one checkpoint a turn)', 'turns K', 'MB stored (tables, indexes, TOAST)', '1')
for (const r of results) {
  for (const m of MODES) out('series', 'peers_append', `ours, ${label[m]}`, String(r.K), f3(r[`append_${m}`]))
  out('series', 'peers_append', LG, String(r.K), f3(r.lg_put))
  out('series', 'peers_append', LGW, String(r.K), f3(r.lg_writes_put))
  out('series', 'peers_storage', 'ours', String(r.K), f3(r.stored_ours / 1e6))
  out('series', 'peers_storage', 'LangGraph', String(r.K), f3(r.stored_lg / 1e6))
  out('series', 'peers_storage', 'the transcript itself', String(r.K), f3(r.transcript / 1e6))
}
out('fact', 'peers versions', `@langchain/langgraph-checkpoint-postgres ${process.env.LG_VERSION ?? '?'}, synchronous_commit ${sync}`)
await poolA.end()
await poolB.end()
