# Gemma 4 E2B on one Cloud TPU v5e chip under vLLM, as code.
# Every target honours DEPLOY_CONFIG=path/to/other.toml (default: deploy.toml).

SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON_BOOT ?= python3
VENV := .venv
PY := $(VENV)/bin/python
CDKTF := node_modules/.bin/cdktf
DEPLOY_CONFIG ?= deploy.toml
export DEPLOY_CONFIG
# No telemetry or version pings from the cdktf CLI / Terraform; jsii's Node-version banner is noise.
export CHECKPOINT_DISABLE := 1
export DISABLE_VERSION_CHECK := 1
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20

VENV_STAMP := $(VENV)/.installed
NODE_STAMP := node_modules/.installed
# Stack names come from the validated config (<name>-secrets, <name>-node); each deployment
# synthesizes into its own folder (cdktf.out/deployments/<name>), so one never removes another's.
STACKS = $(PY) -m tpudeploy stacks
OUTDIR = $$($(STACKS) --outdir)
# cdktf redraws a spinner every 80 ms; into a log that is hundreds of lines. CI=1 makes it print
# the outcome only, when stdout is not a terminal and no approval prompt needs showing.
QUIET_CDKTF = if [ ! -t 1 ] && { [ -n "$(AUTO_APPROVE)" ] || [ ! -t 0 ]; }; then export CI=1; fi;

.PHONY: help install synth diff deploy deploy-secrets destroy destroy-all test lint scan clean check \
	preflight \
	capacity cost status bench bench-quick bench-plan report readme mutants \
	bootstrap bootstrap-synth bootstrap-scan bootstrap-check secret api-key wait smoke endpoint tunnel \
	rehearse test-fast test-slow test-all recover extend

help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

install: $(VENV_STAMP) $(NODE_STAMP) ## Create .venv with the pinned packages and the local cdktf CLI

$(VENV_STAMP): requirements.txt requirements-nodeps.txt
	$(PYTHON_BOOT) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -r requirements-nodeps.txt
	@touch $@

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

check: $(VENV_STAMP) ## Validate the config; print the synth summary and warnings (no cdktf)
	@$(PY) -m tpudeploy check

# Also the first step of deploy, diff and destroy: each failure is one line with its fix.
preflight: $(VENV_STAMP) ## Terraform, credentials, project and the secrets a deploy needs
	@$(PY) -m tpudeploy preflight $(or $(PURPOSE),deploy)

synth: $(VENV_STAMP) ## Write the deployment's Terraform JSON to cdktf.out/deployments/<name>/
	@$(PY) main.py

# `cdktf diff` plans one stack per call: plan each, so the node's plan is shown too.
diff: install ## Show what deploy would change in both stacks (needs Terraform and credentials)
	@$(PY) -m tpudeploy preflight diff
	@$(QUIET_CDKTF) for stack in $$($(STACKS)); do \
	  $(CDKTF) diff --output $(OUTDIR) $$stack || exit $$?; done

# recover: a SUSPENDED/FAILED queued resource or a PREEMPTED node is marked for replacement
# first; Terraform alone would plan no change for it.
# preflight refuses a deploy before `make deploy-secrets`, `make secret` and `make api-key`: the
# node would boot, paid, and stop at reading its secrets. after-failure reads the state files and
# says only what is in them.
deploy: install ## Create or update both stacks (after deploy-secrets, secret and api-key)
	@$(PY) -m tpudeploy preflight deploy
	@$(PY) -m tpudeploy recover
	@$(QUIET_CDKTF) $(CDKTF) deploy --output $(OUTDIR) $$($(STACKS)) \
	  $(if $(AUTO_APPROVE),--auto-approve) || { $(PY) -m tpudeploy after-failure deploy; exit 1; }

# Only the dead node (or queued resource), with Terraform's -replace of that one resource; never a
# run that ended on purpose (deadline fired, flex-start SUSPENDED). The recover workflow runs it.
recover: install ## Replace a preempted/terminated node or failed queued resource, nothing else
	@$(PY) -m tpudeploy check --deploy
	@$(PY) -m tpudeploy recover --apply

extend: install ## Move a spot/on-demand node's deadline later: make extend BY=2h
	@test -n "$$BY" || { echo "usage: make extend BY=<duration, e.g. 2h>" >&2; exit 2; }
	@$(PY) -m tpudeploy extend "$$BY"

deploy-secrets: install ## Create only the long-lived stack (secrets, account, cache bucket)
	@$(PY) -m tpudeploy preflight deploy-secrets
	@$(QUIET_CDKTF) $(CDKTF) deploy --output $(OUTDIR) $$($(STACKS) --secrets) \
	  $(if $(AUTO_APPROVE),--auto-approve)

# cleanup runs whatever cdktf destroy did: Terraform never runs the destroy provisioner of a
# tainted (failed or killed) flex-start create, so the queued resource is deleted by name too.
destroy: install ## Destroy the node stack only: stops the billing, keeps the secret
	@$(PY) -m tpudeploy preflight destroy
	@rc=0; cleanup=0; $(QUIET_CDKTF) TPUDEPLOY_COMMAND=destroy $(CDKTF) destroy \
	  --output $(OUTDIR) $$($(STACKS) --node) $(if $(AUTO_APPROVE),--auto-approve) || rc=$$?; \
	$(PY) -m tpudeploy cleanup || cleanup=$$?; \
	if [ $$rc -ne 0 ] || [ $$cleanup -ne 0 ]; then $(PY) -m tpudeploy after-failure destroy \
	  --terraform-exit $$rc --cleanup-exit $$cleanup; exit 1; fi

# The compile-cache bucket keeps force_destroy = false (a replacement never drops the cache
# silently) and Cloud Storage refuses to delete a bucket with objects: empty it first, confirmed.
destroy-all: install ## Destroy everything: the secrets and their versions, the compile cache
	@$(PY) -m tpudeploy preflight destroy
	@$(PY) -m tpudeploy empty-cache $(if $(AUTO_APPROVE),--yes)
	@rc=0; $(QUIET_CDKTF) TPUDEPLOY_COMMAND=destroy $(CDKTF) destroy --output $(OUTDIR) \
	  $$($(STACKS)) $(if $(AUTO_APPROVE),--auto-approve) || rc=$$?; \
	$(PY) -m tpudeploy cleanup || rc=1; \
	exit $$rc

capacity: $(VENV_STAMP) ## KV pool, memory budget and safe concurrency for the config
	$(PY) -m tpudeploy capacity

cost: $(VENV_STAMP) ## Hourly/monthly cost, $ per million tokens, spot vs flex-start break-even
	$(PY) -m tpudeploy cost

status: $(VENV_STAMP) ## Queued resource / node state, IP and when billing stops
	$(PY) -m tpudeploy status

# Secrets go into Secret Manager from stdin or a hidden prompt, never through argv or a file.
secret: $(VENV_STAMP) ## Store the Hugging Face token (stdin, or a hidden prompt on a terminal)
	$(PY) -m tpudeploy secret

api-key: $(VENV_STAMP) ## Generate and store a new vLLM API key (not printed; says how to read it)
	$(PY) -m tpudeploy api-key

wait: $(VENV_STAMP) ## Follow the boot phases (guest attributes, no SSH) until vLLM is ready
	$(PY) -m tpudeploy wait

# Over TLS pinned to the node's certificate. ENDPOINT=https://HOST:PORT (e.g. the tunnel's
# https://localhost:8443) skips the node lookup, TLS_SHA256 the guest-attribute lookup,
# VLLM_API_KEY the Secret Manager one.
smoke: $(VENV_STAMP) ## Front door locked, then chat + get_weather tool call, with latencies
	$(PY) -m tpudeploy smoke

# CERT_OUT=file also writes the pinned certificate, for clients that take a CA file.
endpoint: $(VENV_STAMP) ## Where the API is, the certificate fingerprint and how clients pin it
	$(PY) -m tpudeploy endpoint $(if $(CERT_OUT),--cert-out $(CERT_OUT))

# The default deployment opens no port: this forwards localhost:LOCAL_PORT (default 8443) to the
# node's proxy over IAP SSH (port 22 is open to Google's IAP range only).
tunnel: $(VENV_STAMP) ## Forward a local port to the node's TLS proxy through IAP (Ctrl-C stops)
	$(PY) -m tpudeploy tunnel

# The sweep runs `vllm bench serve` inside the serving container over IAP SSH; the API key
# travels on stdin, never on a command line. OUT=dir keeps (and resumes) a run's results.
BENCH_ARGS = --config $(DEPLOY_CONFIG) $(if $(OUT),--out $(OUT)) \
	$(if $(API_KEY_SECRET),--api-key-secret $(API_KEY_SECRET))
bench: $(VENV_STAMP) ## Run the build log's 12-cell sweep on the node (PROFILE=quick for a first look)
	$(PY) -m tpudeploy.bench run $(BENCH_ARGS) $(if $(PROFILE),--profile $(PROFILE))

bench-quick: $(VENV_STAMP) ## A first look: 4 cells, one repetition
	$(PY) -m tpudeploy.bench run $(BENCH_ARGS) --profile quick

bench-plan: $(VENV_STAMP) ## Print every benchmark command and a time estimate; runs nothing
	$(PY) -m tpudeploy.bench plan --config $(DEPLOY_CONFIG) $(if $(PROFILE),--profile $(PROFILE))

report: $(VENV_STAMP) ## Rebuild the benchmark report from saved results: make report RESULTS=dir
	@test -n "$(RESULTS)" || { echo "usage: make report RESULTS=<dir of vllm bench serve JSON files>" >&2; exit 2; }
	$(PY) -m tpudeploy.bench report $(RESULTS) --config $(DEPLOY_CONFIG) $(if $(OUT),--out $(OUT))

# Two pytest workers (pytest-xdist), one per core of the machines this runs on; each test file
# stays on one worker, so a module's shared fixture (the rehearsal starts all its runs at once)
# runs once. TEST_WORKERS=0 runs in one process; on a bigger machine, TEST_WORKERS=auto.
TEST_WORKERS ?= 2
PYTEST = $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# Two tiers (docs/development.md): `make test` is everything but the slow tier, in minutes;
# `make test-slow` is the rehearsal matrix (12 full lifecycles, marker `rehearsal`) and the
# mutation tests. CI (.ci/run, the checks workflow) runs both, so nothing leaves CI.
test: install ## The offline test suite (minutes); the slow tier is make test-slow
	$(PYTEST) -m "not rehearsal"

test-fast: test ## The old name of make test

test-slow: install ## The slow tier: the rehearsal matrix, then the mutation tests (CI runs it)
	$(PYTEST) -m rehearsal
	$(PY) -m tools.mutants $(if $(JOBS),--jobs $(JOBS))

test-all: test test-slow ## Both tiers, as CI runs them

# The whole lifecycle, make deploy-secrets to make destroy-all, run for real (cdktf CLI,
# Terraform, the project's clients) against loopback fakes of the Google APIs, in a scratch copy
# of the repository: never your state or deploy.toml. PROVISIONING=all runs the three side by
# side. SCENARIO=preemption (spot, on-demand): the node preempted, then make recover;
# SCENARIO=deadline: the deadline job fires and nothing bills afterwards.
PROVISIONING ?= flex-start
SCENARIO ?= lifecycle
rehearse: install ## Dress rehearsal of the lifecycle: PROVISIONING=flex-start|spot|on-demand|all
	$(PY) -m tools.rehearsal --provisioning $(PROVISIONING) --scenario $(SCENARIO) $(if $(KEEP),--keep)

lint: $(VENV_STAMP) ## ruff and mypy
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

readme: $(VENV_STAMP) ## Regenerate README.md's and docs/build-log.md's generated sections
	$(PY) -m tools.readme

# Minutes, not seconds: part of `make test-slow` (and so of CI), not of `make test`. Fails on a
# survivor that neither a test kills nor tests/mutants_equivalent.toml explains; a timeout counts
# as a kill, so a loaded runner cannot turn it red. JOBS=n sets mutmut's workers (default 2).
mutants: $(VENV_STAMP) ## Mutation-test config validation, guard rails, rendering, flex-start spec
	$(PY) -m tools.mutants $(if $(JOBS),--jobs $(JOBS))

scan: synth ## checkov on the synthesized JSON
	$(PY) -m tools.scan $(OUTDIR)

# GitOps bootstrap (README, GitOps): once per repository, with your own credentials. Its own
# config (gitops.toml), output directory and local state, apart from every deployment.
BOOTSTRAP_CONFIG ?= gitops.toml
export BOOTSTRAP_CONFIG
BOOTSTRAP_APP := $(PY) -m stacks.bootstrap
BOOTSTRAP_OUT := cdktf.out/bootstrap

bootstrap-synth: $(VENV_STAMP) ## Write the GitOps bootstrap's Terraform JSON (state bucket, WIF)
	$(BOOTSTRAP_APP)

bootstrap-scan: bootstrap-synth ## checkov on the bootstrap's JSON
	$(PY) -m tools.scan $(BOOTSTRAP_OUT)

# GITHUB_TOKEN (read access to the repository's environments) is read from the environment, never
# from a make argument; GITHUB_API_URL overrides https://api.github.com.
bootstrap-check: $(VENV_STAMP) ## Read back each GitHub environment's protection (GITHUB_TOKEN)
	$(PY) -m tpudeploy.github_environments

bootstrap: install ## Create the state bucket, GitHub federation and CI accounts (owner, once)
	$(CDKTF) deploy --app "$(BOOTSTRAP_APP)" --output $(BOOTSTRAP_OUT) gitops-bootstrap \
		$(if $(AUTO_APPROVE),--auto-approve)

clean: ## Remove synth output and caches (keeps .venv, node_modules and Terraform state)
	rm -rf cdktf.out mutants .pytest_cache .mypy_cache .ruff_cache
	find . -name __pycache__ -not -path './.venv/*' -not -path './node_modules/*' -prune -exec rm -rf {} +
