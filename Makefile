# sandbox_persist: PGXS build, plus the two commands a newcomer needs:
#   make run    build, install, start a throwaway cluster, walk through every store
#   make test   the same set-up, then every suite (short modes of torture and fuzz)
#   make test-matrix  the suites against PostgreSQL 17 and 18 in Debian chroots (root)
#   make torture  the long reliability runs: crash cycles, 10^5 fuzz inputs, valgrind
#   make bench  benchmarks against baselines into bench/results/ (QUICK=1: a short run)
# SANDBOX_PERSIST_CPU_HOG=N with test, test-shards or torture: N busy processes for the
# whole run (scripts/cpu_hog.sh), stopped however it ends: no suite may need an idle machine.

EXTENSION   = sandbox_persist
MODULE_big  = sandbox_persist
OBJS = \
	src/sandbox_persist.o \
	src/errors.o \
	src/json_io.o \
	src/validate.o \
	src/spi_util.o \
	src/admin.o \
	src/instances.o \
	src/runs.o \
	src/messages.o \
	src/checkpoints.o \
	src/checkpoint_entries.o \
	src/leases.o \
	src/fork.o \
	src/conversations.o \
	src/checkpoint_import.o \
	src/thread_moves.o \
	src/interrupts.o \
	src/metadata.o \
	src/generation_runs.o \
	src/artifacts.o \
	src/zstd_codec.o \
	src/blob_storage.o \
	src/blobs.o \
	src/blob_uploads.o \
	src/claims.o \
	src/locks.o \
	src/event_log.o \
	src/maintenance.o

DATA = $(wildcard sql/sandbox_persist--*.sql)

# pg_regress finds test/sql/<t>.sql via --inputdir and expected/<t>.out in the
# top-level expected/ (its output directory, searched first). Isolation specs
# live in test/specs/; pg_isolation_regress writes to output_iso/ and then
# looks in test/expected/, a symlink to the same top-level expected/.
REGRESS      = $(sort $(basename $(notdir $(wildcard test/sql/*.sql))))
REGRESS_OPTS = --inputdir=test --load-extension=sandbox_persist
ISOLATION      = $(sort $(basename $(notdir $(wildcard test/specs/*.spec))))
ISOLATION_OPTS = --inputdir=test --load-extension=sandbox_persist

PG_CFLAGS = -Wall -Wextra -Werror -Wno-unused-parameter -Wno-sign-compare \
	-Wno-missing-field-initializers -Wno-cast-function-type
SHLIB_LINK += -lzstd

# Debian's server headers enable JIT bitcode, which needs clang; we do not ship any.
override with_llvm = no

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS tracks no header dependencies: every object depends on every header, so a
# changed struct or constant never leaves a stale object behind.
$(OBJS): $(wildcard src/*.h)

.PHONY: deps run stop test test-matrix test-shards torture bench
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
torture:
	bash scripts/torture.sh
bench:
	bash scripts/bench.sh
