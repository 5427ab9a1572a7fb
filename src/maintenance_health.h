/*
 * maintenance_health.h
 *
 * The maintenance health check (maintenance_health.c) as seen by
 * maintenance.c, which lists its findings among the attention items.
 * No locking.
 */
#ifndef SANDBOX_PERSIST_MAINTENANCE_HEALTH_H
#define SANDBOX_PERSIST_MAINTENANCE_HEALTH_H

#include "postgres.h"

#include "lib/stringinfo.h"

/* What MaintHealthGather found (docs/contract/maintenance.md §7). */
typedef struct MaintHealth
{
	int64		now;
	bool		scheduled;		/* recorded by schedule_maintenance, or a visible job */
	bool		recorded;		/* schedule_maintenance recorded it */
	bool		has_job_id;
	int64		job_id;
	char	   *schedule;
	bool		has_scheduled_at;
	int64		scheduled_at;
	bool		has_last_run;	/* maintain() recorded a run */
	int64		last_run_at;
	bool		has_bound;
	int64		bound_ms;
	const char *bound_from;		/* "setting" or "schedule" */
	bool		has_since;		/* when maintain() is owed a run from */
	int64		since;
	bool		cron_visible;	/* pg_cron's view of the job could be read */
	const char *cron_note;		/* why it could not, or what is odd about it */
	bool		job_found;
	bool		job_active;
	char	   *last_status;	/* of pg_cron's latest finished run */
	bool		has_last_cron;
	int64		last_cron_at;
	char	   *last_failure_message;
	bool		has_last_failure;
	int64		last_failure_at;
	int64		failures;		/* failed runs since pg_cron's last success */
	bool		has_first_failure;
	int64		first_failure_at;
	bool		overdue;
	bool		failing;
} MaintHealth;

extern bool MaintHealthAvailable(void);
extern void MaintHealthGather(MaintHealth *h, int64 now);
extern void MaintHealthAppendReport(StringInfo buf, const MaintHealth *h);
extern int	MaintHealthAppendItems(StringInfo buf, const MaintHealth *h, bool *any);

#endif							/* SANDBOX_PERSIST_MAINTENANCE_HEALTH_H */
