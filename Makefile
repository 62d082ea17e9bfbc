# jfast's own tasks. `make test` is what CI runs (.ci/run), with the race detector.

GO ?= go
# Packages are tested one or two at a time: the machine has 2 cores and several
# packages start real servers.
TEST_FLAGS ?= -race -count=1 -p 2 -timeout 15m

.PHONY: run reset test test-loaded test-loaded-ci test-servers bench vet fmt lint fuzz docs-check instructions

## run: the examples on loopback: billing on 127.0.0.1:8010, orders on 127.0.0.1:8000,
## inventory (gRPC) on 127.0.0.1:9020 and the gateway on 127.0.0.1:8090, with the
## machine's PostgreSQL and Redis when present (Ctrl-C stops them all). Meanwhile
## `bash scripts/example.sh stop|start NAME` stops one and starts it again.
run:
	bash scripts/run-examples.sh

## reset: the example pair's demo data as first made (empty databases, migrated
## with their catalogue again by the next make run; no receipts; orders' Redis keys gone).
## Stop make run first.
reset:
	bash scripts/reset-examples.sh

## test-servers: install the servers and tools tests start themselves (S3, SMTP,
## protoc, chromium), once. A script whose tests skip without it prints a SKIP line
## when it cannot install; one whose tests would fail stops here, named.
test-servers:
	@for s in scripts/install-*.sh; do \
		[ -e "$$s" ] || continue; \
		bash "$$s" || { echo "make test-servers: $$s failed (exit status $$?); run it alone to see why" >&2; exit 1; }; \
	done

## test: every package with the race detector, then the bench module's tests,
## then the drill table (with a SKIP row for each drill that could not run, and why)
test: test-servers
	$(GO) vet ./...
	JFAST_DRILL_REPORT=$(CURDIR)/drill-report.md $(GO) test $(TEST_FLAGS) ./...
	# allocation budgets, counted without the race detector (its instrumentation allocates)
	$(GO) test -count=1 -run 'Allocations' ./framework/ ./requestid/
	@echo; [ ! -f drill-report.md ] || cat drill-report.md; echo
	cd bench && $(GO) vet ./... && $(GO) test $(TEST_FLAGS) ./...

## test-loaded: make test LOADED_RUNS times in a row (3) while a busy loop runs on
## every core (scripts/test-loaded.sh): the suite must pass on a busy machine, as on
## a laptop building beside it. LOADED_PKGS='./plugins/http/ ...' runs go test
## $(TEST_FLAGS) on those packages instead.
LOADED_RUNS ?= 3
test-loaded:
	LOADED_RUNS=$(LOADED_RUNS) LOADED_PKGS='$(LOADED_PKGS)' TEST_FLAGS='$(TEST_FLAGS)' GO='$(GO)' MAKE='$(MAKE)' bash scripts/test-loaded.sh

## test-loaded-ci: CI's loaded pass (.ci/run, after make test): once, under the same
## busy loops, the packages that start servers and wait on them; 3 min 52 s measured
## on 2 cores already busy with other work (make test itself is not run loaded in CI:
## three loaded runs of it take about an hour)
LOADED_CI_PKGS = ./plugins/http/ ./plugins/queue/ ./plugins/gateway/ ./plugins/channels/ \
	./plugins/grpc/ ./plugins/db/ ./plugins/cache/ ./framework/statuspage/
test-loaded-ci:
	$(MAKE) test-loaded LOADED_RUNS=1 LOADED_PKGS='$(LOADED_CI_PKGS)'

## fuzz: every fuzz target for FUZZTIME each (go test takes one -fuzz target per
## package per run); CI runs it after the tests. The seed corpora also run in make test.
## A count of executions, not a duration: Go 1.26's fuzzing coordinator can fail a
## target with a bare "context deadline exceeded" when a worker has not answered as
## a -fuzztime duration ends (golang/go#75804, fixed in Go 1.27), which a loaded
## machine makes likely; a count has no deadline to race. 50000 runs take from about
## 1 s (FuzzParseRetryAfter) to 12 s (the framework's two) on an idle 2-core machine,
## 73 s for all nine with their builds: what 8 s each took before.
FUZZTIME ?= 50000x
FUZZ_TARGETS = \
	framework/resilience:FuzzParseRetryAfter framework/resilience:FuzzBreaker \
	framework:FuzzConfigBinding framework:FuzzRequestID \
	problem:FuzzWrite problem:FuzzUnmarshal \
	plugins/auth:FuzzVerify plugins/storage:FuzzValidateKey plugins/idempotency:FuzzFingerprint
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		echo "fuzz $$t ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$${t#*:}\$$" -fuzztime $(FUZZTIME) ./$${t%%:*}/ || exit 1; \
	done

## bench: the benchmarks behind docs/performance.md
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

## instructions: instructions per call of the http client and the gateway
## against their baselines, counted by callgrind (scripts/instructions.sh)
instructions:
	N=$(or $(N),5000) bash scripts/instructions.sh

vet:
	$(GO) vet ./...

## lint: staticcheck, pinned (scripts/staticcheck.sh installs it once); CI runs it
lint:
	sh scripts/staticcheck.sh

fmt:
	gofmt -l -w .

## docs-check: every relative link and every repository path the Markdown names
## exists (part of make test too)
docs-check:
	$(GO) test -count=1 ./internal/docscheck/
