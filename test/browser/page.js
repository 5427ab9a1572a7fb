// The page of the browser suite (test/browser/run.sh), bundled with esbuild:
// the official client reads a live JSON stream and keeps what it received,
// with the offset after it, in localStorage, written together per batch. A
// reload resumes from that offset; the driver compares the kept messages with
// the written ones.
import { stream } from '@durable-streams/client'

const params = new URLSearchParams(location.search)
const url = params.get('stream')
const live = params.get('live')
const key = `browser-suite:${url}`

const state = JSON.parse(localStorage.getItem(key) ?? 'null') ?? { items: [], offset: '-1', loads: 0, done: false }
state.loads += 1
localStorage.setItem(key, JSON.stringify(state))
window.__suite = { status: 'starting', key }

if (state.done) {
  window.__suite.status = 'done'
} else {
  const res = await stream({ url, offset: state.offset, live, warnOnHttp: false })
  res.subscribeJson((batch) => {
    state.items.push(...batch.items)
    state.offset = batch.offset
    if (batch.streamClosed) state.done = true
    localStorage.setItem(key, JSON.stringify(state))
    if (state.done) window.__suite.status = 'done'
  })
  window.__suite.status = 'live'
}
