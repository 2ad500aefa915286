# Stagedoor Box: one program, one SQLite file (or a PostgreSQL database).
#
#   make              build bin/stagedoor (installs the build packages first)
#   make demo         the whole pipeline on a fresh ./var/demo (build packages only)
#   make test         every test suite, each reported: a normal build (rel), the
#                     engine-dependent suites of it again on a throwaway PostgreSQL
#                     cluster (pg), and an AddressSanitizer + UndefinedBehavior-
#                     Sanitizer build (san); installs the build and test packages first
#   make fuzz         the API's parser under libFuzzer (adds clang)
#   make bench        build/stagedoor-bench, the benchmarks' own program, and its
#                     runs (build packages only)
#   make bench-peers  the queue next to Redis Streams and beanstalkd, started
#                     on loopback for the run (adds their Debian packages)
#   make soak         the long crash soak
#   make soak-pg      the long crash soak of two boxes on PostgreSQL
#   make failover     the same, with a standby promoted half way
#   make soak-event   a whole event's day under the kills, on SQLite, then on two
#                     boxes on PostgreSQL: sold, moved, reminded, cancelled
#   make powercut     the long power-cut soak (root, /dev/fuse)
#   make check-fresh  the README's two commands on a fresh Debian 12 chroot (root)
#   make deb          build/stagedoor_<VERSION>_<arch>.deb, lintian-clean (adds dpkg-dev,
#                     lintian, debootstrap: the deb set)
#   make check-deb    the package installed, run, upgraded from v0.1.0 and purged in a
#                     fresh Debian 12 chroot, then booted under a real systemd
#                     (systemd-nspawn: start, reload, logrotate, backups, a port
#                     taken; make check-systemd for that part alone) (root)
#   make install      the binary, man pages, completion and unit under PREFIX (/usr/local),
#   make uninstall    DESTDIR for a staged tree; uninstall removes what install put
#   make deps         the build and test packages; deps-build, deps-test,
#                     deps-fuzz and deps-peers install one set each
#   make hooks        this checkout's git hooks from tools/hooks (the commit
#                     message's rule: subject under 72 characters, a body)
#   make clean
#   V=1               show each compile and link command in full

CC      ?= cc
PKGS    := sqlite3 libpq jansson libqrencode libcurl libmicrohttpd libsystemd
TPKGS   := cmocka
# libharu and mbedTLS ship no pkg-config file in Debian 12: plain -l flags
XLIBS   := -lhpdf -lmbedtls -lmbedx509 -lmbedcrypto
# Every package from Debian 12 itself, one set per purpose.
#   build: what make, make demo and make bench need (compiler, libraries)
#   test:  what the suites run against: cmocka, PostgreSQL, real PDF tools,
#          a real SMTP server, python3-boto3 (botocore signs the SigV4
#          requests test_sigv4 verifies), openssl for the throwaway CA, curl as a TLS
#          client, Debian's chromium and nodejs (npm and tests/browser's
#          pinned playwright-core: tools/npm_deps.sh), ffmpeg to turn a ticket
#          into the door test's fake camera, libfuse3 for tools/powercut,
#          strace to make a disk slow to flush for one process,
#          systemd-analyze (and /bin/kill) to check dist/stagedoor.service,
#          tzdata for the venue-clock tests (Europe/Berlin, Australia/Adelaide)
#   fuzz:  clang for libFuzzer
#   peers: the servers make bench-peers measures the queue against, and
#          hiredis for its Redis client
DEBS_BUILD := gcc make pkg-config libsqlite3-dev libpq-dev libjansson-dev libhpdf-dev \
              libqrencode-dev libmbedtls-dev libcurl4-openssl-dev libmicrohttpd-dev libsystemd-dev
DEBS_TEST  := libcmocka-dev postgresql qpdf poppler-utils python3-aiosmtpd python3-boto3 openssl curl chromium nodejs \
              ffmpeg libfuse3-dev fuse3 groff-base systemd procps strace tzdata
DEBS_FUZZ  := clang
DEBS_PEERS := redis-server beanstalkd libhiredis-dev

# Quiet build lines (CC src/queue.c) unless V=1, as the kernel and curl do.
V       ?= 0
ifeq ($(V),1)
say     =
else
say     = @printf '  %-4s %s\n' '$(1)' '$(2)';
endif

# VERSION: the one source of the version (the binary's --version, the package's)
VERSION := $(shell cat VERSION)
WARN    := -std=c11 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-missing-field-initializers
CFLAGS  ?= -O2 -g
ALL_CFLAGS = $(WARN) -DSTAGEDOOR_VERSION='"$(VERSION)"' $(CFLAGS) $(shell pkg-config --cflags $(PKGS) 2>/dev/null) -pthread
LDLIBS  = $(shell pkg-config --libs $(PKGS) 2>/dev/null) $(XLIBS) -pthread
TLIBS   = $(shell pkg-config --libs $(TPKGS) 2>/dev/null)
SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
# The release build is hardened as Debian builds its packages (dpkg-buildflags
# with hardening=+all); the sanitizer build is not, since fortified calls would
# bypass ASan's checks of the same calls.
HARDEN  := -D_FORTIFY_SOURCE=2 -fstack-protector-strong -fstack-clash-protection \
	   -fcf-protection -Wformat -Werror=format-security
LDHARDEN := -Wl,-z,relro -Wl,-z,now

SRCS    := $(sort $(wildcard src/*.c src/cmd/*.c))
# failpoint.c is in the builds made for tests only (failpoint.h)
LIBSRCS := $(filter-out src/main.c src/failpoint.c,$(SRCS))
# The sources that pass a failpoint: compiled once more, with them, for the
# test build; every other object is the product's own.
FP_RE   := \<failpoint(_on|_check_spec|_set_hook)?[(]
FP_SRCS := $(shell grep -lE '$(FP_RE)' $(LIBSRCS) /dev/null)
SCHEMA_SQLITE := $(sort $(wildcard schema/sqlite/*.sql))
SCHEMA_PG     ?= $(sort $(wildcard schema/pg/*.sql))
SCHEMA  := $(SCHEMA_SQLITE) $(SCHEMA_PG)
# The pages the binary serves (tools/embed_assets): the dashboard at /, the
# door page at /door with its QR decoder, jsQR, vendored byte for byte from
# the npm package src/door/package-lock.json pins (make check-vendor).
ASSETS  := src/dashboard/index.html src/dashboard/dashboard.js src/dashboard/charts.js \
           src/dashboard/boxoffice.js src/dashboard/clock.js src/dashboard/dashboard.css \
           src/door/door.html src/door/door.js src/door/door.css src/door/vendor/jsQR.js
TESTS   := $(sort $(basename $(notdir $(wildcard tests/test_*.c))))
# The suites that depend on the engine, run a second time on PostgreSQL
# (check-pg): the store, the queue, the outbox, the idempotency primitives,
# the handlers and the HTTP API.
# Each suite runs two test binaries at a time, but these alone: they
# measure time or CPU (the door's p99, a worker that must not spin,
# deadlines, the WAL bound of test_maint, power cuts).
TESTS_ALONE := test_doorflood test_procs test_http test_frontdoor test_powercut test_maint
PG_TESTS := test_sqs test_controls test_schedule test_db test_events test_eventruns test_holds test_shop test_payments test_dashboard test_redact test_queue test_outbox test_idem test_orders test_changes test_api test_roles test_procs test_blob test_soak

# Three builds: the product, build/rel (bin/stagedoor), with no failpoint;
# the test build, build/test (build/test/stagedoor and the rel suite's
# tests): the product's objects but those of FP_SRCS, made again with the
# failpoints; and build/san, with the failpoints and the sanitizers.
TESTFP   := -DSTAGEDOOR_FAILPOINTS
REL_OBJS := $(patsubst src/%.c,build/rel/%.o,$(LIBSRCS)) build/rel/schema.o build/rel/assets.o
TEST_OBJS := $(filter-out $(patsubst src/%.c,build/rel/%.o,$(FP_SRCS)),$(REL_OBJS)) \
	     $(patsubst src/%.c,build/test/%.o,$(FP_SRCS) src/failpoint.c)
SAN_OBJS := $(patsubst src/%.c,build/san/%.o,$(LIBSRCS) src/failpoint.c) build/san/schema.o \
	    build/san/assets.o
# stagedoor-bench (src/bench): the benchmarks, a program of their own on the
# product's objects; the tests take its HTTP client (bench_http.o)
BENCH_SRCS := $(sort $(wildcard src/bench/*.c))
BENCH_OBJS := $(patsubst src/%.c,build/rel/%.o,$(filter-out src/bench/main.c,$(BENCH_SRCS)))
SAN_BENCH_OBJS := $(patsubst src/%.c,build/san/%.o,$(filter-out src/bench/main.c,$(BENCH_SRCS)))
# Each object's headers, as the compiler found them
DEPFLAGS := -MMD -MP
# Each build keeps its command line in a stamp, written again only when it
# differs, and its objects depend on it: a change of CFLAGS, of the
# libraries' flags, of the hardening or of how objects are made (the
# header lists of DEPFLAGS, the test build's failpoints) makes them again,
# as an old tree would otherwise keep objects built without it.
REL_FLAGS = $(strip $(CC) $(ALL_CFLAGS) $(HARDEN) $(LDHARDEN) $(LDLIBS) $(DEPFLAGS) $(TESTFP))
SAN_FLAGS = $(strip $(CC) $(ALL_CFLAGS) $(SAN) $(LDLIBS) $(DEPFLAGS) $(TESTFP))
ifeq ($(filter clean deps deps-%,$(MAKECMDGOALS)),)
ifneq ($(REL_FLAGS),$(file <build/rel/.flags))
$(shell mkdir -p build/rel)
$(file >build/rel/.flags,$(REL_FLAGS))
endif
ifneq ($(SAN_FLAGS),$(file <build/san/.flags))
$(shell mkdir -p build/san)
$(file >build/san/.flags,$(SAN_FLAGS))
endif
endif
$(REL_OBJS) $(TEST_OBJS) $(BENCH_OBJS) build/rel/main.o build/test/main.o build/rel/bench/main.o \
	$(TEST_HELPERS:%=build/rel/tests/%.o) bin/stagedoor build/test/stagedoor build/stagedoor-bench: build/rel/.flags
$(SAN_OBJS) $(SAN_BENCH_OBJS) build/san/main.o build/san/bench/main.o $(TEST_HELPERS:%=build/san/tests/%.o): \
	build/san/.flags
# the objects that print the version are made again when it changes
build/rel/version.o build/san/version.o build/rel/help_gen.o build/san/help_gen.o: VERSION
build/rel/db_pg.o build/san/db_pg.o build/rel/runlock.o build/san/runlock.o: VERSION

.PHONY: all deps deps-build deps-test deps-fuzz test check-rel check-pg check-san check-browser \
	check-door check-vendor check-fresh bench bench-peers bench-memory deps-peers demo soak soak-pg soak-event failover powercut fuzz clean \
	deps-deb deb check-deb check-systemd install uninstall hooks
.SUFFIXES:

# `make` installs the build packages, then builds; `make bin/stagedoor`
# only builds.
all: deps-build
	@$(MAKE) --no-print-directory bin/stagedoor

deps: deps-build deps-test
deps-build:
	@sh tools/deps.sh $(DEBS_BUILD)
deps-test: deps-build
	@sh tools/deps.sh $(DEBS_TEST)
	@sh tools/npm_deps.sh tests/browser
deps-fuzz: deps-build
	@sh tools/deps.sh $(DEBS_FUZZ)
deps-peers: deps-build
	@sh tools/deps.sh $(DEBS_PEERS)

build/embed_schema: tools/embed_schema.c
	@mkdir -p build
	$(call say,CC,$<)$(CC) -O1 -o $@ $<

build/schema.c: build/embed_schema $(SCHEMA)
	$(call say,GEN,$@)build/embed_schema $@ db_migrations db_migration_count $(SCHEMA_SQLITE) \
		-- db_migrations_pg db_migration_count_pg $(SCHEMA_PG)

build/embed_assets: tools/embed_assets.c
	@mkdir -p build
	$(call say,CC,$<)$(CC) -O1 -o $@ $<

build/assets.c: build/embed_assets $(ASSETS)
	$(call say,GEN,$@)build/embed_assets $@ $(ASSETS)

build/rel/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) $(ALL_CFLAGS) $(HARDEN) $(DEPFLAGS) -Isrc -c -o $@ $<
build/test/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(call say,CC,$< [test])$(CC) $(ALL_CFLAGS) $(HARDEN) $(TESTFP) $(DEPFLAGS) -Isrc -c -o $@ $<
build/rel/%.o: build/%.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) $(ALL_CFLAGS) $(HARDEN) $(DEPFLAGS) -Isrc -c -o $@ $<
build/san/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(call say,CC,$< [san])$(CC) $(ALL_CFLAGS) $(SAN) $(TESTFP) $(DEPFLAGS) -Isrc -c -o $@ $<
build/san/%.o: build/%.c
	@mkdir -p $(dir $@)
	$(call say,CC,$< [san])$(CC) $(ALL_CFLAGS) $(SAN) $(DEPFLAGS) -Isrc -c -o $@ $<

bin/stagedoor: build/rel/main.o $(REL_OBJS)
	@mkdir -p bin
	$(call say,LD,$@)$(CC) $(CFLAGS) $(LDHARDEN) -o $@ $(filter %.o,$^) $(LDLIBS)
build/test/stagedoor: build/test/main.o $(TEST_OBJS)
	$(call say,LD,$@)$(CC) $(CFLAGS) $(LDHARDEN) -o $@ $(filter %.o,$^) $(LDLIBS)
build/stagedoor-bench: build/rel/bench/main.o $(BENCH_OBJS) $(REL_OBJS)
	$(call say,LD,$@)$(CC) $(CFLAGS) $(LDHARDEN) -o $@ $(filter %.o,$^) $(LDLIBS)
build/san/stagedoor-bench: build/san/bench/main.o $(SAN_BENCH_OBJS) $(SAN_OBJS)
	$(call say,LD,$@)$(CC) $(CFLAGS) $(SAN) -o $@ $(filter %.o,$^) $(LDLIBS)
build/san/stagedoor: build/san/main.o $(SAN_OBJS)
	$(call say,LD,$@)$(CC) $(CFLAGS) $(SAN) -o $@ $(filter %.o,$^) $(LDLIBS)

# Every test links the test helpers: testutil (all of them) and shopfix (the
# shop's fixture, for the shop's tests)
TEST_HELPERS := testutil shopfix
build/rel/tests/%: tests/%.c $(TEST_HELPERS:%=build/rel/tests/%.o) $(TEST_OBJS) build/rel/bench/bench_http.o
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)$(CC) $(ALL_CFLAGS) $(TESTFP) $(DEPFLAGS) -MT $@ -MF $@.d -Isrc -Itests -o $@ $< \
		$(TEST_HELPERS:%=build/rel/tests/%.o) $(TEST_OBJS) build/rel/bench/bench_http.o $(LDLIBS) $(TLIBS)
build/san/tests/%: tests/%.c $(TEST_HELPERS:%=build/san/tests/%.o) $(SAN_OBJS) build/san/bench/bench_http.o
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)$(CC) $(ALL_CFLAGS) $(SAN) $(TESTFP) $(DEPFLAGS) -MT $@ -MF $@.d -Isrc -Itests -o $@ $< \
		$(TEST_HELPERS:%=build/san/tests/%.o) $(SAN_OBJS) build/san/bench/bench_http.o $(LDLIBS) $(TLIBS)
$(TEST_HELPERS:%=build/rel/tests/%.o): build/rel/tests/%.o: tests/%.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) $(ALL_CFLAGS) $(TESTFP) $(DEPFLAGS) -Isrc -Itests -c -o $@ $<
$(TEST_HELPERS:%=build/san/tests/%.o): build/san/tests/%.o: tests/%.c
	@mkdir -p $(dir $@)
	$(call say,CC,$< [san])$(CC) $(ALL_CFLAGS) $(SAN) $(TESTFP) $(DEPFLAGS) -Isrc -Itests -c -o $@ $<

# The suite, once per build; each integration test runs that build's binary.
# A test's log is in build/test-output/BUILD/TEST.log; a failing one's is
# also printed.  tools/run_tests.sh writes the suite's closing line to
# build/test-output/BUILD.result, which `make test` reports.
# The rel and pg suites run the test build (build/test/stagedoor); each suite
# also checks the product binary (STAGEDOOR_PRODUCT_BIN) holds no failpoint.
export STAGEDOOR_PRODUCT_BIN := $(CURDIR)/bin/stagedoor
check-rel: bin/stagedoor build/test/stagedoor build/stagedoor-bench build/sqlbench build/mailsink build/paysink build/chaos build/powercut \
	$(addprefix build/rel/tests/,$(TESTS))
	@STAGEDOOR_BENCH_BIN=$(CURDIR)/build/stagedoor-bench TEST_ALONE="$(TESTS_ALONE)" \
		sh tools/run_tests.sh rel $(CURDIR)/build/test/stagedoor $(addprefix build/rel/tests/,$(TESTS))
check-pg: bin/stagedoor build/test/stagedoor build/stagedoor-bench build/mailsink build/paysink build/chaos $(addprefix build/rel/tests/,$(PG_TESTS))
	@STAGEDOOR_BENCH_BIN=$(CURDIR)/build/stagedoor-bench TEST_ALONE="$(TESTS_ALONE)" \
		sh tools/pg_tests.sh pg $(CURDIR)/build/test/stagedoor $(addprefix build/rel/tests/,$(PG_TESTS))
check-san: bin/stagedoor build/san/stagedoor build/san/stagedoor-bench build/mailsink build/paysink build/chaos build/powercut \
	$(addprefix build/san/tests/,$(TESTS))
	@STAGEDOOR_BENCH_BIN=$(CURDIR)/build/san/stagedoor-bench TEST_ALONE="$(TESTS_ALONE)" \
		sh tools/run_tests.sh san $(CURDIR)/build/san/stagedoor $(addprefix build/san/tests/,$(TESTS))

# Every suite runs, whatever an earlier one did; each is reported, and the
# last line counts them all.  A suite whose build failed counts as a failure.
SUITES := rel pg san
# make test builds each suite's programs on every core
BUILD_JOBS := $(shell nproc 2>/dev/null || echo 2)
test: deps-test
	@rm -f $(SUITES:%=build/test-output/%.result)
	@rc=0; for s in $(SUITES); do \
		$(MAKE) --no-print-directory -j$(BUILD_JOBS) check-$$s || rc=1; \
	done; \
	sh tools/run_tests.sh --report $(SUITES) || rc=1; \
	exit $$rc

# The dashboard in headless Debian chromium (playwright-core from
# tests/browser/package-lock.json) against tests/browser/fake_box.mjs.
check-browser: deps-test
	sh tests/browser/run_fake.sh $(CURDIR)/build/dashboard.png

# The door page in headless Debian chromium with a fake camera that shows a
# ticket this build renders, against tests/browser/fake_door.mjs.
check-door: deps-test bin/stagedoor
	sh tests/browser/run_door_fake.sh $(CURDIR)/build/door.png

# src/door/vendor/jsQR.js is byte for byte the jsQR that src/door's lock file
# pins (npm ci in a temp folder; the build itself never runs npm).
check-vendor:
	@sh tools/check_vendor.sh

# The README's two commands in a fresh minbase Debian 12 chroot (tools/fresh.sh,
# as root): what .ci/run runs.
check-fresh:
	@sh tools/fresh.sh --readme

build/sqlbench: tools/bench/sqlbench.c src/queue_sql.h build/rel/schema.o build/rel/db.o build/rel/db_sqlite.o build/rel/db_pg.o build/rel/db_gate.o build/rel/notify.o build/rel/result.o build/rel/clock.o build/rel/fsio.o build/rel/log.o build/rel/text.o
	$(call say,CCLD,$@)$(CC) $(ALL_CFLAGS) -Isrc -o $@ $^ $(LDLIBS)

# The local HTTPS mail provider the mail tests run against (tools/mailsink).
build/mailsink: $(wildcard tools/mailsink/*.c) $(REL_OBJS)
	$(call say,CCLD,$@)$(CC) $(ALL_CFLAGS) $(DEPFLAGS) -MT $@ -MF $@.d -Isrc -o $@ $(wildcard tools/mailsink/*.c) $(REL_OBJS) \
		-lmbedtls -lmbedx509 -lmbedcrypto $(LDLIBS)

# The local Stripe-like payment provider the payment tests, soaks and the
# offline demo run against (tools/paysink): none of src/, so that it judges
# the box's payments without leaning on the box's code.
build/paysink: $(wildcard tools/paysink/*.c) $(wildcard tools/paysink/*.h)
	@mkdir -p build
	$(call say,CCLD,$@)$(CC) $(WARN) $(CFLAGS) $(shell pkg-config --cflags libmicrohttpd jansson libcurl) -pthread \
		-o $@ $(wildcard tools/paysink/*.c) $(shell pkg-config --libs libmicrohttpd jansson libcurl) -lmbedcrypto -pthread

# The crash soak (tools/chaos): its own SQLite, libpq and jansson, none of src/, so
# that its verdict does not lean on the code it judges.
build/chaos: $(wildcard tools/chaos/*.c) $(wildcard tools/chaos/*.h)
	@mkdir -p build
	$(call say,CCLD,$@)$(CC) $(WARN) $(CFLAGS) $(shell pkg-config --cflags sqlite3 jansson libpq) -o $@ \
		$(wildcard tools/chaos/*.c) $(shell pkg-config --libs sqlite3 jansson libpq)

# The power-cut filesystem (tools/powercut): a FUSE passthrough with a
# volatile write cache; tests/test_powercut checks it.
build/powercut: tools/powercut/powercut.c
	@mkdir -p build
	$(call say,CCLD,$@)$(CC) $(WARN) $(CFLAGS) $(shell pkg-config --cflags fuse3) -o $@ $< \
		$(shell pkg-config --libs fuse3) -pthread

soak: deps-test
	@$(MAKE) --no-print-directory build/test/stagedoor build/mailsink build/paysink build/chaos
	build/chaos --bin build/test/stagedoor --mailsink build/mailsink --orders 2000 --kills 100 \
		--buyers 300 --paysink build/paysink --sqs-tasks 2000 --controls

# The crash soak of two boxes on PostgreSQL (a throwaway cluster), and with
# a synchronous standby that takes over half way (make failover).
soak-pg: deps-test
	@$(MAKE) --no-print-directory build/test/stagedoor build/mailsink build/paysink build/chaos
	sh tools/pg_soak.sh --bin build/test/stagedoor --mailsink build/mailsink --orders 2000 --kills 100 \
		--buyers 300 --paysink build/paysink --sqs-tasks 2000 --controls
failover: deps-test
	@$(MAKE) --no-print-directory build/test/stagedoor build/mailsink build/paysink build/chaos
	sh tools/pg_soak.sh --failover --bin build/test/stagedoor --mailsink build/mailsink --orders 2000 \
		--kills 100 --buyers 300 --paysink build/paysink

# A whole event's day (tools/chaos/eventrun.c): 2000 box-office orders and
# 300 buyers on one event, moved, reminded and cancelled while workers and
# the whole box are killed and paysink fails 5% of refunds; SQLite, then two
# boxes on PostgreSQL.
soak-event: deps-test
	@$(MAKE) --no-print-directory build/test/stagedoor build/mailsink build/paysink build/chaos
	build/chaos --bin build/test/stagedoor --mailsink build/mailsink --orders 2000 --kills 100 \
		--buyers 300 --paysink build/paysink --event-run
	sh tools/pg_soak.sh --bin build/test/stagedoor --mailsink build/mailsink --orders 2000 \
		--kills 100 --buyers 300 --paysink build/paysink --event-run

# The power-cut soak: the box on tools/powercut, 200 cuts (a third torn)
# while 3000 orders go in through the CLI and the API, mail to the HTTPS
# provider; then 50 cuts with the maildir transport and a backup every
# second on the mount; then 200 cuts with a disk slow to flush for the
# intake (each fsync of an `order add` and of the HTTP child held 500 ms):
# no email for an order a cut took, none owed taken for another's, no code
# admitting another order's seat.  Root and /dev/fuse.
powercut: deps-test
	@$(MAKE) --no-print-directory build/test/stagedoor build/mailsink build/chaos build/powercut
	build/chaos --bin build/test/stagedoor --mailsink build/mailsink --powercut build/powercut \
		--orders 3000 --power-cuts 200 --workers 2
	build/chaos --bin build/test/stagedoor --mailsink build/mailsink --powercut build/powercut \
		--orders 750 --power-cuts 50 --workers 2 --maildir-on-box --backups
	build/chaos --bin build/test/stagedoor --mailsink build/mailsink --powercut build/powercut \
		--orders 1000 --power-cuts 200 --workers 2 --slow-fsync-ms 500

# The benchmarks (stagedoor-bench, src/bench; dist/doc/testing.md says what
# each measures): a program beside the product, never in its package.
bench: deps-build
	@$(MAKE) --no-print-directory bin/stagedoor build/stagedoor-bench build/sqlbench build/paysink
	@sh tools/bench/run.sh $(CURDIR)/build/stagedoor-bench $(CURDIR)/build/sqlbench
	@build/stagedoor-bench sqs --rounds 3
	build/stagedoor-bench pipeline --orders 500
	@sh tools/bench/engines.sh $(CURDIR)/build/stagedoor-bench
	build/stagedoor-bench api --requests 2000 --clients 4
	build/stagedoor-bench intake --orders 400 --clients 1,16
	build/stagedoor-bench claim --scheduled 300000 --leased 30000 --done 300000
	build/stagedoor-bench scale --sizes 10000,100000
	build/stagedoor-bench shop --rounds 3
	build/stagedoor-bench event
	build/stagedoor-bench line --grant-s 120
	build/stagedoor-bench hoard

# The PSS of run's process tree under 10 minutes of orders (tools/bench/memory.sh;
# MEMORY_MINUTES, MEMORY_RATE orders/s).
bench-memory: deps-build
	@$(MAKE) --no-print-directory bin/stagedoor
	@sh tools/bench/memory.sh $(CURDIR)/bin/stagedoor $(or $(MEMORY_MINUTES),10) $(or $(MEMORY_RATE),20)

# The peers' clients (tools/bench/peer_*.c): none of src/, each on one
# loopback connection; beanstalkd's needs no library.
PEER_SRCS := tools/bench/peer.c tools/bench/peer.h
build/peer_redis: tools/bench/peer_redis.c $(PEER_SRCS)
	@mkdir -p build
	$(call say,CCLD,$@)$(CC) $(WARN) $(CFLAGS) $(shell pkg-config --cflags hiredis 2>/dev/null) \
		-o $@ $< tools/bench/peer.c $(shell pkg-config --libs hiredis 2>/dev/null)
build/peer_beanstalk: tools/bench/peer_beanstalk.c $(PEER_SRCS)
	@mkdir -p build
	$(call say,CCLD,$@)$(CC) $(WARN) $(CFLAGS) -o $@ $< tools/bench/peer.c

# The queue, the minimal program, Redis Streams and beanstalkd in one run,
# bulk and singles, 3 rounds (tools/bench/peers.sh; BENCH_JOBS, BENCH_REPS).
bench-peers: deps-peers
	@$(MAKE) --no-print-directory build/stagedoor-bench build/sqlbench build/peer_redis build/peer_beanstalk
	@sh tools/bench/peers.sh $(CURDIR)/build/stagedoor-bench $(CURDIR)/build/sqlbench \
		$(CURDIR)/build/peer_redis $(CURDIR)/build/peer_beanstalk

demo: deps-build
	@$(MAKE) --no-print-directory bin/stagedoor build/paysink
	bin/stagedoor demo --shop build/paysink

clean:
	rm -rf build bin

# The repository's git hooks (tools/hooks) for this checkout
hooks:
	git config core.hooksPath tools/hooks
	@echo "hooks: git now runs tools/hooks (commit-msg)"

# The API's parsing layer under libFuzzer (tests/fuzz): a clang build of the
# library with ASan and UBSan, run for FUZZ_TIME seconds on a copy of the
# corpus (tests/fuzz/corpus is never written).  Not part of make test.
FUZZ_CC   ?= clang
FUZZ_TIME ?= 60
FUZZ_SAN  := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
# other modules are written for gcc: clang warns on some, so no -Werror there
FUZZ_LIBFLAGS = $(filter-out -Werror,$(ALL_CFLAGS))
FUZZ_OBJS := $(patsubst src/%.c,build/fuzz/%.o,$(LIBSRCS)) build/fuzz/schema.o build/fuzz/assets.o
build/fuzz/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(call say,CC,$< [fuzz])$(FUZZ_CC) $(FUZZ_LIBFLAGS) $(FUZZ_SAN) $(DEPFLAGS) -fsanitize=fuzzer-no-link -Isrc -c -o $@ $<
build/fuzz/%.o: build/%.c
	@mkdir -p $(dir $@)
	$(call say,CC,$< [fuzz])$(FUZZ_CC) $(FUZZ_LIBFLAGS) $(FUZZ_SAN) $(DEPFLAGS) -Isrc -c -o $@ $<
build/fuzz/fuzz_api: tests/fuzz/fuzz_api.c $(FUZZ_OBJS)
	$(call say,CCLD,$@)$(FUZZ_CC) $(ALL_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer -Isrc -o $@ $< $(FUZZ_OBJS) $(LDLIBS)
fuzz: deps-fuzz
	@$(MAKE) --no-print-directory build/fuzz/fuzz_api
	rm -rf build/fuzz/corpus && mkdir -p build/fuzz/corpus
	cp tests/fuzz/corpus/* build/fuzz/corpus/
	build/fuzz/fuzz_api -max_total_time=$(FUZZ_TIME) -max_len=70000 -timeout=10 \
		build/fuzz/corpus

# ---- The Debian package, make install / uninstall -------------------------
# VERSION is the one source of the version: the package's, and (with
# -DSTAGEDOOR_VERSION) the binary's.  The man pages and the bash completion
# are generated by the binary itself.  tools/deb.sh builds the package
# (dpkg-deb --root-owner-group: no root, no network) and lintian must find
# no error in it; tools/check_deb.sh installs it in a fresh Debian 12 chroot,
# sells an order through it, upgrades to it from v0.1.0's package and purges
# it (root).  The doc variables can name other files, e.g. to package with
# another build's pages.
#   deb: dpkg-shlibdeps (dpkg-dev) for Depends, lintian, debootstrap for check-deb
DEBS_DEB       := dpkg-dev lintian debootstrap systemd-container
DEB_ARCH        = $(shell dpkg --print-architecture)
DEB_FILE        = build/stagedoor_$(VERSION)_$(DEB_ARCH).deb
DOC_MAN1       ?= build/man/stagedoor.1
DOC_MAN5       ?= build/man/stagedoor.conf.5
DOC_COMPLETION ?= build/completion/stagedoor
DOCS_GEN        = $(DOC_MAN1) $(DOC_MAN5) $(DOC_COMPLETION)
PREFIX         ?= /usr/local
SYSCONFDIR     ?= /etc
DESTDIR        ?=
INSTALL_BIN    ?= bin/stagedoor

deps-deb:
	@sh tools/deps.sh $(DEBS_DEB)

# Each made in a temp file, and refused when the binary printed something
# else (an older binary's `help` prints its usage and exits 0).
build/man/stagedoor.1: bin/stagedoor
	@mkdir -p $(dir $@)
	$(call say,GEN,$@)bin/stagedoor help --man 1 >$@.tmp && grep -q '^\.TH ' $@.tmp && mv $@.tmp $@ || \
		{ rm -f $@.tmp; echo "make: 'bin/stagedoor help --man 1' printed no man page" >&2; exit 1; }
build/man/stagedoor.conf.5: bin/stagedoor
	@mkdir -p $(dir $@)
	$(call say,GEN,$@)bin/stagedoor help --man 5 >$@.tmp && grep -q '^\.TH ' $@.tmp && mv $@.tmp $@ || \
		{ rm -f $@.tmp; echo "make: 'bin/stagedoor help --man 5' printed no man page" >&2; exit 1; }
build/completion/stagedoor: bin/stagedoor
	@mkdir -p $(dir $@)
	$(call say,GEN,$@)bin/stagedoor help --completion bash >$@.tmp && grep -q 'complete ' $@.tmp && \
		mv $@.tmp $@ || { rm -f $@.tmp; \
		echo "make: 'bin/stagedoor help --completion bash' printed no completion" >&2; exit 1; }

deb: deps-build deps-deb
	@$(MAKE) --no-print-directory bin/stagedoor $(DOCS_GEN)
	@sh tools/deb.sh --version $(VERSION) --bin bin/stagedoor --man1 $(DOC_MAN1) --man5 $(DOC_MAN5) \
		--completion $(DOC_COMPLETION) --out build >/dev/null
	lintian --fail-on error --info --display-experimental --pedantic $(DEB_FILE)

check-deb: deb
	@sh tools/check_deb.sh --deb $(CURDIR)/$(DEB_FILE) --old v0.1.0 \
		--man1 $(DOC_MAN1) --man5 $(DOC_MAN5) --completion $(DOC_COMPLETION)
	@sh tools/check_systemd.sh --deb $(CURDIR)/$(DEB_FILE)

# The package under a real systemd only (the last part of check-deb).
check-systemd: deb
	@sh tools/check_systemd.sh --deb $(CURDIR)/$(DEB_FILE)

install: $(INSTALL_BIN) $(DOCS_GEN)
	@sh tools/install.sh install --prefix "$(PREFIX)" --sysconfdir "$(SYSCONFDIR)" --destdir "$(DESTDIR)" \
		--bin $(INSTALL_BIN) --man1 $(DOC_MAN1) --man5 $(DOC_MAN5) --completion $(DOC_COMPLETION)
uninstall:
	@sh tools/install.sh uninstall --prefix "$(PREFIX)" --sysconfdir "$(SYSCONFDIR)" --destdir "$(DESTDIR)"

# The headers each object, test and tool was made from (DEPFLAGS)
-include $(wildcard build/*/*.d build/*/*/*.d build/*.d)
