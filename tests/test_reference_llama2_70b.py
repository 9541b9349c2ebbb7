"""Llama2-70B against the MLCommons reference (language/llama2-70b), run as separate processes from the
read-only official tree ($MLPERF_INFERENCE_DIR; cwd and every output in tmp).

What the reference needs that is not here, and what it gets instead:
* the hub tokenizer meta-llama/Llama-2-70b-chat-hf: the tiny checkpoint's folder, through the
  reference's own arguments (``Dataset(model_name=...)``, evaluate-accuracy.py ``--checkpoint-path``);
* the processed OpenOrca pickle: the tiny one in the same format (the columns the reference reads);
* ``evaluate.load("rouge")`` (a hub download) and ``datasets``: the stand-ins of
  tests.test_reference_rouge.official_env; NLTK's punkt_tab: the tiny one our scorer loads
  (NLTK_DATA=rouge.nltk_data_dir("tiny")), so rougeLsum is compared too (tests.test_llm_harness.reference_env).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from tests.conftest import official_root

LLAMA = ("--benchmarks=llama2_70b",)

# The reference's QSL (dataset.Dataset) on each pickle, and the generation settings of its SUT
DRIVE = '''\
import json, sys
from dataset import Dataset
import SUT
out = {"gen_kwargs": SUT.gen_kwargs}
for name, path in zip(sys.argv[3::2], sys.argv[4::2]):
    d = Dataset(model_name=sys.argv[2], dataset_path=path)
    out[name] = {"ids": [t[0].tolist() for t in d.input_ids], "dtype": str(d.input_ids[0].dtype),
                 "mask": [t[0].tolist() for t in d.attention_masks], "lens": d.input_lens,
                 "count": d.total_sample_count, "max_length": d.max_length}
json.dump(out, open(sys.argv[1], "w"))
'''


def scratch(env) -> Path:
    return Path(env["MLPERF_SCRATCH_PATH"])


def benchmark(variant: str):
    from code.common.benchmarks import implementation
    from code.main import plan

    _, settings = plan(["--action=preprocess_data", *LLAMA, f"--model_variant={variant}"])
    return implementation(settings[0].spec)(settings[0])


def test_llama2_preprocessing_equals_reference_dataset(tiny_llama, tmp_path):
    """The token ids our QSL holds (prompts.npz, what the model is fed) equal the reference
    dataset.Dataset's input_ids (tok_input of the processed OpenOrca pickle, int32, mask all ones) for
    every sample of the tiny pickle; the same for a pickle whose tok_input rows are numpy arrays (as
    pandas may hold them) through our real-variant read_raw; and the reference SUT's generation
    settings (SUT.gen_kwargs: max/min new tokens, beams) equal ours for the real model."""
    root = official_root("language", "llama2-70b")
    import pandas as pd

    from code.common.llm.harness import load_prompts
    from tests.test_llm_harness import reference_env
    from code.llama2_70b import dataset, harness

    ckpt = scratch(tiny_llama) / "models" / "llama2_70b" / "tiny" / "checkpoint"
    pkl = scratch(tiny_llama) / "data" / "llama2_70b" / "tiny" / dataset.DATASET_PKL
    alt_dir = tmp_path / "alt"
    alt_dir.mkdir()
    df = pd.read_pickle(pkl).iloc[::-1].reset_index(drop=True)
    df["tok_input"] = [np.asarray(t, dtype=np.int64) for t in df["tok_input"]]
    df.to_pickle(alt_dir / dataset.DATASET_PKL)
    r = subprocess.run([sys.executable, "-c", DRIVE, str(tmp_path / "ref.json"), str(ckpt), "tiny", str(pkl),
                        "alt", str(alt_dir / dataset.DATASET_PKL)], cwd=tmp_path, env=reference_env(tmp_path, root)[0],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    ref = json.loads((tmp_path / "ref.json").read_text())

    ours = [p.tolist() for p in load_prompts(scratch(tiny_llama) / "preprocessed_data" / "llama2_70b" / "tiny"
                                             / "prompts.npz")]
    t = ref["tiny"]
    assert t["dtype"] == "torch.int32" and t["count"] == len(ours) == 240
    assert all(m == [1] * n for m, n in zip(t["mask"], t["lens"]))
    # the reference's SUT left-pads every prompt to its max_length 1024 (a longer one cannot be run)
    assert max(t["lens"]) <= t["max_length"] == 1024
    same_tiny = sum(a == b for a, b in zip(t["ids"], ours))
    from code.common.llm import tiny

    alt_ids, _ = benchmark("reference").read_raw(tiny.load_tokenizer(ckpt), alt_dir)
    same_alt = sum(a == b for a, b in zip(ref["alt"]["ids"], alt_ids))
    g = ref["gen_kwargs"]
    print(f"FIGURE llama2_70b preprocessing identical input ids: tiny pickle {same_tiny}/{len(ours)}, numpy-row pickle "
          f"{same_alt}/{len(alt_ids)}; reference gen_kwargs max_new_tokens {g['max_new_tokens']} min_new_tokens "
          f"{g['min_new_tokens']} num_beams {g['num_beams']} do_sample {g['do_sample']}, ours "
          f"{harness.REAL.max_new_tokens}/{harness.REAL.min_new_tokens}/{harness.REAL.num_beams}/greedy")
    assert same_tiny == len(ours) and same_alt == len(alt_ids) == len(ref["alt"]["ids"])
    assert (g["max_new_tokens"], g["min_new_tokens"], g["num_beams"], g["do_sample"]) == (
        harness.REAL.max_new_tokens, harness.REAL.min_new_tokens, harness.REAL.num_beams, False)


def planted_log(outputs: list[list[int]], path: Path, eos: int, seed: int = 4) -> list[int]:
    """An int32 accuracy log: ``outputs[i]`` (each sample's reference answer tokenized, then EOS), altered
    for some (cut short, a token changed, an EOS inside, BOS before and EOS after), every fifth sample
    left out, sample 2 logged twice (its second entry other tokens: the first counts). Returns the
    indices logged."""
    rng = np.random.default_rng(seed)
    entries, idx = [], []
    for i, out in enumerate(outputs):
        if i % 5 == 4:
            continue
        t = list(out)
        k = i % 6
        if k == 1:
            t = t[:max(1, len(t) // 3)]
        elif k == 2:
            t[int(rng.integers(len(t)))] = int(rng.integers(3, 500))
        elif k == 3:
            t = t[:len(t) // 2] + [eos] + t[len(t) // 2:]
        elif k == 5:
            t = [1] + t + [eos]
        entries.append({"seq_id": len(entries), "qsl_idx": i, "data": np.asarray(t, np.int32).tobytes().hex().upper()})
        idx.append(i)
    entries.append({"seq_id": len(entries), "qsl_idx": 2, "data": np.arange(10, 70, dtype=np.int32).tobytes().hex()})
    path.write_text(json.dumps(entries))
    return idx


def test_llama2_scoring_equals_reference_evaluate_accuracy(tiny_llama, tmp_path):
    """evaluate-accuracy.py (--checkpoint-path the tiny checkpoint, --dtype int32, the tiny pickle) and
    our Llama2-70B accuracy on one planted log: rouge1, rouge2, rougeL equal to 4 significant digits;
    gen_len, gen_num, gen_tok_len and tokens_per_sample exactly; rougeLsum too: both sides
    load the tiny punkt_tab (NLTK_DATA at the folder our scorer reads)."""
    root = official_root("language", "llama2-70b")
    from code.common.llm import tiny
    from tests.test_llm_harness import compare_official, reference_env
    from tests.test_reference_rouge import parse_result_dict
    from code.llama2_70b import dataset

    ckpt = scratch(tiny_llama) / "models" / "llama2_70b" / "tiny" / "checkpoint"
    pkl = scratch(tiny_llama) / "data" / "llama2_70b" / "tiny" / dataset.DATASET_PKL
    tok = tiny.load_tokenizer(ckpt)
    targets = json.loads((scratch(tiny_llama) / "preprocessed_data" / "llama2_70b" / "tiny" / "references.json")
                         .read_text())["targets"]
    log = tmp_path / "mlperf_log_accuracy.json"
    idx = planted_log([tok(t, add_special_tokens=False)["input_ids"] + [tiny.EOS] for t in targets], log, tiny.EOS)
    env, why = reference_env(tmp_path, root)
    r = subprocess.run([sys.executable, str(root / "evaluate-accuracy.py"), "--checkpoint-path", str(ckpt),
                        "--mlperf-accuracy-file", str(log), "--dataset-file", str(pkl), "--dtype", "int32"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    theirs = parse_result_dict(r.stdout)
    got = benchmark("tiny").accuracy(str(log), str(tmp_path / "ours"))
    ours = got["metrics"]
    assert got["samples"] == len(idx) == int(theirs["gen_num"])
    assert 5 < float(theirs["rouge1"]) < 99, theirs          # the planted changes move the score
    compare_official("llama2_70b scoring, planted log", theirs, ours, why,
                     ("gen_len", "gen_num", "gen_tok_len", "tokens_per_sample"))
