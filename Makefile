# Mother: build, run and test. `make help` lists the targets.

SHELL        := /bin/bash
GO           ?= go
DATA         ?= ./data
VERSION      ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# The release is the VERSION file's (pkg/version); VERSION here is the
# build's label and COMMIT the commit, both shown by --version.
COMMIT       ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null)
LDFLAGS      := -s -w -X main.version=$(VERSION) -X github.com/mother-chat/mother/pkg/version.commit=$(COMMIT)
BUILD        := CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)"
MODULE       := github.com/mother-chat/mother
TOOLS        := $(CURDIR)/bin/tools
PROTO_FILES  := $(wildcard proto/mother/v1/*.proto)

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

.PHONY: build
build: ## build bin/mother, bin/chick and bin/momctl for this machine
	$(BUILD) -o bin/mother ./cmd/mother
	$(BUILD) -tags timetzdata -o bin/chick ./cmd/chick
	$(BUILD) -o bin/momctl ./cmd/momctl

.PHONY: image
image: ## build the offline chick image mother-chick:dev (FROM scratch: static chick + busybox-static)
	VERSION=$(VERSION) bash images/chick/build-offline.sh mother-chick:dev

.PHONY: run
# RUN_BIN is where make run builds Mother; CHICK_IMAGE the image it makes
# sure of (Mother's default chicks.image).
RUN_BIN      ?= bin/mother
CHICK_IMAGE  ?= mother-chick:dev
run: ## run Mother on the embedded default: files in $(DATA), the terminal as a channel (builds the chick image once when Docker answers)
	@echo "make run: building Mother into $(RUN_BIN) (a first build takes a few minutes)..." >&2
	@$(GO) build -o $(RUN_BIN) ./cmd/mother
	@VERSION=$(VERSION) bash images/chick/ensure-image.sh $(CHICK_IMAGE)
	@echo "make run: starting Mother in this terminal, files in $(DATA); type a message, Ctrl-D ends her" >&2
	@$(RUN_BIN) --cli $(DATA)

.PHONY: test
test: check ## the whole suite: the checks, go test -race, each fuzz target briefly, a short soak (installs what tests need); lists skips, which fail under CI=true
	@bash .ci/ensure-tools
	@bash .ci/ensure-kube
	$(GO) build -o bin/testsummary ./internal/testsummary
	set -o pipefail; MOTHER_TEST_RACE=1 $(GO) test -race -count=1 -timeout 45m -json ./... | bin/testsummary
	@FUZZTIME=$(FUZZTIME) bash .ci/fuzz
	@$(MAKE) --no-print-directory soak-short

FUZZTIME ?= 3000x
.PHONY: fuzz
fuzz: ## run every fuzz target for FUZZTIME (default 3000 executions each; e.g. make fuzz FUZZTIME=5m)
	@FUZZTIME=$(FUZZTIME) bash .ci/fuzz

# The soak's every scenario, shortened: 3 SIGKILLs instead of 20, 50
# spawn/kill cycles instead of 1,000, a 5 s slow model instead of 60 s, a
# flood of 10 turns instead of 40, power cuts at a sample of the fsyncs
# that covers every kind instead of at every fsync. make test runs it.
SOAK_SHORT := SOAK_KILLS=3 SOAK_CYCLES=50 SOAK_SLOW=5s SOAK_FLOOD_TURNS=10 POWERCUT=short
.PHONY: soak-short
soak-short: ## fault injection, short (about 3 min, part of make test): every soak scenario with fewer rounds
	@bash .ci/ensure-docker
	$(SOAK_SHORT) $(GO) test -tags soak -count=1 -timeout 30m $(SOAKFLAGS) ./soak/

SOAKFLAGS ?=
.PHONY: soak
soak: ## fault injection, long: Mother SIGKILLed, chicks crashed/hung/flooding, engine restarts, model and platform faults, 1,000 spawn/kill cycles, power cuts at every fsync
	@bash .ci/ensure-docker
	$(GO) test -tags soak -count=1 -v -timeout 150m $(SOAKFLAGS) ./soak/

.PHONY: check
check: vet fmt-check tidy-check proto-check lint-proto proto-breaking deps-check clock-check staticcheck ## vet, gofmt, go mod tidy, generated code, buf lint and breaking, dependency rules, one clock, staticcheck

.PHONY: vet
vet:
	$(GO) vet ./...
	$(GO) vet -tags soak ./soak/

.PHONY: fmt-check
fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

.PHONY: tidy-check
tidy-check:
	@cp go.mod /tmp/mother-go.mod.bak && cp go.sum /tmp/mother-go.sum.bak
	@$(GO) mod tidy
	@if ! git diff --quiet -- go.mod go.sum 2>/dev/null; then \
		git diff -- go.mod go.sum; cp /tmp/mother-go.mod.bak go.mod; cp /tmp/mother-go.sum.bak go.sum; \
		echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; fi

.PHONY: tools
tools: ## install the protoc plugins pinned in go.mod into bin/tools
	@mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) $(GO) install tool

.PHONY: proto
proto: tools ## regenerate the gRPC code from proto/
	@bash .ci/ensure-protoc
	PATH=$(TOOLS):$$PATH protoc -I proto \
		--go_out=. --go_opt=module=$(MODULE) \
		--go-grpc_out=. --go-grpc_opt=module=$(MODULE) $(PROTO_FILES)

.PHONY: proto-check
proto-check: tools ## fail if the committed generated code is not what proto/ generates
	@bash .ci/ensure-protoc
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	PATH=$(TOOLS):$$PATH protoc -I proto \
		--go_out=$$tmp --go_opt=module=$(MODULE) \
		--go-grpc_out=$$tmp --go-grpc_opt=module=$(MODULE) $(PROTO_FILES) && \
	diff -r $$tmp/proto proto -x '*.proto' -x doc.go -x BASELINE && echo "generated code is current"

.PHONY: lint-proto
lint-proto: ## buf lint (STANDARD); installs the pinned buf into bin/tools (.ci/ensure-buf)
	@buf=$$(bash .ci/ensure-buf) && $$buf lint && echo "buf lint: clean"

.PHONY: proto-breaking
proto-breaking: ## buf breaking against the previous commit, never one before proto/BASELINE (see .ci/proto-breaking)
	@bash .ci/proto-breaking

.PHONY: deps-check
deps-check: ## dependency direction: chick and agent stay free of chat platforms
	@bash .ci/check-deps

.PHONY: clock-check
clock-check: ## one clock: no time.Now/Sleep/After/... in production code outside pkg/clock
	@bash .ci/check-clock

STATICCHECK_VERSION := v0.8.2
.PHONY: staticcheck
staticcheck: ## staticcheck (pinned, installed into bin/tools on first use)
	@bash .ci/staticcheck $(STATICCHECK_VERSION)

.PHONY: bench
bench: ## print performance figures (footprint, overhead, store scale, start-up, chick spawn vs docker run, relay, ...); BENCHFLAGS='-baseline 14dc8ff -runs 2' compares
	@bash .ci/ensure-docker
	$(GO) run ./bench $(BENCHFLAGS)

.PHONY: cross
cross: ## Mother and momctl for linux/arm64 (the Pi), the chick for linux/amd64, in dist/
	GOOS=linux GOARCH=arm64 $(BUILD) -o dist/mother-linux-arm64 ./cmd/mother
	GOOS=linux GOARCH=arm64 $(BUILD) -o dist/momctl-linux-arm64 ./cmd/momctl
	GOOS=linux GOARCH=amd64 $(BUILD) -tags timetzdata -o dist/chick-linux-amd64 ./cmd/chick

.PHONY: release
release: cross ## cross builds plus SHA256SUMS in dist/, the release from VERSION, the build label from git describe
	cd dist && sha256sum mother-linux-arm64 momctl-linux-arm64 chick-linux-amd64 > SHA256SUMS
	@cat dist/SHA256SUMS

# Debian packages (deploy/debian, internal/packaging): mother for each of
# PACKAGE_ARCHES, mother-chick (the chick image for docker load, the
# inference-server files) for amd64, SHA256SUMS; the version from VERSION
# and git (internal/packaging/version.go).
comma := ,
PACKAGE_ARCHES := amd64,arm64
.PHONY: packages
packages: ## .deb packages in dist/deb/: mother (arm64, amd64: daemon, momctl, systemd unit), mother-chick (amd64: chick image, inference files), SHA256SUMS
	@bash .ci/ensure-docker
	@for arch in $(subst $(comma), ,$(PACKAGE_ARCHES)); do \
		GOOS=linux GOARCH=$$arch $(BUILD) -o dist/mother-linux-$$arch ./cmd/mother && \
		GOOS=linux GOARCH=$$arch $(BUILD) -o dist/momctl-linux-$$arch ./cmd/momctl || exit 1; \
	done
	VERSION=$(VERSION) bash images/chick/build-offline.sh mother-chick:dev
	docker save -o dist/mother-chick-image.tar mother-chick:dev
	$(GO) run ./internal/mkpackages -bin dist -chick-image dist/mother-chick-image.tar -out dist/deb -arch $(PACKAGE_ARCHES)

.PHONY: clean
clean: ## remove build output
	rm -rf bin dist
