"""Word-substitution attacks written in the project: TextFooler (Jin et al. 2020).

Modules, one job each: `wordvectors` (vectors and neighbour search), `similarity` (windowed sentence
similarity, MiniLM), `pos` (part-of-speech constraint), `search` (importance ranking, greedy search, metrics),
`recipe` (assembly with defaults, `attack_pairs`), `examples` (attacked sample, stored adversarial files),
`textattack_backend` (optional cross-check with TextAttack's own recipe).
"""


def skip(reason: str) -> Exception:
    """A SkipEvaluator with reason (imported on use: bench.evaluators imports this package's modules)."""
    from bench.evaluators.base import SkipEvaluator

    return SkipEvaluator(reason)
