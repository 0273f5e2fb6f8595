"""Loading cases: generic JSONL/CSV/Parquet readers, the papers' data formats, and built-in suites."""

from mheval.suites.registry import Suite, list_suites, load_suite

__all__ = ["Suite", "list_suites", "load_suite"]
