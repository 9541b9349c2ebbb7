"""Read accuracy figures from an accuracy.txt the way the submission checker does, and judge them
against the round's targets (and the harness's BenchmarkSpec.accuracy_targets when given)."""
from __future__ import annotations

import re
from typing import Any, Iterable

# The checker's patterns for the metrics our benchmarks report (one value per line), widened to
# accept a minus sign: the checker cannot read a negative score and calls it missing; we report it.
PATTERNS = {
    "acc": r"^(?:\{\"accuracy|accuracy)[\": ]*=?\s*(-?[\d\.]+).*",
    "CLIP_SCORE": r".*'CLIP_SCORE':\s+'?(-?[\d.]+).*",
    "FID_SCORE": r".*'FID_SCORE':\s+'?(-?[\d.]+).*",
    "DICE": r"Accuracy\:\s*mean\s*=\s*(-?[\d\.]+).*",     # 3d-unet: accuracy_kits.py's output line
    "F1": r"^{[\"\']exact_match[\"\']\:\s*-?[\d\.]+,\s*[\"\']f1[\"\']\:\s*(-?[\d\.]+)}",  # bert: evaluate-v1.1's line
    # the LLM evaluators print a dict with the reference's lower-case keys
    "ROUGE1": r".*'rouge1':\s+'?(-?[\d.]+)'?.*",
    "ROUGE2": r".*'rouge2':\s+'?(-?[\d.]+)'?.*",
    "ROUGEL": r".*'rougeL':\s+'?(-?[\d.]+)'?.*",
    "ROUGELSUM": r".*'rougeLsum':\s+'?(-?[\d.]+)'?.*",
    "GEN_LEN": r".*'gen_len':\s(-?[\d.]+).*",
    "TOKENS_PER_SAMPLE": r".*'tokens_per_sample':\s(-?[\d.]+).*",
    "gsm8k_accuracy": r".*'gsm8k':\s(-?[\d.]+).*",
    "mbxp_accuracy": r".*'mbxp':\s(-?[\d.]+).*",
    "exact_match": r".*'exact_match':\s(-?[\d.]+).*",               # deepseek-r1, gpt-oss-120b
    "F1_HIERARCHICAL": r'\{.*"f1":\s*(-?[\d\.]+).*\}',            # qwen3-vl-235b-a22b: the reference's JSON line
    "ACCURACY": r"Word Error Rate\:.*, accuracy=(-?[0-9\.]+)%",    # whisper: accuracy_eval.py's output line
    # dlrm-v3: the reference's MetricsLogger keys (metric/lifetime_<name>/<task>)
    "DLRM_NE": r".*metric/lifetime_ne/rating:\s*(-?[\d\.]+).*",
    "DLRM_ACC": r".*metric/lifetime_accuracy/rating:\s*(-?[\d\.]+).*",
    "DLRM_AUC": r".*metric/lifetime_gauc/rating:\s*(-?[\d\.]+).*",
}
HASH = re.compile(r"^hash=([\w\d]+)$")
# A scorer that could not score as the official script does (a missing language runtime, an untrained
# sentence splitter) says so in one line each; such a run is never staged nor passes the pre-flight.
UNOFFICIAL = "UNOFFICIAL:"


def read(path, fix: str = "rescore the run (make run_harness RUN_ARGS=\"... --test_mode=AccuracyOnly\"), then "
                             "make update_results") -> str:
    """The text of an accuracy.txt; one that is not UTF-8 text (a binary file, a NUL byte) or cannot be read is a
    HarnessError naming it, with ``fix``."""
    from pathlib import Path

    from code.common.errors import HarnessError

    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise HarnessError(f"{path}: not text (a binary file, not UTF-8)", fix) from None
    except OSError as e:
        raise HarnessError(f"{path}: cannot read: {e.strerror}", fix) from None
    if "\x00" in text:
        raise HarnessError(f"{path}: not text (a binary file, NUL bytes)", fix)
    return text


def values(text: str, metrics: Iterable[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in text.splitlines():
        for m in metrics:
            pat = PATTERNS.get(m, rf".*'?{re.escape(m)}'?\s*[:=]\s*'?(-?[\d.]+).*")
            hit = re.match(pat, line)
            if hit and m not in out:
                try:
                    out[m] = float(hit.group(1).rstrip("."))
                except ValueError:
                    pass
    return out


def unofficial(text: str) -> list[str]:
    """The reasons an accuracy.txt gives for not being an official score (its ``UNOFFICIAL:`` lines)."""
    return [line.strip()[len(UNOFFICIAL):].strip() for line in text.splitlines() if line.strip().startswith(UNOFFICIAL)]


def has_hash(text: str) -> bool:
    return any(HASH.match(line.strip()) for line in text.splitlines())


def judge(found: dict[str, float], minimum: dict[str, float], maximum: dict[str, float],
          spec_targets: Iterable[dict[str, Any]] = ()) -> list[str]:
    """One line per unmet target (empty list: all met). Missing metrics are unmet."""
    problems = []
    for m, lo in minimum.items():
        if m not in found:
            problems.append(f"{m} not found in accuracy.txt")
        elif found[m] < lo:
            problems.append(f"{m} = {found[m]:.6g} is below the target {lo:.6g}")
    for m, hi in maximum.items():
        if m in found and found[m] > hi:
            problems.append(f"{m} = {found[m]:.6g} is above the upper limit {hi:.6g}")
    for t in spec_targets:
        m = t.get("metric")
        if m is None or m in minimum or m in maximum:
            continue
        v = found.get(m)
        if v is None:
            continue
        if t.get("min") is not None and v < t["min"]:
            problems.append(f"{m} = {v:.6g} is below the harness target {t['min']:.6g}")
        if t.get("max") is not None and v > t["max"]:
            problems.append(f"{m} = {v:.6g} is above the harness limit {t['max']:.6g}")
    return problems
