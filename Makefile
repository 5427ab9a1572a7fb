# sandbox_persist: PGXS build, plus the three commands a newcomer needs:
#   make run    build, install, start a throwaway cluster, walk through every store
#   make check  the edit-test loop: the same set-up, then pg_regress + isolation,
#               pgTAP and the Node adapter (build, type-check, vitest) only
#   make test   the same set-up, then every suite (short modes of torture and
#               fuzz): the whole suite, what CI runs (.ci/run)
#   make test-pitr  one suite: pgBackRest point-in-time recovery and a standby rebuild
#   make test-matrix  the suites against PostgreSQL 17 and 18 in Debian chroots (root)
#   make torture  the long reliability runs: crash cycles, 10^5 fuzz inputs, valgrind, failovers
#   make test-ha  the high-availability suite alone, long mode (Patroni, etcd, HAProxy)
#   make installcheck-conformance  the pgTAP conformance suites against an existing
#               database (PG* variables or CONFORMANCE_DB=URL), its data untouched
#   make deb    Debian packages postgresql-NN-sandbox-persist into dist/deb/ (+ lintian);
#               PG_MAJORS="15 17 18": 17 and 18 built in the trixie and sid chroots (root)
#   make test-packaging  the .deb installed into a clean chroot, upgraded from the previous release's (root);
#               PG_MAJORS="15 17 18" for each major on its release (default 15)
#   make dist   the PGXN zip (git archive), the adapter's .tgz and SHA256SUMS into dist/
#   make bench  benchmarks against baselines into bench/results/ (QUICK=1: a short run)
# SANDBOX_PERSIST_CPU_HOG=N with test, test-shards or torture: N busy processes for the
# whole run (scripts/cpu_hog.sh), stopped however it ends: no suite may need an idle machine.

EXTENSION   = sandbox_persist
MODULE_big  = sandbox_persist
OBJS = \
	src/sandbox_persist.o \
	src/schema_version.o \
	src/released_symbols.o \
	src/errors.o \
	src/json_io.o \
	src/validate.o \
	src/spi_util.o \
	src/key_scans.o \
	src/row_wait.o \
	src/admin.o \
	src/instances.o \
	src/runs.o \
	src/messages.o \
	src/checkpoints.o \
	src/checkpoint_entries.o \
	src/fences.o \
	src/leases.o \
	src/fork.o \
	src/conversations.o \
	src/checkpoint_import.o \
	src/thread_moves.o \
	src/interrupts.o \
	src/metadata.o \
	src/generation_runs.o \
	src/artifacts.o \
	src/blob_codec.o \
	src/blob_storage.o \
	src/blob_rows.o \
	src/blob_upsert.o \
	src/blob_recompress.o \
	src/blobs.o \
	src/blob_uploads.o \
	src/claims.o \
	src/locks.o \
	src/takeovers.o \
	src/event_log.o \
	src/event_log_append.o \
	src/streams.o \
	src/stream_writes.o \
	src/stream_create.o \
	src/stream_bodies.o \
	src/stream_offsets.o \
	src/stream_reads.o \
	src/stream_pages.o \
	src/stream_run_logs.o \
	src/stream_purge.o \
	src/stream_subscriptions.o \
	src/stream_subscription_rules.o \
	src/stream_wakes.o \
	src/row_counts.o \
	src/maintenance.o \
	src/maintenance_health.o

# The current schema has one source, sql/sandbox_persist.sql; the full script
# of the default version is built from it (DATA_built, not committed:
# .gitignore), so CREATE EXTENSION runs it directly. DATA holds the released
# scripts: 0.1.0's full script and every upgrade script, the path of existing
# databases. Relative to the source tree, so an out-of-tree build
# (pg_buildext build build-NN, VPATH) installs the same scripts; PGXS prefixes
# $(srcdir). See docs/architecture.md, "One source of the schema".
EXTVERSION = $(shell sed -n "s/^default_version *= *'\([^']*\)'.*/\1/p" $(srcdir)/$(EXTENSION).control)
DATA_built = sql/$(EXTENSION)--$(EXTVERSION).sql
DATA = $(filter-out $(DATA_built),$(patsubst $(srcdir)/%,%,$(wildcard $(srcdir)/sql/sandbox_persist--*.sql)))

# pg_regress finds test/sql/<t>.sql via --inputdir and test/expected/<t>.out
# there too (it looks in the top level's expected/ first, so keep none there).
# Isolation specs live in test/specs/; pg_isolation_regress writes to
# output_iso/ and reads the same test/expected/.
REGRESS      = $(sort $(basename $(notdir $(wildcard test/sql/*.sql))))
REGRESS_OPTS = --inputdir=test --load-extension=sandbox_persist
ISOLATION      = $(sort $(basename $(notdir $(wildcard test/specs/*.spec))))
ISOLATION_OPTS = --inputdir=test --load-extension=sandbox_persist

PG_CFLAGS = -Wall -Wextra -Werror -Wno-unused-parameter -Wno-sign-compare \
	-Wno-missing-field-initializers -Wno-cast-function-type
SHLIB_LINK += -lzstd -llz4

# Debian's server headers enable JIT bitcode, which needs clang; we do not ship any.
override with_llvm = no

PG_CONFIG ?= pg_config
# make check, the edit-test loop: the suites of make test that follow a change
# to the C, the SQL or the adapter, on the same machinery (scripts/test.sh: its
# set-up builds and installs through make itself, then a throwaway cluster and
# the summaries). PGXS has a "check" of its own (a stub: "not supported"
# outside the source tree) and two recipes for one target make GNU make warn
# at every run, so PGXS is left out when check is the goal (srcdir: what PGXS
# sets for a build in the checkout).
ifneq ($(filter check,$(MAKECMDGOALS)),)
ifneq ($(MAKECMDGOALS),check)
$(error make check runs alone: it builds, installs and starts its own cluster)
endif
srcdir = .
check:
	SANDBOX_PERSIST_SUITES="regress pgtap node" bash scripts/test.sh
else
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)
endif

# An out-of-tree build writes its objects under its own src/ and the built
# script under its own sql/.
ifdef VPATH
$(shell mkdir -p src sql)
endif

# The full script of the default version: the schema source with a header
# naming it (edit the source, never the built file).
$(DATA_built): sql/$(EXTENSION).sql $(EXTENSION).control
	{ echo '-- Built by make from sql/$(EXTENSION).sql: edit that file, not this one.'; cat $<; } >$@

# PGXS tracks no header dependencies: every object depends on every header, so a
# changed struct or constant never leaves a stale object behind.
$(OBJS): $(wildcard $(srcdir)/src/*.h)

# Everything that restates src/errors.h's error table, generated from it (checked
# in; the vocabulary suite fails when it is stale): the Node adapter's codes,
# code unions and checkpoint error classes, and the error tables of README.md
# and docs/contract/README.md.
error-codes:
	bash scripts/gen_error_codes.sh

.PHONY: error-codes deps run stop check test test-matrix test-shards test-pitr test-ha torture bench installcheck-conformance deb dist test-packaging
deps:
	bash scripts/deps.sh
run:
	bash scripts/run.sh
stop:
	bash scripts/cluster.sh stop
test:
	bash scripts/test.sh
test-matrix:
	bash scripts/matrix.sh
test-shards:
	SANDBOX_PERSIST_SUITES=shards bash scripts/test.sh
test-pitr:
	SANDBOX_PERSIST_SUITES=pitr bash scripts/test.sh
test-ha:
	bash scripts/deps.sh
	flock /tmp/sandbox_persist.install.lock sh -c '$(MAKE) -s && $(MAKE) -s install >/dev/null'
	bash test/ha/run.sh --long
torture:
	bash scripts/torture.sh
bench:
	bash scripts/bench.sh
installcheck-conformance:
	bash scripts/conformance.sh $(CONFORMANCE_DB)
deb:
	bash scripts/deb.sh
dist:
	bash scripts/dist.sh
test-packaging:
	bash test/packaging/run.sh
