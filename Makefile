# The whole set-up on a fresh machine is `make run` (a development deployment) and `make test`.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X renga.dev/renga/cli.Version=$(VERSION)

.PHONY: all build run test generate check-generated vet bench clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/renga ./cmd/renga

# A development deployment: a private PostgreSQL under .renga/, migrated, and a printed dev token.
run: build
	./bin/renga serve --dev

# Tests use RENGA_TEST_DATABASE_URL when set, else start a private PostgreSQL per test process.
test:
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 15m ./...

# Regenerates everything generated from openapi.yaml.
generate:
	$(GO) generate ./...

# CI: regenerating must change nothing.
check-generated: generate
	@git diff --exit-code -- gen/ || (echo "generated code is stale: run make generate and commit" >&2; exit 1)
	@test -z "$$(git status --porcelain -- gen/)" || (git status --porcelain -- gen/; echo "untracked generated files" >&2; exit 1)

bench:
	$(GO) test -run '^$$' -bench . -benchtime 5s ./bench/...

clean:
	rm -rf bin
