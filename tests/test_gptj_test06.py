"""GPT-J's TEST06 (v5.0 lists gptj-99/99.9 under models_TEST06). mlperf.conf infers GPT-J's token latencies
(infer_token_latencies, 69 tokens a sample), so LoadGen logs no token_count and no first token unless the run sets
use_token_latencies: its TEST06 audit does (code.common.harness.child), and the streaming SUT reports the first token
and the completion with its token count as for every other LLM. Before, the official run_verification.py found no
token_data in the log and wrote nothing (exit 1); the smoke's checker read "first_token_check: False / length_check:
False". Here: one tiny Server audit (the audit.config's 100 queries) verified by ours and the official script, a
SingleStream audit with a planted wrong first token (--plant_first_token) rejected by both, and the 4-beam processor
(the real GPT-J's decoding, whose first token is known only at the end) reporting the first token of the output it
completes."""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import numpy as np

from tests.conftest import audit_dir, run_main

GPTJ = ("--benchmarks=gptj", "--model_variant=tiny", "--round=v5.0")
PASS = ["First token check pass: True", "EOS check pass: True", "Sample length check pass: True",
        "TEST06 verification complete"]


def test_gptj_server_test06_reports_tokens_and_passes_the_official_check(tiny_gptj):
    # TEST06 judges tokens, not latency: at 50 QPS the 100 queries arrive in 2 s and queue (the SUT sheds nothing
    # below 256 outstanding samples, code.common.harness.sut.pending_bound)
    r = run_main("--action=run_audit_harness", "--audit_test=TEST06", *GPTJ, "--scenarios=Server",
                 "--server_target_qps=50", env=tiny_gptj)
    assert r.returncode == 0, r.stdout + r.stderr
    d = audit_dir(tiny_gptj, "TEST06", "gptj", "Server")
    assert (d / "verify_accuracy.txt").read_text().splitlines() == PASS
    rec = json.loads((d / "verification.json").read_text())
    print(f"FIGURE tiny GPT-J TEST06 Server over {rec['accuracy']['samples']} logged samples: "
          f"{rec['accuracy']['verdict']} (official: "
          f"{((rec.get('official') or {}).get('accuracy') or {}).get('text', 'not run').strip().splitlines()[-1]})")
    assert rec["passed"] and rec["accuracy"]["samples"] == 100 and rec["accuracy"]["eos_token_id"] is not None
    if os.environ.get("MLPERF_INFERENCE_DIR"):        # make test: compliance/TEST06/run_verification.py ran on the log
        official = rec["official"]
        assert official["script"].endswith("compliance/TEST06/run_verification.py") and official["returncode"] == 0
        assert official["accuracy"]["text"].splitlines() == PASS and not rec["errors"], official
    # the audit alone turns the token report on; LoadGen still infers the tokens/s it reports (69 a sample)
    detail = (d / "mlperf_log_detail.txt").read_text()
    assert '"key": "requested_use_token_latencies", "value": true' in detail
    summary = (d / "mlperf_log_summary.txt").read_text()
    assert "Completed tokens per second (inferred)" in summary and "Min First Token latency" in summary
    # a wrong first token planted in every first-token report fails it, ours and the official script alike; in
    # SingleStream (not Offline, where the first token is not checked), whose 100 queries take about a second here
    bad = run_main("--action=run_audit_harness", "--audit_test=TEST06", *GPTJ, "--scenarios=SingleStream",
                   "--plant_first_token", "--llm_sample_count=8", env=tiny_gptj)
    assert bad.returncode == 4 and "Traceback" not in bad.stderr, bad.stdout + bad.stderr
    d = audit_dir(tiny_gptj, "TEST06", "gptj", "SingleStream")
    assert (d / "verify_accuracy.txt").read_text().splitlines()[0] == "First token check pass: False"
    assert "differs from the first token" in bad.stdout
    if os.environ.get("MLPERF_INFERENCE_DIR"):
        official = json.loads((d / "verification.json").read_text())["official"]["accuracy"]["text"].splitlines()
        assert official == ["First token check pass: False", *PASS[1:3], "TEST06 verification failed"], official


class RecordingLoadGen:
    """Stands in for mlperf_loadgen: records FirstTokenComplete / QuerySamplesComplete payloads in call order."""

    class QuerySampleResponse:
        def __init__(self, qid, ptr, nbytes, n_tokens=None):
            import ctypes

            self.qid, self.n_tokens = qid, n_tokens
            self.data = np.frombuffer(ctypes.string_at(ptr, nbytes), dtype=np.int32).tolist() if nbytes else []

    def __init__(self, expected: int):
        self.events: list[tuple[str, int, list[int], int | None]] = []
        self.done = threading.Event()
        self.expected = expected

    def FirstTokenComplete(self, responses):
        self.events += [("first", x.qid, x.data, x.n_tokens) for x in responses]

    def QuerySamplesComplete(self, responses):
        self.events += [("done", x.qid, x.data, x.n_tokens) for x in responses]
        if sum(e[0] == "done" for e in self.events) == self.expected:
            self.done.set()


def test_gptj_beam_search_reports_the_first_token_of_its_output(tiny_gptj):
    """The real GPT-J decodes with 4 beams (BeamSearchProcessor, model.generate): through the streaming SUT with token
    latencies on, each sample's first-token report is the first token of the output it completes, sent before that
    completion, and the completion carries the output's length: what TEST06 checks in LoadGen's log."""
    import transformers

    from code.common.llm.backends import BeamSearchProcessor, WorkerSpec
    from code.common.llm.harness import load_prompts
    from code.common.llm.sut import StreamingSUT
    from code.gptj.harness import REAL, TINY

    scratch = Path(tiny_gptj["MLPERF_SCRATCH_PATH"])
    ckpt = scratch / "models" / "gptj" / "tiny" / "checkpoint"
    prompts = load_prompts(scratch / "preprocessed_data" / "gptj" / "tiny" / "prompts.npz")[:4]
    eos = json.loads((ckpt / "config.json").read_text())["eos_token_id"]
    model = transformers.AutoModelForCausalLM.from_pretrained(str(ckpt)).eval()
    proc = BeamSearchProcessor(model, WorkerSpec(model_dir=str(ckpt), max_batch_size=2, num_beams=REAL.num_beams,
                                                 eos_token_id=eos, pad_token_id=eos), lambda: None)
    lg = RecordingLoadGen(len(prompts))
    sut = StreamingSUT(lg, [proc], prompts.__getitem__, max_new_tokens=TINY.max_new_tokens,
                       min_new_tokens=TINY.min_new_tokens, token_latencies=True)
    sut.start()
    try:
        sut.issue_queries([type("S", (), {"id": 100 + i, "index": i})() for i in range(len(prompts))])
        assert lg.done.wait(120), sut.state()
    finally:
        sut.stop()
    assert not sut.errors, sut.errors
    for qid in range(100, 100 + len(prompts)):
        mine = [e for e in lg.events if e[1] == qid]
        assert [e[0] for e in mine] == ["first", "done"], mine
        (_, _, first, _), (_, _, out, n) = mine
        assert len(out) >= TINY.min_new_tokens and n == len(out) and first == out[:1], (first, out, n)
