# MLPerf Inference harness. Every target creates or reuses .venv and installs requirements.txt
# (idempotent: a stamp file records the hash of the pins).
SHELL := /bin/bash
PYTHON_SYS ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.requirements.sha256
# installed without their declared dependencies (which would replace the pinned ones), into a folder of their own
# that only the tests using them put on sys.path (tests/vbench_oracle.py): vbench 0.1.5's own code is the oracle of
# tests/test_wan_amt.py (AMT-S), tests/test_wan_tag2text.py (Tag2Text, scene) and tests/test_wan_vbench_official.py
# (the DINO, CLIP and RAFT dimensions, which import OpenAI's clip and easydict). Not in site-packages: OpenAI's
# top-level `clip` package would shadow the SDXL reference's own tools/clip (a namespace package, which loses to a
# regular one anywhere on sys.path). requirements.txt names them in a comment, so the stamp follows a change
NODEPS := vbench==0.1.5 openai-clip==1.0.1 easydict==1.14
ORACLE := $(VENV)/oracle
REQ_SHA := $(shell sha256sum requirements.txt | cut -c1-64)
BENCHMARKS ?= resnet50
MODEL_VARIANT ?= reference
RUN_ARGS ?=
SUBMITTER ?= OpenHarness
DIVISION ?= closed
export MLPERF_SCRATCH_PATH ?= $(CURDIR)/build/scratch
export PYTHONUNBUFFERED := 1
MAIN := $(PY) -m code.main
# NVIDIA's space-separated form (BENCHMARKS="resnet50 sdxl") becomes one comma list; "all" works too.
EMPTY :=
SPACE := $(EMPTY) $(EMPTY)
COMMA := ,
BENCHMARK_LIST := $(subst $(SPACE),$(COMMA),$(strip $(BENCHMARKS)))
ROUND ?=
ROUND_ARG := $(if $(strip $(ROUND)),--round=$(strip $(ROUND)))
# the submission tools: SUBMITTER=, DIVISION= and ROUND= become their flags (RUN_ARGS adds others, e.g.
# --staging_root=...; ARGS= is the older spelling of RUN_ARGS here)
SUBMISSION_ARGS = --submitter=$(SUBMITTER) $(ROUND_ARG) $(RUN_ARGS) $(ARGS)
DATA_ARGS := --benchmarks=$(BENCHMARK_LIST) --model_variant=$(MODEL_VARIANT)

.PHONY: prebuild venv build info download_model download_data preprocess_data calibrate generate_engines run_harness run \
        find_performance run_audit_harness run_audit_test01 run_audit_test04 run_audit_test06 run_audit_test07 run_audit_test08 run_audit_test09 run_power_harness update_results truncate_results export_submission \
        check_submission submission demo test docs clean bench add_system doctor report run_llm_server stop_llm_server gpu_check

venv: $(STAMP)
$(STAMP): requirements.txt
	@test -x $(PY) || $(PYTHON_SYS) -m venv $(VENV)
	@if [ "$$(cat $(STAMP) 2>/dev/null)" != "$(REQ_SHA)" ]; then \
	  echo "[venv] installing requirements.txt into $(VENV)"; \
	  $(PY) -m pip install -q --disable-pip-version-check -r requirements.txt \
	  || { echo "[venv] install failed; once more without pip's cache (a download cut short or corrupted in transit fails its hash)"; \
	       $(PY) -m pip install -q --disable-pip-version-check --no-cache-dir -r requirements.txt; } \
	  && rm -rf $(ORACLE) && $(PY) -m pip install -q --disable-pip-version-check --no-deps --target $(ORACLE) $(NODEPS) \
	  && echo "$(REQ_SHA)" > $(STAMP); \
	fi

# DOCKER=1: build the image and start a container (code.common.docker; DRY_RUN=1 prints the docker commands).
# Otherwise the native .venv, plus GPU_EXTRAS / LLM_EXTRAS.
DOCKER ?=
DRY_RUN ?=
ifeq ($(DOCKER),1)
prebuild:
	@DRY_RUN=$(DRY_RUN) $(PYTHON_SYS) -m code.common.docker
else
prebuild: venv
	@if [ -n "$(GPU_EXTRAS)" ]; then $(PY) -m pip install -q -r requirements-gpu.txt; fi
	@if [ -n "$(LLM_EXTRAS)" ]; then \
	  pin=$$(grep -E "^$(subst _,[-_],$(LLM_EXTRAS))==" requirements-llm-gpu.txt) || { \
	    echo "error: LLM_EXTRAS=$(LLM_EXTRAS) is not in requirements-llm-gpu.txt"; \
	    echo "  fix: use LLM_EXTRAS=vllm or LLM_EXTRAS=tensorrt_llm"; exit 2; }; \
	  $(PY) -m pip install -q "$$pin" --extra-index-url https://pypi.nvidia.com; fi
endif

build: prebuild
	$(MAIN) --action=build

info: venv
	$(MAIN) --action=info --benchmarks=$(BENCHMARK_LIST) $(ROUND_ARG) $(RUN_ARGS)

download_model: venv
	$(MAIN) --action=download_model $(DATA_ARGS) $(RUN_ARGS)

download_data: venv
	$(MAIN) --action=download_data $(DATA_ARGS) $(RUN_ARGS)

preprocess_data: venv
	$(MAIN) --action=preprocess_data $(DATA_ARGS) $(RUN_ARGS)

# int8/fp8 Q/DQ models from the official calibration sets (--precision=int8|fp8, --force_calibration)
calibrate: venv
	$(MAIN) --action=calibrate $(ROUND_ARG) $(RUN_ARGS)

generate_engines: venv
	$(MAIN) --action=generate_engines $(ROUND_ARG) $(RUN_ARGS)

# prints this invocation's result table itself (never an earlier run's)
run_harness: venv
	@$(MAIN) --action=run_harness $(ROUND_ARG) $(RUN_ARGS)

# NVIDIA's `make run` (generate_engines, then run_harness) as one step, so RUN_ARGS meant for either is accepted
run: venv
	@$(MAIN) --action=run $(ROUND_ARG) $(RUN_ARGS)

# measure offline_expected_qps / server_target_qps / expected latencies; --write_config stores them
find_performance: venv
	$(MAIN) --action=find_performance $(ROUND_ARG) $(RUN_ARGS)

run_audit_harness: venv
	$(MAIN) --action=run_audit_harness $(ROUND_ARG) $(RUN_ARGS)

# a power run: ranging + testing run under the MLCommons power server (POWER_SERVER=host[:port], power-dev's server.py)
run_power_harness: venv
	$(MAIN) --action=run_power_harness $(if $(POWER_SERVER),--power_server=$(POWER_SERVER)) $(ROUND_ARG) $(RUN_ARGS)

run_audit_test01: venv
	$(MAIN) --action=run_audit_harness --audit_test=TEST01 $(ROUND_ARG) $(RUN_ARGS)

run_audit_test04: venv
	$(MAIN) --action=run_audit_harness --audit_test=TEST04 $(ROUND_ARG) $(RUN_ARGS)

# LLMs: first token, EOS and output-length checks (compliance/TEST06)
run_audit_test06: venv
	$(MAIN) --action=run_audit_harness --audit_test=TEST06 $(ROUND_ARG) $(RUN_ARGS)

# gpt-oss-120b (v6.0 on): TEST07 scores a performance-mode run over its GPQA compliance set (every sample logged);
# TEST09 checks the mean output length of a performance-mode run over the whole performance set
run_audit_test07: venv
	$(MAIN) --action=run_audit_harness --audit_test=TEST07 $(ROUND_ARG) $(RUN_ARGS)

run_audit_test09: venv
	$(MAIN) --action=run_audit_harness --audit_test=TEST09 $(ROUND_ARG) $(RUN_ARGS)

# dlrm-v3 (v6.0 on): TEST08 logs a sample of a performance-mode run's answers and matches each with the accuracy
# run's answer for the same (ts_idx, query_idx) (their NE within 0.1%); needs that accuracy run first
run_audit_test08: venv
	$(MAIN) --action=run_audit_harness --audit_test=TEST08 $(ROUND_ARG) $(RUN_ARGS)

# OpenAI-compatible LLM servers for --backend=openai (vLLM, SGLang, trtllm-serve or the harness's own), one per
# model instance; build/llm_server/endpoints.json names them
run_llm_server: venv
	$(MAIN) --action=run_llm_server $(ROUND_ARG) $(RUN_ARGS)

stop_llm_server: venv
	$(MAIN) --action=stop_llm_server

update_results: venv
	$(MAIN) --action=update_results --division=$(DIVISION) $(SUBMISSION_ARGS)

truncate_results: venv
	$(MAIN) --action=truncate_results $(RUN_ARGS) $(ARGS)

export_submission: venv
	$(MAIN) --action=export_submission --division=$(DIVISION) $(SUBMISSION_ARGS)

check_submission: venv
	$(MAIN) --action=check_submission $(SUBMISSION_ARGS)

# a round's whole submission, resumable (code/common/submission/flow.py): make submission ROUND=v6.1 SYSTEM_TYPE=edge
# [BENCHMARKS=resnet50] [MODEL_VARIANT=tiny] [SMOKE=1: short runs, never submittable] [PLAN=1: print the plan only]
# [POWER_SERVER=host[:port]: each performance run made as make run_power_harness makes it, ranging + testing]
SYSTEM_TYPE ?=
SMOKE ?=
PLAN ?=
submission: venv
	@$(MAIN) --action=submission --system_type=$(SYSTEM_TYPE) $(ROUND_ARG) --model_variant=$(MODEL_VARIANT) \
	  $(if $(filter command line environment,$(origin BENCHMARKS)),--benchmarks=$(BENCHMARK_LIST)) \
	  --submitter=$(SUBMITTER) --division=$(DIVISION) $(if $(SMOKE),--smoke) $(if $(PLAN),--dry_run) \
	  $(if $(POWER_SERVER),--power_server=$(POWER_SERVER)) $(RUN_ARGS)

# register this machine's GPUs as a known system with config blocks: RUN_ARGS="--system_id=... --based_on=..."
add_system: venv
	$(MAIN) --action=add_system $(RUN_ARGS)

# one line per check, ok / warn / FAIL with the fix; exit 0 only when nothing FAILs
doctor: venv
	@$(MAIN) --action=doctor $(if $(filter command line environment,$(origin BENCHMARKS)),--benchmarks=$(BENCHMARK_LIST)) $(RUN_ARGS)

# build/report/index.html (+ summary.json, summary.md): the latest invocation's runs, or RUN_ARGS="--report_logs=..."
report: venv
	@$(MAIN) --action=report $(RUN_ARGS)

docs: venv
	$(MAIN) --action=docs

# The tiny variant end to end on this machine (CPU fallback), all with --fast. BENCHMARKS=... on the
# command line picks what it runs (make demo BENCHMARKS=retinanet).
DEMO_DEFAULT := resnet50,sdxl,llama2_70b
DEMO_BENCHMARKS ?= $(if $(filter command line environment,$(origin BENCHMARKS)),$(BENCHMARK_LIST),$(DEMO_DEFAULT))
demo: venv
	$(PY) scripts/demo.py --benchmarks=$(DEMO_BENCHMARKS)

# The GPU paths in minutes (issue 29): build/gpu_check/gpu_check.md and .json; a CPU dry-run where no GPU is found.
# GPU_CHECK_ARGS="--budget_s 300 --steps resnet50,llm" (python scripts/gpu_check.py --help)
gpu_check: venv
	$(PY) scripts/gpu_check.py $(GPU_CHECK_ARGS)

bench: venv
	$(PY) -m pip install -q -r requirements-bench.txt
	$(PY) scripts/bench_harness.py
	$(PY) scripts/bench_sdxl.py

# The official MLCommons tools are the tests' oracles: ../shared/mlcommons-inference when it is there and
# MLPERF_INFERENCE_DIR is unset (a value you give wins; without either, those tests skip with the reason).
OFFICIAL_DIR := $(abspath $(CURDIR)/../shared/mlcommons-inference)
# The MLCommons endpoints client (Python 3.12, build/endpoints_venv) installs in the background while the tests run;
# the interop tests wait for it (scripts/endpoints_venv.sh; they skip with the reason where it cannot install).
# Three pytest-xdist workers on two cores: a test module is one work unit, heaviest first (tests/conftest.py: HEAVY);
# the tiny builds are shared by the workers under file locks. Many tests wait on a Server run's arrival schedule or a
# server's answers with the CPU idle, which a third worker fills (the latency-bound runs get the CPU first, see
# tests/conftest.py _priority): 14m42 for the whole suite with three, where two left a quarter of the CPU idle.
# TEST_WORKERS=0 runs in-process, in file order.
TEST_WORKERS ?= 3
test: venv
	@if [ -z "$$MLPERF_INFERENCE_DIR" ] && [ -d "$(OFFICIAL_DIR)/tools/submission" ]; then \
	  export MLPERF_INFERENCE_DIR="$(OFFICIAL_DIR)"; fi; \
	echo "[test] MLPERF_INFERENCE_DIR=$${MLPERF_INFERENCE_DIR:-(unset: the reference tests skip)}"; \
	if [ -n "$$MLPERF_INFERENCE_DIR" ] && [ ! -f build/torchrec_site/.installed ]; then \
	  echo "[test] torchrec (CPU) for the DLRM-v2 reference into build/torchrec_site"; \
	  $(PY) -m pip install -q --disable-pip-version-check --no-deps --target build/torchrec_site \
	    -r code/dlrm_v2/reference-torchrec.txt && touch build/torchrec_site/.installed || \
	    echo "[test] torchrec could not be installed: the DLRM-v2 reference tests skip"; fi; \
	mkdir -p build; bash scripts/endpoints_venv.sh > build/endpoints_venv.log 2>&1 & \
	rm -f build/test_failures.log; MLPERF_TEST_FAILURES_LOG=$(CURDIR)/build/test_failures.log \
	$(PY) -m pytest -q tests -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

clean:
	rm -rf build .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
