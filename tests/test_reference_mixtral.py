"""Mixtral-8x7B against the official reference (language/mixtral-8x7b in $MLPERF_INFERENCE_DIR), run as it is
in a separate process on the tiny variant's files.

Pre-processing: the reference's ``dataset.py`` (``Dataset``: what its SUT feeds the model) reads our 15k-format
pickle: its input ids and sub-dataset names must be what our QSL feeds (prompts.npz, references.json). Its
``postProcess`` (trailing EOS/pad removed, MBXP cut after its stop sequence) on synthetic outputs is
compared with ours (the SUT's stop-sequence cut and EOS strip).

Scoring: the official ``evaluate-accuracy.py`` and ours on one accuracy log of all 60 tiny samples written
here (OpenOrca answers: half of them the target's halves swapped around an abbreviation, so that rougeLsum
depends on the splitter; GSM8K answers right, wrong,
continued, without a number; MBXP programs that pass and that fail, in every language of the set). Figures
to 4 significant digits, and per-problem verdicts: GSM8K with the reference's own find_number /
maybe_remove_comma / try_float, MBXP with its evaluate_mbxp.py (its ``evaluated_test.json``). Stand-ins,
each given through the environment: ``evaluate`` is rouge-score (what its rouge metric calls); NLTK_DATA is
the punkt_tab folder our scorer loaded (tiny: the locally trained one); ``mxeval`` (a git-only package) is a
plain runner written here from mxeval's documented rules, independent of our runner: the program is
``prompt + completion + test`` (python: ``+ "\\ncheck(<entry point>)"``), run with python / node / php / ruby /
g++ / tsc, passed when it exits 0, failed when its tool is missing."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.conftest import official_root
from tests.test_reference_llama3_1_8b import swapped
from tests.test_reference_rouge import (four_digits, official_env, parse_result_dict, run_official,
                                        write_accuracy_log)

BENCH = "mixtral_8x7b"
PKL = "09292024_mixtral_15k_mintoken2_v1.pkl"


def _scratch(env: dict) -> Path:
    return Path(env["MLPERF_SCRATCH_PATH"])


def _ckpt(env: dict) -> Path:
    return _scratch(env) / "models" / BENCH / "tiny" / "checkpoint"


def _pkl(env: dict) -> Path:
    return _scratch(env) / "data" / BENCH / "tiny" / PKL


def _pre(env: dict) -> Path:
    return _scratch(env) / "preprocessed_data" / BENCH / "tiny"


READ_DATASET = r'''
import json, sys
import numpy as np, torch
from dataset import Dataset
d = Dataset(model_name=sys.argv[2], dataset_path=sys.argv[1], total_sample_count=15000)
out = {"input_ids": [x.flatten().tolist() for x in d.input_ids], "dataset": list(d.dataset_names),
       "dtype": str(d.input_ids[0].dtype), "total_sample_count": d.total_sample_count, "post": []}
for seq, kind in json.loads(sys.argv[3]):
    full = torch.tensor([[7, 7, 7] + seq])          # the SUT passes input + output, cut at the input length
    out["post"].append(d.postProcess(full, length=3, query_id_list=[0], dataset_list=[kind])[0].tolist())
print("RESULT " + json.dumps(out))
'''

STOP = [13, 13940, 28832, 13]       # "\n```\n" in Mixtral's tokenizer (dataset.py mbxp_stop's default)
OUTPUTS = [([5, 6, 7, 2], "OpenOrca"), ([5, 6, 7, 2, 2], "GSM8K"), ([5, 6, 9, 8], "OpenOrca"),
           ([8, *STOP, 9, 10, 2], "MBXP"), ([8, 9, *STOP], "MBXP"), ([*STOP[:3], 11, 2], "MBXP"), ([4, 0, 2], "GSM8K")]


def _ours_post(seq: list[int], kind: str) -> list[int]:
    """What our SUT reports for a generation that produced ``seq``: cut after the MBXP stop sequence (the
    generation stops there), then the trailing EOS (id 2) stripped (Generation.strip_eos)."""
    from code.common.llm.generation import cut_at_stop, strip_trailing

    out = cut_at_stop(seq, STOP if kind == "MBXP" else (), 2)
    return strip_trailing(out, 2)


def test_mixtral_8x7b_preprocessing_reference_dataset_reads_what_we_feed(request, tmp_path):
    """dataset.py over our pickle: the same prompt token ids and sub-dataset per sample as our prompts.npz and
    references.json; its postProcess and ours report the same tokens, except a trailing pad 0 before the EOS
    (it drops 0s too, ours only the EOS): a special token, decoded away (skip_special_tokens), so no
    accuracy figure moves; it can add one token to gen_tok_len for such an output."""
    from code.common.llm.harness import load_prompts

    root = official_root("language", "mixtral-8x7b")
    tiny_mixtral = request.getfixturevalue("tiny_mixtral")  # after the skip: no tiny build
    env = official_env(tmp_path, _scratch(tiny_mixtral) / "nltk_data" / "tiny", root)
    out = run_official(["-c", READ_DATASET, str(_pkl(tiny_mixtral)), str(_ckpt(tiny_mixtral)), json.dumps(OUTPUTS)],
                       tmp_path, env)
    theirs = json.loads(next(ln for ln in out.splitlines() if ln.startswith("RESULT "))[7:])
    ours = [p.tolist() for p in load_prompts(_pre(tiny_mixtral) / "prompts.npz")]
    kinds = json.loads((_pre(tiny_mixtral) / "references.json").read_text())["dataset"]
    same = sum(a == b for a, b in zip(ours, theirs["input_ids"]))
    post = [_ours_post(s, k) for s, k in OUTPUTS]
    post_same = sum(a == b for a, b in zip(post, theirs["post"]))
    print(f"FIGURE mixtral_8x7b preprocessing (reference dataset.py): {same}/{len(ours)} prompts identical "
          f"({sum(map(len, ours))} tokens, {theirs['dtype']}); postProcess {post_same}/{len(OUTPUTS)} identical")
    assert theirs["total_sample_count"] == len(ours) == 60
    assert theirs["input_ids"] == ours and theirs["dataset"] == kinds
    for (seq, kind), a, b in zip(OUTPUTS, post, theirs["post"]):
        assert a == b or (a[:len(b)] == b and set(a[len(b):]) <= {0}), (seq, kind, a, b)
    assert post_same == len(OUTPUTS) - 1


SHIM_MXEVAL = r'''
"""Stand-in for mxeval.execution (git-only, not on PyPI): mxeval's rules, run plainly. The program is
prompt + completion + test (python: + "\ncheck(<entry point>)"), written to a fresh folder, compiled where
the language compiles (g++; tsc, "compiled" only when it exits 2), run; passed when the run exits 0; a
missing tool or a timeout fails."""
import os, shutil, subprocess, sys, tempfile

RUN = {"python": (None, [sys.executable, "main.py"]), "javascript": (None, ["node", "main.js"]),
       "php": (None, ["php", "main.php"]), "ruby": (None, ["ruby", "main.rb"]),
       "cpp": (["g++", "main.cpp", "-o", "main_cpp"], ["./main_cpp"]),
       "typescript": (["tsc", "main.ts", "--target", "es5", "--lib", "es2016"], ["node", "main.js"])}
EXT = {"python": "py", "javascript": "js", "php": "php", "ruby": "rb", "cpp": "cpp", "typescript": "ts"}


def _checker(lang):
    def check(problem, completion, timeout, completion_id=None, **kw):
        program = problem["prompt"] + completion + ("\n" if lang == "python" else "") + problem["test"]
        if lang == "python":
            program += f"\ncheck({problem['entry_point']})"
        d = tempfile.mkdtemp()
        try:
            with open(os.path.join(d, "main." + EXT[lang]), "w") as f:
                f.write(program)
            comp, run = RUN[lang]
            if comp:
                rc = subprocess.run(comp, cwd=d, capture_output=True, timeout=100).returncode
                if rc != (2 if lang == "typescript" else 0):
                    return {"task_id": problem["task_id"], "passed": False, "result": "compile", "completion_id": completion_id}
            r = subprocess.run(run, cwd=d, capture_output=True, text=True, timeout=timeout)
            return {"task_id": problem["task_id"], "passed": r.returncode == 0, "result": r.stderr[-200:],
                    "completion_id": completion_id}
        except Exception as e:      # a missing tool, a timeout: failed, as in mxeval
            return {"task_id": problem["task_id"], "passed": False, "result": str(e), "completion_id": completion_id}
        finally:
            shutil.rmtree(d, ignore_errors=True)
    return check


check_correctness = _checker("python")
for _lang in ("cpp", "javascript", "php", "ruby", "typescript"):
    globals()[f"check_correctness_{_lang}"] = _checker(_lang)
for _lang in ("csharp", "go", "java", "kotlin", "perl", "scala", "swift"):
    globals()[f"check_correctness_{_lang}"] = None
'''

RUN_EVALUATOR = r'''
import importlib.util, json, runpy, sys
script, answers = sys.argv[1], sys.argv[2]
spec = importlib.util.spec_from_file_location("evaluate_accuracy", script)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
verdicts = []
for pred, gt in json.loads(open(answers).read()):      # the reference's own GSM8K extraction, per problem
    got = mod.try_float(mod.maybe_remove_comma(mod.find_number(pred.split("\nQ:")[0])))
    verdicts.append(got is not None and mod.try_float(gt) == got)
print("GSM8K_VERDICTS " + json.dumps(verdicts))
sys.argv = [script] + sys.argv[3:]
runpy.run_path(script, run_name="__main__")
'''


def _log_texts(pkl: Path) -> dict[int, str]:
    """A decoded answer per tiny sample, by kind (see the module docstring)."""
    import pandas as pd

    df = pd.read_pickle(pkl)
    keys = sorted({i for i, k in zip(df["id"], df["dataset"]) if k == "MBXP"})
    texts = {}
    for i, row in enumerate(df.itertuples()):
        if row.dataset == "OpenOrca":
            texts[i] = swapped(row.gt_output) if i % 2 else row.question
        elif row.dataset == "GSM8K":
            gt = int(row.gt_output)
            texts[i] = [f"So {gt - 3} plus 3 is {gt}. The answer is {gt}.", f"The answer is {gt + 1}.",
                        f"It is {gt}\nQ: Sam has 99 marbles. The answer is 99.", "I do not know.",
                        f"The answer is {gt:,}0 apples", f"{gt} minus nothing is {gt}"][(i // 3) % 6]
        else:                             # MBXP: the solution for half of the problems, broken code for the rest
            good = keys.index(row.id) % 2 == 0
            texts[i] = row.ref_output if good else row.ref_output.replace("return", "retur n").replace("+", "+ +")
    return texts


def test_mixtral_8x7b_official_evaluate_accuracy_scores_the_same_log(request, tmp_path, monkeypatch):
    """evaluate-accuracy.py and ours on the same log: every figure to 4 significant digits, and the same
    verdict for every GSM8K answer and every MBXP problem (the official denominator: problems whose
    runtime is missing here count as failed on both sides). Both sides get the same node modules: where
    lodash (which every real MBXP javascript test requires, and our runner therefore requires) is not
    installed, a stand-in through NODE_PATH."""
    import pandas as pd

    from code.common.benchmarks import implementation
    from code.main import plan
    from code.mixtral_8x7b import gsm8k, mbxp

    root = official_root("language", "mixtral-8x7b")
    tiny_mixtral = request.getfixturevalue("tiny_mixtral")  # after the skip: no tiny build
    pkl = _pkl(tiny_mixtral)
    mbxp._node_module_found.cache_clear()
    if shutil.which("node") and mbxp.missing_runtime("javascript") == "node module lodash":
        (tmp_path / "node_modules" / "lodash").mkdir(parents=True)
        (tmp_path / "node_modules" / "lodash" / "index.js").write_text(
            "module.exports = { isEqual: require('util').isDeepStrictEqual };\n")
        monkeypatch.setenv("NODE_PATH", str(tmp_path / "node_modules"))
        mbxp._node_module_found.cache_clear()
    _, settings = plan(["--action=run_harness", "--benchmarks=mixtral_8x7b", "--model_variant=tiny", "--round=v6.0",
                        "--scenarios=Offline"])
    b = implementation(settings[0].spec)(settings[0])
    tok = b.tokenizer()
    texts = _log_texts(pkl)
    log = write_accuracy_log(tmp_path / "mlperf_log_accuracy.json",
                             {i: tok(t, add_special_tokens=False)["input_ids"] for i, t in texts.items()})
    idx, tokens, preds, targets = b.decode_log(str(log))
    b.score_notes = []
    runs = []                                 # our MBXP result as the harness computed it (its per-problem details)
    real_evaluate = mbxp.evaluate
    monkeypatch.setattr(mbxp, "evaluate", lambda *a, **k: runs.append(real_evaluate(*a, **k)) or runs[-1])
    ours = b.report_dict(b.score(idx, tokens, preds, targets))

    df = pd.read_pickle(pkl)
    kinds = list(df["dataset"])
    gsm = [(preds[j], targets[j]) for j, i in enumerate(idx) if kinds[i] == "GSM8K"]
    (tmp_path / "gsm8k.json").write_text(json.dumps(gsm))
    shim = tmp_path / "shim" / "mxeval"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("")
    (shim / "execution.py").write_text(SHIM_MXEVAL)
    env = official_env(tmp_path, _scratch(tiny_mixtral) / "nltk_data" / "tiny", root)
    out = run_official(["-c", RUN_EVALUATOR, str(root / "evaluate-accuracy.py"), str(tmp_path / "gsm8k.json"),
                        "--checkpoint-path", str(_ckpt(tiny_mixtral)), "--mlperf-accuracy-file", str(log),
                        "--dataset-file", str(pkl), "--dtype", "int32", "--n_workers", "2"], tmp_path, env)
    theirs = parse_result_dict(out)
    keys = ("rouge1", "rouge2", "rougeL", "rougeLsum", "gsm8k", "mbxp", "gen_len", "gen_num", "gen_tok_len",
            "tokens_per_sample")
    their_gsm = json.loads(next(ln for ln in out.splitlines() if ln.startswith("GSM8K_VERDICTS "))[15:])
    our_gsm = [gsm8k.is_correct(p, t) for p, t in gsm]
    their_mbxp = {k: v["passed"] for k, v in json.loads((tmp_path / "run" / "evaluated_test.json").read_text()).items()}
    [run] = runs
    our_mbxp = {d["key"]: bool(d["passed"]) for d in run["details"]}
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    from code.common.llm import rouge

    split = PunktSentenceTokenizer().tokenize
    orca = [j for j, i in enumerate(idx) if kinds[i] == "OpenOrca"]
    untrained = rouge.rouge(["\n".join(split(preds[j].strip())) for j in orca],
                            ["\n".join(split(targets[j].strip())) for j in orca])["rougeLsum"]
    print("FIGURE mixtral_8x7b official evaluate-accuracy.py: " + ", ".join(f"{k} {four_digits(theirs[k])}" for k in keys)
          + " | ours: " + ", ".join(f"{k} {four_digits(ours[k])}" for k in keys)
          + f" | GSM8K verdicts {sum(a == b for a, b in zip(our_gsm, their_gsm))}/{len(gsm)} agree "
          f"({sum(their_gsm)} correct); MBXP verdicts {sum(our_mbxp[k] == v for k, v in their_mbxp.items())}/"
          f"{len(their_mbxp)} problems agree ({sum(their_mbxp.values())} pass) | ours with untrained Punkt: "
          f"rougeLsum {four_digits(untrained)}")
    mbxp._node_module_found.cache_clear()
    assert our_gsm == their_gsm and 0 < sum(our_gsm) < len(gsm)
    assert our_mbxp == their_mbxp and 0 < sum(our_mbxp.values()) < len(our_mbxp), (our_mbxp, their_mbxp)
    for k in keys:
        assert four_digits(theirs[k]) == four_digits(ours[k]), (k, theirs[k], ours[k])
    assert four_digits(untrained) != four_digits(theirs["rougeLsum"])
