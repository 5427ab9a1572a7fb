/**
 * The maintenance helper's health report (docs/contract/maintenance.md §7,
 * issue 20 item 2): `postgresMaintenance(pool).health()` answers whether the
 * scheduled maintenance runs, and reports a failing or overdue one to the
 * logger and the diagnostics channel as `maintenance.not_running`.
 *
 * The job is scheduled for 1 January only, so pg_cron's launcher (running
 * in the test database) never runs it during the test; its failing runs are
 * rows inserted into cron.job_run_details, and "overdue" is a scheduling
 * time set years back, so nothing waits on the clock.
 */
import diagnostics from 'node:diagnostics_channel'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  DIAGNOSTICS_CHANNEL,
  postgresMaintenance,
  type MaintenanceHealth,
  type SandboxPersistLogger,
  type SandboxPersistReport,
} from '../src/index.js'
import { makePool, reset, rows } from './helpers.js'

const pool = makePool()

function recordingLogger(): SandboxPersistLogger & { reports: SandboxPersistReport[] } {
  const reports: SandboxPersistReport[] = []
  return { reports, warn: (_message, report) => void reports.push(report) }
}

beforeEach(async () => {
  await reset(pool)
  await pool.query('SELECT sandbox_persist.unschedule_maintenance()')
})

afterEach(async () => {
  await pool.query('SELECT sandbox_persist.unschedule_maintenance()')
})

describe('maintenance health', () => {
  it('M26 a failing pg_cron run is reported by health(), the logger, the diagnostics channel and attention()', async () => {
    const logger = recordingLogger()
    const published: SandboxPersistReport[] = []
    const onMessage = (message: unknown) => void published.push(message as SandboxPersistReport)
    diagnostics.subscribe(DIAGNOSTICS_CHANNEL, onMessage)
    const maintenance = postgresMaintenance(pool, { logger })
    try {
      const quiet = await maintenance.health()
      expect(quiet).toMatchObject({ ok: true, scheduled: false, overdue: false, failing: false })
      expect(logger.reports).toEqual([])

      const [{ job }] = (await rows<{ job: string }>(pool, "SELECT sandbox_persist.schedule_maintenance('0 0 1 1 *') AS job")) as [
        { job: string },
      ]
      const scheduled = await maintenance.health()
      expect(scheduled).toMatchObject({ ok: true, scheduled: true, jobId: Number(job), schedule: '0 0 1 1 *', boundFrom: 'schedule' })
      expect(logger.reports).toEqual([])

      // What pg_cron writes when it cannot connect (pg_hba.conf asks a password).
      await pool.query(
        `INSERT INTO cron.job_run_details (jobid, job_pid, database, username, command, status, return_message, start_time, end_time)
         SELECT jobid, 0, database, username, command, 'failed', 'connection failed', clock_timestamp(), clock_timestamp()
           FROM cron.job WHERE jobid = $1`,
        [job],
      )
      const health: MaintenanceHealth = await maintenance.health()
      expect(health).toMatchObject({ ok: false, failing: true, lastFailureMessage: 'connection failed', failuresSinceSuccess: 1 })
      expect(health.problem).toMatch(/connection failed/)
      const reported = logger.reports.filter((r) => r.event === 'maintenance.not_running')
      expect(reported).toHaveLength(1)
      expect(reported[0]!.message).toMatch(/connection failed/)
      expect(reported[0]!.health).toEqual(health)
      expect(published).toContainEqual(expect.objectContaining({ event: 'maintenance.not_running' }))
      const items = await maintenance.attention()
      expect(items).toContainEqual(
        expect.objectContaining({ kind: 'maintenance_failing', detail: expect.objectContaining({ lastFailureMessage: 'connection failed' }) }),
      )
    } finally {
      diagnostics.unsubscribe(DIAGNOSTICS_CHANNEL, onMessage)
      await maintenance.close()
    }
  })

  it('M27 maintenance that has not completed within the bound is overdue', async () => {
    const logger = recordingLogger()
    const maintenance = postgresMaintenance(pool, { logger })
    try {
      await pool.query("SELECT sandbox_persist.schedule_maintenance('0 0 1 1 *')")
      // Scheduled four years ago and never run: past twice the yearly gap.
      await pool.query(
        `UPDATE sandbox_persist.maintenance_schedule
            SET scheduled_at = (extract(epoch FROM clock_timestamp() - interval '4 years') * 1000)::bigint`,
      )
      const health = await maintenance.health()
      expect(health).toMatchObject({ ok: false, overdue: true, failing: false, scheduled: true })
      expect(health.boundMs).toBeGreaterThanOrEqual(2 * 365 * 86_400_000)
      expect(health.lastRunAt).toBeUndefined()
      expect(logger.reports.map((r) => r.event)).toEqual(['maintenance.not_running'])
      expect(await maintenance.attention()).toContainEqual(expect.objectContaining({ kind: 'maintenance_overdue' }))
      // One completed maintain() ends it.
      await maintenance.maintain()
      expect(await maintenance.health()).toMatchObject({ ok: true, overdue: false })
      expect(logger.reports).toHaveLength(1)
    } finally {
      await maintenance.close()
    }
  })
})
