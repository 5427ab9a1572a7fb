/**
 * Which installed extension this adapter works with, checked once per pool at
 * its first call (README "Releases you can pin"). The rule: the adapter's
 * major.minor is the extension release it was made for, its patch level moves
 * on its own. While the major is 0 the installed extension's major.minor must
 * be equal; from 1.0 on, the same major and at least the adapter's minor
 * (a minor release only adds functions).
 */
import { SandboxPersistSetupError } from './errors.js'
import type { Queryable } from './queryable.js'

/** This package's version; equals package.json's (a test holds them together). */
export const ADAPTER_VERSION = '0.5.0'

/** The npm name, for the hint of an extension newer than this adapter. */
const PACKAGE_NAME = '@sandbox-persist/tanstack-ai'

type Version = { major: number; minor: number; patch: number }

/** major.minor.patch of a version string, or null when it is not one. */
function parseVersion(text: string): Version | null {
  const m = /^(\d+)\.(\d+)\.(\d+)$/.exec(text)
  return m === null ? null : { major: Number(m[1]), minor: Number(m[2]), patch: Number(m[3]) }
}

/** The installed versions this adapter accepts, in words. */
export function compatibleRange(adapter: string = ADAPTER_VERSION): string {
  const a = parseVersion(adapter)
  if (a === null) throw new TypeError(`not a version: ${adapter}`)
  return a.major === 0
    ? `${a.major}.${a.minor}.x`
    : `${a.major}.x from ${a.major}.${a.minor}.0`
}

/** Whether an installed extension version fits an adapter version (the rule above). */
export function isCompatible(installed: string, adapter: string = ADAPTER_VERSION): boolean {
  const i = parseVersion(installed)
  const a = parseVersion(adapter)
  if (i === null || a === null) return false
  if (a.major === 0) return i.major === 0 && i.minor === a.minor
  return i.major === a.major && i.minor >= a.minor
}

/** The error for an installed version that does not fit, with how to fix it. */
export function incompatibleVersionError(installed: string, adapter: string = ADAPTER_VERSION): SandboxPersistSetupError {
  const i = parseVersion(installed)
  const a = parseVersion(adapter)
  const older = i !== null && a !== null && (i.major < a.major || (i.major === a.major && i.minor < a.minor))
  const target = `${a?.major}.${a?.minor}.0`
  const hint = older
    ? `upgrade the extension: install the server package of sandbox_persist ${target} or later ${a?.major}.${a?.minor}.x ` +
      `(postgresql-NN-sandbox-persist), then run ALTER EXTENSION sandbox_persist UPDATE; in this database ` +
      `(or pin ${PACKAGE_NAME} to the release matching ${installed}).`
    : `install the adapter release made for it: ${PACKAGE_NAME}@${i === null ? installed : `~${i.major}.${i.minor}.0`}.`
  return new SandboxPersistSetupError(
    'EXTENSION_VERSION_INCOMPATIBLE',
    `The installed sandbox_persist extension is ${installed}; ${PACKAGE_NAME} ${adapter} works with ${compatibleRange(adapter)}.`,
    hint,
  )
}

const checked = new WeakMap<object, Promise<void>>()

/**
 * Check the installed extension's version once per pool or client (anything
 * with `connect`, as node-postgres' Pool and Client have), asking through
 * `via`: the connection the first call took, so the check fails over like the
 * call itself. A bare `{ query }`
 * object is the caller's own statement stream (a wrapper, a transaction's
 * client bound by hand) and gets no statement it did not ask for. No row (not
 * installed, or a PL/Proxy router, which has the functions but not the
 * extension) passes: the calls themselves report a missing extension. A failed
 * check is not remembered, so the next call asks again.
 */
export function ensureCompatibleExtension(db: Queryable, via: { query(text: string): Promise<unknown> }): Promise<void> {
  if (typeof (db as { connect?: unknown }).connect !== 'function') return Promise.resolve()
  let pending = checked.get(db)
  if (pending === undefined) {
    pending = (async () => {
      const result = (await via.query(`SELECT extversion AS r FROM pg_catalog.pg_extension WHERE extname = 'sandbox_persist'`)) as { rows: Array<{ r: string }> }
      const row = result.rows[0]
      if (row !== undefined && !isCompatible(row.r)) throw incompatibleVersionError(row.r)
    })()
    checked.set(db, pending)
    pending.catch(() => checked.delete(db))
  }
  return pending
}
