"""Model.register: the tensor protocols, in place and without copies, and the refusals."""
import array
import gc
import unittest
import weakref

import tensorhub
from thubtest import needs_numpy, np, words

N = 2048


class ArrayInterfaceOnly:
    """Memory offered only through __array_interface__ (as a foreign array library would)."""

    def __init__(self, a):
        self._a = a
        self.__array_interface__ = a.__array_interface__


class DlpackOnly:
    """Memory offered only through DLPack."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, stream=None):
        return self._a.__dlpack__()

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


class CudaArrayInterface:
    """A __cuda_array_interface__ whose pointer is host memory: for checking the memory type."""

    def __init__(self, a):
        self._a = a
        self.__cuda_array_interface__ = dict(a.__array_interface__, version=3)


@needs_numpy
class TensorsTest(unittest.TestCase):
    def setUp(self):
        self.ctx = tensorhub.Context(timeout_ms=60000)
        self.addCleanup(self.ctx.close)
        self.src = np.zeros(N, dtype=np.uint32)
        self.trainer = self.ctx.open("tensors", "trainer")
        self.trainer.register("w", self.src)
        self.src[:] = words(5, 0, N)
        self.trainer.publish(5)

    def replicate_into(self, replica, tensor):
        with self.ctx.open("tensors", replica) as m:
            m.register("w", tensor)
            self.assertIs(m.tensors["w"], tensor)
            self.assertEqual(m.replicate(), 5)

    def test_numpy_in_place(self):
        dst = np.zeros((32, N // 32), dtype=np.uint32)  # any shape: the bytes count
        self.replicate_into("numpy", dst)
        np.testing.assert_array_equal(dst.reshape(-1), words(5, 0, N))

    def test_array_interface_object(self):
        dst = np.zeros(N, dtype=np.uint32)
        self.replicate_into("array-interface", ArrayInterfaceOnly(dst))
        np.testing.assert_array_equal(dst, words(5, 0, N))

    def test_dlpack_object(self):
        dst = np.zeros(N, dtype=np.uint32)
        self.replicate_into("dlpack", DlpackOnly(dst))
        np.testing.assert_array_equal(dst, words(5, 0, N))

    def test_buffer_protocol(self):
        for i, dst in enumerate([bytearray(4 * N), array.array("I", bytes(4 * N)), memoryview(bytearray(4 * N))]):
            self.replicate_into("buffer-%d" % i, dst)
            np.testing.assert_array_equal(np.frombuffer(dst, dtype=np.uint32), words(5, 0, N))

    def test_a_view_is_registered_in_place(self):
        base = np.zeros(2 * N, dtype=np.uint32)
        self.replicate_into("view", base[N:])  # a contiguous slice: the base's memory
        np.testing.assert_array_equal(base[N:], words(5, 0, N))
        self.assertFalse(base[:N].any())

    def test_registered_objects_are_kept_alive(self):
        m = self.ctx.open("tensors", "kept")
        m.register("w", np.zeros(N, dtype=np.uint32))
        ref = weakref.ref(m.tensors["w"])
        gc.collect()
        self.assertIsNotNone(ref())
        self.assertEqual(m.replicate(), 5)
        np.testing.assert_array_equal(ref(), words(5, 0, N))
        m.close()
        gc.collect()
        self.assertIsNone(ref())

    def test_refusals(self):
        m = self.ctx.open("tensors", "refused")
        cases = [
            (np.zeros(2 * N, dtype=np.uint32)[::2], ValueError, "C-contiguous"),
            (np.zeros((64, 32), dtype=np.uint32, order="F"), ValueError, "C-contiguous"),
            (np.frombuffer(bytes(4 * N), dtype=np.uint32), ValueError, "read-only"),
            (bytes(4 * N), ValueError, "read-only"),
            (memoryview(bytearray(4 * N))[::2], ValueError, "C-contiguous"),
            ("a string", TypeError, "not a tensor"),
            (12, TypeError, "not a tensor"),
        ]
        for obj, error, text in cases:
            with self.assertRaises(error, msg=repr(type(obj))) as e:
                m.register("w", obj)
            self.assertIn(text, str(e.exception))
        self.assertEqual(m.tensors, {})
        m.register("w", np.zeros(N, dtype=np.uint32))
        with self.assertRaises(tensorhub.TensorHubError) as e:
            m.register("w", np.zeros(N, dtype=np.uint32))
        self.assertEqual(e.exception.code, tensorhub.ERR_ARG)

    def test_cuda_array_interface_is_cuda_memory(self):
        m = self.ctx.open("tensors", "cuda")
        try:
            m.register("w", CudaArrayInterface(np.zeros(N, dtype=np.uint32)))
        except tensorhub.TensorHubError as e:
            # THUB_MEM_CUDA reached the library, which has no usable CUDA device here.
            self.assertEqual(e.code, tensorhub.ERR_UNSUPPORTED, str(e))
            self.assertIn("CUDA", e.detail)
        else:
            self.skipTest("a CUDA device is usable here: host memory passed as CUDA is not refused")


if __name__ == "__main__":
    unittest.main()
