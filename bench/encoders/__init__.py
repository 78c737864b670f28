"""Encoders: the text models a method fine-tunes (Hugging Face, packaged MiniLM, tiny test models, TextCNN)."""
