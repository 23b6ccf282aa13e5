# onetick: `make test` installs what the tests need (redis-server, promtool,
# chromium, PostgreSQL, etcd) when it is missing and starts PostgreSQL, then runs
# vet, the race-enabled tests and the alert rule tests. `make run` starts
# onetick on its embedded default.

GO ?= go
export PATH := $(PATH):/usr/sbin:/usr/bin

.PHONY: test deps vet unit alerts-test run demo bench verify soak fuzz build chaos

test: deps vet unit alerts-test

deps:
	@bash scripts/install-deps.sh

vet:
	$(GO) vet ./...
	$(GO) vet -tags verify ./...

unit:
	$(GO) test -race -count=1 -timeout 9m ./...

alerts-test:
	promtool check rules deploy/prometheus/alerts.yml
	promtool test rules deploy/prometheus/alerts_test.yml

run:
	$(GO) run ./cmd/onetick run --config examples/hello.yaml

demo:
	$(GO) run ./cmd/onetick demo

build:
	$(GO) build -o bin/onetick ./cmd/onetick

fuzz:
	$(GO) test -run xxx -fuzz FuzzURL -fuzztime 30s ./internal/redact/
	$(GO) test -run xxx -fuzz FuzzTickID -fuzztime 30s .
	$(GO) test -run xxx -fuzz FuzzParse -fuzztime 60s ./cron/
	$(GO) test -run xxx -fuzz FuzzReference -fuzztime 60s ./cron/
	$(GO) test -run xxx -fuzz FuzzParse -fuzztime 60s ./config/
	$(GO) test -run xxx -fuzz FuzzClaimDamage -fuzztime 60s ./memory/
	$(GO) test -run xxx -fuzz FuzzClaimDamage -fuzztime 60s ./redis/
	$(GO) test -run xxx -fuzz FuzzClaim -fuzztime 60s ./sqlite/
	$(GO) test -run xxx -fuzz FuzzClaimDamage -fuzztime 60s ./postgres/
	$(GO) test -run xxx -fuzz FuzzParseSecret -fuzztime 30s ./executor/webhook/
	$(GO) test -run xxx -fuzz FuzzVerify -fuzztime 30s ./executor/webhook/
	$(GO) test -run xxx -fuzz FuzzParseRetryAfter -fuzztime 30s ./executor/
	$(GO) test -run xxx -fuzz FuzzRead -fuzztime 30s ./internal/chaos/
	$(GO) test -run xxx -fuzz FuzzQuery -fuzztime 30s ./internal/web/
	$(GO) test -run xxx -fuzz FuzzAPIBody -fuzztime 60s -fuzzminimizetime 5s ./internal/cli/

# Go benchmarks of the engine, then the side-by-side harness (its own module):
# against asynq and gocron on Redis, then against River on PostgreSQL.
# `make bench PART=shards` runs one part of the harness only (its -only).
bench: deps
ifdef PART
	cd bench && $(GO) run . -only $(PART)
else
	$(GO) test -run xxx -bench . -benchmem ./...
	cd bench && $(GO) run . 
	cd bench && $(GO) run . -only postgres
	cd bench && $(GO) run . -only ledger
	cd bench && $(GO) run . -only etcd
	cd bench && $(GO) run . -only relays
	cd bench && $(GO) run . -only relays-faults
	cd bench && $(GO) run . -only shards
endif

# The fault-injection verification suite (real processes, real redis-server),
# then the Sentinel and Cluster failover measurements of the test harness.
verify: deps
	$(GO) test -tags verify -count=1 -timeout 25m -v ./verify/
	$(GO) test -tags verify -count=1 -timeout 15m -v -run Verify ./internal/redistest/

# The same with the long steady-state run.
soak: deps
	ONETICK_VERIFY_STEADY=10m $(GO) test -tags verify -count=1 -timeout 60m -v ./verify/

# The chaos run (issue 22): a seeded nemesis against three replicas on each
# store in turn; a history per store (JSON lines) for the checker.
# make chaos SEED=42 DURATION=10m STORES=redis,postgres HISTORY=/tmp/h
chaos: deps
	ONETICK_CHAOS_SEED=$(SEED) ONETICK_CHAOS_DURATION=$(DURATION) ONETICK_CHAOS_STORES=$(STORES) \
	ONETICK_CHAOS_HISTORY=$(HISTORY) $(GO) test -race -tags 'verify chaos' -count=1 -timeout 0 -v -run TestChaos ./verify/
