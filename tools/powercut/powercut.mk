# tools/powercut: a FUSE filesystem that simulates power cuts (README.md here).
#
#   build/powercut        the daemon (and its --ctl client)
#   build/test_powercut   its cmocka suite
#   make test-powercut    builds both and runs the suite (root, /dev/fuse)
#
# Works included from the top Makefile (it leaves the default goal alone) or
# on its own:
#   make -f tools/powercut/powercut.mk test-powercut
# Debian packages: libfuse3-dev fuse3 (build and run), libcmocka-dev
# libsqlite3-dev (the suite).  POWERCUT_TEST_SRC names the suite's source
# where it moves.

POWERCUT_PREV_GOAL := $(.DEFAULT_GOAL)
POWERCUT_DIR       := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
POWERCUT_TEST_SRC  ?= $(POWERCUT_DIR)/test_powercut.c
POWERCUT_CFLAGS    := -std=c11 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -O2 -g

.PHONY: test-powercut

build/powercut: $(POWERCUT_DIR)/powercut.c $(POWERCUT_DIR)/powercut.mk
	@mkdir -p build
	$(CC) $(POWERCUT_CFLAGS) -o $@ $< $(shell pkg-config --cflags --libs fuse3) -pthread

build/test_powercut: $(POWERCUT_TEST_SRC) $(POWERCUT_DIR)/powercut.mk
	@mkdir -p build
	$(CC) $(POWERCUT_CFLAGS) -o $@ $< $(shell pkg-config --cflags --libs cmocka sqlite3) -pthread

test-powercut: build/powercut build/test_powercut
	POWERCUT=build/powercut build/test_powercut

ifneq ($(words $(MAKEFILE_LIST)),1)
.DEFAULT_GOAL := $(POWERCUT_PREV_GOAL)
endif
