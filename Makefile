# Stagedoor Box: one program, one SQLite file.
#
#   make          build bin/stagedoor
#   make deps     install the Debian packages the build and tests need
#   make test     deps, then every test twice: a normal build and an
#                 AddressSanitizer + UndefinedBehaviorSanitizer build
#   make bench    the queue benchmark next to a minimal SQL-only program,
#                 then the ticket pipeline and the HTTP intake benchmarks
#   make demo     a short run of the queue on its built-in job kinds
#   make clean

CC      ?= cc
PKGS    := sqlite3 jansson libqrencode libcurl libmicrohttpd
TPKGS   := cmocka
# libharu and mbedTLS ship no pkg-config file in Debian 12: plain -l flags
XLIBS   := -lhpdf -lmbedcrypto
DEBS    := gcc make pkg-config libsqlite3-dev libjansson-dev libcmocka-dev \
           libhpdf-dev libqrencode-dev libmbedtls-dev libcurl4-openssl-dev \
           qpdf poppler-utils python3-aiosmtpd openssl libmicrohttpd-dev \
           clang chromium nodejs

WARN    := -std=c11 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-missing-field-initializers
CFLAGS  ?= -O2 -g
ALL_CFLAGS = $(WARN) $(CFLAGS) $(shell pkg-config --cflags $(PKGS) 2>/dev/null) -pthread
LDLIBS  = $(shell pkg-config --libs $(PKGS) 2>/dev/null) $(XLIBS) -pthread
TLIBS   = $(shell pkg-config --libs $(TPKGS) 2>/dev/null)
SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer

SRCS    := $(sort $(wildcard src/*.c))
LIBSRCS := $(filter-out src/main.c,$(SRCS))
SCHEMA  := $(sort $(wildcard schema/*.sql))
ASSETS  := src/dashboard/index.html src/dashboard/dashboard.js src/dashboard/dashboard.css
TESTS   := $(sort $(basename $(notdir $(wildcard tests/test_*.c))))

# Two builds of everything: build/rel (bin/stagedoor) and build/san.
REL_OBJS := $(patsubst src/%.c,build/rel/%.o,$(LIBSRCS)) build/rel/schema.o build/rel/assets.o
SAN_OBJS := $(patsubst src/%.c,build/san/%.o,$(LIBSRCS)) build/san/schema.o build/san/assets.o

.PHONY: all deps test check-rel check-san check-browser bench demo soak clean
.SUFFIXES:

all: bin/stagedoor

deps:
	@sh tools/deps.sh $(DEBS)
	@sh tools/npm_deps.sh tests/browser

build/embed_schema: tools/embed_schema.c
	@mkdir -p build
	$(CC) -O1 -o $@ $<

build/schema.c: build/embed_schema $(SCHEMA)
	build/embed_schema $@ $(SCHEMA)

build/embed_assets: tools/embed_assets.c
	@mkdir -p build
	$(CC) -O1 -o $@ $<

build/assets.c: build/embed_assets $(ASSETS)
	build/embed_assets $@ $(ASSETS)

build/rel/%.o: src/%.c src/*.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Isrc -c -o $@ $<
build/rel/schema.o: build/schema.c src/db.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Isrc -c -o $@ $<
build/san/%.o: src/%.c src/*.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(SAN) -Isrc -c -o $@ $<
build/san/schema.o: build/schema.c src/db.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(SAN) -Isrc -c -o $@ $<
build/rel/assets.o: build/assets.c src/http.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Isrc -c -o $@ $<
build/san/assets.o: build/assets.c src/http.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(SAN) -Isrc -c -o $@ $<

bin/stagedoor: build/rel/main.o $(REL_OBJS)
	@mkdir -p bin
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)
build/san/stagedoor: build/san/main.o $(SAN_OBJS)
	$(CC) $(CFLAGS) $(SAN) -o $@ $^ $(LDLIBS)

build/rel/tests/%: tests/%.c tests/testutil.h build/rel/tests/testutil.o $(REL_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Isrc -Itests -o $@ $< build/rel/tests/testutil.o $(REL_OBJS) $(LDLIBS) $(TLIBS)
build/san/tests/%: tests/%.c tests/testutil.h build/san/tests/testutil.o $(SAN_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(SAN) -Isrc -Itests -o $@ $< build/san/tests/testutil.o $(SAN_OBJS) $(LDLIBS) $(TLIBS)
build/rel/tests/testutil.o: tests/testutil.c tests/testutil.h src/*.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Isrc -Itests -c -o $@ $<
build/san/tests/testutil.o: tests/testutil.c tests/testutil.h src/*.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(SAN) -Isrc -Itests -c -o $@ $<

# The suite, once per build; each integration test runs that build's binary.
check-rel: bin/stagedoor build/sqlbench build/mailsink build/chaos $(addprefix build/rel/tests/,$(TESTS))
	@sh tools/run_tests.sh rel $(CURDIR)/bin/stagedoor $(addprefix build/rel/tests/,$(TESTS))
check-san: build/san/stagedoor build/mailsink build/chaos $(addprefix build/san/tests/,$(TESTS))
	@sh tools/run_tests.sh san $(CURDIR)/build/san/stagedoor $(addprefix build/san/tests/,$(TESTS))

test: deps
	@$(MAKE) --no-print-directory check-rel
	@$(MAKE) --no-print-directory check-san

# The dashboard in headless Debian chromium (playwright-core from
# tests/browser/package-lock.json) against tests/browser/fake_box.mjs.
check-browser:
	sh tests/browser/run_fake.sh $(CURDIR)/build/dashboard.png

build/sqlbench: tools/bench/sqlbench.c src/queue_sql.h build/rel/schema.o build/rel/db.o build/rel/notify.o build/rel/result.o build/rel/clock.o build/rel/fsio.o
	$(CC) $(ALL_CFLAGS) -Isrc -o $@ $^ $(LDLIBS)

# The local HTTPS mail provider the mail tests run against (tools/mailsink).
build/mailsink: $(wildcard tools/mailsink/*.c) src/*.h $(REL_OBJS)
	$(CC) $(ALL_CFLAGS) -Isrc -o $@ $(wildcard tools/mailsink/*.c) $(REL_OBJS) \
		-lmbedtls -lmbedx509 -lmbedcrypto $(LDLIBS)

# The crash soak (tools/chaos): its own SQLite and jansson, none of src/, so
# that its verdict does not lean on the code it judges.
build/chaos: $(wildcard tools/chaos/*.c) $(wildcard tools/chaos/*.h)
	@mkdir -p build
	$(CC) $(WARN) $(CFLAGS) $(shell pkg-config --cflags sqlite3 jansson) -o $@ \
		$(wildcard tools/chaos/*.c) $(shell pkg-config --libs sqlite3 jansson)

soak: deps bin/stagedoor build/mailsink build/chaos
	build/chaos --bin bin/stagedoor --mailsink build/mailsink --orders 2000 --kills 100

bench: deps bin/stagedoor build/sqlbench
	@sh tools/bench/run.sh $(CURDIR)/bin/stagedoor $(CURDIR)/build/sqlbench
	bin/stagedoor bench pipeline --orders 500
	bin/stagedoor bench api --requests 2000 --clients 4

demo: deps
	@$(MAKE) --no-print-directory all
	bin/stagedoor demo

clean:
	rm -rf build bin

# The API's parsing layer under libFuzzer (tests/fuzz): a clang build of the
# library with ASan and UBSan, run for FUZZ_TIME seconds on a copy of the
# corpus (tests/fuzz/corpus is never written).  Not part of make test.
FUZZ_CC   ?= clang
FUZZ_TIME ?= 60
FUZZ_SAN  := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
# other modules are written for gcc: clang warns on some, so no -Werror there
FUZZ_LIBFLAGS = $(filter-out -Werror,$(ALL_CFLAGS))
FUZZ_OBJS := $(patsubst src/%.c,build/fuzz/%.o,$(LIBSRCS)) build/fuzz/schema.o build/fuzz/assets.o
.PHONY: fuzz
build/fuzz/%.o: src/%.c src/*.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_LIBFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer-no-link -Isrc -c -o $@ $<
build/fuzz/schema.o: build/schema.c src/db.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_LIBFLAGS) $(FUZZ_SAN) -Isrc -c -o $@ $<
build/fuzz/assets.o: build/assets.c src/http.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_LIBFLAGS) $(FUZZ_SAN) -Isrc -c -o $@ $<
build/fuzz/fuzz_api: tests/fuzz/fuzz_api.c $(FUZZ_OBJS)
	$(FUZZ_CC) $(ALL_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer -Isrc -o $@ $< $(FUZZ_OBJS) $(LDLIBS)
fuzz: build/fuzz/fuzz_api
	rm -rf build/fuzz/corpus && mkdir -p build/fuzz/corpus
	cp tests/fuzz/corpus/* build/fuzz/corpus/
	build/fuzz/fuzz_api -max_total_time=$(FUZZ_TIME) -max_len=70000 -timeout=10 \
		build/fuzz/corpus
