"""ONNX's backend node-test suite (every op's reference cases) run through ember's Backend.

Only the node tests run: the suite's "real" model tests download models from the internet.
Tests listed in expected_failures.py are skipped with their reason; set
EMBER_ONNX_CHECK_EXPECTED=1 to run them as expected failures instead (an unexpected success
then shows which entries to delete).
"""

from __future__ import annotations

import os
import unittest
import warnings

import onnx.backend.test

from ember import onnx_backend

from .expected_failures import EXPECTED_FAILURES

with warnings.catch_warnings():  # generating the node tests' data warns about casts
    warnings.simplefilter("ignore")
    backend_test = onnx.backend.test.BackendTest(onnx_backend, __name__)

REASONS = {name: reason for reason, names in EXPECTED_FAILURES.items() for name in names}
_CHECK = os.environ.get("EMBER_ONNX_CHECK_EXPECTED", "") not in ("", "0")

OnnxBackendNodeModelTest = backend_test.enable_report().test_cases["OnnxBackendNodeModelTest"]
SUITE = {n.removesuffix("_cpu") for n in vars(OnnxBackendNodeModelTest) if n.endswith("_cpu")}
for _name in list(vars(OnnxBackendNodeModelTest)):
    if _name.startswith("test_") and not _name.endswith("_cpu"):
        delattr(OnnxBackendNodeModelTest, _name)        # CUDA variants: always skipped
    elif _name.removesuffix("_cpu") in REASONS:
        _test = getattr(OnnxBackendNodeModelTest, _name)
        _mark = unittest.expectedFailure if _CHECK else \
            unittest.skip(f"expected failure: {REASONS[_name.removesuffix('_cpu')]}")
        setattr(OnnxBackendNodeModelTest, _name, _mark(_test))


def test_expected_failures_name_real_tests():
    stale = sorted(set(REASONS) - SUITE)
    assert not stale, f"expected_failures.py lists tests the suite does not have: {stale}"
    assert all(reason.strip() for reason in EXPECTED_FAILURES)
