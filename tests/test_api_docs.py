"""The API reference (docs/api: Sphinx autodoc + napoleon) builds from the docstrings with
every warning an error, and lists each public entry point."""

from pathlib import Path

import pytest

pytest.importorskip("sphinx")
DOCS = Path(__file__).resolve().parents[1] / "docs" / "api"
ENTRY_POINTS = ["ember.compile", "ember.export_library", "ember.target.Target",
                "ember.errors.EmberError", "ember.errors.ModelError",
                "ember.runtime.executor.CompiledModel", "ember.runtime.module.Module",
                "ember.runtime.library.load_library", "ember.autotune.tune",
                "ember.autotune.extract_tasks", "ember.autotune.TuningDatabase"]


def test_api_reference_builds_without_warnings(tmp_path: Path) -> None:
    from sphinx.cmd.build import build_main

    status = build_main(["-W", "--keep-going", "-q", "-E", "-b", "html", str(DOCS),
                         str(tmp_path)])
    assert status == 0, "the API reference has warnings (see the output above)"
    html = "".join(p.read_text() for p in tmp_path.glob("*.html"))
    missing = [name for name in ENTRY_POINTS if f'id="{name}"' not in html]
    assert not missing, missing
