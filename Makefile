# The whole set-up on a fresh machine is `make run` (a development deployment) and `make test`.
GO      ?= go
TERRAFORM ?= terraform
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X renga.dev/renga/cli.Version=$(VERSION)

.PHONY: all build run test generate check-generated check-breaking lint lint-spec bench fuzz mutate clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/renga ./cmd/renga
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/renga-agent ./cmd/renga-agent

# A development deployment: a private PostgreSQL under .renga/, migrated, and a printed dev token.
run: build
	./bin/renga serve --dev

# Tests use RENGA_TEST_DATABASE_URL when set, else start a private PostgreSQL per test process.
# The provider's acceptance tests run the machine's terraform, offline, against a real server.
test:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/'))" || (gofmt -l $$(git ls-files '*.go' | grep -v '^gen/'); echo "run gofmt -w" >&2; exit 1)
	$(GO) vet ./...
	TF_ACC=1 TF_ACC_TERRAFORM_PATH="$$(command -v $(TERRAFORM))" $(GO) test -count=1 -timeout 15m ./...
	$(GO) test -race -count=1 -timeout 15m ./server/... ./agent/... ./cli/... ./resolver/...

# Regenerates everything generated: gen/ from openapi.yaml, then the Terraform provider's docs/
# from its schema and examples/ (tfplugindocs builds the provider; terraform must be on PATH).
generate:
	$(GO) generate ./...
	$(TERRAFORM) fmt -recursive examples/
	$(GO) tool tfplugindocs generate --provider-dir provider --provider-name renga \
		--examples-dir ../examples --rendered-website-dir ../docs

# CI: regenerating must change nothing.
check-generated: generate
	@git diff --exit-code -- gen/ docs/ examples/ || (echo "generated code or docs are stale: run make generate and commit" >&2; exit 1)
	@test -z "$$(git status --porcelain -- gen/ docs/ examples/)" || (git status --porcelain -- gen/ docs/ examples/; echo "untracked generated files" >&2; exit 1)

# golangci-lint (errcheck, staticcheck, forcetypeassert, errorlint; .golangci.yml), pinned.
GOLANGCI_LINT ?= github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
lint:
	$(GO) run $(GOLANGCI_LINT) run ./...

# Changes to openapi.yaml that break clients of the last release (api/openapi.released.yaml)
# fail unless CHANGELOG.md declares them (make test runs the same check in api/).
check-breaking:
	$(GO) tool oasdiff breaking api/openapi.released.yaml openapi.yaml --fail-on ERR --err-ignore CHANGELOG.md \
		--severity-levels api/oasdiff-levels.txt
	$(GO) test -count=1 -run '^TestRemovedEnumValuesAreDeclared$$' ./api

# openapi.yaml under Redocly's recommended rules and Spectral's spec:oas, both pinned in
# tools/spec/package-lock.json: no error, no warning.
lint-spec:
	cd tools/spec && npm ci --no-audit --no-fund --loglevel=error && npm run --silent lint

# The spec-driven fuzzer's long run (make test runs a short, seeded one): every operation,
# FUZZ_ITERATIONS valid and as many invalid requests each, from a new seed (printed; replay a
# run with RENGA_FUZZ_SEED=<seed>).
FUZZ_ITERATIONS ?= 500
fuzz:
	RENGA_FUZZ_ITERATIONS=$(FUZZ_ITERATIONS) RENGA_FUZZ_SEED=$${RENGA_FUZZ_SEED:-$$(date +%s)} \
		$(GO) test -count=1 -timeout 60m -run '^TestSpecFuzz$$' -v ./server/apitest/ | grep -E 'fuzz_test|^(ok|FAIL|---)'

# Mutation testing (docs/mutation-testing.md): github.com/go-gremlins/gremlins (a pinned Go tool)
# lists the mutants of MUTATE_TARGET (server/domain or server/pipeline), one small change each;
# tools/mutate judges them: each selected test (MUTATE_PACKAGES, MUTATE_RUN) is run once alone
# with coverage, then each mutant is built in place (go test -c -overlay) and tried against only
# the tests that reach its line, fastest first, until one fails (killed) or none does (lived).
# Needs RENGA_TEST_DATABASE_URL. A mutant is "timed out" when a test runs past
# MUTATE_TIMEOUT_COEFFICIENT times its time without mutants; "not covered" when no selected test
# reaches it (widen MUTATE_RUN, e.g. MUTATE_RUN=. for the whole suite, to judge those).
# MUTATE_FLAGS adds tools/mutate flags (-dry-run lists the mutants and the tests that reach each;
# -only "file.go:line:col ..." judges only these). Results: the log on stdout,
# bin/mutate-<target>.json; a stopped run resumes where it was (bin/mutate/results-*.jsonl).
MUTATE_TARGET ?= server/domain
MUTATE_TIMEOUT_COEFFICIENT ?= 3
# The target's own tests, every one (found in its _test.go files).
MUTATE_UNIT_TESTS = $(shell grep -ho '^func Test[A-Za-z0-9_]*' $(wildcard $(MUTATE_TARGET)/*_test.go $(MUTATE_TARGET)/*/*_test.go) | cut -c6- | grep -vx TestMain | paste -sd'|')
MUTATE_API_TESTS := TestOrganizationLifecycle|TestOrganizationListPagesAndFilters|TestSuspendResumeTwice|TestSuspendedOwnersReadOnly|TestDeletionScheduling|TestPurge|TestInvitationEndToEnd|TestInvitationByOrganizationState|TestPolicyDocument|TestPolicyOwnerSettings|TestPolicyDeploymentDefaults|TestPolicyMaxUsers|TestPolicyWithdrawIdentityProviders|TestSettingsUnderLock|TestOwnersSettingsReadBack|TestOrganizationIdentityProviders|TestOrganizationProvidersEntitlement|TestJobsFlow|TestMaxJobsPerDay|TestMaxAgents|TestInstallationRegistration|TestIntakeKeyShownOnce|TestIntakeKeyFormatAndAuthentication|TestIntakeBytesPerDay|TestIntakeDeduplicatedAndCountedOnce|TestObservationCapPerBatch|TestIntakeShardsStayWithinThePool|TestIntakeGroupAnswersEachBatchAsAlone|TestIntakeGroupRefusedByPostgreSQL|TestIntakeGroupCancellation|TestIntakeGroupOfEndedRequestsStops|TestIntakeDuringAnOutageIs503|TestIntakeGroupOutageIsEveryBatchs|TestIntakeGroupCarriesAtMostMaxBytes|TestSubmitBatchChecksTheOrganizationInItsStatement|TestObservationsAreStoredFaithfully|TestObservedAtOffsetsPostgreSQLCannotRead|TestNumbersFitNumericAsPostgreSQL|TestCreateAnswersWhatItStored|TestObservationRetention|TestRetentionForgetsOldBatchesAndObservations|TestUsageCountedOnce|TestUsageDaysAndTotals|TestUsageRetention|TestUsageRetentionDeletesInBatches|TestAuditFailedAttempts|TestAuditListFiltersAndPages|TestAuditActivity|TestOwnerAndIntakeKeyWritesAreAudited|TestOwnersReadInventory|TestIdentityProviderLifecycle|TestIdentityProviderRefusals|TestProviderLockoutGuard|TestLockoutGuardCountsLocalRecovery|TestLocalRecoverySignIn|TestSignInRefusals|TestSignInEmailBoundaries|TestSupportSourceDecidesWhoSignsIn|TestSupportGrants|TestSupportConsole|TestProviderTestOfASupersededRevisionFails|TestIfMatchRules|TestIdempotencyKeyRules|TestValidation|TestRateLimits|TestRateLimitedWritesAreNotAudited|TestCredentialPaths|TestKnownTokenWritesInTwoRoundTrips|TestRevokedKnownTokenIsRefusedLikeAnUnknownOne|TestKnownTokenFromAnotherAddressIsLookedUp|TestRevocationDuringAWrite|TestKnownTokenOverItsRateLimitIsRefusedWhenRevoked|TestKnownTokenDuringAnOutageIs503|TestKnownTokenWriteThatTimesOutIsAudited|TestIntakeGuaranteesOnBothPaths|TestIntakeAnswersOverHTTPOnBothPaths|TestIntakeCachedKeyIsCheckedAgain|TestIntakeAndStateChangesWaitForEachOther|TestIntakeStatementsAndMetrics|TestIntakeGroupCommitSetting|TestOrganizationStateAtIntake|TestMovedOrganizationBody|TestAgentJobTrafficDuringAFreeze|TestAgentWritesWaitForStateChanges|TestExportForMoveFreezesAgentWrites|TestMoveExportLosesNoBatch|TestTransferRoundTrip|TestExportCancel|TestDownloadCapability|TestMoveEndsNameWhatChanged|TestTransferChangeSeesTheOneBeforeIt|TestValidationGaps|TestAnonymousLimitPerIPv6Network|TestIntakeAfterTheFirstBatchIsOneRoundTrip
MUTATE_RUN ?= ^($(MUTATE_UNIT_TESTS)|$(MUTATE_API_TESTS))$$
MUTATE_PACKAGES ?= ./$(MUTATE_TARGET)/... ./server/apitest
# MUTATE_FILES, when set, limits the mutants to these files of MUTATE_TARGET (relative to it,
# e.g. MUTATE_FILES="observation.go usage.go").
MUTATE_FILES ?=
MUTATE_FLAGS ?=

mutate:
	@test -n "$$RENGA_TEST_DATABASE_URL" || (echo "make mutate needs RENGA_TEST_DATABASE_URL" >&2; exit 1)
	$(GO) build -o bin/gremlins github.com/go-gremlins/gremlins/cmd/gremlins
	$(GO) build -o bin/renga-mutate ./tools/mutate
	bin/renga-mutate -target $(MUTATE_TARGET) -packages "$(MUTATE_PACKAGES)" -run '$(MUTATE_RUN)' \
		-files "$(MUTATE_FILES)" -timeout-coefficient $(MUTATE_TIMEOUT_COEFFICIENT) $(MUTATE_FLAGS)

bench:
	$(GO) test -run '^$$' -bench . -benchtime 5s ./bench/...

clean:
	rm -rf bin
