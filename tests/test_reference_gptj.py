"""GPT-J against the MLCommons reference (language/gpt-j), run as separate processes from the read-only
official tree ($MLPERF_INFERENCE_DIR; cwd and every output in tmp).

What the reference needs that is not here, and what it gets instead:
* the hub tokenizer "EleutherAI/gpt-j-6B", a name fixed in dataset.py and evaluation.py (no argument):
  the tiny checkpoint's tokenizer, as a folder of that relative name in the script's working
  directory (``from_pretrained`` takes a local folder first);
* ``evaluate.load("rouge")`` (a hub download) and ``datasets``: the stand-ins of
  tests.test_reference_rouge.official_env; NLTK's punkt_tab: the tiny one our scorer loads
  (NLTK_DATA=rouge.nltk_data_dir("tiny")), so rougeLsum is compared too (tests.test_llm_harness.reference_env).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from tests.conftest import official_root

GPTJ = ("--benchmarks=gptj", "--round=v5.0")

# The reference's QSL (dataset.Dataset) on each file, and the generation settings of its SUT
DRIVE = '''\
import json, os, sys
os.environ.pop("GPTJ_BEAM_SIZE", None)
from dataset import Dataset
import backend_PyTorch
out = {"gen_kwargs": backend_PyTorch.gen_kwargs}
for name, path in zip(sys.argv[2::2], sys.argv[3::2]):
    d = Dataset(path)
    out[name] = {"ids": [t[0].tolist() for t in d.source_encoded_input_ids],
                 "mask": [t[0].tolist() for t in d.source_encoded_attn_masks], "targets": d.targets}
json.dump(out, open(sys.argv[1], "w"))
'''


def scratch(env) -> Path:
    return Path(env["MLPERF_SCRATCH_PATH"])


def reference_cwd(env, tmp_path: Path) -> Path:
    """A working directory where "EleutherAI/gpt-j-6B" is the tiny tokenizer."""
    cwd = tmp_path / "cwd"
    shutil.copytree(scratch(env) / "models" / "gptj" / "tiny" / "checkpoint", cwd / "EleutherAI" / "gpt-j-6B",
                    ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
    return cwd


def benchmark(variant: str):
    from code.common.benchmarks import implementation
    from code.main import plan

    _, settings = plan(["--action=preprocess_data", *GPTJ, f"--model_variant={variant}"])
    return implementation(settings[0].spec)(settings[0])


def long_records() -> list[dict]:
    """Articles past the reference's 1919-token cut, and odd ones: special-token text, accents and
    symbols, blank lines, an empty article."""
    from code.common.llm.tiny import TextGen
    from code.gptj.dataset import INSTRUCTION

    g = TextGen(99)
    inputs = [g.paragraph(260), g.paragraph(400) + "\n\n" + g.paragraph(30), "</s> <s> " + g.paragraph(5) + " </s>",
              "Caf\u00e9 \u2014 \u201cna\u00efve\u201d r\u00e9sum\u00e9 \u00a9 2024\t\u4e2d\u6587 \U0001f600  " + g.paragraph(3),
              "", "  \n" + g.paragraph(2) + "\n  "]
    return [{"instruction": INSTRUCTION, "input": x, "output": g.paragraph(2)} for x in inputs]


def test_gptj_preprocessing_equals_reference_dataset(tiny_gptj, tmp_path):
    """The token ids our QSL holds (prompts.npz, what the model is fed) equal those the reference's
    dataset.Dataset builds (Alpaca prompt_input template over instruction + input, tokenized one
    prompt at a time, truncated to 1919 tokens) from the same cnn_eval.json: the tiny set (120
    samples), and long/odd articles through our real-variant read_raw (cut at 1919, as the reference).
    Also the reference SUT's generation settings (backend_PyTorch.gen_kwargs) against ours."""
    root = official_root("language", "gpt-j")
    from code.common.llm.harness import load_prompts
    from tests.test_llm_harness import reference_env
    from code.gptj import dataset, harness

    cwd = reference_cwd(tiny_gptj, tmp_path)
    tiny_json = scratch(tiny_gptj) / "data" / "gptj" / "tiny" / dataset.CNN_EVAL
    long_dir = tmp_path / "long"
    long_dir.mkdir()
    (long_dir / dataset.CNN_EVAL).write_text(json.dumps(long_records(), indent=4, ensure_ascii=False))
    r = subprocess.run([sys.executable, "-c", DRIVE, str(tmp_path / "ref.json"), "tiny", str(tiny_json),
                        "long", str(long_dir / dataset.CNN_EVAL)], cwd=cwd, env=reference_env(tmp_path, root)[0],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    ref = json.loads((tmp_path / "ref.json").read_text())

    pre = scratch(tiny_gptj) / "preprocessed_data" / "gptj" / "tiny"
    ours = [p.tolist() for p in load_prompts(pre / "prompts.npz")]
    assert len(ours) == len(ref["tiny"]["ids"]) == 120
    # the tiny model's context cuts prompts at 1024 - 32 - 1 tokens, the reference at 1919: no tiny prompt reaches either
    assert max(map(len, ref["tiny"]["ids"])) < 1024 - harness.TINY.max_new_tokens - 1
    same_tiny = sum(a == b for a, b in zip(ref["tiny"]["ids"], ours))
    assert all(m == [1] * len(i) for m, i in zip(ref["tiny"]["mask"], ref["tiny"]["ids"]))   # no padding: none sent
    assert json.loads((pre / "references.json").read_text())["targets"] == ref["tiny"]["targets"]

    from code.common.llm import tiny

    tok = tiny.load_tokenizer(cwd / "EleutherAI" / "gpt-j-6B")          # what LLMBenchmark.tokenizer() loads
    real = benchmark("reference")
    assert not real.tiny
    long_ids, long_targets = real.read_raw(tok, long_dir)
    same_long = sum(a == b for a, b in zip(ref["long"]["ids"], long_ids))
    cut = sum(len(x) == dataset.REAL_MAX_LENGTH for x in ref["long"]["ids"])
    assert cut >= 2 and long_targets == ref["long"]["targets"]
    g = ref["gen_kwargs"]
    print(f"FIGURE gptj preprocessing identical prompt token ids: tiny set {same_tiny}/{len(ours)}, long/odd articles "
          f"{same_long}/{len(long_ids)} ({cut} cut at {dataset.REAL_MAX_LENGTH}); reference gen_kwargs "
          f"max_new_tokens {g['max_new_tokens']} min_new_tokens {g['min_new_tokens']} num_beams {g['num_beams']}, "
          f"ours {harness.REAL.max_new_tokens}/{harness.REAL.min_new_tokens}/{harness.REAL.num_beams}")
    assert same_tiny == len(ours) and same_long == len(long_ids)
    assert (g["max_new_tokens"], g["min_new_tokens"], g["num_beams"]) == (
        harness.REAL.max_new_tokens, harness.REAL.min_new_tokens, harness.REAL.num_beams)


def planted_log(outputs: list[list[int]], path: Path, eos: int, seed: int = 3) -> list[int]:
    """An int32 accuracy log over the samples: ``outputs[i]`` (each sample's reference summary, tokenized,
    then EOS), altered for some
    (cut short, a token changed, an EOS inside, special tokens around), every fourth sample left out,
    sample 1 logged twice (its second entry other tokens: the first counts). Returns the indices logged."""
    rng = np.random.default_rng(seed)
    entries, idx = [], []
    for i, out in enumerate(outputs):
        if i % 4 == 3:
            continue
        t = list(out) or [5]
        k = i % 6
        if k == 1:
            t = t[:max(1, len(t) // 2)]
        elif k == 2:
            t[int(rng.integers(len(t)))] = int(rng.integers(3, 500))
        elif k == 4:
            t = t[:len(t) // 2] + [eos] + t[len(t) // 2:]
        elif k == 5:
            t = [1] + t + [eos, eos]
        entries.append({"seq_id": len(entries), "qsl_idx": i, "data": np.asarray(t, np.int32).tobytes().hex().upper()})
        idx.append(i)
    entries.append({"seq_id": len(entries), "qsl_idx": 1, "data": np.arange(10, 40, dtype=np.int32).tobytes().hex()})
    path.write_text(json.dumps(entries))
    return idx


def test_gptj_scoring_equals_reference_evaluation(tiny_gptj, tmp_path):
    """evaluation.py (--dtype int32, the tiny cnn_eval.json) and our GPT-J accuracy on one planted
    accuracy log: rouge1, rouge2, rougeL equal to 4 significant digits, gen_len and gen_num exactly;
    rougeLsum too: both sides load the tiny punkt_tab (NLTK_DATA at the folder our scorer reads)."""
    root = official_root("language", "gpt-j")
    from tests.test_llm_harness import compare_official, reference_env
    from tests.test_reference_rouge import parse_result_dict
    from code.common.llm.tiny import EOS
    from code.gptj import dataset

    cwd = reference_cwd(tiny_gptj, tmp_path)
    pre = scratch(tiny_gptj) / "preprocessed_data" / "gptj" / "tiny"
    from code.common.llm import tiny

    tok = tiny.load_tokenizer(cwd / "EleutherAI" / "gpt-j-6B")
    targets = json.loads((pre / "references.json").read_text())["targets"]
    idx = planted_log([tok(t)["input_ids"] + [EOS] for t in targets], tmp_path / "mlperf_log_accuracy.json", EOS)
    shutil.copyfile(scratch(tiny_gptj) / "data" / "gptj" / "tiny" / dataset.CNN_EVAL, cwd / dataset.CNN_EVAL)
    env, why = reference_env(tmp_path, root)
    r = subprocess.run([sys.executable, str(root / "evaluation.py"), "--mlperf-accuracy-file",
                        str(tmp_path / "mlperf_log_accuracy.json"), "--dataset-file", dataset.CNN_EVAL, "--dtype", "int32"],
                       cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    theirs = parse_result_dict(r.stdout)
    got = benchmark("tiny").accuracy(str(tmp_path / "mlperf_log_accuracy.json"), str(tmp_path / "ours"))
    ours = got["metrics"]
    assert got["samples"] == len(idx) == int(theirs["gen_num"])
    assert 5 < float(theirs["rouge1"]) < 99, theirs          # the planted changes move the score
    compare_official("gptj scoring, planted log", theirs, ours, why, ("gen_len", "gen_num"))
