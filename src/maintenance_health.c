/*
 * maintenance_health.c
 *
 * Whether scheduled maintenance really runs (docs/contract/maintenance.md §7).
 * maintain() records its own last run, so a job that never connects (pg_hba,
 * cron.host) or never starts (pg_cron not preloaded, another
 * cron.database_name) leaves nothing behind; this module judges the
 * schedule that schedule_maintenance recorded against that record and, when
 * pg_cron is installed here, against pg_cron's own run details, and reports
 * it through maintenance_health(), attention_list() and the overview view.
 *
 * Two findings: "failing" when pg_cron's latest finished run of the job failed
 * and maintain() has not completed since it started; "overdue" when maintenance
 * is scheduled (or expected by sandbox_persist.maintenance_overdue_after) and
 * maintain() has not completed within the bound: the setting, else twice the
 * longest gap between two runs of the cron schedule plus one minute.
 *
 * Locking: reads only, no row locks. pg_cron's tables are read as the calling
 * role (the session's current_user outside SECURITY DEFINER), so the
 * row-level security pg_cron puts on them applies as it would to a direct
 * query; the caller learns nothing pg_cron would not show it.
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/lsyscache.h"

#include "sandbox_persist.h"
#include "maintenance_health.h"

PG_FUNCTION_INFO_V1(maintenance_health);

/* Slack added to twice the schedule's longest gap: a run's own duration. */
#define HEALTH_SLACK_MS (60 * 1000)
/* Days of calendar searched for a schedule's longest gap (four years and a day). */
#define HEALTH_HORIZON_DAYS (4 * 366 + 1)
/* pg_cron run details read per call, newest first. */
#define HEALTH_RUNS_READ 1000

static SpQuery health_schedule = {
	"SELECT job_id, schedule, username, scheduled_at"
	" FROM sandbox_persist.maintenance_schedule WHERE id = 1",
	0, {InvalidOid}
};

static SpQuery health_last_run = {
	"SELECT last_run_at FROM sandbox_persist.maintenance_state WHERE id = 1",
	0, {InvalidOid}
};

static SpQuery health_job_by_id = {
	"SELECT jobid AS job_id, schedule, active, username::text AS username"
	" FROM cron.job WHERE jobid = $1",
	1, {INT8OID}
};

static SpQuery health_job_by_name = {
	"SELECT jobid AS job_id, schedule, active, username::text AS username FROM cron.job"
	" WHERE jobname = " SP_SQL_Q(SP_CRON_JOB_NAME) " AND database = pg_catalog.current_database()"
	" ORDER BY jobid LIMIT 1",
	0, {InvalidOid}
};

/*
 * The job's newest finished runs: the latest, the latest failure, failures
 * since a success. A run that could not connect has no start_time, only an
 * end_time: its time is whichever is set.
 */
static SpQuery health_runs = {
	"WITH r AS (SELECT runid, status, return_message,"
	"                  (extract(epoch FROM coalesce(start_time, end_time)) * 1000)::bigint AS started"
	"             FROM cron.job_run_details"
	"            WHERE jobid = $1 AND status IN (" SP_SQL_Q(SP_CRON_STATUS_SUCCEEDED) ", "
	SP_SQL_Q(SP_CRON_STATUS_FAILED) ")"
	"            ORDER BY runid DESC LIMIT " SP_STRINGIFY(HEALTH_RUNS_READ) "),"
	" s AS (SELECT coalesce(max(runid), 0) AS ok FROM r WHERE status = "
	SP_SQL_Q(SP_CRON_STATUS_SUCCEEDED) "),"
	" f AS (SELECT r.* FROM r, s WHERE r.status = " SP_SQL_Q(SP_CRON_STATUS_FAILED)
	"        AND r.runid > s.ok)"
	" SELECT (SELECT status FROM r ORDER BY runid DESC LIMIT 1) AS last_status,"
	"        (SELECT started FROM r ORDER BY runid DESC LIMIT 1) AS last_started,"
	"        (SELECT return_message FROM r WHERE status = " SP_SQL_Q(SP_CRON_STATUS_FAILED)
	"          ORDER BY runid DESC LIMIT 1) AS last_failure_message,"
	"        (SELECT started FROM r WHERE status = " SP_SQL_Q(SP_CRON_STATUS_FAILED)
	"          ORDER BY runid DESC LIMIT 1) AS last_failure_at,"
	"        (SELECT count(*) FROM f) AS failures,"
	"        (SELECT min(started) FROM f) AS first_failure",
	1, {INT8OID}
};

/* ---- the longest gap of a cron schedule ---- */

/* One parsed five-field schedule: a bit per allowed value. */
typedef struct CronSpec
{
	uint64		minutes;		/* 0-59 */
	uint64		hours;			/* 0-23 */
	uint64		days;			/* 1-31 */
	uint64		months;			/* 1-12 */
	uint64		weekdays;		/* 0-6, Sunday 0 */
	bool		days_star;		/* day-of-month field starts with '*' */
	bool		weekdays_star;
} CronSpec;

static const char *const cron_month_names[] = {
	"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec", NULL
};
static const char *const cron_day_names[] = {
	"sun", "mon", "tue", "wed", "thu", "fri", "sat", NULL
};

/* Read a number or a three-letter name (names[i] is lo + i) at *p. */
static bool
CronValue(const char **p, int lo, const char *const *names, int *out)
{
	if (isdigit((unsigned char) **p))
	{
		int			v = 0;

		while (isdigit((unsigned char) **p) && v < 1000)
			v = v * 10 + (*(*p)++ - '0');
		*out = v;
		return true;
	}
	for (int i = 0; names != NULL && names[i] != NULL; i++)
		if (pg_strncasecmp(*p, names[i], 3) == 0)
		{
			*p += 3;
			*out = lo + i;
			return true;
		}
	return false;
}

/*
 * Parse one field (a comma list of *, n, n-m, each with an optional /step)
 * into bits of lo..hi; `wrap` maps hi to lo (day of week 7 = Sunday).
 */
static bool
CronField(const char *field, int lo, int hi, const char *const *names, bool wrap,
		  uint64 *bits, bool *star)
{
	const char *p = field;

	*bits = 0;
	*star = *p == '*';
	for (;;)
	{
		int			from, to, step = 1;

		if (*p == '*')
		{
			from = lo;
			to = wrap ? hi - 1 : hi;
			p++;
		}
		else
		{
			if (!CronValue(&p, lo, names, &from))
				return false;
			to = from;
			if (*p == '-')
			{
				p++;
				if (!CronValue(&p, lo, names, &to))
					return false;
			}
		}
		if (*p == '/')
		{
			p++;
			if (!CronValue(&p, 0, NULL, &step) || step <= 0)
				return false;
			if (from == to)
				to = wrap ? hi - 1 : hi;
		}
		if (from < lo || to > hi || from > to)
			return false;
		for (int v = from; v <= to; v += step)
			*bits |= UINT64CONST(1) << ((wrap && v == hi) ? lo : v);
		if (*p == '\0')
			return *bits != 0;
		if (*p++ != ',')
			return false;
	}
}

/* Parse a five-field schedule; false for anything else. */
static bool
CronParse(const char *schedule, CronSpec *spec)
{
	char	   *copy = pstrdup(schedule);
	char	   *fields[6];
	int			n = 0;
	char	   *save = NULL;

	for (char *tok = strtok_r(copy, " \t", &save); tok != NULL; tok = strtok_r(NULL, " \t", &save))
	{
		if (n == 5)
			return false;
		fields[n++] = tok;
	}
	if (n != 5)
		return false;
	{
		bool		minutes_star, hours_star, months_star;

		return CronField(fields[0], 0, 59, NULL, false, &spec->minutes, &minutes_star) &&
			CronField(fields[1], 0, 23, NULL, false, &spec->hours, &hours_star) &&
			CronField(fields[2], 1, 31, NULL, false, &spec->days, &spec->days_star) &&
			CronField(fields[3], 1, 12, cron_month_names, false, &spec->months, &months_star) &&
			CronField(fields[4], 0, 7, cron_day_names, true, &spec->weekdays, &spec->weekdays_star);
	}
}

/* Whether the schedule runs on Julian day jd (cron's day-of-month/day-of-week rule). */
static bool
CronDayMatches(const CronSpec *spec, int jd)
{
	int			year, month, day;
	bool		by_day, by_weekday;

	j2date(jd, &year, &month, &day);
	if ((spec->months & (UINT64CONST(1) << month)) == 0)
		return false;
	by_day = (spec->days & (UINT64CONST(1) << day)) != 0;
	by_weekday = (spec->weekdays & (UINT64CONST(1) << j2day(jd))) != 0;
	/* with either field unrestricted both must match, else either does */
	return (spec->days_star || spec->weekdays_star) ? (by_day && by_weekday) : (by_day || by_weekday);
}

/*
 * The longest time in ms between two consecutive runs of `schedule` (UTC, as
 * pg_cron runs by default), over the next four years; false when the
 * schedule is not understood or does not run on two days in that time.
 */
static bool
CronLongestGapMs(const char *schedule, int64 now_ms, int64 *gap_ms)
{
	static const struct
	{
		const char *name;
		const char *spec;
	}			macros[] = {
		{"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
		{"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"}, {"@midnight", "0 0 * * *"},
		{"@hourly", "0 * * * *"}
	};
	CronSpec	spec;
	int			day_minutes[24 * 60];
	int			nminutes = 0;
	int64		longest = 0;
	int			today;
	int			previous = -1;
	int			days = 0;
	int			seconds;
	char		unit[16];

	/* pg_cron 1.5+: "N seconds" */
	if (sscanf(schedule, " %d %15s", &seconds, unit) == 2 &&
		(strcmp(unit, "seconds") == 0 || strcmp(unit, "second") == 0))
	{
		if (seconds <= 0 || seconds >= 60)
			return false;
		*gap_ms = (int64) seconds * 1000;
		return true;
	}
	for (int i = 0; i < lengthof(macros); i++)
		if (pg_strcasecmp(schedule, macros[i].name) == 0)
			schedule = macros[i].spec;
	if (!CronParse(schedule, &spec))
		return false;
	for (int h = 0; h < 24; h++)
		for (int m = 0; m < 60; m++)
			if ((spec.hours & (UINT64CONST(1) << h)) && (spec.minutes & (UINT64CONST(1) << m)))
				day_minutes[nminutes++] = h * 60 + m;
	for (int i = 1; i < nminutes; i++)
		longest = Max(longest, (int64) (day_minutes[i] - day_minutes[i - 1]));
	today = (int) (now_ms / (SECS_PER_DAY * INT64CONST(1000))) + UNIX_EPOCH_JDATE;
	for (int jd = today; jd <= today + HEALTH_HORIZON_DAYS; jd++)
	{
		if (!CronDayMatches(&spec, jd))
			continue;
		if (previous >= 0)
			longest = Max(longest, (int64) (jd - previous) * 24 * 60
						  - day_minutes[nminutes - 1] + day_minutes[0]);
		previous = jd;
		days++;
	}
	if (days < 2)
		return false;
	*gap_ms = longest * 60 * 1000;
	return true;
}

/* ---- gathering ---- */

/* Read pg_cron's job and runs as the calling role; fills the cron part of h. Inside SPI. */
static void
HealthReadCron(MaintHealth *h, const char *recorded_user)
{
	Oid			ns = get_namespace_oid("cron", true);
	Oid			role = GetOuterUserId();
	Oid			job_rel, runs_rel;
	Oid			saved_user;
	int			saved_sec;
	bool		complete;
	SpArgs		args;
	int			n;

	if (!OidIsValid(ns) ||
		!OidIsValid(job_rel = get_relname_relid("job", ns)) ||
		!OidIsValid(runs_rel = get_relname_relid("job_run_details", ns)))
	{
		h->cron_note = "pg_cron is not installed in this database";
		return;
	}
	/* jobname and active came with pg_cron 1.3 and 1.1: an older one is not read */
	if (get_attnum(job_rel, "jobname") == InvalidAttrNumber ||
		get_attnum(job_rel, "active") == InvalidAttrNumber)
	{
		h->cron_note = "pg_cron is older than 1.3: its job table is not read";
		return;
	}
	/* has_schema_privilege: pg_namespace_aclcheck is gone in PostgreSQL 16 */
	if (!DatumGetBool(DirectFunctionCall3(has_schema_privilege_id_id, ObjectIdGetDatum(role),
										  ObjectIdGetDatum(ns), CStringGetTextDatum("USAGE"))) ||
		pg_class_aclcheck(job_rel, role, ACL_SELECT) != ACLCHECK_OK ||
		pg_class_aclcheck(runs_rel, role, ACL_SELECT) != ACLCHECK_OK)
	{
		h->cron_note = "this role may not read pg_cron's tables (GRANT USAGE ON SCHEMA cron)";
		return;
	}
	/* pg_cron shows each role only its own jobs, unless it is a superuser */
	complete = superuser_arg(role) ||
		(recorded_user != NULL && strcmp(recorded_user, GetUserNameFromId(role, false)) == 0);

	GetUserIdAndSecContext(&saved_user, &saved_sec);
	SetUserIdAndSecContext(role, saved_sec | SECURITY_LOCAL_USERID_CHANGE);
	SpArgsInit(&args);
	if (h->has_job_id)
	{
		SpArgInt64(&args, h->job_id);
		n = SpExec(&health_job_by_id, &args, true, 1);
	}
	else
		n = SpExec(&health_job_by_name, &args, true, 1);
	if (n == 1)
	{
		h->job_found = true;
		h->scheduled = true;
		SpGetInt64(0, SpColumn("job_id"), &h->job_id);
		h->has_job_id = true;
		h->schedule = SpGetText(0, SpColumn("schedule"));
		SpGetBool(0, SpColumn("active"), &h->job_active);
		SpArgsInit(&args);
		SpArgInt64(&args, h->job_id);
		SpExec(&health_runs, &args, true, 1);
		h->last_status = SpGetText(0, SpColumn("last_status"));
		h->has_last_cron = SpGetInt64(0, SpColumn("last_started"), &h->last_cron_at);
		h->last_failure_message = SpGetText(0, SpColumn("last_failure_message"));
		h->has_last_failure = SpGetInt64(0, SpColumn("last_failure_at"), &h->last_failure_at);
		SpGetInt64(0, SpColumn("failures"), &h->failures);
		h->has_first_failure = SpGetInt64(0, SpColumn("first_failure"), &h->first_failure_at);
		h->cron_visible = true;
		if (!h->job_active)
			h->cron_note = "the pg_cron job is inactive (cron.alter_job(..., active := false))";
	}
	else if (complete && h->recorded)
	{
		h->cron_visible = true;
		h->cron_note = "the recorded pg_cron job no longer exists (unscheduled with cron.unschedule?)";
	}
	else if (h->recorded)
		h->cron_note = "pg_cron shows this role only its own jobs: ask as a superuser or as the role that scheduled it";
	SetUserIdAndSecContext(saved_user, saved_sec);
}

/*
 * Judge maintenance at now: what schedule_maintenance recorded, maintain()'s
 * last run, pg_cron's job and runs (as the caller), the bound. Inside SPI.
 */
void
MaintHealthGather(MaintHealth *h, int64 now)
{
	char	   *recorded_user = NULL;
	SpArgs		args;

	memset(h, 0, sizeof(MaintHealth));
	h->now = now;
	if (!MaintHealthAvailable())
		return;
	SpArgsInit(&args);
	if (SpExec(&health_schedule, &args, true, 1) == 1)
	{
		h->recorded = h->scheduled = true;
		h->has_job_id = SpGetInt64(0, SpColumn("job_id"), &h->job_id);
		h->schedule = SpGetText(0, SpColumn("schedule"));
		recorded_user = SpGetText(0, SpColumn("username"));
		h->has_scheduled_at = SpGetInt64(0, SpColumn("scheduled_at"), &h->scheduled_at);
	}
	if (SpExec(&health_last_run, &args, true, 1) == 1)
		h->has_last_run = SpGetInt64(0, SpColumn("last_run_at"), &h->last_run_at);
	HealthReadCron(h, recorded_user);

	/* the bound: the setting, else derived from the schedule */
	if (sp_maintenance_overdue_after_s > 0)
	{
		h->bound_ms = (int64) sp_maintenance_overdue_after_s * 1000;
		h->has_bound = true;
		h->bound_from = "setting";
	}
	else if (h->scheduled && h->schedule != NULL &&
			 CronLongestGapMs(h->schedule, now, &h->bound_ms))
	{
		h->bound_ms = 2 * h->bound_ms + HEALTH_SLACK_MS;
		h->has_bound = true;
		h->bound_from = "schedule";
	}

	/* since when maintain() is owed a run: its last run, or the scheduling */
	h->has_since = h->has_last_run || h->has_scheduled_at;
	h->since = h->has_last_run ? h->last_run_at : h->scheduled_at;
	if (h->has_last_run && h->has_scheduled_at)
		h->since = Max(h->last_run_at, h->scheduled_at);
	/* never run and no start known: only an explicit expectation is overdue at once */
	h->overdue = (h->scheduled || sp_maintenance_overdue_after_s > 0) && h->has_bound &&
		(h->has_since ? now - h->since > h->bound_ms : sp_maintenance_overdue_after_s > 0);
	h->failing = h->last_status != NULL && strcmp(h->last_status, SP_CRON_STATUS_FAILED) == 0 &&
		(!h->has_last_cron || !h->has_last_run || h->last_cron_at >= h->last_run_at);
}

/* True when the database has the 0.4.0 schedule record (the same library serves older schemas). */
bool
MaintHealthAvailable(void)
{
	Oid			ns = get_namespace_oid("sandbox_persist", true);

	return OidIsValid(ns) && OidIsValid(get_relname_relid("maintenance_schedule", ns));
}

/* ---- output ---- */

/* Append "key": value (or nothing when absent) for an optional int64. */
static void
HealthInt(StringInfo buf, bool *first, const char *key, bool present, int64 v)
{
	if (!present)
		return;
	SpAppendKey(buf, first, key);
	SpAppendInt64(buf, v);
}

/* Append "key": "text" when text is not NULL. */
static void
HealthText(StringInfo buf, bool *first, const char *key, const char *text)
{
	if (text == NULL)
		return;
	SpAppendKey(buf, first, key);
	SpAppendString(buf, text);
}

/* Append "key": true|false. */
static void
HealthBool(StringInfo buf, bool *first, const char *key, bool v)
{
	SpAppendKey(buf, first, key);
	appendStringInfoString(buf, v ? "true" : "false");
}

/* The members every report and attention detail shares. */
static void
HealthAppendFacts(StringInfo buf, bool *first, const MaintHealth *h)
{
	HealthInt(buf, first, "jobId", h->has_job_id, h->job_id);
	HealthText(buf, first, "schedule", h->schedule);
	HealthInt(buf, first, "scheduledAt", h->has_scheduled_at, h->scheduled_at);
	HealthInt(buf, first, "lastRunAt", h->has_last_run, h->last_run_at);
	HealthInt(buf, first, "boundMs", h->has_bound, h->bound_ms);
	HealthText(buf, first, "boundFrom", h->bound_from);
	HealthText(buf, first, "lastCronStatus", h->last_status);
	HealthInt(buf, first, "lastCronRunAt", h->has_last_cron, h->last_cron_at);
	HealthInt(buf, first, "lastFailureAt", h->has_last_failure, h->last_failure_at);
	HealthText(buf, first, "lastFailureMessage", h->last_failure_message);
	if (h->cron_visible)
		HealthInt(buf, first, "failuresSinceSuccess", true, h->failures);
	HealthText(buf, first, "cronNote", h->cron_note);
}

/* A sentence saying what is wrong, for the report's "problem" member. */
static char *
HealthProblem(const MaintHealth *h)
{
	if (h->failing)
		return psprintf("pg_cron's last run of the maintenance job failed%s%s%s; maintain() has not"
						" completed since. See the README's pg_cron requirements (cron.host,"
						" cron.use_background_workers, pg_hba.conf).",
						h->last_failure_message ? " (" : "",
						h->last_failure_message ? h->last_failure_message : "",
						h->last_failure_message ? ")" : "");
	if (h->overdue)
		return psprintf("maintain() has not completed for longer than " INT64_FORMAT " ms although"
						" maintenance is %s%s%s.", h->bound_ms,
						h->scheduled ? "scheduled" : "expected (sandbox_persist.maintenance_overdue_after)",
						h->cron_note ? "; " : "", h->cron_note ? h->cron_note : "");
	return NULL;
}

/* The whole report as a JSON object (maintenance_health()). */
void
MaintHealthAppendReport(StringInfo buf, const MaintHealth *h)
{
	bool		first = true;

	appendStringInfoChar(buf, '{');
	HealthBool(buf, &first, "ok", !h->overdue && !h->failing);
	HealthBool(buf, &first, "scheduled", h->scheduled);
	HealthBool(buf, &first, "overdue", h->overdue);
	HealthBool(buf, &first, "failing", h->failing);
	HealthBool(buf, &first, "cronVisible", h->cron_visible);
	HealthText(buf, &first, "problem", HealthProblem(h));
	HealthAppendFacts(buf, &first, h);
	HealthInt(buf, &first, "checkedAt", true, h->now);
	appendStringInfoChar(buf, '}');
}

/*
 * Append the attention items (maintenance.md §3) the report implies, each
 * preceded by a comma when *any is set: {kind, firstSeen, lastSeen, detail}.
 * Returns how many were appended.
 */
int
MaintHealthAppendItems(StringInfo buf, const MaintHealth *h, bool *any)
{
	int			n = 0;

	for (int k = 0; k < 2; k++)
	{
		bool		first = true;
		bool		dfirst = true;
		int64		since;

		if (k == 0 ? !h->failing : !h->overdue)
			continue;
		/* first seen: the first failure since a success, or when the bound passed */
		if (k == 0)
			since = h->has_first_failure ? h->first_failure_at : h->has_last_cron ? h->last_cron_at : h->now;
		else
			since = h->has_since ? h->since + h->bound_ms : h->now;
		if (*any)
			appendStringInfoChar(buf, ',');
		*any = true;
		appendStringInfoChar(buf, '{');
		SpAppendKey(buf, &first, "kind");
		SpAppendString(buf, k == 0 ? "maintenance_failing" : "maintenance_overdue");
		HealthInt(buf, &first, "firstSeen", true, Min(since, h->now));
		HealthInt(buf, &first, "lastSeen", true, h->now);
		SpAppendKey(buf, &first, "detail");
		appendStringInfoChar(buf, '{');
		HealthText(buf, &dfirst, "problem", HealthProblem(h));
		HealthAppendFacts(buf, &dfirst, h);
		appendStringInfoString(buf, "}}");
		n++;
	}
	return n;
}

/*
 * maintenance_health() -> json: whether scheduled maintenance runs
 * {ok, scheduled, overdue, failing, cronVisible, problem?, jobId?, schedule?,
 * scheduledAt?, lastRunAt?, boundMs?, boundFrom?, lastCronStatus?,
 * lastCronRunAt?, lastFailureAt?, lastFailureMessage?, failuresSinceSuccess?,
 * cronNote?, checkedAt}.
 */
Datum
maintenance_health(PG_FUNCTION_ARGS)
{
	MemoryContext outer = CurrentMemoryContext;
	MemoryContext spi;
	MaintHealth h;
	StringInfoData buf;
	Datum		result;

	SPI_connect();
	MaintHealthGather(&h, SpNowMs(fcinfo, -1));
	spi = MemoryContextSwitchTo(outer);
	initStringInfo(&buf);
	MaintHealthAppendReport(&buf, &h);
	result = SpJsonResult(&buf);
	MemoryContextSwitchTo(spi);
	SPI_finish();
	PG_RETURN_DATUM(result);
}
