"""Reporting: tables, statistics, figures and rendering, read from stored results only (never training code)."""
