"""`make demo`: the tiny variant end to end on this machine, every step through the real CLI.

download_model, download_data, preprocess_data, generate_engines, then PerformanceOnly and
AccuracyOnly in Offline and SingleStream, all with --fast, then the LLMs among --benchmarks (default: the tiny
Llama2-70B; Offline and Server performance, Offline accuracy) (each performance run sized by its own
warm-up to --seconds, 10 s by default, instead of --fast's minute, so the demo stays under five
minutes on a 2-core machine), then the summary table read from metadata.json. Exit code: 0 when
every run finished (INVALID results are reported, not errors).

``make demo BENCHMARKS=retinanet`` (or ``=3d-unet``, any list) runs just those; a benchmark the installed
LoadGen's round no longer has runs under the newest round that has it (``--round``).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def step(args: list[str]) -> None:
    cmd = [sys.executable, "-m", "code.main", *args]
    print(f"\n$ python -m code.main {' '.join(args)}", flush=True)
    t0 = time.time()
    r = subprocess.run(cmd, cwd=REPO)
    print(f"  ({time.time() - t0:.1f}s)", flush=True)
    if r.returncode != 0:
        sys.exit(r.returncode)


def groups(names: str, llm: bool, scenarios: str | None = None) -> dict[tuple[str, ...], list[str]]:
    """The (LLM or not) benchmarks of ``names`` grouped by the round arguments they run under: a benchmark
    that the installed LoadGen's round lacks (RetinaNet left after v6.0, DLRM-v2 after v5.1) runs under
    the newest round that has it. With ``scenarios``, also by the ones of those each supports (DLRM-v2
    has no SingleStream), or its first scenario when it supports none of them (``--scenarios=...``)."""
    from code.common import rounds
    from code.common.benchmarks import resolve

    out: dict[tuple[str, ...], list[str]] = {}
    for n in filter(None, (x.strip() for x in names.split(","))):
        spec = resolve(n)
        if spec.generates_tokens != llm:
            continue
        has = [r.version for r in rounds.ROUNDS.values() if r.entries(spec.name)]
        args = () if rounds.current().entries(spec.name) or not has else (f"--round={has[-1]}",)
        if scenarios is not None:
            ok = [x for x in scenarios.split(",") if x in spec.scenarios] or [spec.scenarios[0]]
            args += (f"--scenarios={','.join(ok)}",)
        out.setdefault(args, []).append(spec.name)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--benchmarks", default="resnet50,sdxl,llama2_70b",
                    help="any benchmarks; LLMs among them run Offline and Server, the others --scenarios")
    ap.add_argument("--scenarios", default="Offline,SingleStream")
    ap.add_argument("--sdxl-accuracy-samples", type=int, default=128)
    ap.add_argument("--seconds", type=float, default=10.0, help="length of each performance run")
    a = ap.parse_args()
    t0 = time.time()
    sys.path.insert(0, str(REPO))
    from code.common import paths
    from code.common.harness import runner

    logs = paths.logs_dir() / f"demo-{runner.timestamp()}"
    for key, names in groups(a.benchmarks, llm=False, scenarios=a.scenarios).items():
        rnd, scen = key[:-1], key[-1]
        common = [f"--benchmarks={','.join(names)}", "--model_variant=tiny", *rnd]
        for action in ("download_model", "download_data", "preprocess_data"):
            step([f"--action={action}", *common])
        step(["--action=generate_engines", *common, scen])
        for mode in ("PerformanceOnly", "AccuracyOnly"):
            # 100 queries at least: a SingleStream run needs that many for early stopping (tiny SDXL: ~20 s)
            extra = [f"--min_duration={int(a.seconds * 1000)}", "--min_query_count=100"] if mode == "PerformanceOnly" else []
            if mode == "AccuracyOnly" and "sdxl" in names:
                # CLIP/FID scoring dominates a tiny SDXL accuracy run; 128 of the 320 captions keep the demo
                # under 10 minutes on 2 cores (the full tiny set runs in make test).
                extra.append(f"--sdxl_sample_count={a.sdxl_accuracy_samples}")
            step(["--action=run_harness", *common, scen, f"--test_mode={mode}", "--fast",
                  f"--log_dir={logs}", *extra])
    for rnd, names in groups(a.benchmarks, llm=True).items():   # token streaming: tokens/s, TTFT/TPOT
        llm = [f"--benchmarks={','.join(names)}", "--model_variant=tiny", *rnd]
        for action in ("download_model", "download_data", "preprocess_data"):
            step([f"--action={action}", *llm])
        # 460 queries at least: the p99 TTFT and TPOT early-stopping estimates need that many (64 samples:
        # equal issue rounds the count up to whole passes over them)
        step(["--action=run_harness", *llm, "--scenarios=Offline,Server", "--test_mode=PerformanceOnly", "--fast",
              f"--min_duration={int(a.seconds * 1000)}", "--min_query_count=460", "--performance_sample_count=64",
              f"--log_dir={logs}"])
        step(["--action=run_harness", *llm, "--scenarios=Offline", "--test_mode=AccuracyOnly", f"--log_dir={logs}"])
    print()
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "print_harness_result.py"), str(logs)], cwd=REPO)
    print(f"\ndemo finished in {time.time() - t0:.0f}s")
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
