"""SDXL throughput benchmark (prints figures; asserts nothing).

Tiny SDXL on the CPU (default), all four measured side by side on the same weights, captions,
latent and batch size, in a private scratch folder:
  (a) diffusers StableDiffusionXLPipeline in torch (main thread, text prompts)
  (b) our engines called directly (code.sdxl.pipeline over ORT engines, main thread, no LoadGen)
  (c) the harness Offline through LoadGen (`python -m code.main --action=run_harness`, metadata.json)
  (d) the MLCommons reference text_to_image/main.py from a local checkout of mlcommons/inference
      (--mlperf-inference-dir or $MLPERF_INFERENCE_DIR; needs pandas and opencv-python-headless),
      pointed at the same tiny weights, captions and latent
and the ratios c/b (goal >= 0.97), c/a and c/d (goal >= 2).

--cuda: the full-size SDXL architecture with random weights, fp16 unet/CLIPs, on torch CUDA
through the harness (--backend=pytorch), next to diffusers on the same GPU and NVIDIA's published
2.1 samples/s per H200 (TensorRT fp8).

usage: python scripts/bench_sdxl.py [--images 64] [--batch 8] [--seconds 30] [--skip a,d]
       python scripts/bench_sdxl.py --cuda [--batch 8] [--seconds 60]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
NVIDIA_H200_OFFLINE = 2.1   # samples/s per H200, NVIDIA's published TensorRT fp8 result


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "code.main", *args], cwd=REPO, env=dict(os.environ),
                       capture_output=True, text=True)
    if check and r.returncode != 0:
        sys.exit(f"code.main {' '.join(args)} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


def batch_args(b: int) -> str:
    return f"--gpu_batch_size=clip1:{b},clip2:{b},unet:{b},vae:{b}"


def settings_for(*argv: str):
    from code.main import plan

    return plan(["--action=run_harness", "--benchmarks=sdxl", "--scenarios=Offline", *argv])[1][0]


def wait_quiet(args) -> None:
    """On a shared machine: wait (up to --quiet-wait s) for the 1-minute load average to drop below 0.7."""
    t0 = time.time()
    while time.time() - t0 < args.quiet_wait and os.getloadavg()[0] >= 0.7:
        time.sleep(5)
    if args.quiet_wait:
        print(f"    [load average {os.getloadavg()[0]:.2f}]")


def timed(fn, n_images: int) -> float:
    t0 = time.perf_counter()
    fn()
    return n_images / (time.perf_counter() - t0)


# --- (a) diffusers ------------------------------------------------------------------------------

def bench_diffusers(pipe, captions, latent, batch: int, device: str = "cpu") -> float:
    import torch

    from code.sdxl.constants import GUIDANCE_SCALE, NEGATIVE_PROMPT, NUM_STEPS

    side = pipe.unet.config.sample_size * pipe.vae_scale_factor

    def run(caps):
        with torch.inference_mode():
            lat = torch.from_numpy(latent).to(device, pipe.unet.dtype).repeat(len(caps), 1, 1, 1)
            pipe(prompt=list(caps), negative_prompt=[NEGATIVE_PROMPT] * len(caps), num_inference_steps=NUM_STEPS,
                 guidance_scale=GUIDANCE_SCALE, latents=lat, height=side, width=side, output_type="pt")
        if device != "cpu":
            torch.cuda.synchronize()

    run(captions[:batch])  # warmup
    return timed(lambda: [run(captions[s:s + batch]) for s in range(0, len(captions), batch)], len(captions))


# --- (b) our engines directly ----------------------------------------------------------------------

def bench_engines(batch: int, n: int, *extra: str) -> tuple[float, int]:
    """The harness's own pipelines (same engines, threads and worker count as (c)), fed batches from a
    plain queue by one thread per worker: what (c) would reach with zero LoadGen/SUT overhead."""
    import queue
    import threading

    from code.sdxl.harness import SDXLBenchmark

    bench = SDXLBenchmark(settings_for("--model_variant=tiny", batch_args(batch), *extra))
    qsl = bench.make_qsl()
    procs = bench.make_processors(qsl, bench.generate_engines())
    for p in procs:
        p.warmup()
    work: queue.Queue = queue.Queue()
    for s in range(0, n, batch):
        work.put(list(range(s, min(s + batch, n))))

    def worker(p):
        while True:
            try:
                idx = work.get_nowait()
            except queue.Empty:
                return
            p.process(idx)

    def run():
        ts = [threading.Thread(target=worker, args=(p,)) for p in procs]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    return timed(run, n), len(procs)


# --- (c) the harness through LoadGen ----------------------------------------------------------------

def bench_harness(root: Path, variant: str, batch: int, seconds: int, expected_qps: float, *extra: str) -> dict:
    log_dir = root / "logs" / f"harness-{time.strftime('%H%M%S')}"
    cli("--action=run_harness", "--benchmarks=sdxl", "--scenarios=Offline", "--test_mode=PerformanceOnly",
        f"--model_variant={variant}", batch_args(batch), "--fast", f"--min_duration={seconds * 1000}",
        f"--offline_expected_qps={expected_qps}", f"--log_dir={log_dir}", *extra)
    meta = json.loads(next(log_dir.rglob("metadata.json")).read_text())
    if meta["status"] != "ok":
        sys.exit(f"harness run failed: {meta['error']}")
    return meta


# --- (d) the MLCommons reference ----------------------------------------------------------------------

def bench_reference(ref_dir: Path, root: Path, batch: int, seconds: int, expected_qps: float, n: int,
                    omp_threads: int = 0) -> float | None:
    """Run text_to_image/main.py (unmodified) on the tiny model; returns its Offline samples/s.
    omp_threads > 0 sets OMP_NUM_THREADS for it (0: as users run it, torch's default)."""
    import torch

    from code.common import paths

    main_py = ref_dir / "text_to_image" / "main.py"
    if not main_py.exists():
        print(f"(d) skipped: {main_py} not found. Extract it with: git -C <mlcommons/inference clone> archive HEAD "
              "text_to_image | tar -x -C /tmp/ref  and pass --mlperf-inference-dir=/tmp/ref")
        return None
    missing = [m for m in ("pandas", "cv2") if __import__("importlib").util.find_spec(m) is None]
    if missing:
        print(f"(d) skipped: the reference imports {', '.join(missing)}: pip install pandas opencv-python-headless")
        return None
    work = root / "reference"
    shutil.rmtree(work, ignore_errors=True)
    (work / "data" / "captions").mkdir(parents=True)
    (work / "data" / "latents").mkdir()
    (work / "model").mkdir()
    raw = paths.data_dir("sdxl", "tiny")
    lines = (raw / "captions_source.tsv").read_text().splitlines()
    (work / "data" / "captions" / "captions.tsv").write_text("\n".join(lines[:n + 1]) + "\n")
    torch.save(torch.from_numpy(np.load(raw / "latents.npy")), work / "data" / "latents" / "latents.pt")
    pipe_dir = paths.models_dir("sdxl", "tiny") / "pipeline"
    # its loader reads <model>/checkpoint_pipe and <model>/checkpoint_scheduler/scheduler
    os.symlink(pipe_dir, work / "model" / "checkpoint_pipe")
    os.symlink(pipe_dir, work / "model" / "checkpoint_scheduler")
    conf = work / "user.conf"
    conf.write_text(f"stable-diffusion-xl.Offline.min_duration = {seconds * 1000}\n"
                    f"stable-diffusion-xl.Offline.min_query_count = 1\n"
                    f"stable-diffusion-xl.Offline.offline_expected_qps = {expected_qps}\n")
    out = work / "output"
    cmd = [sys.executable, "main.py", "--dataset=coco-1024", f"--dataset-path={work / 'data'}",
           "--profile=stable-diffusion-xl-pytorch", "--scenario=Offline", f"--max-batchsize={batch}", "--threads=1",
           f"--model-path={work / 'model'}", "--dtype=fp32", "--device=cpu", "--latent-framework=torch",
           f"--user_conf={conf}", f"--output={out}", f"--performance-sample-count={n}"]
    env = dict(os.environ, **({"OMP_NUM_THREADS": str(omp_threads)} if omp_threads else {}))
    r = subprocess.run(cmd, cwd=main_py.parent, capture_output=True, text=True, env=env)
    summary = out / "mlperf_log_summary.txt"
    if r.returncode != 0 or not summary.exists():
        print(f"(d) failed ({r.returncode}):\n{r.stderr[-2000:]}")
        return None
    m = re.search(r"Samples per second\s*:\s*([0-9.eE+-]+)", summary.read_text())
    return float(m.group(1)) if m else None


# --- modes -----------------------------------------------------------------------------------------

def tiny_mode(args, root: Path) -> None:
    import torch

    from code.common import paths
    from code.sdxl.dataset import SDXLData
    from code.sdxl.model import load_pipeline

    for action in ("download_model", "download_data", "preprocess_data"):
        cli(f"--action={action}", "--benchmarks=sdxl", "--model_variant=tiny")
    cli("--action=generate_engines", "--benchmarks=sdxl", "--scenarios=Offline", "--model_variant=tiny",
        batch_args(args.batch))
    data = SDXLData(paths.preprocessed_dir("sdxl", "tiny"), "tiny", args.images)
    n, b = len(data), args.batch
    cores = len(os.sched_getaffinity(0))
    print(f"tiny SDXL, {n} images, batch {b}, {cores} cores, 20 steps, 128x128")
    res: dict[str, float] = {}
    if "a" not in args.skip:
        # torch's OpenMP pool collapses when a core is busy elsewhere (FACTS.md), so diffusers gets
        # its better figure of 1 thread and all cores.
        pipe = load_pipeline(paths.models_dir("sdxl", "tiny") / "pipeline")
        per = {}
        for t in sorted({1, cores}):
            torch.set_num_threads(t)
            wait_quiet(args)
            per[t] = bench_diffusers(pipe, data.captions, data.latent, b)
        best = max(per, key=per.get)
        res["a"] = per[best]
        print(f"(a) diffusers torch pipeline:      {res['a']:.2f} img/s  (torch threads {best}; "
              + ", ".join(f"{t}: {v:.2f}" for t, v in per.items()) + ")")
    if "b" not in args.skip:
        wait_quiet(args)
        res["b"], workers = bench_engines(b, n)
        print(f"(b) our engines directly (ORT):    {res['b']:.2f} img/s  ({workers} worker(s), no LoadGen)")
    guess = max(res.values(), default=6.0)
    if "c" not in args.skip:
        wait_quiet(args)
        meta = bench_harness(root, "tiny", b, args.seconds, guess)
        res["c"] = float(meta["metric_value"])
        print(f"(c) harness Offline via LoadGen:   {res['c']:.2f} img/s  ({meta['log_dir']})")
    if "d" not in args.skip:
        ref_dir = Path(args.mlperf_inference_dir or os.environ.get("MLPERF_INFERENCE_DIR", "/tmp/ref"))
        wait_quiet(args)
        d = bench_reference(ref_dir, root, b, args.seconds, guess, n, args.reference_threads)
        if d:
            res["d"] = d
            how = f"OMP_NUM_THREADS={args.reference_threads}" if args.reference_threads else "default threads"
            print(f"(d) MLCommons reference main.py:   {res['d']:.2f} img/s  ({how})")
    for num, den, goal in (("c", "b", 0.97), ("c", "a", None), ("c", "d", 2.0)):
        if num in res and den in res:
            g = f"  (goal >= {goal})" if goal else ""
            print(f"{num}/{den} = {res[num] / res[den]:.3f}{g}")


def cuda_mode(args, root: Path) -> None:
    """Full-size SDXL architecture, random weights, torch CUDA fp16, through the harness."""
    import torch

    from code.common import paths
    from code.common.fileio import staged_dir, write_json
    from code.sdxl import dataset, model
    from code.sdxl.download import COMPLETE
    from code.sdxl.constants import latent_side

    smoke = args.cpu_smoke   # the same flow on the CPU with the tiny architecture at 1024x1024 (checks the script)
    arch, device, dtype = ("tiny", "cpu", torch.float32) if smoke else ("sdxl", "cuda", torch.float16)
    if not smoke and not torch.cuda.is_available():
        sys.exit("--cuda needs a CUDA GPU visible to torch")
    pipe_dir = paths.models_dir("sdxl") / "pipeline"
    t0 = time.time()
    pipe = model.build_pipeline(arch, seed=0, dtype=dtype, device=device)
    pipe.set_progress_bar_config(disable=True)
    if not (pipe_dir / COMPLETE).exists():
        with staged_dir(pipe_dir) as tmp:
            pipe.save_pretrained(tmp, safe_serialization=True)
            write_json(tmp / COMPLETE, {"repo": f"random weights (scripts/bench_sdxl.py --cuda, {arch}, seed 0)",
                                        "variant": None})
    print(f"{arch} SDXL random weights ({dtype}) built and saved in {time.time() - t0:.0f}s "
          f"(unet {model.count_params(pipe.unet) / 1e9:.2f}B params)")
    raw = paths.data_dir("sdxl")
    raw.mkdir(parents=True, exist_ok=True)
    rows = dataset.synthetic_captions(args.images, seed=0)
    dataset.write_captions(raw / "captions_source.tsv", rows)
    np.save(raw / "latents.npy", dataset.make_latent(latent_side("reference")))
    (raw / "sample_ids.txt").write_text("".join(f"{i}\n" for i in range(10)))
    cli("--action=preprocess_data", "--benchmarks=sdxl")
    b = args.batch
    res = {}
    if "a" not in args.skip and not smoke:
        # the fp16 vae is upcast to fp32 inside diffusers (force_upcast), as the harness runs it
        caps = [r["caption"] for r in rows[:2 * b]]
        res["a"] = bench_diffusers(pipe, caps, dataset.make_latent(latent_side("reference")), b, device="cuda")
        print(f"(a) diffusers fp16 on CUDA:        {res['a']:.3f} img/s")
    del pipe
    if not smoke:
        torch.cuda.empty_cache()
    meta = bench_harness(root, "reference", b, args.seconds, max(res.values(), default=1.0), "--backend=pytorch",
                         "--precision=fp16", "--sdxl_vae_precision=fp32")
    res["c"] = float(meta["metric_value"])
    print(f"(c) harness Offline, torch CUDA fp16: {res['c']:.3f} img/s  (valid={meta['valid']}, {meta['log_dir']})")
    print(f"NVIDIA published H200 TensorRT fp8: {NVIDIA_H200_OFFLINE} samples/s -> ours/NVIDIA = "
          f"{res['c'] / NVIDIA_H200_OFFLINE:.2f}")
    if "a" in res:
        print(f"c/a = {res['c'] / res['a']:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=64, help="captions used by (a), (b) and the QSL of (d)")
    ap.add_argument("--batch", type=int, default=8, help="batch size of every component and of the reference")
    ap.add_argument("--seconds", type=int, default=30, help="LoadGen min_duration for (c) and (d)")
    ap.add_argument("--skip", default="", help="comma list of a,b,c,d to skip")
    ap.add_argument("--mlperf-inference-dir", default=None, help="checkout holding text_to_image/ (default "
                    "$MLPERF_INFERENCE_DIR or /tmp/ref)")
    ap.add_argument("--reference-threads", type=int, default=0, help="OMP_NUM_THREADS for (d) (0: its default)")
    ap.add_argument("--quiet-wait", type=int, default=0, help="before each measurement wait up to this many s "
                    "for the load average to fall below 0.7 (shared machines)")
    ap.add_argument("--cuda", action="store_true", help="full-size SDXL random weights on torch CUDA")
    ap.add_argument("--cpu-smoke", action="store_true", help="with --cuda: run that flow on the CPU with the tiny "
                    "architecture at 1024x1024 (checks the script; figures meaningless)")
    ap.add_argument("--root", default=None, help="private scratch/build folder (default build/bench_sdxl[_cuda])")
    args = ap.parse_args()
    args.skip = set(x.strip() for x in args.skip.split(",") if x.strip())
    root = Path(args.root or REPO / "build" / ("bench_sdxl_cuda" if args.cuda else "bench_sdxl")).resolve()
    os.environ.update({"MLPERF_BUILD_DIR": str(root / "build"), "MLPERF_SCRATCH_PATH": str(root / "scratch")})
    (cuda_mode if args.cuda else tiny_mode)(args, root)


if __name__ == "__main__":
    main()
