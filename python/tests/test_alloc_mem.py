"""Context.alloc_mem: THUB_Alloc_mem memory as a buffer that numpy and torch make tensors of;
freed when unreferenced; the context refuses to close while it is referenced."""
import ctypes
import gc
import unittest

import tensorhub
from tensorhub import _lib
from thubtest import needs_numpy, np, words

N = 1 << 18


@needs_numpy
class AllocMemTest(unittest.TestCase):
    def test_tensors_in_alloc_mem(self):
        ctx = tensorhub.Context(timeout_ms=60000)
        src_mem, dst_mem = ctx.alloc_mem(4 * N), ctx.alloc_mem(4 * N + 64)
        self.assertEqual(ctypes.addressof(src_mem) % 4096, 0)  # page-aligned
        src = np.frombuffer(src_mem, dtype=np.uint32)
        dst = np.frombuffer(dst_mem, dtype=np.uint32, count=N, offset=64)  # anywhere inside it
        src[:] = words(3, 0, N)
        trainer, rollout = ctx.open("mem", "trainer"), ctx.open("mem", "rollout")
        trainer.register("w", src)
        rollout.register("w", dst)
        trainer.publish(3)
        self.assertEqual(rollout.replicate(), 3)
        np.testing.assert_array_equal(dst, words(3, 0, N))
        trainer.close()
        rollout.close()

        with self.assertRaises(tensorhub.TensorHubError) as e:
            ctx.close()  # src and dst still use the memory
        self.assertEqual(e.exception.code, tensorhub.ERR_STATE)
        self.assertFalse(ctx.closed)

        base = ctypes.addressof(dst_mem)
        del dst, dst_mem
        gc.collect()
        # freed already: a second THUB_Free_mem of the address is refused
        self.assertEqual(_lib.lib.THUB_Free_mem(ctx._handle, base), tensorhub.ERR_ARG)
        del src, src_mem
        ctx.close()
        self.assertTrue(ctx.closed)

    def test_bad_size(self):
        with tensorhub.Context() as ctx:
            with self.assertRaises(tensorhub.TensorHubError) as e:
                ctx.alloc_mem(0)
            self.assertEqual(e.exception.code, tensorhub.ERR_ARG)


if __name__ == "__main__":
    unittest.main()
