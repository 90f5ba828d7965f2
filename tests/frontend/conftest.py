"""Register the marker onnx's BackendTest.enable_report() puts on every backend test."""


def pytest_configure(config):
    config.addinivalue_line("markers", "onnx_coverage(proto, category): ONNX backend test "
                                       "coverage report (from onnx.backend.test)")
