// bench/suites/_common.mjs: helpers shared by the suites' Node scripts
// (imported; the runner only runs bench/suites/*.sh). No dependencies.

/** The median of a list of numbers (NaN for an empty list). */
export function median(xs) {
  const s = [...xs].sort((a, b) => a - b)
  const n = s.length
  return n === 0 ? NaN : n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2
}

/** The p-quantile (0..1) of a list of numbers, nearest rank (NaN for an empty list). */
export function percentile(xs, p) {
  const s = [...xs].sort((a, b) => a - b)
  return s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.floor(p * s.length))]
}

/** A number with four significant digits, as the suites print figures. */
export const sig4 = (x) => Number(x.toPrecision(4))

/** Stream chunk i of the stream suites: a TEXT_MESSAGE_CONTENT of ~90 bytes of JSON. */
export const streamChunk = (i) => ({ type: 'TEXT_MESSAGE_CONTENT', messageId: 'm1', delta: 'tok' + i, timestamp: 1767225600000 + i })
