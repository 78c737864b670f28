"""clbench: a benchmark and comparison suite for contrastive fine-tuning of text classifiers."""

__version__ = "0.1.0"
