# Build, install and test the pure-Go perfevent agent.
#
#   make build     bin/pmdaperfevent and bin/perfalloc (static, no cgo)
#   make test      unit tests (everything except qa/, which drives the real pmcd)
#   make check     the full suite: setup, unit tests, vet, gofmt, cross, fuzz, qa (as root)
#   make cross     build for every Linux architecture; unit tests of arm64, ppc64le, s390x under qemu-user
#   make bench     Go benchmarks, then our agent against the C agent (qa/bench)
#   make install   copy the agent's files into $(DESTDIR)$(PMDADIR), link both commands into $(BINDIR)
#   make deb rpm   pcp-pmda-perfevent-go packages in dist/ (PKG_ARCH=arm64 … for others)
#   make clean
#
# Packagers: make build && make install DESTDIR=/tmp/stage MANDIR=/usr/share/man
# then run $(PMDADIR)/Install on the target to register the agent with pmcd.
# Nothing is installed over a file of Debian's pcp package.

SHELL := /bin/bash

GO ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
GOFLAGS_BUILD ?= -trimpath

# The agent's home, beside (never inside) the C agent's $(PCP_PMDAS_DIR)/perfevent.
PCP_PMDAS_DIR ?= $(or $(shell . /etc/pcp.conf 2>/dev/null && echo $$PCP_PMDAS_DIR),/var/lib/pcp/pmdas)
PMDADIR ?= $(PCP_PMDAS_DIR)/perfevent-go
# Man pages stay in the agent's home by default (man -M $(PMDADIR)/man
# pmdaperfevent): Debian's pcp owns pmdaperfevent.1 and perfevent.conf.5 in
# the system man tree. A package that replaces the C agent sets
# MANDIR=$(PREFIX)/share/man; MANDIR=/usr/local/share/man makes a plain
# `man perfalloc` show ours (man searches it before /usr/share/man).
# pmrep(1) reads every view file in $(PCP_SYSCONF_DIR)/pmrep; ours is
# perfevent-go.conf there, a name no package of PCP's uses.
PCP_SYSCONF_DIR ?= $(or $(shell . /etc/pcp.conf 2>/dev/null && echo $$PCP_SYSCONF_DIR),/etc/pcp)
# pmieconf(1) reads rule groups from $(PCP_VAR_DIR)/config/pmieconf; ours
# is perfevent/ there, a group no package of PCP's has.
PCP_VAR_DIR ?= $(or $(shell . /etc/pcp.conf 2>/dev/null && echo $$PCP_VAR_DIR),/var/lib/pcp)
PREFIX ?= /usr
MANDIR ?= $(PMDADIR)/man
# Both commands on PATH: symbolic links in BINDIR to the agent's home
# (BINDIR= makes none). /usr/local/bin comes before /usr/bin in the usual
# PATH, so a distribution's perfalloc there (Fedora's pcp-pmda-perfevent;
# Debian keeps the C one in the C agent's directory, off PATH) is found
# after ours; install says which comes first. Both perfallocs speak the
# same lock-file protocol to either agent. A file there that is not our
# link is left alone.
BINDIR ?= /usr/local/bin
LINKS := pmdaperfevent perfalloc
DESTDIR ?=

# What `make install` copies; override to install prebuilt binaries.
AGENT_BIN ?= bin/pmdaperfevent
PERFALLOC_BIN ?= bin/perfalloc

INSTALL_SCRIPTS := install/Install install/Remove install/Upgrade install/c-config
INSTALL_DATA := install/pmns install/domain.h install/root install/help
# grafana-pcp's dashboard, for an administrator to import into Grafana.
DASHBOARDS := install/grafana/perfevent.json
MANPAGES := $(wildcard man/*.[1-8])

QA_TIMEOUT ?= 25m
FUZZTIME ?= 5s

.PHONY: all build test check vet fmt-check cross fuzz qa bench install deb rpm clean FORCE

all: build

build: bin/pmdaperfevent bin/perfalloc

# Always ask go: it knows what is up to date, and leaves an unchanged
# binary alone, so a rebuild does not disturb a running agent's file.
bin/pmdaperfevent: FORCE
	CGO_ENABLED=0 $(GO) build $(GOFLAGS_BUILD) -o $@ ./pmda

bin/perfalloc: FORCE
	CGO_ENABLED=0 $(GO) build $(GOFLAGS_BUILD) -o $@ ./perfalloc

test:
	$(GO) test $$($(GO) list ./... | grep -v '^perfevent/qa$$')

vet:
	$(GO) vet ./...

# Both commands build for each architecture (arm64, riscv64 and loong64
# have no dup2, s390x is big-endian); the unit tests run for those that
# qemu-user-static emulates well enough, s390x for the byte order. The
# host kernel cannot start their binaries, so go test -exec runs the test
# binary under qemu, and PERFEVENT_EMULATOR tells the tests to start the
# programs they build through it too (internal/emulator). What qemu-user
# does not emulate (perf_event_open, a process's own start time) is
# skipped, by name. scripts/cross-test runs them, and a package that hung
# under qemu once more.
CROSS_BUILD ?= amd64 arm64 ppc64le s390x riscv64 loong64
CROSS_TEST ?= arm64:aarch64 ppc64le:ppc64le s390x:s390x

cross:
	@set -e; for a in $(CROSS_BUILD); do \
		echo "cross: build linux/$$a"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$a $(GO) build $(GOFLAGS_BUILD) -o /dev/null ./pmda ./perfalloc; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$a $(GO) vet ./...; \
	done
	GO=$(GO) CROSS_TEST="$(CROSS_TEST)" scripts/cross-test

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) scripts/fuzz

# qa/ installs, removes and restarts the real agent under the real pmcd.
# PERFEVENT_QA=1 turns its "no root or no pmcd" skips into failures.
qa:
	PERFEVENT_QA=1 $(GO) test -count=1 -timeout $(QA_TIMEOUT) -v ./qa/

check:
	scripts/setup
	@# -k: one failing step should not hide the verdict of the others
	$(MAKE) -k test vet fmt-check cross fuzz qa

# qa/bench/run runs the Go micro-benchmarks, then times our agent against
# the C one, each under a private pmcd (qa/bench/README.md).
bench: build
	@if [ -x qa/bench/run ]; then GO=$(GO) qa/bench/run; \
	else $(GO) test -run='^$$' -bench=. ./...; fi

install: $(AGENT_BIN) $(PERFALLOC_BIN)
	install -d -m 0755 $(DESTDIR)$(PMDADIR)
	install -C -m 0755 $(AGENT_BIN) $(DESTDIR)$(PMDADIR)/pmdaperfevent
	install -C -m 0755 $(PERFALLOC_BIN) $(DESTDIR)$(PMDADIR)/perfalloc
	install -C -m 0755 $(INSTALL_SCRIPTS) $(DESTDIR)$(PMDADIR)/
	install -C -m 0644 $(INSTALL_DATA) $(DESTDIR)$(PMDADIR)/
	install -d -m 0755 $(DESTDIR)$(PMDADIR)/grafana
	install -C -m 0644 $(DASHBOARDS) $(DESTDIR)$(PMDADIR)/grafana/
	@# An administrator's edits to the installed configuration win over
	@# ours: a different file is left alone and ours lands beside it.
	@for c in perfevent.conf cgroups.conf; do \
		if [ ! -f $$c ]; then \
			echo "note: no $$c in the source tree; the agent uses its built-in default"; \
		elif [ ! -f $(DESTDIR)$(PMDADIR)/$$c ] || [ -n "$(FORCE_CONF)" ]; then \
			install -C -m 0644 $$c $(DESTDIR)$(PMDADIR)/$$c; \
		elif ! cmp -s $$c $(DESTDIR)$(PMDADIR)/$$c; then \
			install -m 0644 $$c $(DESTDIR)$(PMDADIR)/$$c.new; \
			echo "note: kept the existing $(PMDADIR)/$$c; the new default is $$c.new (FORCE_CONF=1 replaces it)"; \
		fi; \
	done
	@if [ -n "$(BINDIR)" ]; then \
		install -d -m 0755 $(DESTDIR)$(BINDIR); \
		for c in $(LINKS); do \
			l=$(DESTDIR)$(BINDIR)/$$c; \
			if [ -e "$$l" ] && [ ! -L "$$l" ]; then \
				echo "note: $$l exists and is not our link; left alone (run $(PMDADIR)/$$c)"; \
				continue; \
			fi; \
			[ "$$(readlink "$$l")" = $(PMDADIR)/$$c ] || ln -sfn $(PMDADIR)/$$c "$$l"; \
		done; \
		[ -n "$(DESTDIR)" ] || scripts/which-perfalloc "$(BINDIR)" "$(PMDADIR)"; \
	fi
	install -d -m 0755 $(DESTDIR)$(PCP_SYSCONF_DIR)/pmrep
	install -C -m 0644 install/pcp/pmrep-perfevent-go.conf $(DESTDIR)$(PCP_SYSCONF_DIR)/pmrep/perfevent-go.conf
	install -d -m 0755 $(DESTDIR)$(PCP_VAR_DIR)/config/pmieconf/perfevent
	install -C -m 0644 install/pmieconf/perfevent/reservation_held $(DESTDIR)$(PCP_VAR_DIR)/config/pmieconf/perfevent/
	@if [ -n "$(MANPAGES)" ]; then \
		for m in $(MANPAGES); do \
			s=$${m##*.}; install -d -m 0755 $(DESTDIR)$(MANDIR)/man$$s; \
			install -C -m 0644 $$m $(DESTDIR)$(MANDIR)/man$$s/; \
		done; \
	fi

# Packages from static binaries (scripts/package, packaging/nfpm.yaml):
# PKG_ARCH (a GOARCH), PKG_VERSION and PKG_RELEASE override the defaults.
deb rpm:
	GO=$(GO) scripts/package $@

clean:
	rm -rf bin
