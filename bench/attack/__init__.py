"""Word-substitution attacks written in the project: TextFooler (Jin et al. 2020).

Modules, one job each: `wordvectors` (vectors and neighbour search), `similarity` (windowed sentence
similarity, MiniLM), `pos` (part-of-speech constraint), `search` (importance ranking, greedy search, metrics),
`recipe` (assembly with defaults, `attack_pairs`), `examples` (attacked sample, stored adversarial files),
`textattack_backend` (optional cross-check with TextAttack's own recipe).
"""


from bench.errors import SkipEvaluator


def skip(reason: str) -> Exception:
    """The SkipEvaluator that says why the attack cannot run here."""
    return SkipEvaluator(reason)
