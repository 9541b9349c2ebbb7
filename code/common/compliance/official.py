"""Run the official compliance scripts from a local mlcommons/inference checkout
($MLPERF_INFERENCE_DIR) on the same logs we verified, and report where they disagree with us.

The official scripts write verify_*.txt into their working directory, so each call gets a
throw-away working directory; the submission logs are only read (linked, never copied or changed).
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from code.common.compliance.verify import verdict_line_passed
from code.common.errors import HarnessError


def inference_dir() -> Path | None:
    """$MLPERF_INFERENCE_DIR if set (checked to be a checkout), else None."""
    raw = os.environ.get("MLPERF_INFERENCE_DIR")
    if not raw:
        return None
    p = Path(raw).expanduser()
    if not (p / "compliance" / "TEST01" / "run_verification.py").is_file():
        raise HarnessError(f"MLPERF_INFERENCE_DIR={raw} is not a checkout of mlcommons/inference "
                           "(no compliance/TEST01/run_verification.py)",
                           "git clone https://github.com/mlcommons/inference and point MLPERF_INFERENCE_DIR at it, "
                           "or unset it")
    return p


def run_verification(test: str, root: Path, *, reference_perf: Path, reference_acc: Path | None,
                     audit_dir: Path, timeout: float = 1800) -> dict:
    """Run ``compliance/<test>/run_verification.py``; return its verdicts and output."""
    script = root / "compliance" / test / "run_verification.py"
    with tempfile.TemporaryDirectory(prefix=f"official-{test}-") as tmp:
        tmp = Path(tmp)
        results = tmp / "results"
        (results / "performance" / "run_1").mkdir(parents=True)
        for f in ("mlperf_log_detail.txt", "mlperf_log_summary.txt"):
            os.symlink((reference_perf / f).resolve(), results / "performance" / "run_1" / f)
        if reference_acc is not None:
            (results / "accuracy").mkdir()
            os.symlink((reference_acc / "mlperf_log_accuracy.json").resolve(),
                       results / "accuracy" / "mlperf_log_accuracy.json")
        cwd = tmp / "cwd"
        cwd.mkdir()
        out = tmp / "out"
        r = subprocess.run([sys.executable, str(script), "-r", str(results), "-c", str(audit_dir.resolve()),
                            "-o", str(out)], cwd=cwd, capture_output=True, text=True, timeout=timeout)
        res = {"returncode": r.returncode, "output": (r.stdout + r.stderr)[-6000:], "script": str(script)}
        for kind in ("accuracy", "performance"):
            f = out / test / f"verify_{kind}.txt"
            if f.is_file():
                text = f.read_text()
                res[kind] = {"passed": verdict_line_passed(text), "text": text}
    return res


def run_test06(root: Path, *, audit_dir: Path, scenario: str, eos_token_id: int | None, dtype: str = "int32",
               timeout: float = 600) -> dict:
    """Run ``compliance/TEST06/run_verification.py`` on the audit's logs; return its verdict and output."""
    script = root / "compliance" / "TEST06" / "run_verification.py"
    with tempfile.TemporaryDirectory(prefix="official-TEST06-") as tmp:
        out = Path(tmp) / "out"
        cmd = [sys.executable, str(script), "-c", str(audit_dir.resolve()), "-o", str(out), "-s", scenario,
               "--dtype", dtype] + (["-e", str(eos_token_id)] if eos_token_id is not None else [])
        r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=timeout)
        res = {"returncode": r.returncode, "output": (r.stdout + r.stderr)[-6000:], "script": str(script)}
        f = out / "TEST06" / "verify_accuracy.txt"
        if f.is_file():
            text = f.read_text()
            res["accuracy"] = {"passed": "TEST06 verification complete" in text, "text": text}
    return res


def run_test07_09(test: str, root: Path, *, audit_dir: Path, audit_config: str, accuracy_command: str | None = None,
                  timeout: float = 1800) -> dict:
    """Run ``compliance/TEST07|TEST09/run_verification.py`` on the audit's logs with the audit.config the run used
    (TEST07 also runs ``accuracy_command``, the benchmark's official accuracy script with ``{accuracy_log}`` for
    the log); return its verdict (``accuracy`` for TEST07, ``output_len`` for TEST09) and output."""
    script = root / "compliance" / test / "run_verification.py"
    name = "verify_accuracy.txt" if test == "TEST07" else "verify_output_len.txt"
    with tempfile.TemporaryDirectory(prefix=f"official-{test}-") as tmp:
        tmp = Path(tmp)
        cfg = tmp / "audit.config"
        cfg.write_text(audit_config)
        out = tmp / "out"
        cwd = tmp / "cwd"
        cwd.mkdir()
        cmd = [sys.executable, str(script), "-c", str(audit_dir.resolve()), "-o", str(out), "--audit-config", str(cfg)]
        if test == "TEST07":
            cmd += ["--accuracy-script", accuracy_command or "false"]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
        res = {"returncode": r.returncode, "output": (r.stdout + r.stderr)[-6000:], "script": str(script)}
        f = out / test / name
        if f.is_file():
            text = f.read_text()
            res["accuracy" if test == "TEST07" else "output_len"] = {"passed": verdict_line_passed(text), "text": text}
    return res


def run_test08(root: Path, *, reference_acc: Path, audit_dir: Path, tolerance: float, timeout: float = 1800) -> dict:
    """Run ``compliance/TEST08/run_verification.py -r <accuracy run's log> -t <audit's log>``: it prints its verdict
    (``TEST PASS`` / ``TEST FAIL``) and writes no file; that output is its verify_accuracy.txt."""
    script = root / "compliance" / "TEST08" / "run_verification.py"
    with tempfile.TemporaryDirectory(prefix="official-TEST08-") as tmp:
        cmd = [sys.executable, str(script), "-r", str((reference_acc / "mlperf_log_accuracy.json").resolve()),
               "-t", str((audit_dir / "mlperf_log_accuracy.json").resolve()), "--tolerance", str(tolerance)]
        r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=timeout)
    res = {"returncode": r.returncode, "output": (r.stdout + r.stderr)[-6000:], "script": str(script)}
    if "TEST08 verification complete" in r.stdout:
        res["accuracy"] = {"passed": "TEST PASS" in r.stdout.splitlines(), "text": r.stdout}
    return res


def disagreements(test: str, ours: dict[str, bool], official: dict) -> list[str]:
    """Lines naming each verdict where the official script and ours differ (or it produced none)."""
    out = []
    for kind, passed in ours.items():
        theirs = official.get(kind)
        if theirs is None:
            out.append(f"{test} {kind}: the official script wrote no verify_{kind}.txt "
                       f"(exit {official.get('returncode')}); see verification.json")
        elif theirs["passed"] != passed:
            out.append(f"{test} {kind}: official script says {'PASS' if theirs['passed'] else 'FAIL'}, "
                       f"ours says {'PASS' if passed else 'FAIL'}")
    return out
