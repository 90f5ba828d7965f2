"""`ember serve-web`: the example page (examples/web) with a model compiled to WebAssembly,
served on this machine.

    ember serve-web --model mobilenet_v2.onnx         # http://127.0.0.1:8000/
"""

from __future__ import annotations

import functools
import http.server
import os
import threading
from pathlib import Path
from typing import Any

from ember.errors import ArgumentError

DEFAULT_ROOT = Path(__file__).resolve().parents[1] / "examples" / "web"


class _Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".js": "text/javascript", ".mjs": "text/javascript",
                      ".wasm": "application/wasm", ".weights": "application/octet-stream"}

    def log_message(self, format: str, *args: Any) -> None:  # quiet unless asked
        if os.environ.get("EMBER_WEB_LOG"):
            super().log_message(format, *args)


def build_site(model: Any, root: str | os.PathLike[str] = DEFAULT_ROOT,
               input_shapes: Any = None) -> Path:
    """Compile `model` to root/model/model.{wasm,weights,js}, beside the page."""
    from ember.driver import export_wasm

    site = Path(root)
    if not (site / "index.html").is_file():
        raise ArgumentError(f"serve-web: '{site}' has no index.html; give --root the "
                            "examples/web directory of an ember checkout")
    export_wasm(model, site / "model", name="model", input_shapes=input_shapes)
    return site


def start_server(root: str | os.PathLike[str], host: str = "127.0.0.1", port: int = 8000
                 ) -> http.server.ThreadingHTTPServer:
    """An HTTP server for `root` running in a daemon thread (`.shutdown()` stops it)."""
    handler = functools.partial(_Handler, directory=str(root))
    server = http.server.ThreadingHTTPServer((host, port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
