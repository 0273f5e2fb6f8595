"""The package root's lazy names (`mheval/__init__.py`): each one listed is the API's own object, and the
lists that declare them (`_PUBLIC`, `__all__`) agree."""

from __future__ import annotations

import subprocess
import sys

import mheval
from mheval import api


def test_compare_text_is_exported_beside_compare() -> None:
    assert mheval.compare_text is api.compare_text
    assert "compare_text" in mheval.__all__ and "compare_text" in dir(mheval)


def test_every_lazy_name_is_listed_and_resolves() -> None:
    lazy = set(mheval._PUBLIC)
    assert lazy == set(mheval.__all__) - {"__version__"}
    for name, module in mheval._PUBLIC.items():
        assert getattr(mheval, name) is getattr(__import__(module, fromlist=[name]), name)


def test_importing_the_package_loads_no_api() -> None:
    """The names load on first use: a bare `import mheval` does not import the API (the command line's start)."""
    code = "import sys, mheval; print('mheval.api' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "False"
