/**
 * Releases an app can pin (README "Releases you can pin"): the adapter checks
 * the installed extension's version at its first call and refuses one that
 * does not fit, saying which versions fit and how to upgrade. Cases VR1-VR4.
 */
import { readFileSync } from 'node:fs'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  ADAPTER_VERSION,
  compatibleRange,
  isCompatible,
  postgresPersistence,
  SandboxPersistSetupError,
} from '../src/index.js'
import { makePool, rejection } from './helpers.js'

const pool = makePool()
const OLD_DB = 'sandbox_persist_oldext_test'

beforeAll(async () => {
  await pool.query(`DROP DATABASE IF EXISTS ${OLD_DB} WITH (FORCE)`)
  await pool.query(`CREATE DATABASE ${OLD_DB}`)
  const old = new pg.Client({ database: OLD_DB })
  await old.connect()
  await old.query(`CREATE EXTENSION sandbox_persist VERSION '0.3.0'`)
  await old.end()
})

afterAll(async () => {
  await pool.query(`DROP DATABASE IF EXISTS ${OLD_DB} WITH (FORCE)`)
})

describe('the version rule', () => {
  it('VR1 the adapter version is package.json\'s and the control file\'s release', () => {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
    expect(ADAPTER_VERSION).toBe(pkg.version)
    const control = readFileSync(new URL('../../../sandbox_persist.control', import.meta.url), 'utf8')
    const extension = /^default_version = '([^']+)'/m.exec(control)?.[1] ?? ''
    expect(isCompatible(extension)).toBe(true)
  })

  it('VR2 while the major is 0 the major.minor must be equal; from 1.0 the same major, minor at least ours', () => {
    expect(isCompatible('0.4.0', '0.4.0')).toBe(true)
    expect(isCompatible('0.4.7', '0.4.0')).toBe(true)
    expect(isCompatible('0.4.0', '0.4.3')).toBe(true)
    expect(isCompatible('0.3.0', '0.4.0')).toBe(false)
    expect(isCompatible('0.5.0', '0.4.0')).toBe(false)
    expect(isCompatible('1.0.0', '0.4.0')).toBe(false)
    expect(isCompatible('1.3.0', '1.2.5')).toBe(true)
    expect(isCompatible('1.1.9', '1.2.0')).toBe(false)
    expect(isCompatible('2.0.0', '1.2.0')).toBe(false)
    expect(isCompatible('0.4', '0.4.0')).toBe(false)
    expect(compatibleRange('0.4.2')).toBe('0.4.x')
    expect(compatibleRange('1.2.0')).toBe('1.x from 1.2.0')
  })
})

describe('the installed extension is checked at first use', () => {
  it('VR3 an older installed extension is refused: EXTENSION_VERSION_INCOMPATIBLE, the range and the upgrade', async () => {
    const elsewhere = makePool({ database: OLD_DB, max: 1 })
    const error = await rejection(postgresPersistence(elsewhere).stores.runs.get('r'))
    expect(error).toBeInstanceOf(SandboxPersistSetupError)
    expect(error.code).toBe('EXTENSION_VERSION_INCOMPATIBLE')
    expect(error.message).toContain('is 0.3.0')
    expect(error.message).toContain(`works with ${compatibleRange()}`)
    expect(error.hint).toMatch(/ALTER EXTENSION sandbox_persist UPDATE/)
    // Refused every time while it does not fit: nothing was called.
    const again = await rejection(postgresPersistence(elsewhere).stores.runs.get('r'))
    expect(again.code).toBe('EXTENSION_VERSION_INCOMPATIBLE')
  })

  it('VR4 after ALTER EXTENSION ... UPDATE a new pool works', async () => {
    const admin = new pg.Client({ database: OLD_DB })
    await admin.connect()
    await admin.query('ALTER EXTENSION sandbox_persist UPDATE')
    await admin.end()
    const upgraded = makePool({ database: OLD_DB, max: 1 })
    await expect(postgresPersistence(upgraded).stores.runs.get('absent')).resolves.toBeNull()
  })
})
