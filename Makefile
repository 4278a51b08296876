# The suite's commands. `make test` is the one test command (.ci/run calls it).
#
# Every module of go.work is listed once in MODULES: `go test ./...` at the
# root does not reach nested modules, so each target runs inside each module.

MODULES  := pkg scripts tests services/console services/order services/payment services/inventory services/points services/notification services/reconciliation examples/shipping tools/dev
SERVICES := order payment inventory points notification reconciliation
BIN_DIR  := bin

GO ?= go
# The Postgres server the tests and `make run` use; the environment wins,
# but an empty DATABASE_URL means the default too, so `DATABASE_URL= make
# test` runs the database tests instead of skipping them.
ifeq ($(strip $(DATABASE_URL)),)
DATABASE_URL := postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
endif
export DATABASE_URL

# $(call each_module,VERB,COMMAND) runs COMMAND inside every module with a
# banner, skipping (and saying so) a module that has no packages yet, since
# `go test ./...` fails on one. COMMAND's status is in $$rc afterwards.
define each_module
for m in $(MODULES); do \
	echo; echo "==================== $(1) $$m ===================="; \
	if (cd $$m && $(GO) list ./... 2>&1) | grep -q 'matched no packages'; then echo "(no packages yet: skipped)"; continue; fi; \
	rc=0; (cd $$m && $(2)) || rc=$$?;
endef

# -race in every module (docs/decisions.md, Testing): the service
# processes tests/ starts are built without it, their code is raced in the
# services' in-process tests.
TEST_FLAGS  ?= -race -count=1 -p 2 -timeout 9m
# -p 1: one package's benchmarks at a time, so no figure shares the CPU
# with another package's.
# tests/bench starts a whole suite and relays tens of thousands of rows
# twice: longer than go test's default 10 minutes on a busy machine.
# BENCH_RELAY_ROWS, BENCH_API_ORDERS and BENCH_API_RATE scale it, and
# BENCH_API_RATES sweeps the API benchmark's rates (docs/benchmarks.md).
BENCH_FLAGS ?= -p 1 -run '^$$' -bench . -benchmem -timeout 30m
# Where `make bench` keeps its raw output (docs/benchmarks.md).
BENCH_DIR   ?= docs/benchmarks

# `make fuzz` runs every fuzz target (func FuzzXxx in a _test.go file of
# any module) for FUZZTIME, one after the other: go test -fuzz takes one
# target of one package per run. Their seed corpora (f.Add and
# testdata/fuzz/) already run in `make test` (docs/testing.md).
FUZZTIME ?= 60s

.DEFAULT_GOAL := help
.PHONY: help run build test bench fuzz mutate lint vet fmt up down compose-env compose-control clean screenshots
.PHONY: drills drill-duplicate drill-loss drill-reorder drill-poison drill-replay drill-reconcile drill-backlog dlq publish reconcile

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-16s %s\n", $$1, $$2}'

# The runner is built and then run (not `go run`), so Ctrl-C reaches it
# directly and its exit status is make's.
run: ## run the whole suite on this machine, no Docker (Ctrl-C stops it)
	@$(GO) build -o $(BIN_DIR)/run ./scripts/run
	@exec ./$(BIN_DIR)/run

build: ## build the six service binaries and the console into bin/, and every module
	@set -e; for s in $(SERVICES); do \
		echo "go build -o $(BIN_DIR)/$$s-service ./services/$$s"; \
		$(GO) build -o $(BIN_DIR)/$$s-service ./services/$$s; \
	done; \
	echo "go build -o $(BIN_DIR)/console ./services/console"; \
	$(GO) build -o $(BIN_DIR)/console ./services/console
	@$(call each_module,build,$(GO) build ./...) [ $$rc -eq 0 ] || exit 1; done

# The pictures of docs/console.md: a suite of its own (as the tests start
# one) and Debian's chromium, driven by tests/browser TestConsoleScreenshots.
screenshots: ## regenerate the console's pictures in docs/console/ (needs chromium and Postgres)
	@mkdir -p docs/console
	cd tests && CONSOLE_SCREENSHOTS=$(CURDIR)/docs/console $(GO) test -count=1 -timeout 10m -run '^TestConsoleScreenshots$$' -v ./browser

# Runs every module even after a failure, then fails naming the failed ones.
# Each module's wall time (build and tests) is listed at the end, against
# the budget of 10 minutes in all on 2 cores (docs/testing.md).
test: ## run the tests of every module under the race detector (uses Postgres at DATABASE_URL)
	@failed=""; times=""; all=$$(date +%s); last=$$all; $(call each_module,test,$(GO) test $(TEST_FLAGS) ./...) \
		now=$$(date +%s); times="$$times $$m $$((now - last))s,"; last=$$now; [ $$rc -eq 0 ] || failed="$$failed $$m"; done; \
	echo; echo "make test: wall time per module:$${times%,}; $$(( $$(date +%s) - all ))s in all"; \
	if [ -n "$$failed" ]; then echo "make test: FAILED in:$$failed"; exit 1; fi; \
	echo "make test: every module passed"

# Packages are found by their source (a line starting "func Fuzz" in a
# _test.go file), then `go test -list` names their targets. The last
# progress line of each run (execs, new interesting) is repeated at the end.
# A run that ends in a bare "context deadline exceeded" without writing a
# failing input is Go's fuzztime deadline race on a starved machine
# (go.dev/issue/75804, fixed in Go 1.27), reported but not a failure.
fuzz: ## run every fuzz target for FUZZTIME each (default 60s), one at a time
	@failed=""; flaked=""; summary=""; \
	for m in $(MODULES); do \
		for pd in $$(cd $$m && $(GO) list -f '{{.ImportPath}}={{.Dir}}' ./... 2>/dev/null); do \
			pkg=$${pd%%=*}; dir=$${pd#*=}; \
			grep -qs '^func Fuzz' $$dir/*_test.go || continue; \
			for t in $$(cd $$m && $(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
				echo; echo "==================== fuzz $$pkg $$t ($(FUZZTIME)) ===================="; \
				out=$$(cd $$m && $(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) $$pkg 2>&1); rc=$$?; \
				echo "$$out" | tail -n 20; \
				last=$$(echo "$$out" | grep '^fuzz: elapsed' | tail -n 1); \
				summary="$$summary$$pkg $$t: $${last#fuzz: }\n"; \
				if [ $$rc -ne 0 ]; then \
					if ! echo "$$out" | grep -q 'Failing input written to' && echo "$$out" | grep -q '^ *context deadline exceeded$$'; then \
						flaked="$$flaked $$pkg.$$t"; \
					else failed="$$failed $$pkg.$$t"; fi; \
				fi; \
			done; \
		done; \
	done; \
	echo; printf "$$summary"; echo; \
	if [ -n "$$flaked" ]; then echo "make fuzz: no failing input, stopped by Go's fuzztime deadline race (go.dev/issue/75804, a starved worker):$$flaked"; fi; \
	if [ -n "$$failed" ]; then echo "make fuzz: FAILED:$$failed (the failing input is under that package's testdata/fuzz/)"; exit 1; fi; \
	echo "make fuzz: every target passed"

# `make bench` prints and keeps its raw output in BENCH_DIR, one file per
# run named by its UTC start to the minute, headed by the date and the
# machine as `key: value` lines (go test adds goos, goarch, pkg and cpu),
# then regenerates the Latest figures of docs/benchmarks.md, and the chart
# of a sweep's goodput curve, from that file (tools/dev/benchtables). A failed module stops it: the raw file stays, the
# figures are left as they were.
bench: ## run the benchmarks of every module, keep the raw output, regenerate docs/benchmarks.md's figures
	@mkdir -p $(BENCH_DIR); set -- $$(date -u '+%Y-%m-%dT%H%M %Y-%m-%dT%H:%M:%SZ'); \
	raw=$(BENCH_DIR)/$$1-make-bench.txt; status=$$(mktemp); echo 0 > $$status; \
	{ \
		echo "date: $$2"; \
		echo "cpu: $$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)"; \
		echo "cores: $$(getconf _NPROCESSORS_ONLN)"; \
		echo "memory: $$(awk '/^MemTotal:/ { printf "%.1f GiB", $$2 / 1048576 }' /proc/meminfo 2>/dev/null)"; \
		echo "go-version: $$($(GO) env GOVERSION) $$($(GO) env GOOS)/$$($(GO) env GOARCH)"; \
		echo "kernel: $$(uname -srm)"; \
		echo "commit: $$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$$(git diff --quiet HEAD -- 2>/dev/null || echo ' with uncommitted changes')"; \
		echo "modules: $(MODULES)"; \
		echo "bench-flags: $(BENCH_FLAGS)"; \
		echo "bench-env: $$(env | grep '^BENCH_' | grep -v '^BENCH_FLAGS=\|^BENCH_DIR=' | sort | tr '\n' ' ')"; \
		$(call each_module,bench,$(GO) test $(BENCH_FLAGS) ./...) [ $$rc -eq 0 ] || { echo $$rc > $$status; break; }; done; \
	} 2>&1 | tee $$raw; \
	rc=$$(cat $$status); rm -f $$status; \
	if [ "$$rc" -ne 0 ]; then echo "make bench: FAILED; raw output in $$raw, docs/benchmarks.md left as it was"; exit 1; fi; \
	echo; echo "raw output: $$raw"; $(GO) run ./tools/dev/benchtables $$raw

# `make mutate` is mutation testing (docs/testing.md, Mutation testing):
# gremlins, pinned as a tool in the tools/ module (outside go.work, so its
# dependencies never change the suite's build list and `make test` never
# reaches it; tools/dev beneath it is a module of go.work and MODULES, the
# repository's own checks: docs/decisions.md, Development tools), mutates pkg/versionguard, pkg/inbox, pkg/outbox and every
# service's internal/domain and internal/app packages one at a time, runs
# the package's tests against each mutant and prints a table and the
# survivors; the raw output is kept in docs/mutation/. Slow (tens of
# minutes to hours): MUTATE_PACKAGES="pkg/versionguard
# services/order/internal/domain/order" runs a few, MUTATE_WORKERS (default
# 1) and MUTATE_TIMEOUT_COEFFICIENT (default 5) are gremlins' --workers and
# --timeout-coefficient; MUTATE_MIN_TIMEOUT (default 60s) is the least time
# a mutant's test run gets, whatever the coefficient.
mutate: ## mutation-test the rules' packages (gremlins), print scores and survivors, keep the raw output in docs/mutation/
	@cd tools && GOWORK=off $(GO) build -o ../$(BIN_DIR)/gremlins github.com/go-gremlins/gremlins/cmd/gremlins && GOWORK=off $(GO) build -o ../$(BIN_DIR)/mutate ./mutate
	@GREMLINS=$(BIN_DIR)/gremlins ./$(BIN_DIR)/mutate

# `make lint` is golangci-lint with the committed .golangci.yml (its
# linters and why: docs/decisions.md, Linting), pinned like gremlins as a
# tool of the tools/ module and built from it, so a clean clone needs only
# the module proxy. It runs inside every module (golangci-lint, like go
# test, stops at a nested module's go.mod), all of them even after a
# failure, then fails naming the failed ones. Its gofmt and goimports
# formatters and its govet cover `make fmt` and `make vet`.
GOLANGCI_LINT := $(CURDIR)/$(BIN_DIR)/golangci-lint

lint: ## golangci-lint (.golangci.yml: vet, staticcheck, revive, gofmt, goimports, ...) in every module
	@cd tools && GOWORK=off $(GO) build -o $(GOLANGCI_LINT) github.com/golangci/golangci-lint/v2/cmd/golangci-lint
	@failed=""; $(call each_module,lint,$(GOLANGCI_LINT) run --config $(CURDIR)/.golangci.yml ./...) [ $$rc -eq 0 ] || failed="$$failed $$m"; done; \
	echo; \
	if [ -n "$$failed" ]; then echo "make lint: FAILED in:$$failed"; exit 1; fi; \
	echo "make lint: every module passed"

fmt: ## fail when a file is not gofmt-formatted
	@out=$$(gofmt -l $(MODULES)); \
	if [ -n "$$out" ]; then echo "gofmt -l: these files need gofmt -w:"; echo "$$out"; exit 1; fi

vet: ## go vet every module
	@$(call each_module,vet,$(GO) vet ./...) [ $$rc -eq 0 ] || exit 1; done

# The drills run against a suite that is already running (`make run` in
# another terminal, or `make up` with `make compose-control` in another
# terminal: docs/drills.md, Drills under compose); DRILL_FLAGS passes flags, e.g. DRILL_FLAGS="--run-id r1"
# (--keep-planted keeps the synthetic orders a case plants, docs/drills.md).
# Each exits non-zero when a case fails (docs/exercises/, README.md (Drills)).
DRILL       := $(GO) run ./scripts/drill/run
DRILL_FLAGS ?=

drills: ## run every drill against the running suite (make run, or make up + make compose-control)
	@$(DRILL) $(DRILL_FLAGS) all

drill-duplicate: ## drill: duplicate deliveries and callbacks apply once
	@$(DRILL) $(DRILL_FLAGS) duplicate

drill-loss: ## drill: crashes around the publish, lost ack, consumer crash/failure, rollback, broker and callback outages
	@$(DRILL) $(DRILL_FLAGS) loss

drill-reorder: ## drill: reordered events apply in version order
	@$(DRILL) $(DRILL_FLAGS) reorder

drill-poison: ## drill: poison messages and the retry bound reach the DLQ
	@$(DRILL) $(DRILL_FLAGS) poison

drill-replay: ## drill: replay a dead letter once, with its original eventId
	@$(DRILL) $(DRILL_FLAGS) replay

drill-reconcile: ## drill: agreed rules, refunds, returned payments; reconciliation finds, compensates, audits
	@$(DRILL) $(DRILL_FLAGS) reconcile

# The backlog drill (docs/backlog.md), also against `make run` (or compose
# with `make compose-control`): one instance
# per consumer, 100 000 events, scale-out to 6 instances, samples until
# drained, exactly-once checks; a table, and report.json + report.html under
# .data/backlog/<run-id>/. BACKLOG_FLAGS="--count 20000 --run-id b1".
BACKLOG_FLAGS ?=

drill-backlog: ## drill: 100 000-event backlog, scale-out 1 → 6, exactly-once checks, charts
	@$(GO) run ./scripts/backlog/run $(BACKLOG_FLAGS)

# A reconciliation run against the running suite, printed as a table:
# RECONCILE_ARGS="--order O-1 --min-age 0s", "--show 12" or "--runs".
RECONCILE_ARGS ?=

reconcile: ## start a reconciliation run, wait for it and print its findings (RECONCILE_ARGS)
	@$(GO) run ./scripts/reconcile $(RECONCILE_ARGS)

# DLQ_ARGS="show --service inventory --id 3", or "replay --service inventory --id 3".
dlq: ## list the consumers' dead letters (DLQ_ARGS for show / replay)
	@$(GO) run ./scripts/dlq $(or $(DLQ_ARGS),list)

# The backlog drill's load (docs/backlog.md): the tutorial's 100 000 events
# by default; PUBLISH_ARGS="--count 20000 --run-id r2 --seed-stock 1000".
PUBLISH_ARGS ?= --count 100000 --run-id backlog-01

publish: ## publish OrderPaid events for the backlog drill (PUBLISH_ARGS)
	@$(GO) run ./scripts/publish_orders $(PUBLISH_ARGS)

# `make up` is `docker compose up`, which works alone on a fresh clone:
# compose's one-shot service secrets generates the secrets into a volume
# (docs/security.md). Nothing here reads or writes .env.
up: ## start the suite in Docker (Redpanda, Console, Postgres, Prometheus, Grafana, services)
	docker compose up --build -d

down: ## stop the Docker suite and delete its volumes (data and generated secrets)
	docker compose down -v --remove-orphans

# What a shell on this machine needs to call the compose suite's /admin
# routes and to run the drills against it: eval "$$(make -s compose-env)".
# Read in the running order-service container, whose user owns the files.
compose-env: ## print the compose suite's ADMIN_TOKEN, CALLBACK_SECRET and DATABASE_URL as shell exports
	@docker compose exec -T order-service sh -euc '\
		echo "export ADMIN_TOKEN='\''$$(cat /run/secrets/admin_token)'\''"; \
		echo "export CALLBACK_SECRET='\''$$(cat /run/secrets/callback_secret)'\''"; \
		echo "export DATABASE_URL='\''postgres://postgres:$$(cat /run/secrets/postgres_password)@127.0.0.1:15432/postgres?sslmode=disable'\''"'

# The control API of `make run` for the compose suite (docs/drills.md,
# Drills under compose), so `make drills` and `make drill-backlog` run every
# case against compose too: it stops, starts, recreates and scales the
# containers with the Docker CLI. Built and run like `make run`, so Ctrl-C
# reaches it; it removes the extra instances it started on the way out.
compose-control: ## serve the drills' control API for the Docker suite on 127.0.0.1:8090 (Ctrl-C stops it)
	@$(GO) build -o $(BIN_DIR)/compose-control ./scripts/compose_control
	@exec ./$(BIN_DIR)/compose-control

clean: ## remove binaries, the embedded broker's data and test profiles
	rm -rf $(BIN_DIR) .data
	find . -name '*.test' -o -name 'coverage.*' -o -name 'cover.out' | xargs rm -f
