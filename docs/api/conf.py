"""Sphinx configuration of ember's API reference (built from the docstrings).

    python -m sphinx -W -b html docs/api docs/api/_build    # pip install -e ".[docs]"
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ember.version import __version__  # noqa: E402

project = "ember"
author = "the ember authors"
copyright = "the ember authors"
release = version = __version__

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon"]
source_suffix = {".rst": "restructuredtext"}
exclude_patterns = ["_build"]
root_doc = "index"

# docstrings are Google style; signatures keep their type hints, which are not cross-linked
napoleon_google_docstring = True
napoleon_numpy_docstring = False
autodoc_typehints = "signature"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": True}
html_theme = "alabaster"
html_static_path: list[str] = []
