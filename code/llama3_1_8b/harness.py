"""Llama3.1-8B actions on the shared LLM layer: the reference's data (datacenter and edge files),
generation and metrics."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from code.common.llm.harness import Generation, LLMBenchmark, load_prompts, save_prompts
from code.llama3_1_8b import SPEC, dataset

# language/llama3.1-8b/SUT_VLLM.py: greedy (temperature 0, top_k 1), max_tokens 128, min_tokens 1. The tiny
# model asks for at least 2 tokens: LoadGen with use_token_latencies logs an error for a 1-token answer.
REAL = Generation(max_new_tokens=128, min_new_tokens=1)
TINY = Generation(max_new_tokens=32, min_new_tokens=2)
EDGE_REFERENCE = "generate_reference_edge.npz"


class Llama31Benchmark(LLMBenchmark):
    spec = SPEC
    tiny_kind = "llama"
    tiny_context = 1024
    tiny_samples = 40
    tiny_edge_samples = 20
    _category: str | None = None          # preprocess_data: the twin being preprocessed

    def generation(self) -> Generation:
        return TINY if self.tiny else REAL

    @property
    def edge(self) -> bool:
        return self._category == "edge" if self._category else self.settings.edge_twin

    @property
    def pre_dir(self) -> Path:
        base = super().pre_dir
        return base / "edge" if self.edge else base

    # --- data ---------------------------------------------------------------------------------------
    def make_tiny_raw(self, tokenizer, out_dir, targets=None):
        from code.common.llm.tiny import SEED

        _, _, subset = dataset.make_tiny(out_dir, tokenizer, self.tiny_samples, self.tiny_edge_samples, SEED + 5,
                                         targets)
        self._edge_subset = subset

    def read_raw(self, tokenizer, folder):
        records = dataset.read(Path(folder) / dataset.file_for(self.edge), self.fix("download_data"))
        return [[int(t) for t in r["tok_input"]] for r in records], [str(r["output"]) for r in records]

    def download_data(self) -> None:
        """Tiny: the layer's synthetic build over the datacenter file, plus the edge file's share of plain
        generate's outputs (its samples are a subset)."""
        super().download_data()
        if self.tiny:
            from code.common import paths

            out_dir = paths.data_dir(self.spec.name, "tiny")
            ref = load_prompts(out_dir / "generate_reference.npz")
            save_prompts(out_dir / EDGE_REFERENCE, [ref[i] for i in self._edge_subset])

    def preprocess_data(self) -> None:
        """Both twins: cnn_eval.json (datacenter) and sample_cnn_eval_5000.json (edge), each that is present."""
        for category in ("datacenter", "edge"):
            self._category = category
            try:
                if (self.raw_dir / dataset.file_for(self.edge)).exists() or category == "datacenter":
                    super().preprocess_data()
                    if self.tiny and self.edge:      # the edge twin's plain-generate reference
                        import shutil

                        from code.common.fileio import staged_path

                        with staged_path(self.pre_dir / "generate_reference.npz") as tmp:
                            shutil.copyfile(self.raw_dir / EDGE_REFERENCE, tmp)
            finally:
                self._category = None

    def download_real_model(self) -> None:
        from code.llama3_1_8b import download

        download.download_model(self.checkpoint)

    def download_real_data(self) -> None:
        from code.llama3_1_8b import download

        download.download_data(self.raw_dir, self.settings.values.get("data_dir"))

    def metrics(self, preds, targets, tokens) -> dict[str, Any]:
        """language/llama3.1-8b/evaluation.py: ROUGE (printed as strings there), gen_len (characters of the
        postprocessed predictions) and gen_num."""
        from code.common.llm import rouge

        out: dict[str, Any] = rouge.rouge(preds, targets)
        out["gen_len"] = int(np.sum([len(p) for p in preds]))
        out["gen_num"] = len(preds)
        return out
