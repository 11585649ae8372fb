"""Shared helpers of the Python tests: optional modules and the tensors' expected values."""
import importlib
import unittest


def optional(module):
    """The module, or None where it cannot be imported."""
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


np = optional("numpy")  # torch is imported by test_torch only: it takes seconds to import

needs_numpy = unittest.skipIf(np is None, "numpy is not importable by this python (apt install python3-numpy)")


def words(version, tensor, count):
    """The uint32 words tensor `tensor` holds at `version` (every word differs by version)."""
    i = np.arange(count, dtype=np.uint64)
    return ((np.uint64(version) * np.uint64(1000003) + np.uint64(tensor) * np.uint64(7919)
             + i * np.uint64(31)) % np.uint64(4294967291)).astype(np.uint32)
