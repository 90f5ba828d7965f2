"""ONNX's backend node-test suite (every op's reference cases) run through ember's Backend.

Only the node tests run: the suite's "real" model tests download models from the internet.
onnx's reference evaluator, which wrote the suite's expected outputs, is made to raise while
the tests run, so a test passes only on what ember computes itself.

Tests listed in expected_failures.py run as strict expected failures: a listed test that
passes fails the run (delete it from the list), so the list stays true.
"""

from __future__ import annotations

import unittest
import warnings

import onnx.backend.test
import pytest

from ember import onnx_backend
from tests.benchmark_modules import load_benchmark

from .expected_failures import EXPECTED_FAILURES

conformance = load_benchmark("onnx_conformance")

with warnings.catch_warnings():  # generating the node tests' data warns about casts
    warnings.simplefilter("ignore")
    backend_test = onnx.backend.test.BackendTest(onnx_backend, __name__)

REASONS = {name: reason for reason, names in EXPECTED_FAILURES.items() for name in names}

OnnxBackendNodeModelTest = backend_test.enable_report().test_cases["OnnxBackendNodeModelTest"]
SUITE = {n.removesuffix("_cpu") for n in vars(OnnxBackendNodeModelTest) if n.endswith("_cpu")}
for _name in list(vars(OnnxBackendNodeModelTest)):
    if _name.startswith("test_") and not _name.endswith("_cpu"):
        delattr(OnnxBackendNodeModelTest, _name)        # CUDA variants: always skipped
    elif _name.removesuffix("_cpu") in REASONS:
        # unittest's expectedFailure: pytest fails the run on an unexpected success
        setattr(OnnxBackendNodeModelTest, _name,
                unittest.expectedFailure(getattr(OnnxBackendNodeModelTest, _name)))


@pytest.fixture(autouse=True, scope="module")
def _no_onnx_reference():
    with conformance.onnx_reference_blocked():
        yield


def test_expected_failures_name_real_tests():
    stale = sorted(set(REASONS) - SUITE)
    assert not stale, f"expected_failures.py lists tests the suite does not have: {stale}"
    assert all(reason.strip() for reason in EXPECTED_FAILURES)


def test_no_wrong_numbers_among_expected_failures():
    # a test giving wrong numbers is a bug to fix, not an expected failure
    wrong = [reason for reason in EXPECTED_FAILURES if "wrong results" in reason]
    assert not wrong, f"expected_failures.py lists wrong results: {wrong}"


def test_reference_is_blocked_in_the_suite():
    import onnx.reference

    with pytest.raises(conformance.ReferenceBlocked, match="onnx.reference is blocked"):
        onnx.reference.ReferenceEvaluator(onnx.ModelProto())
