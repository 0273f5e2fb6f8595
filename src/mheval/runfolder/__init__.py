"""The run folder: one run's SQLite store (`store`), its flat tables and exports (`export`), and who may
write it (`claim`: one run per folder, one writer at a time). Read by the engine, the report, the
analyses and the Python API alike; it imports none of them."""

from mheval.runfolder.store import Store

__all__ = ["Store"]
