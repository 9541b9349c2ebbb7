"""Harness benchmark for BERT on ONNX Runtime (CPU). Prints figures; asserts nothing.

  (a) raw samples/s: a tight loop of the Processor's own code path (BertProcessor.process, seqlen-
      bucketed, gpu_batch_size features per call, in the order the SUT gives an Offline query: LoadGen's
      seeded random order, sorted by length when bucketed (BertBenchmark.offline_order_key))
      over the same engine file, spec and QSL, no LoadGen;
  (b) harness Offline samples/s through LoadGen (offline_expected_qps = a, min_duration = --seconds);
  (c) b/a (goal >= 0.97);
  (d) seqlen-aware batching: harness Offline samples/s and F1 with bert_seqlen_batching=bucketed and
      =padded (every feature padded to 384), and their ratio;
  (e) the MLCommons reference, language/bert/run.py --backend=onnxruntime (its onnxruntime_SUT: one
      thread and one 1-sample session.run per sample, 384 tokens), on the same tiny ONNX and data,
      Offline, in this same invocation: its samples/s, F1 (accuracy-squad.py on its accuracy log) and
      our harness / reference ratio. Needs $MLPERF_INFERENCE_DIR (a mlcommons/inference checkout);
      create_squad_data imports Google BERT's tokenization.py from the DeepLearningExamples
      submodule, and when that is not checked out a stand-in built on transformers' BasicTokenizer is
      put on its path (printed).
(a) and (b) alternate as scripts/bench_common.py does (each harness run against the mean of the raw loops
just before and after it), with a padded (d) run after each bucketed one, in this one process tree (the
machine may be shared: compare the figures of one invocation, not across invocations).

The tiny variant is built in a private scratch. --real runs the real BERT-Large and SQuAD features
when they are in $MLPERF_SCRATCH_PATH (download_model / download_data / preprocess_data first).

usage: python scripts/bench_bert.py [--seconds 3] [--repeats 5] [--real] [--no-reference]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import REPO, alternate, harness_run as harness, offline_settings, prepare_tiny, report  # noqa: E402


def settings_for(extra: list[str], real: bool):
    return offline_settings("bert", extra, not real)


def raw_loop(settings, seconds: float) -> float:
    """Samples/s of BertProcessor.process over the same engine (loaded as the harness loads it)."""
    from code.bert.harness import BertBenchmark

    b = BertBenchmark(settings)
    qsl = b.make_qsl()
    [proc] = b.make_processors(qsl, b.generate_engines())
    proc.warmup()
    rng = np.random.default_rng(0)
    order = rng.permutation(qsl.total_count)
    key = b.offline_order_key(qsl)          # the order the SUT gives an Offline query (bucketed: by length)
    if key is not None:
        order = np.array(sorted(order.tolist(), key=key))
    bs = proc.batch_size
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds or n % qsl.total_count:
        start = n % qsl.total_count
        batch = order[start:start + bs]
        proc.process(batch.tolist())
        n += len(batch)
    rate = n / (time.perf_counter() - t0)
    for e in {id(x): x for x in proc.engines.values()}.values():
        e.close()
    return rate


def reference_env(work: Path, ref: Path, scratch: Path) -> dict:
    from code.bert.official import reference_pythonpath, tokenization_checked_out

    paths = reference_pythonpath(ref, work)
    if not tokenization_checked_out(ref):
        print("  (reference: DeepLearningExamples/tokenization.py not checked out; using a stand-in on "
              "transformers' BasicTokenizer)")
    model_dir = scratch / "models" / "bert" / "tiny"
    # run.py --accuracy ends by running `python3 accuracy-squad.py`: python3 must be this interpreter
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONPATH": os.pathsep.join(paths), "ML_MODEL_FILE_WITH_PATH": str(model_dir / "model.onnx"),
            "VOCAB_FILE": str(model_dir / "vocab.txt"), "DATASET_FILE": str(scratch / "data" / "squad" / "tiny" / "dev-v1.1.json"),
            "USE_GPU": "no"}


def reference_run(work: Path, ref: Path, scratch: Path, seconds: float, qps: float, accuracy: bool) -> dict:
    """language/bert/run.py --backend=onnxruntime --scenario=Offline in ``work`` (its feature cache
    and build/logs land there)."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "user.conf").write_text(textwrap.dedent(f"""\
        bert.Offline.target_qps = {qps:.3f}
        bert.Offline.min_duration = {int(seconds * 1000)}
        bert.Offline.min_query_count = 1
        """))
    env = reference_env(work, ref, scratch)
    env["LOG_PATH"] = str(work / ("acc" if accuracy else "perf"))
    cmd = [sys.executable, str(ref / "run.py"), "--backend=onnxruntime", "--scenario=Offline",
           f"--user_conf={work / 'user.conf'}"] + (["--accuracy"] if accuracy else [])
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=1800)
    out = {"rc": r.returncode, "wall_s": round(time.perf_counter() - t0, 2)}
    if r.returncode != 0 and not (accuracy and (Path(env["LOG_PATH"]) / "mlperf_log_accuracy.json").is_file()):
        out["error"] = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["?"]
        return out
    summary = (Path(env["LOG_PATH"]) / "mlperf_log_summary.txt")
    if summary.is_file():
        hit = re.search(r"Samples per second\s*:\s*([\d.]+)", summary.read_text())
        out["samples_per_s"] = float(hit.group(1)) if hit else None
        out["valid"] = "Result is : VALID" in summary.read_text()
    if accuracy:
        a = subprocess.run([sys.executable, str(ref / "accuracy-squad.py"), "--vocab_file", env["VOCAB_FILE"],
                            "--val_data", env["DATASET_FILE"], "--log_file",
                            str(Path(env["LOG_PATH"]) / "mlperf_log_accuracy.json"),
                            "--out_file", str(work / "predictions.json"),
                            "--features_cache_file", str(work / "eval_features.pickle")],
                           cwd=work, env=env, capture_output=True, text=True, timeout=600)
        line = next((x for x in a.stdout.splitlines()[::-1] if x.startswith("{")), None)
        out["accuracy"] = json.loads(line) if line else (a.stderr.strip().splitlines()[-1:] or ["?"])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=3.0, help="length of each measurement")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--real", action="store_true", help="the real model and SQuAD features in $MLPERF_SCRATCH_PATH")
    ap.add_argument("--no-reference", action="store_true", help="skip (e), the MLCommons reference run.py")
    ap.add_argument("--root", default=str(REPO / "build" / "bench_bert"))
    a = ap.parse_args()
    root = Path(a.root)
    if not a.real:
        prepare_tiny(root, "bert")
    dur = int(a.seconds * 1000)
    padded: list[float] = []

    def bucketed_then_padded(qps: float, rep: int) -> dict:
        """(b) one bucketed harness run, then (d) a padded-384 one at the same settings."""
        common = [f"--min_duration={dur}", "--min_query_count=1", f"--offline_expected_qps={qps:.3f}"]
        m = harness(settings_for(common, a.real), root / "logs" / f"offline-{rep}")
        mp = harness(settings_for([*common, "--bert_seqlen_batching=padded"], a.real), root / "logs" / f"offline-padded-{rep}")
        padded.append(mp["metric_value"] or 0.0)
        print(f"  repeat {rep}: harness {m['metric_value'] or 0:.2f} samples/s ({m['result_validity']}); padded-384 "
              f"harness {padded[-1]:.2f} samples/s ({mp['result_validity']})", flush=True)
        return m

    ab = alternate(lambda: raw_loop(settings_for([], a.real), a.seconds), bucketed_then_padded, a.repeats)
    raws = ab["a_raw_samples_per_s"]
    f1 = {}
    for mode in ("bucketed", "padded"):
        m = harness(settings_for([f"--bert_seqlen_batching={mode}"], a.real), root / "logs" / f"accuracy-{mode}",
                    "AccuracyOnly")
        f1[mode] = (m.get("accuracy") or {}).get("metrics", {})
    s = settings_for([], a.real)
    from code.bert.harness import BertBenchmark

    lens = BertBenchmark(s).make_qsl().seq_len
    fig = {
        "model": ("real BERT-Large" if a.real else "tiny BERT (hidden 64, 2 layers)")
                 + f", {len(lens)} features of {lens.min()}-{lens.max()} tokens (mean {lens.mean():.0f})",
        "backend": s.backend, "gpu_batch_size": s.batch_size(), "bucket_step": s.bert_bucket_step,
        "threads": s.cpu_threads or len(os.sched_getaffinity(0)), "seconds": a.seconds,
        **ab,
        "d_padded_samples_per_s": [round(x, 2) for x in padded],
        "d_bucketed_over_padded_medians": round(statistics.median(ab["b_harness_offline_samples_per_s"])
                                                / statistics.median(padded), 3),
        "d_bucketed_F1_EM": [f1["bucketed"].get("F1"), f1["bucketed"].get("exact_match")],
        "d_padded_F1_EM": [f1["padded"].get("F1"), f1["padded"].get("exact_match")],
    }
    ref_dir = os.environ.get("MLPERF_INFERENCE_DIR")
    if a.no_reference or a.real:
        fig["e_reference"] = "skipped (--no-reference)" if a.no_reference else "skipped (--real: tiny only)"
    elif not ref_dir:
        fig["e_reference"] = "skipped: set MLPERF_INFERENCE_DIR to a mlcommons/inference checkout"
    else:
        ref = Path(ref_dir) / "language" / "bert"
        scratch = Path(os.environ["MLPERF_SCRATCH_PATH"])
        # alternating: the reference, then our harness, same min_duration, --repeats times
        refs, ours = [], []
        # the reference caches features in eval_features.pickle (cwd) and reuses it whatever the data
        (root / "reference" / "eval_features.pickle").unlink(missing_ok=True)
        ref_qps = statistics.median(raws) / 4
        for rep in range(a.repeats):
            rp = reference_run(root / "reference", ref, scratch, a.seconds, ref_qps, False)
            if not rp.get("samples_per_s"):
                refs.append(rp)
                break
            ref_qps = rp["samples_per_s"] * 1.5
            m = harness(settings_for([f"--min_duration={dur}", "--min_query_count=1",
                                      f"--offline_expected_qps={statistics.median(raws) * 1.5:.3f}"], a.real),
                        root / "logs" / f"offline-vs-reference-{rep}")
            refs.append(rp)
            ours.append(m["metric_value"] or 0.0)
            print(f"  reference repeat {rep}: run.py onnxruntime {rp['samples_per_s']:.2f} samples/s, harness "
                  f"{ours[-1]:.2f} samples/s", flush=True)
        ra = reference_run(root / "reference", ref, scratch, a.seconds, 1.0, True)
        fig["e_reference_offline_samples_per_s"] = [r.get("samples_per_s", r.get("error")) for r in refs]
        fig["e_harness_offline_samples_per_s"] = [round(x, 2) for x in ours]
        fig["e_reference_accuracy_squad"] = ra.get("accuracy", ra.get("error"))
        if ours and all(r.get("samples_per_s") for r in refs):
            fig["e_median_pair_ratio_harness_over_reference"] = round(
                statistics.median(o / r["samples_per_s"] for o, r in zip(ours, refs)), 3)
    report(fig, root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
