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

.PHONY: help install synth diff deploy deploy-secrets destroy destroy-cluster destroy-all test lint scan clean check \
	preflight \
	capacity cost plan-scale status bench bench-quick bench-plan report readme mutants \
	bootstrap bootstrap-synth bootstrap-scan bootstrap-check state-init secret api-key tls-cert usage logs dashboard wait pin smoke accept endpoint tunnel \
	rehearse test-fast test-slow test-all recover extend tune-plan tune tune-report \
	watch-check upstream-watch

# Sorted by name, the descriptions in one column however long the longest target name is.
help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | sort -t: -k1,1 | awk -F':.*## ' \
	  '{name[NR] = $$1; text[NR] = $$2; if (length($$1) > w) w = length($$1)} \
	  END {for (i = 1; i <= NR; i++) printf "  %-*s  %s\n", w, name[i], text[i]}'

install: $(VENV_STAMP) $(NODE_STAMP) ## Create .venv with the pinned packages and the local cdktf CLI

# Every file is checked against its pinned sha256 (--require-hashes). The jobs that mint a
# deploy token set REQUIREMENTS=requirements-deploy.txt: only what deploy, destroy and recover
# run, no scanners or test tools (nor tf, which only the rehearsal uses).
REQUIREMENTS ?= requirements.txt
PIP_INSTALL = $(PY) -m pip install --disable-pip-version-check --require-hashes --progress-bar off
# A fresh clone's first command installs for minutes (issue 37: 7.5 silent minutes under load):
# pip names each package as it fetches it, and its size when it downloads; the rest is dropped.
PIP_PROGRESS = grep --line-buffered -E '^(Collecting|  Downloading|  Using cached|ERROR)' || true
$(VENV_STAMP): $(REQUIREMENTS) requirements-nodeps.txt
	@echo "creating $(VENV): $$(grep -c '==' $(REQUIREMENTS)) pinned Python packages from $(REQUIREMENTS), each checked against its sha256 (minutes on a fresh clone; each is named below as it is fetched)"
	$(PYTHON_BOOT) -m venv $(VENV)
	set -o pipefail; $(PIP_INSTALL) -r $(REQUIREMENTS) 2>&1 | { $(PIP_PROGRESS); }
	$(if $(filter requirements.txt,$(REQUIREMENTS)),set -o pipefail; $(PIP_INSTALL) --no-deps -r requirements-nodeps.txt 2>&1 | { $(PIP_PROGRESS); })
	@echo "$(VENV) is ready"
	@touch $@

$(NODE_STAMP): package.json package-lock.json
	@echo "installing the cdktf CLI into node_modules: $$(grep -c '"integrity"' package-lock.json) npm packages pinned by package-lock.json, each checked against its hash (a minute or two on a fresh clone)"
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
# Cheap checks first: each command's preflight runs (it needs .venv only) before the cdktf CLI's
# npm install, so a fresh clone without credentials hears so before 476 packages download.
# .NOTPARALLEL keeps prerequisites in the order written, even under make -j.
.NOTPARALLEL:
PREFLIGHTS := preflight-diff preflight-deploy preflight-deploy-secrets preflight-destroy
.PHONY: $(PREFLIGHTS)
$(PREFLIGHTS): preflight-%: $(VENV_STAMP)
	@$(PY) -m tpudeploy preflight $*

diff: $(VENV_STAMP) preflight-diff $(NODE_STAMP) ## Show what deploy would change in both stacks (needs Terraform and credentials)
	@$(QUIET_CDKTF) for stack in $$($(STACKS)); do \
	  $(CDKTF) diff --output $(OUTDIR) $$stack || exit $$?; done

# deploywalk: cdktf deploy of every stack; with a capacity ladder, rung after rung on a documented
# stockout or quota error (docs/capacity-and-cost.md). destroy forgets the rung it recorded.
# recover: a SUSPENDED/FAILED queued resource or a PREEMPTED node is marked for replacement
# first; Terraform alone would plan no change for it.
# preflight refuses a deploy before `make deploy-secrets`, `make secret` and `make api-key`: the
# node would boot, paid, and stop at reading its secrets. after-failure reads the state files and
# says only what is in them.
deploy: $(VENV_STAMP) preflight-deploy $(NODE_STAMP) ## Create or update both stacks (after deploy-secrets, secret and api-key)
	@$(PY) -m tpudeploy recover
	@$(QUIET_CDKTF) $(PY) -m tpudeploy.deploywalk --cdktf $(CDKTF) --outdir $(OUTDIR) \
	  $(if $(AUTO_APPROVE),--auto-approve) || { $(PY) -m tpudeploy after-failure deploy; exit 1; }
	@echo "deployed. Next: make wait, then make smoke and make accept (the build log's acceptance table)"

# Only the dead node (or queued resource), with Terraform's -replace of that one resource; never a
# run that ended on purpose (deadline fired, flex-start SUSPENDED). The recover workflow runs it.
recover: install ## TPU VM only: replace a preempted/terminated node or failed queued resource, nothing else
	@$(PY) -m tpudeploy check --deploy
	@$(PY) -m tpudeploy recover --apply

extend: $(VENV_STAMP) ## Move a spot/on-demand node's (GKE: the cluster's) deadline later: make extend BY=2h
	@test -n "$$BY" || { echo "usage: make extend BY=<duration, e.g. 2h>" >&2; exit 2; }
	@$(PY) -m tpudeploy extend "$$BY"

deploy-secrets: $(VENV_STAMP) preflight-deploy-secrets $(NODE_STAMP) ## Create only the long-lived stack (secrets, account, cache bucket)
	@$(QUIET_CDKTF) $(CDKTF) deploy --output $(OUTDIR) $$($(STACKS) --secrets) \
	  $(if $(AUTO_APPROVE),--auto-approve)

# cleanup runs whatever cdktf destroy did: Terraform never runs the destroy provisioner of a
# tainted (failed or killed) flex-start create, so the queued resource is deleted by name too.
destroy: $(VENV_STAMP) preflight-destroy $(NODE_STAMP) ## Destroy what bills per chip-hour (the node; GKE: the serving stack), keep the secrets
	@rc=0; cleanup=0; $(QUIET_CDKTF) TPUDEPLOY_COMMAND=destroy $(CDKTF) destroy \
	  --output $(OUTDIR) $$($(STACKS) --node) $(if $(AUTO_APPROVE),--auto-approve) || rc=$$?; \
	$(PY) -m tpudeploy cleanup || cleanup=$$?; \
	if [ $$rc -ne 0 ] || [ $$cleanup -ne 0 ]; then $(PY) -m tpudeploy after-failure destroy \
	  --terraform-exit $$rc --cleanup-exit $$cleanup; exit 1; fi; \
	$(PY) -m tpudeploy.deploywalk --forget

# GKE: make destroy leaves the cluster, whose idle floor bills (system node, management fee, NAT,
# load balancer rule) until it goes; this removes it too. Deletion protection is lifted by an apply
# first, as destroy-all does (Terraform refuses to delete a protected cluster); the serving stack is
# named too, since cdktf destroys dependents first. A TPU VM has no cluster stack (`tpudeploy
# stacks --protected` is empty): make destroy removed its node, so there is nothing more.
destroy-cluster: $(VENV_STAMP) ## GKE: destroy the cluster stack too, keep the secrets
	@if [ -z "$$($(STACKS) --protected)" ]; then \
	  echo "$(DEPLOY_CONFIG): no cluster stack (a TPU VM deployment): make destroy removed its node; nothing more to destroy"; \
	  exit 0; fi; \
	$(MAKE) --no-print-directory preflight-destroy $(NODE_STAMP) || exit $$?; \
	$(QUIET_CDKTF) for stack in $$($(STACKS) --protected); do \
	  $(CDKTF) deploy --output $(OUTDIR) $$stack --ignore-missing-stack-dependencies \
	    --var deletion_protection=false $(if $(AUTO_APPROVE),--auto-approve) || exit $$?; done; \
	rc=0; TPUDEPLOY_COMMAND=destroy $(CDKTF) destroy --output $(OUTDIR) \
	  $$($(STACKS) --node) $$($(STACKS) --protected) $(if $(AUTO_APPROVE),--auto-approve) || rc=$$?; \
	$(PY) -m tpudeploy cleanup || rc=1; \
	exit $$rc

# The compile-cache bucket keeps force_destroy = false (a replacement never drops the cache
# silently) and Cloud Storage refuses to delete a bucket with objects: empty it first, confirmed.
destroy-all: $(VENV_STAMP) preflight-destroy $(NODE_STAMP) ## Destroy everything: the secrets and their versions, the compile cache
	@$(PY) -m tpudeploy empty-cache $(if $(AUTO_APPROVE),--yes)
	@# GKE: the cluster's deletion protection is lifted by an apply first (Terraform refuses to
	@# delete a protected cluster); `tpudeploy stacks --protected` is empty for a TPU VM.
	@$(QUIET_CDKTF) for stack in $$($(STACKS) --protected); do \
	  $(CDKTF) deploy --output $(OUTDIR) $$stack --ignore-missing-stack-dependencies \
	    --var deletion_protection=false $(if $(AUTO_APPROVE),--auto-approve) || exit $$?; done
	@rc=0; $(QUIET_CDKTF) TPUDEPLOY_COMMAND=destroy $(CDKTF) destroy --output $(OUTDIR) \
	  $$($(STACKS)) $(if $(AUTO_APPROVE),--auto-approve) || rc=$$?; \
	$(PY) -m tpudeploy cleanup || rc=1; \
	if [ $$rc -eq 0 ]; then $(PY) -m tpudeploy.deploywalk --forget; fi; \
	exit $$rc

# Team use: one state bucket for the deployment (versioned, uniform access, no public access),
# with the caller's own credentials; it prints the state_bucket line to add (never edits the
# config), and once the line is there moves each stack's local state into it. DRY_RUN=1 says
# what it would do; STATE_BUCKET=name picks the bucket (default PROJECT-tfstate).
state-init: $(VENV_STAMP) ## Create the deployment's state bucket, move local state into it (DRY_RUN=1)
	@$(PY) -m tpudeploy state-init $(if $(DRY_RUN),--dry-run)

capacity: $(VENV_STAMP) ## KV pool, memory budget and safe concurrency for the config
	@$(PY) -m tpudeploy capacity

cost: $(VENV_STAMP) ## Hourly/monthly cost, $ per million tokens, spot vs flex-start break-even
	@$(PY) -m tpudeploy cost

# CLIENTS, CONTEXT and TTFT_MS fall back to the config's [load] table. They reach the command
# from the environment (make exports command-line variables), so no value is shell-parsed.
plan-scale: $(VENV_STAMP) ## Replicas, $/hour, $/M tokens and autoscaler targets for CLIENTS at CONTEXT [TTFT_MS]
	@$(PY) -m tpudeploy plan-scale $${CLIENTS:+--clients "$$CLIENTS"} \
	  $${CONTEXT:+--context "$$CONTEXT"} $${TTFT_MS:+--ttft-ms "$$TTFT_MS"}

status: $(VENV_STAMP) ## Node (GKE: replicas, TPU nodes, autoscaler), cost now, when billing stops
	@$(PY) -m tpudeploy status

# Secrets go into Secret Manager from stdin or a hidden prompt, never through argv or a file.
secret: $(VENV_STAMP) ## Store the Hugging Face token (stdin, or a hidden prompt on a terminal)
	@$(PY) -m tpudeploy secret

# One key per [access] client, each its own secret. CLIENT defaults to the first client; a second
# run refuses unless ROTATE=1 (the old key works for OVERLAP, default [access] rotation_overlap;
# OVERLAP=0 stops it now). The key is printed only with SHOW=1.
api-key: $(VENV_STAMP) ## Store CLIENT's key (ROTATE=1 [OVERLAP=30m]: replace it, the old one working meanwhile; SHOW=1 prints it)
	@$(PY) -m tpudeploy api-key $${CLIENT:+--client "$$CLIENT"} $${ROTATE:+--rotate "$$ROTATE"} \
	  $${OVERLAP:+--overlap "$$OVERLAP"} $${SHOW:+--show "$$SHOW"}

# Every front door of the deployment serves this one certificate (a client pins one fingerprint
# whichever GKE pod answers, and whichever TPU VM a re-creation made); made in memory, the key
# goes to Secret Manager only. ROTATE=1 replaces a stored one (agents must re-pin).
tls-cert: $(VENV_STAMP) ## Make and store the deployment's front-door certificate (ROTATE=1: replace it; agents re-pin)
	@$(PY) -m tpudeploy tls-cert $${ROTATE:+--rotate "$$ROTATE"}

dashboard: $(VENV_STAMP) ## The deployment's Cloud Monitoring dashboard: its console URL and the gcloud command
	@$(PY) -m tpudeploy.dashboardcli

logs: $(VENV_STAMP) ## The deployment's logs from Cloud Logging, no SSH (SINCE=1h, WHAT=vllm|frontdoor|boot)
	@$(PY) -m tpudeploy.logscli $${SINCE:+--since "$$SINCE"} $${WHAT:+--what "$$WHAT"}

usage: $(VENV_STAMP) ## Per client: requests, errors, p50/p95, output tokens, share of the chips' cost (SINCE=24h, CLIENT=)
	@$(PY) -m tpudeploy usage $${SINCE:+--since "$$SINCE"} $${CLIENT:+--client "$$CLIENT"}

wait: $(VENV_STAMP) ## Follow the boot (GKE: the rollout, each replica) until vLLM is ready
	@$(PY) -m tpudeploy wait

# make tune's own step (no ## : not a command for people): the node's boot check into OUT.
boot-record: $(VENV_STAMP)
	@test -n "$(OUT)" || { echo "usage: make boot-record OUT=<file.json>" >&2; exit 2; }
	@$(PY) -m tpudeploy.tpuvm.bootrecord $(OUT)

# The node publishes the RepoDigest it pulled (never the config-blob image ID) and the versions
# the image reports; this writes them into DEPLOY_CONFIG, comments and layout kept.
pin: $(VENV_STAMP) ## TPU VM only: hold the build, writing the ready node's image digests into the config
	@$(PY) -m tpudeploy pin

# Over TLS pinned to the node's certificate. ENDPOINT=https://HOST:PORT (e.g. the tunnel's
# https://localhost:8443) skips the node lookup, TLS_SHA256 the guest-attribute lookup,
# VLLM_API_KEY the Secret Manager one.
smoke: $(VENV_STAMP) ## Front door locked, then chat + get_weather tool call, with latencies
	@$(PY) -m tpudeploy smoke

# ENDPOINT, TLS_SHA256 and VLLM_API_KEY override as for smoke (GKE through the Gateway: its
# address and its certificate's fingerprint). About 12 s of model time at the build log's rates.
accept: $(VENV_STAMP) ## The build log's acceptance table: chat, tool, image, 26K prompt, needles, determinism
	@$(PY) -m tpudeploy accept

# CERT_OUT=file also writes the pinned certificate, for clients that take a CA file.
endpoint: $(VENV_STAMP) ## Where the API is, the certificate fingerprint and how clients pin it
	@$(PY) -m tpudeploy endpoint $(if $(CERT_OUT),--cert-out $(CERT_OUT))

# The default deployment opens no port: this forwards localhost:LOCAL_PORT (default 8443) to the
# node's proxy over IAP SSH (port 22 is open to Google's IAP range only).
tunnel: $(VENV_STAMP) ## TPU VM only: forward a local port to the node's TLS proxy through IAP (Ctrl-C stops)
	@$(PY) -m tpudeploy tunnel

# The sweep runs `vllm bench serve` inside the serving container: over IAP SSH on a TPU VM, in
# one ready replica through the Kubernetes API's exec on GKE; the API key travels on stdin,
# never on a command line. OUT=dir keeps (and resumes) a run's results. ROUTE=gateway (GKE with
# [routing]): the pool through the Gateway instead of one replica's own vLLM; SHARED_PREFIX=75:
# that percent of each prompt is shared by a run's requests (agent turns).
ROUTE_ARGS = $(if $(ROUTE),--route $(ROUTE)) $(if $(SHARED_PREFIX),--shared-prefix-percent $(SHARED_PREFIX))
BENCH_ARGS = --config $(DEPLOY_CONFIG) $(if $(OUT),--out $(OUT)) \
	$(if $(API_KEY_SECRET),--api-key-secret $(API_KEY_SECRET)) $(ROUTE_ARGS)
bench: $(VENV_STAMP) ## Run the build log's 12-cell sweep on the node (PROFILE=quick for a first look)
	@$(PY) -m tpudeploy.benchcli run $(BENCH_ARGS) $(if $(PROFILE),--profile $(PROFILE))

bench-quick: $(VENV_STAMP) ## A first look: 4 cells, one repetition
	@$(PY) -m tpudeploy.benchcli run $(BENCH_ARGS) --profile quick

bench-plan: $(VENV_STAMP) ## Print every benchmark command and a time estimate; runs nothing
	@$(PY) -m tpudeploy.benchcli plan --config $(DEPLOY_CONFIG) $(if $(PROFILE),--profile $(PROFILE)) $(ROUTE_ARGS)

report: $(VENV_STAMP) ## Rebuild the benchmark report from saved results: make report RESULTS=dir
	@test -n "$(RESULTS)" || { echo "usage: make report RESULTS=<dir of vllm bench serve JSON files>" >&2; exit 2; }
	@$(PY) -m tpudeploy.benchcli report $(RESULTS) --config $(DEPLOY_CONFIG) $(if $(OUT),--out $(OUT))

# make tune (docs/tuning.md): the build log's untested ideas (tune/*.toml) as whole configs, each
# booted from scratch, ROUNDS times interleaved; ARMS=a,b picks arms, TUNE_ARMS=dir another folder.
TUNE_ARGS = --config $(DEPLOY_CONFIG) $(if $(PROFILE),--profile $(PROFILE)) \
	$(if $(ROUNDS),--rounds $(ROUNDS)) $(if $(ARMS),--arms $(ARMS)) $(if $(TUNE_ARMS),--arms-dir $(TUNE_ARMS))
tune-plan: $(VENV_STAMP) ## What make tune would run: each arm's change, the order, time and cost
	@$(PY) -m tpudeploy.tune plan $(TUNE_ARGS)

# Paid: creates and bills TPU nodes (asks first without AUTO_APPROVE); OUT=dir resumes a run.
tune: install ## TPU VM only: boot each arm from scratch, bench it, stop the billing (KEEP=arm|winner keeps one)
	@$(PY) -m tpudeploy.tune run $(TUNE_ARGS) $(if $(OUT),--out $(OUT)) \
	  $(if $(KEEP),--keep $(KEEP)) $(if $(AUTO_APPROVE),--yes)

tune-report: $(VENV_STAMP) ## The tune's verdict: make tune-report OUT=tune-results/<name>-<profile>
	@test -n "$(OUT)" || { echo "usage: make tune-report OUT=<the OUT of make tune>" >&2; exit 2; }
	@$(PY) -m tpudeploy.tune report $(OUT) $(TUNE_ARGS)

# The upstream watch ([watch] table, docs/tuning.md); exit 1 when its run would be refused.
watch-check: $(VENV_STAMP) ## The upstream watch's budget, worst case, time limit and billing stop
	@$(PY) -m tpudeploy.upstream check

# Paid: what .github/workflows/upstream-watch.yml runs. A new vllm-tpu build on its own flex-start
# deployment <name>-watch, judged against the pinned one, always destroyed; OUT gets the verdict.
upstream-watch: install ## Judge a new vllm-tpu build on its own flex-start node (OUT=dir)
	@$(PY) -m tpudeploy.upstream run --out $(or $(OUT),watch-out)

# Two pytest workers (pytest-xdist), one per core of the machines this runs on; each test file
# stays on one worker, so a module's shared fixture (the rehearsal starts all its runs at once)
# runs once. TEST_WORKERS=0 runs in one process; on a bigger machine, TEST_WORKERS=auto.
TEST_WORKERS ?= 2
PYTEST = $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# Two tiers (docs/development.md): `make test` is everything but the slow tier, in minutes;
# `make test-slow` is the rehearsal matrix (full lifecycles, marker `rehearsal`), the flex-start
# node stack's Terraform lifecycles (marker `lifecycle`) and the few tests of tens of seconds of
# CPU each (marker `slow_tier`), then the mutation tests (make mutants). CI (.ci/run, the checks workflow) runs both tiers.
SLOW_TIER = rehearsal or lifecycle or slow_tier
# Python's default is to keep bytecode caches; an environment that turns them off
# (PYTHONDONTWRITEBYTECODE=1, as on this project's CI machines) makes every one of the suite's
# ~150 Python processes compile the project's modules again and pytest rewrite every test
# module in each worker: 20 s of CPU per run, measured. The tests keep them (in the ignored
# __pycache__ folders); nothing else the Makefile runs changes.
test test-slow test-all mutants: export PYTHONDONTWRITEBYTECODE =
test: install ## The offline test suite (minutes); the slow tier is make test-slow
	$(PYTEST) -m "not ($(SLOW_TIER))"

test-fast: test ## The old name of make test

# One after the other, not side by side: each takes both cores.
test-slow: install ## The slow tier: the rehearsal matrix, then the mutation tests (CI runs it)
	$(PYTEST) -m "$(SLOW_TIER)"
	$(MUTANTS)

test-all: test test-slow ## Both tiers, as CI runs them

# The whole lifecycle, make deploy-secrets to make destroy-all, run for real (cdktf CLI,
# Terraform, the project's clients) against loopback fakes of the Google APIs, in a scratch copy
# of the repository: never your state or deploy.toml. PROVISIONING=all runs the three side by
# side. SCENARIO=preemption (spot, on-demand): the node preempted, then make recover;
# SCENARIO=deadline: the deadline job fires and nothing bills afterwards; SCENARIO=pipeline
# (spot, on-demand): both stacks applied as the GitOps deploy identity, the bootstrap's grants
# in force (docs/gitops.md); SCENARIO=ladder (spot, on-demand): a capacity ladder whose first
# zone is out of stock (docs/capacity-and-cost.md); SCENARIO=idle (any provisioning): the idle
# node deletes itself.
PROVISIONING ?= flex-start
SCENARIO ?= lifecycle
# PLATFORM=gke: the GKE lifecycle (cluster, pools, the serving objects) against fakes of the GKE
# API and of the cluster's Kubernetes API (docs/rehearsal.md); PROVISIONING does not apply.
PLATFORM ?= tpu-vm
rehearse: install ## Dress rehearsal of the lifecycle: PROVISIONING=flex-start|spot|on-demand|all, PLATFORM=gke
	@$(PY) -m tools.rehearsal --platform $(PLATFORM) --provisioning $(PROVISIONING) \
	  --scenario $(SCENARIO) $(if $(KEEP),--keep)

lint: $(VENV_STAMP) ## ruff, mypy and the import layers (tools/layers.py)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(PY) -m tools.layers

readme: $(VENV_STAMP) ## Regenerate the generated sections of README.md and docs/
	$(PY) -m tools.readme

# Minutes, not seconds: the second half of `make test-slow`. Fails on a survivor that neither a
# test kills nor tests/mutants_equivalent.toml explains, and on a run cut short (a mutant not
# checked). A timeout or a crash counts as a kill only if it repeats with the mutant run alone,
# so a loaded runner makes it slower, never wrongly green or red (tools/mutants.py). JOBS=n sets
# mutmut's workers (2).
MUTANTS = $(PY) -m tools.mutants $(if $(JOBS),--jobs $(JOBS))
mutants: $(VENV_STAMP) ## Mutation-test config validation, guard rails, rendering, flex-start spec
	$(MUTANTS)

scan: synth ## checkov on the synthesized JSON
	$(PY) -m tools.scan $(OUTDIR)

# GitOps bootstrap (docs/gitops.md): once per repository, with your own credentials. Its own
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
	@$(PY) -m tpudeploy.github_environments

# Preflight first (placeholders left in gitops.toml, Terraform, credentials): it needs only .venv,
# so a mistake is refused before npm installs the cdktf CLI.
bootstrap: $(VENV_STAMP) ## Create the state bucket, GitHub federation and CI accounts (owner, once)
	@$(PY) -m tpudeploy.bootstrap_preflight
	@$(MAKE) --no-print-directory $(NODE_STAMP)
	$(CDKTF) deploy --app "$(BOOTSTRAP_APP)" --output $(BOOTSTRAP_OUT) gitops-bootstrap \
		$(if $(AUTO_APPROVE),--auto-approve)

clean: ## Remove synth output and caches (keeps .venv, node_modules and Terraform state)
	rm -rf cdktf.out mutants .pytest_cache .mypy_cache .ruff_cache
	find . -name __pycache__ -not -path './.venv/*' -not -path './node_modules/*' -prune -exec rm -rf {} +
