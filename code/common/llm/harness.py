"""What every LLM benchmark shares: folders, the tiny build, the prompt QSL, generation workers, the
accuracy-log decoding and the input checks. A benchmark package subclasses ``LLMBenchmark`` and says
what is its own: the dataset (raw format -> prompt token ids + reference texts), the generation
settings per variant, the real downloads and the metrics.

Folders (variant = "reference" | "tiny"):
  models_dir(<bench>, variant)/checkpoint/   the Hugging Face folder (weights + tokenizer)
  data_dir(<bench>, variant)/                the dataset in the reference's own format
  preprocessed_dir(<bench>, variant)/        prompts.npz (token ids) + references.json (targets)
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from code.common import paths
from code.common.benchmark import QSL, Benchmark
from code.common.errors import HarnessError, MissingDataError
from code.common.fileio import check_hf_folder, read_json, staged_path, write_json
from code.common.llm.sampling import GREEDY, Sampling


@dataclasses.dataclass(frozen=True)
class Generation:
    """The reference's generation settings (greedy unless ``num_beams`` > 1 or ``sampling`` samples)."""

    max_new_tokens: int
    min_new_tokens: int = 0
    num_beams: int = 1
    strip_eos: bool = False          # outputs are reported without their trailing EOS (Mixtral's reference)
    sampling: Sampling = GREEDY      # temperature, top_k, top_p, seed (--llm_temperature ... override them)


class PromptQSL(QSL):
    """Prompts as token ids, all in memory (a few MB even for the real datasets): load/unload are no-ops.
    ``stops``: a stop sequence per sample (empty: none), when the benchmark has any."""

    def __init__(self, prompts: Sequence[np.ndarray], performance_count: int,
                 stops: Sequence[tuple[int, ...]] | None = None):
        self.prompts = list(prompts)
        self.stops = list(stops) if stops and any(stops) else None
        self.total_count = len(self.prompts)
        self.performance_count = min(performance_count or self.total_count, self.total_count)

    def load(self, indices) -> None:
        return None

    def unload(self, indices) -> None:
        return None

    def prompt(self, index: int) -> np.ndarray:
        return self.prompts[index]

    def stop(self, index: int) -> tuple[int, ...]:
        return self.stops[index] if self.stops else ()


def save_prompts(path: Path, prompts: Sequence[Sequence[int]]) -> None:
    """prompts.npz: every prompt's token ids concatenated (int32) plus offsets; staged."""
    lens = np.array([len(p) for p in prompts], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    flat = np.concatenate([np.asarray(p, dtype=np.int32) for p in prompts]) if len(prompts) else np.zeros(0, np.int32)
    with staged_path(path) as tmp, open(tmp, "wb") as f:     # a file object: np.savez would append ".npz"
        np.savez(f, tokens=flat, offsets=offsets)


def load_prompts(path: Path, fix: str = "make preprocess_data") -> list[np.ndarray]:
    """Token sequences saved by save_prompts; a damaged or truncated file is a one-line error naming it."""
    import zipfile

    try:
        with np.load(path) as z:
            flat, off = z["tokens"], z["offsets"]
        if off.ndim != 1 or len(off) < 1 or off[0] != 0 or np.any(np.diff(off) < 0) or off[-1] != len(flat):
            raise ValueError("offsets do not match the tokens")
    except FileNotFoundError:
        raise MissingDataError(f"not found: {path}", fix) from None
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
        raise MissingDataError(f"{path} is damaged ({type(e).__name__}: {str(e)[:100]})", fix) from None
    return [flat[off[i]:off[i + 1]] for i in range(len(off) - 1)]


def token_ids(seq) -> list[int]:
    """A data set's token ids as ints; a non-integral one (1.5, "abc", None) is a ValueError, never rounded."""
    out = []
    for t in seq:
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)) and not (
                isinstance(t, (float, np.floating)) and float(t).is_integer()):
            raise ValueError(f"token id {t!r} is not an integer")
        out.append(int(t))
    return out


def text_or_none(x) -> str | None:
    """A reference output as text; a missing one (None, NaN) stays None so the data-set check names it."""
    if x is None or (isinstance(x, float) and x != x):
        return None
    return str(x)


def read_records(path: Path, fix: str, keys: Sequence[str], what: str) -> list[dict]:
    """A JSON list of records that each hold ``keys`` (cnn_eval.json and its kin), or a one-line error."""
    if not path.exists():
        raise MissingDataError(f"dataset not found: {path}", fix)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise MissingDataError(f"{path} is not a readable {what} ({type(e).__name__})", fix) from None
    if not isinstance(data, list) or any(not isinstance(x, dict) or not set(keys) <= set(x) for x in data):
        raise MissingDataError(f"{path} is not in the reference format (a list of records with "
                               f"{', '.join(keys)})", fix)
    return data


def read_accuracy_log(path: str | Path, dtype=np.int32) -> dict[int, np.ndarray]:
    """qsl_idx -> output token ids from mlperf_log_accuracy.json; the first entry of a repeated
    index counts (as the reference evaluators dedup)."""
    from code.common.results.loadgen_logs import first_answers

    return first_answers(path, dtype)


class LLMBenchmark(Benchmark):
    """Shared actions of the LLM benchmarks. Subclasses set ``tiny_kind`` ("gptj" | "llama") and
    implement the dataset and metric hooks below."""

    tiny_kind: str = "llama"
    tiny_build_options: dict = {}         # extra arguments of code.common.llm.tiny.build_model
    tiny_context: int = 1024
    tiny_samples: int = 240
    dataset: str = ""                     # data folder name
    # how outputs are decoded for scoring: False where the reference keeps special tokens in the text it scores
    # (GPT-OSS-120B: the harmony channel markers, which its answer extraction reads)
    skip_special_tokens: bool = True

    # --- hooks ----------------------------------------------------------------------------------------
    def generation(self) -> Generation:
        raise NotImplementedError

    def sampling(self) -> Sampling:
        """The run's decoding: ``generation().sampling`` with what --llm_temperature, --llm_top_k, --llm_top_p and
        --llm_seed (or config.json) set."""
        s, v = self.generation().sampling, self.settings.values
        over = {k: v.get(f"llm_{k}") for k in ("temperature", "top_k", "top_p", "seed")}
        return dataclasses.replace(s, **{k: x for k, x in over.items() if x is not None})

    def make_tiny_raw(self, tokenizer, out_dir: Path, targets: Sequence[str] | None = None) -> None:
        """Write the synthetic dataset in the reference's raw format into out_dir (seeded: the same
        samples every time); ``targets`` replaces the reference answers."""
        raise NotImplementedError

    def read_raw(self, tokenizer, folder: Path) -> tuple[list[list[int]], list[str]]:
        """(prompt token ids, reference texts) from the raw dataset in ``folder``."""
        raise NotImplementedError

    def read_extra(self, tokenizer, folder: Path) -> dict[str, list]:
        """Per-sample lists beyond prompts and targets, kept in references.json: ``stops`` (a stop
        sequence per sample, [] for none) and whatever the metrics need (Mixtral: each sample's
        sub-dataset and id)."""
        return {}

    def download_real_model(self) -> None:
        raise NotImplementedError

    def download_real_data(self) -> None:
        raise NotImplementedError

    def metrics(self, preds: list[str], targets: list[str], tokens: list[np.ndarray]) -> dict[str, Any]:
        raise NotImplementedError

    def score(self, idx: list[int], tokens: list[np.ndarray], preds: list[str], targets: list[str]) -> dict[str, Any]:
        """The metrics of decoded predictions ``preds`` (the samples ``idx``): the reference's postprocessing
        (strip, one sentence per line) then ``metrics``. Mixtral overrides it (three sub-datasets)."""
        from code.common.llm import rouge

        pp, tt = rouge.postprocess_text(preds, targets, self.variant)
        self.mark_unofficial(rouge.unofficial_reasons(self.variant, self.fix("download_data")))
        return self.metrics(pp, tt, tokens)

    def mark_unofficial(self, reasons: Sequence[str]) -> None:
        """For score(): why this score is not the official one (one line each, with the command that fixes
        it); accuracy() writes them as ``UNOFFICIAL: <reason>`` lines and returns them as ``unofficial``."""
        self.score_unofficial = [*getattr(self, "score_unofficial", []), *reasons]

    def response_bytes(self):
        """None: LoadGen logs each answer's token ids (int32), as every LLM reference but Qwen3-VL's; a benchmark
        whose scorer reads text returns a function tokens -> the bytes to log."""
        return None

    # metrics the tiny variant is judged on against plain model.generate (prefixes)
    tiny_judged: tuple[str, ...] = ("rouge",)
    uses_rouge: bool = True               # a ROUGE score (rougeLsum splits sentences with NLTK's punkt_tab)

    # --- locations ------------------------------------------------------------------------------------
    @property
    def variant(self) -> str:
        return self.settings.model_variant

    @property
    def checkpoint(self) -> Path:
        return paths.models_dir(self.spec.name, self.variant) / "checkpoint"

    @property
    def raw_dir(self) -> Path:
        if self.settings.values.get("data_dir"):
            return Path(self.settings.data_dir)
        return paths.data_dir(self.spec.name, self.variant)

    @property
    def pre_dir(self) -> Path:
        return paths.preprocessed_dir(self.spec.name, self.variant)

    # --- model and tokenizer --------------------------------------------------------------------------
    def tokenizer(self):
        from transformers import AutoTokenizer

        if not (self.checkpoint / "tokenizer_config.json").exists():
            if self.tiny:
                self.download_model()
            else:
                raise MissingDataError(f"tokenizer not found in {self.checkpoint}", self.fix("download_model"))
        check_hf_folder(self.checkpoint, self.fix("download_model"))
        try:
            return AutoTokenizer.from_pretrained(str(self.checkpoint))
        except (OSError, ValueError, KeyError, TypeError) as e:     # a file the checks above cannot see into
            raise HarnessError(f"the tokenizer in {self.checkpoint} does not load ({type(e).__name__}: "
                               f"{str(e).splitlines()[0][:120] if str(e) else ''})", self.fix("download_model")) from None

    def tiny_tokenizer_dir(self) -> Path:
        from code.common.llm import tiny

        d = paths.models_dir("llm_tokenizer", "tiny")
        if not (d / "tokenizer.json").exists():
            tiny.build_tokenizer(d)
        return d

    def download_model(self) -> None:
        if not self.tiny:
            self.download_real_model()
            return
        from code.common.backends.pytorch import one_thread
        from code.common.llm import tiny

        tok = tiny.load_tokenizer(self.tiny_tokenizer_dir())
        g = tiny.TextGen(tiny.SEED + 7)
        prompts = [np.asarray(tok(g.paragraph(2 + i % 6))["input_ids"]) for i in range(16)]
        gen = self.generation()
        with one_thread():      # the tiny model's many small matmuls (code.common.backends.pytorch.one_thread)
            rec = tiny.build_model(self.tiny_kind, self.checkpoint, self.tiny_tokenizer_dir(), context=self.tiny_context,
                                   max_new_tokens=gen.max_new_tokens, min_new_tokens=gen.min_new_tokens,
                                   calibration_prompts=prompts, **self.tiny_build_options)
        print(f"[download_model] tiny {self.tiny_kind} ({rec['parameters']:,} parameters, EOS scale {rec['eos_scale']}, "
              f"median output {rec['median_output_tokens']:g} tokens) -> {self.checkpoint}")

    def model_config(self) -> dict:
        p = self.checkpoint / "config.json"
        if not p.exists():
            raise MissingDataError(f"model not found: {p}", self.fix("download_model"))
        return read_json(p, self.fix("download_model"))

    def eos_token_id(self) -> int | None:
        eos = self.model_config().get("eos_token_id")
        return eos[0] if isinstance(eos, list) else eos

    def max_context(self) -> int:
        cfg = self.model_config()
        return int(cfg.get("max_position_embeddings") or cfg.get("n_positions") or 0)

    def tokenizer_size(self) -> int:
        """``len(tokenizer)`` (added tokens included) without transformers: its tokenizer import pulls in torch,
        torchvision and torch._dynamo, about 4 s of CPU in every CLI call that only checks the pair. Read from
        tokenizer.json with the tokenizers library (what a fast tokenizer's ``len`` returns); a checkpoint
        without one goes through AutoTokenizer."""
        f = self.checkpoint / "tokenizer.json"
        if not f.exists():
            return len(self.tokenizer())
        check_hf_folder(self.checkpoint, self.fix("download_model"))
        from tokenizers import Tokenizer

        try:
            return Tokenizer.from_file(str(f)).get_vocab_size(with_added_tokens=True)
        except Exception as e:  # noqa: BLE001 - the Rust library raises its own Exception type for a bad file
            raise HarnessError(f"the tokenizer in {self.checkpoint} does not load ({f.name}: "
                               f"{str(e).splitlines()[0][:120] if str(e) else type(e).__name__})",
                               self.fix("download_model")) from None

    def check_tokenizer(self, size: int | None = None) -> None:
        """The tokenizer must fit the model: a token id past the embedding table is garbage or a crash."""
        size = self.tokenizer_size() if size is None else size
        vocab = int(self.model_config().get("vocab_size", 0))
        if vocab and size > vocab:
            raise HarnessError(f"the tokenizer in {self.checkpoint} has {size} tokens but the model's vocabulary "
                               f"has {vocab}: they are not a pair", self.fix("download_model"))

    # --- data -----------------------------------------------------------------------------------------
    def download_data(self) -> None:
        """Tiny: seeded synthetic samples in the reference's format. Their reference answers are the lead
        sentence of the input plus the first 60% of the tiny model's own greedy answer (plain
        ``model.generate``, kept as generate_reference.npz): ROUGE is then high and moves with every
        token a harness changes, which makes the fidelity comparison sensitive."""
        if not self.tiny:
            self.download_real_data()
            self.download_punkt_tab()
            return
        self.download_punkt_tab()
        out_dir, tok, prompts, leads = self._tiny_raw()
        outs = self._plain_generate(prompts, self.read_extra(tok, out_dir).get("stops"))
        save_prompts(out_dir / "generate_reference.npz", outs)
        texts = tok.batch_decode(outs, skip_special_tokens=True)
        targets = [f"{lead.split('.')[0]}. {t[:max(1, int(len(t) * 0.6))].strip()}" for lead, t in zip(leads, texts)]
        self.make_tiny_raw(tok, out_dir, targets)
        print(f"[download_data] {len(prompts)} synthetic samples -> {out_dir}")

    def download_punkt_tab(self) -> None:
        """rougeLsum's sentence splitter: NLTK's punkt_tab as nltk.download fetches it; the tiny variant's is
        trained locally (no network). Both into rouge.nltk_data_dir(variant)."""
        from code.common.llm import download as dl

        if self.tiny:
            dl.install_tiny_punkt_tab()
        else:
            dl.download_punkt_tab(fix=self.fix("download_data"), tag=f"[{self.spec.mlperf_name}]")

    def _tiny_exact_match_set(self, dialect: str, what: str = "synthetic questions") -> None:
        """The tiny set of an exact-match benchmark (DeepSeek-R1, GPT-OSS-120B): its ground truth is what the
        reference's extraction (``code.common.llm.exact_match``, ``dialect``) reads in plain ``model.generate``'s
        answer, decoded as the benchmark scores, for three samples in four (a wrong one for the fourth); a sample
        whose answer holds nothing to extract keeps its seeded truth. Writes the set and generate's answers."""
        from collections import Counter

        from code.common.llm import exact_match

        out_dir, tok, prompts, truths = self._tiny_raw()
        kinds = self.read_extra(tok, out_dir)["dataset"]
        outs = self._plain_generate(prompts)
        texts = tok.batch_decode(outs, skip_special_tokens=self.skip_special_tokens)
        letters = "ABCDEFGHIJ"
        targets, found = [], 0
        for i, (k, t, truth) in enumerate(zip(kinds, texts, truths)):
            got = exact_match.extract(k, t, dialect)
            if got is None:
                targets.append(truth)
                continue
            found += 1
            if i % 4 == 3:                   # a wrong truth: the metric is not 100 by construction
                got = (int(got) + 1) % 1000 if isinstance(got, int) else letters[(letters.index(got) + 1) % 4]
            targets.append(str(got))
        self.make_tiny_raw(tok, out_dir, targets)
        save_prompts(out_dir / "generate_reference.npz", outs)
        n = Counter(exact_match.family_key(k, dialect) for k in kinds)
        print(f"[download_data] {len(prompts)} {what} ({', '.join(f'{v} {k}' for k, v in n.items())}; "
              f"an answer found in {found} of plain generate's outputs) -> {out_dir}")

    def _tiny_raw(self):
        """The tiny set's first draft (the model built if missing): (folder, tokenizer, prompts, targets)."""
        from code.common.llm import tiny

        out_dir = paths.data_dir(self.spec.name, "tiny")
        tok = tiny.load_tokenizer(self.tiny_tokenizer_dir())
        if not (self.checkpoint / "config.json").exists():
            self.download_model()
        self.make_tiny_raw(tok, out_dir)
        prompts, targets = self.read_raw(tok, out_dir)
        return out_dir, tok, prompts, targets

    def _plain_generate(self, prompts: Sequence[Sequence[int]], stops: Sequence[Sequence[int]] | None = None
                        ) -> list[list[int]]:
        """Plain ``model.generate`` per prompt (batch 1, greedy), then what the reference does to its output:
        cut after the sample's stop sequence, the trailing EOS dropped where the benchmark reports it so."""
        from code.common import progress
        from code.common.backends.pytorch import one_thread
        from code.common.llm import tiny
        from code.common.llm.generation import cut_at_stop, strip_trailing
        from code.common.llm.hf import greedy_generate

        model = tiny.load_model(self.checkpoint)
        gen, cfg = self.generation(), self.model_config()
        eos = self.eos_token_id()
        outs = []
        with progress.bar(len(prompts), "plain model.generate (tiny reference)", "sample") as bar, one_thread():
            for i, p in enumerate(prompts):
                out = greedy_generate(model, np.asarray(p), max_new_tokens=gen.max_new_tokens,
                                      min_new_tokens=gen.min_new_tokens, eos_token_id=cfg.get("eos_token_id"),
                                      pad_token_id=cfg.get("pad_token_id") or 0)
                out = cut_at_stop(out, stops[i] if stops else (), gen.min_new_tokens)
                outs.append(strip_trailing(out, eos) if gen.strip_eos else out)
                bar.update()
        return outs

    def preprocess_data(self) -> None:
        tok = self.tokenizer()
        self.check_tokenizer(len(tok))
        try:
            prompts, targets = self.read_raw(tok, self.raw_dir)
        except (ValueError, TypeError) as e:       # a value of the wrong kind in the data set
            raise MissingDataError(f"the dataset in {self.raw_dir} is not usable: {str(e)[:160]}",
                                   self.fix("download_data")) from None
        if not prompts:
            raise MissingDataError(f"the dataset in {self.raw_dir} holds no samples", self.fix("download_data"))
        self.check_dataset(prompts, targets, self.fix("download_data"), f"the dataset in {self.raw_dir}")
        self.pre_dir.mkdir(parents=True, exist_ok=True)
        save_prompts(self.pre_dir / "prompts.npz", prompts)
        write_json(self.pre_dir / "references.json", {"targets": targets, "source": str(self.raw_dir),
                                                      **self.read_extra(tok, self.raw_dir)})
        ref = self.raw_dir / "generate_reference.npz"
        if self.tiny and ref.exists():   # plain model.generate on every prompt: what the tiny accuracy is judged by
            import shutil

            with staged_path(self.pre_dir / ref.name) as tmp:
                shutil.copyfile(ref, tmp)
        lens = [len(p) for p in prompts]
        print(f"[preprocess_data] {len(prompts)} prompts ({min(lens)}-{max(lens)} tokens, mean {np.mean(lens):.0f}) "
              f"-> {self.pre_dir}")

    def prompts(self) -> list[np.ndarray]:
        p = self.pre_dir / "prompts.npz"
        if not p.exists():
            raise MissingDataError(f"preprocessed prompts not found: {p}", self.fix("preprocess_data"))
        prompts = load_prompts(p, self.fix("preprocess_data"))
        if not prompts:
            raise MissingDataError(f"{p} holds no prompts", self.fix("preprocess_data"))
        n = self.settings.values.get("llm_sample_count") or 0
        return prompts[:n] if n else prompts

    def references(self) -> dict[str, Any]:
        """references.json: ``targets`` and the benchmark's per-sample extras (``read_extra``)."""
        p = self.pre_dir / "references.json"
        if not p.exists():
            raise MissingDataError(f"preprocessed references not found: {p}", self.fix("preprocess_data"))
        refs = read_json(p, self.fix("preprocess_data"))
        if not isinstance(refs.get("targets"), list):
            raise MissingDataError(f"{p} holds no list of targets", self.fix("preprocess_data"))
        return refs

    def targets(self) -> list[str]:
        return self.references()["targets"]

    def check_dataset(self, prompts: Sequence, targets: Sequence, fix: str, where: str) -> None:
        """Every prompt a non-empty list of token ids inside the model's vocabulary, every reference output
        present: found at preprocess_data, not minutes into a run (an empty prompt or an id past the vocabulary
        ended in a RecursionError deep in the generation loop)."""
        vocab = int(self.model_config().get("vocab_size") or 0)
        for i, p in enumerate(prompts):
            a = np.asarray(p)
            if a.ndim != 1 or a.size == 0:
                raise MissingDataError(f"{where}: sample {i} has an empty prompt", fix)
            if a.dtype.kind not in "iu":
                raise MissingDataError(f"{where}: sample {i}'s token ids are not integers ({a.dtype})", fix)
            if vocab and (a.min() < 0 or a.max() >= vocab):
                bad = int(a.min()) if a.min() < 0 else int(a.max())
                raise MissingDataError(f"{where}: sample {i} has token id {bad}, outside the model's vocabulary of "
                                       f"{vocab}", fix)
        missing = [i for i, t in enumerate(targets) if t is None]
        if missing:
            raise MissingDataError(f"{where}: {len(missing)} sample(s) have no reference output (the first: sample "
                                   f"{missing[0]})", fix)

    def check_prompts(self, prompts: Sequence[np.ndarray]) -> None:
        self.check_dataset(prompts, (), self.fix("preprocess_data"), "the preprocessed prompts")
        ctx = self.max_context()
        room = ctx - self.generation().max_new_tokens
        if ctx:
            for i, p in enumerate(prompts):
                if len(p) > room:
                    raise HarnessError(f"prompt {i} has {len(p)} tokens; with {self.generation().max_new_tokens} new "
                                       f"tokens it exceeds the model's context of {ctx}",
                                       f"re-run {self.fix('preprocess_data')} (it truncates prompts to {room} tokens), "
                                       "or use a model with a longer context")

    # --- engines --------------------------------------------------------------------------------------
    def backend(self):
        from code.common.backends import get_backend

        # the parent only needs the class (remote or not, instances per process, beam search): the library is
        # imported by the processes that generate, which report a broken install
        return get_backend(self.settings.backend, deep=False)

    def generate_engines(self) -> dict[str, str]:
        self.model_config()
        self.check_tokenizer()
        spec = self.worker_specs(str(self.checkpoint))[0]
        return {"model": self.backend().prepare_model(str(self.checkpoint), spec)}

    # --- run ------------------------------------------------------------------------------------------
    def make_qsl(self) -> PromptQSL:
        prompts = self.prompts()
        self.check_prompts(prompts)
        stops = self.references().get("stops")
        self.qsl = PromptQSL(prompts, self.settings.performance_sample_count or len(prompts),
                             [tuple(int(t) for t in x) for x in stops[:len(prompts)]] if stops else None)
        return self.qsl

    def workers(self) -> list[int]:
        """One generation worker per model instance: GPUs / (tensor x pipeline parallel) instances,
        times gpu_inference_streams; on a CPU, gpu_inference_streams workers."""
        s = self.settings
        per = max(1, s.tensor_parallel_size * s.pipeline_parallel_size)
        gpus = s.system.gpu_count if s.system.accelerator == "gpu" else 0
        instances = max(1, gpus // per) if gpus else 1
        return [d * per for _ in range(max(1, s.gpu_inference_streams)) for d in range(instances)]

    def worker_specs(self, model_dir: str, local: bool = False):
        """One spec per generation worker: a model instance (its device or GPU group), or with a remote backend
        (``--backend=openai``) one per server, unless ``local`` (the instances make run_llm_server starts)."""
        from code.common.llm.backends import WorkerSpec

        s, gen = self.settings, self.generation()
        backend = None if local else self.backend()
        if s.system.accelerator == "gpu" and (backend is None or not backend.remote):
            self.check_memory()             # before anything is loaded: the block must fit the GPUs it names
        cfg = self.model_config()
        eos = cfg.get("eos_token_id")
        eos, extra = (eos[0], tuple(eos[1:])) if isinstance(eos, list) and eos else (eos, ())
        pad = cfg.get("pad_token_id")
        pad = pad if pad is not None else (eos or 0)
        sampling = self.sampling()
        if gen.num_beams > 1 and not sampling.greedy:
            raise HarnessError(f"{self.spec.name} decodes with {gen.num_beams} beams; sampling (temperature "
                               f"{sampling.temperature:g}, top_k {sampling.top_k}) does not combine with beams",
                               "drop --llm_temperature / --llm_top_k")
        if backend is not None and backend.remote:
            from code.common.llm import servers

            urls, served = servers.endpoints(tuple(s.values.get("llm_endpoints") or ()), self.spec.name, s.model_variant)
            served = s.values.get("llm_served_model") or served
            return [WorkerSpec(model_dir=model_dir, precision=s.precision, device="remote", max_batch_size=s.batch_size(),
                               eos_token_id=eos, extra_eos=extra, pad_token_id=pad,
                               num_beams=gen.num_beams, sampling=sampling, endpoint=u, served_model=served,
                               request_timeout_s=float(s.values.get("llm_request_timeout_s") or 300.0),
                               start_fix=servers.start_command(self.spec.name, s.model_variant), name=f"openai-{i}",
                               api=s.values.get("llm_api") or "completions",
                               token_ids=s.values.get("llm_token_ids") or "server")
                    for i, u in enumerate(urls)]
        gpu = s.system.accelerator == "gpu"
        per = max(1, s.tensor_parallel_size * s.pipeline_parallel_size)
        dist = self.check_distributed(per)
        if gpu and s.system.gpu_count < per and dist != "ray":
            raise HarnessError(f"tensor_parallel_size {s.tensor_parallel_size} x pipeline_parallel_size "
                               f"{s.pipeline_parallel_size} needs {per} GPUs; {s.system_id} has {s.system.gpu_count}",
                               f"use --tensor_parallel_size={s.system.gpu_count} (or a system block of your own)")
        ep = int(s.values.get("expert_parallel_size") or 1)
        if ep > 1 and s.tensor_parallel_size % ep:
            raise HarnessError(f"expert_parallel_size {ep} does not divide tensor_parallel_size {s.tensor_parallel_size}"
                               " (the experts are spread over GPUs of one tensor-parallel instance)",
                               f"use --expert_parallel_size={s.tensor_parallel_size} or a divisor of it")
        devs = self.workers()
        slices = self.cpu_slices() or [()] * len(devs)
        out = []
        for i, (d, sl) in enumerate(zip(devs, slices)):
            out.append(WorkerSpec(
                model_dir=model_dir, precision=s.precision, device=f"cuda:{d}" if gpu else "cpu",
                # more GPUs than this node has (llm_distributed_backend=ray): Ray places the ranks
                gpus=tuple(range(d, d + per)) if gpu and per <= s.system.gpu_count else (), max_batch_size=s.batch_size(),
                batching=s.llm_batching, max_num_tokens=s.llm_max_num_tokens, batch_timeout_s=self.batch_timeout_s(),
                tensor_parallel_size=s.tensor_parallel_size, pipeline_parallel_size=s.pipeline_parallel_size,
                expert_parallel_size=ep, distributed_backend=dist,
                kv_cache_memory_fraction=s.kv_cache_memory_fraction, eos_token_id=eos, extra_eos=extra,
                pad_token_id=pad, max_context=self.max_context(),
                num_beams=gen.num_beams, sampling=sampling, threads=self.intra_op_threads(),
                cpu_cores=tuple(sl or ()), name=f"gen-worker-{i}"))
        if backend is not None:
            backend.place(out)
        return out

    def intra_op_threads(self) -> int:
        """torch's CPU threads per generation worker: ``cpu_threads``, else one where other work shares the cores
        (``shared_cpu``: the test suite), else the cores shared out over the workers. A decode step of a small model is
        hundreds of small ops, and a team of two waits for its descheduled peer at each: the tiny DeepSeek-R1 here
        (AMD EPYC, 2 cores, 2026-12-07), Server 460 queries at 8 QPS: 35.8 CPU-s and TPOT p99 8.3 ms with two
        threads, 31.5 and 4.6 with one; Offline 60 samples: 769 and 1,226 tokens/s with two, 2,658 and 2,100 with one."""
        from code.common.backends.base import shared_cpu

        if not self.settings.cpu_threads and self.settings.system.accelerator != "gpu" and shared_cpu():
            return 1
        return super().intra_op_threads()

    def memory_plan(self):
        """Weights + KV cache per GPU for this block (code.common.llm.memory); None where nothing is sized: the
        tiny variant, a CPU, an unknown GPU memory or a benchmark without a declared shape."""
        from code.common.llm import memory

        s = self.settings
        gib = s.system.gpu_memory_gib if s.system.accelerator == "gpu" else 0.0
        if s.model_variant == "tiny" or not gib or self.spec.llm_shape is None:
            return None
        return memory.plan(self.spec.llm_shape, precision=s.precision, batch=s.batch_size(), gpu_gib=gib,
                           fraction=s.kv_cache_memory_fraction, tensor_parallel=s.tensor_parallel_size,
                           pipeline_parallel=s.pipeline_parallel_size, beams=self.generation().num_beams)

    def check_memory(self) -> None:
        from code.common.llm import memory

        p = self.memory_plan()
        if p is not None:
            s = self.settings
            memory.check(p, f"{s.benchmark} {s.scenario} on {s.system_id} ({s.precision}, tensor_parallel_size "
                            f"{s.tensor_parallel_size})")

    def check_distributed(self, per: int) -> str:
        """llm_distributed_backend as the engine gets it; ray needs executor=ray, an engine that spans
        nodes (vllm, tensorrt_llm) and a cluster with the GPUs tensor x pipeline parallel asks for."""
        from code.common import backends
        from code.common.harness import ray_executor

        s = self.settings
        dist = s.values.get("llm_distributed_backend") or "auto"
        if dist != "ray":
            return dist
        if s.values.get("executor") != "ray":
            raise HarnessError("llm_distributed_backend=ray spans the GPUs of a Ray cluster, but executor is "
                               f"{s.values.get('executor')}", "add --executor=ray --ray_address=<head>:6379")
        if not backends.backend_class(s.backend).spans_ray_cluster:
            able = [n for n in backends.for_benchmark(True) if backends.backend_class(n).spans_ray_cluster]
            raise HarnessError(f"llm_distributed_backend=ray needs {' or '.join(able)}; --backend={s.backend} runs "
                               "one process", f"use --backend={able[0]}, or drop llm_distributed_backend")
        have = ray_executor.cluster_gpus()
        if have is not None and have < per:
            raise HarnessError(f"tensor_parallel_size {s.tensor_parallel_size} x pipeline_parallel_size "
                               f"{s.pipeline_parallel_size} needs {per} GPUs; the Ray cluster has {have}",
                               "add GPU nodes to the cluster (ray start --address=<head>:6379), or lower the sizes")
        return dist

    def make_processors(self, qsl, engines: Mapping[str, str]):
        backend = self.backend()
        self.check_tokenizer()
        return [backend.processor(spec) for spec in self.worker_specs(engines.get("model", str(self.checkpoint)))]

    def null_processors(self):
        """--null_processor: the harness's own ceiling (tokens without compute), EOS after max_new_tokens."""
        from code.common.llm.generation import NullStepModel, Scheduler

        s = self.settings
        return [Scheduler(NullStepModel(None), s.batch_size(), mode=s.llm_batching, max_num_tokens=s.llm_max_num_tokens,
                          batch_timeout_s=self.batch_timeout_s(), name=f"gen-worker-{i}")
                for i, _ in enumerate(self.workers())]

    # --- accuracy -------------------------------------------------------------------------------------
    def decode_log(self, accuracy_log: str) -> tuple[list[int], list[np.ndarray], list[str], list[str]]:
        """(indices, output tokens, decoded predictions, reference texts) from an accuracy log."""
        outs = read_accuracy_log(accuracy_log)
        targets = self.targets()
        idx = list(outs)
        tok = self.tokenizer()
        preds = tok.batch_decode([outs[i].tolist() for i in idx], skip_special_tokens=self.skip_special_tokens)
        return idx, [outs[i] for i in idx], preds, [targets[i] for i in idx]

    def accuracy(self, accuracy_log: str, out_dir: str) -> dict[str, Any]:
        from code.common.results.accuracy_text import judge
        from code.common.fileio import write_text
        from code.common.llm import rouge

        idx, tokens, preds, targets = self.decode_log(accuracy_log)
        if not idx:
            raise HarnessError("the accuracy log holds no samples", "re-run with --test_mode=AccuracyOnly")
        from code.common.results.accuracy_text import values

        self.score_notes: list[str] = []
        self.score_unofficial: list[str] = []     # score() adds why the score is not the official one
        metrics = self.score(idx, tokens, preds, targets)
        notes = list(self.score_notes)
        # the tiny variant has no official target (it is judged against plain generate): never unofficial
        unofficial = [] if self.tiny else list(dict.fromkeys(self.score_unofficial))
        entry = self.settings.round_entry()
        report = self.report_dict(metrics)
        # read back as the checker reads accuracy.txt: the targets' metrics and the upper limits' (GPT-OSS-120B has
        # a TOKENS_PER_SAMPLE limit without a target)
        found = values(repr(report), (*entry.accuracy_metrics, *entry.accuracy_max))
        if self.tiny:     # no official target for the tiny model: plain model.generate on the same weights is its target
            problems = self._tiny_judge(metrics, idx)
            judged = ("tiny variant: judged against plain model.generate on the same weights "
                      f"({', '.join(self.tiny_judged)} >= 99% of it)")
        else:
            problems = judge(found, dict(entry.accuracy_min), dict(entry.accuracy_max))
            judged = f"{entry.name}: " + ", ".join([f"{k} >= {v:.6g}" for k, v in entry.accuracy_min.items()]
                                                  + [f"{k} <= {v:.6g}" for k, v in entry.accuracy_max.items()])
        text = (f"{report!r}\n"
                + "".join(f"UNOFFICIAL: {u}\n" for u in unofficial)
                + f"# {len(idx)} samples; output tokens read as int32"
                + (f"; sentence splitting: {rouge.sentence_splitter(self.variant)}\n" if self.uses_rouge else "\n")
                + "".join(f"# {n}\n" for n in notes)
                + f"# {judged}\n"
                + ("".join(f"# FAIL: {p}\n" for p in problems) or "# PASS\n"))
        # no hash= line: truncate_results appends the log's hash when it truncates it (as the reference's
        # truncate_accuracy_log.py does); a hash here would mark an untruncated log as done
        write_text(Path(out_dir) / "accuracy.txt", text)
        return {"metrics": report, "passed": not problems, "problems": problems, "text": text,
                "samples": len(idx), "generate_metrics": getattr(self, "_generate_metrics", None),
                "unofficial": unofficial}

    def report_dict(self, metrics: dict) -> dict:
        """The dict accuracy.txt prints (the reference's keys, plain Python numbers)."""
        return {k: (float(v) if isinstance(v, (float, np.floating)) else int(v) if isinstance(v, (np.integer,)) else v)
                for k, v in metrics.items()}

    def generate_reference(self) -> list[np.ndarray] | None:
        """Tiny variant: plain ``model.generate`` outputs per sample (None for the real model)."""
        p = self.pre_dir / "generate_reference.npz"
        return load_prompts(p, self.fix("preprocess_data")) if p.exists() else None

    def _tiny_judge(self, metrics: dict, idx: list[int]) -> list[str]:
        """Tiny: the same metrics over plain generate's outputs for the same samples; a harness result below
        99% of any of them fails."""
        ref = self.generate_reference()
        if ref is None:
            return ["no plain-generate reference for the tiny variant (run make preprocess_data MODEL_VARIANT=tiny)"]
        tok = self.tokenizer()
        targets = self.targets()
        preds = tok.batch_decode([ref[i].tolist() for i in idx], skip_special_tokens=self.skip_special_tokens)
        notes, unofficial = self.score_notes, self.score_unofficial
        want = self.score(idx, [ref[i] for i in idx], preds, [targets[i] for i in idx])
        self.score_notes, self.score_unofficial = notes, unofficial
        self._generate_metrics = want
        out = []
        for k, v in want.items():
            if k in metrics and isinstance(v, (int, float)) and k.startswith(self.tiny_judged) and metrics[k] < 0.99 * v:
                out.append(f"{k} = {metrics[k]:.6g} is below 99% of plain generate's {v:.6g}")
        return out
