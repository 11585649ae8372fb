"""Nonblocking Model.ireplicate / iupdate / iunpublish: Request.wait, test, cancel; waitall."""
import unittest

import tensorhub
from thubtest import needs_numpy, np, words

N = 100000


@needs_numpy
class RequestsTest(unittest.TestCase):
    def setUp(self):
        self.ctx = tensorhub.Context(timeout_ms=60000)
        self.addCleanup(self.ctx.close)
        self.src = np.zeros(N, dtype=np.uint32)
        self.trainer = self.ctx.open("requests", "trainer")
        self.trainer.register("w", self.src)
        self.publish(1)

    def publish(self, version):
        self.src[:] = words(version, 0, N)
        self.trainer.publish(version)

    def reader(self, replica):
        dst = np.zeros(N, dtype=np.uint32)
        m = self.ctx.open("requests", replica)
        m.register("w", dst)
        return m, dst

    def test_ireplicate_iupdate_iunpublish(self):
        m, dst = self.reader("r0")
        req = m.ireplicate()
        self.assertEqual(req.kind, "replicate")
        self.assertEqual(req.wait(), 1)
        self.assertTrue(req.done)
        self.assertTrue(req.test())  # finished: test and wait give the same answer again
        self.assertEqual(req.wait(), 1)
        np.testing.assert_array_equal(dst, words(1, 0, N))

        self.assertIsNone(m.iupdate().wait())  # nothing newer
        req = self.trainer.iunpublish()
        self.assertIsNone(req.wait())
        self.publish(2)
        req = m.iupdate(tensorhub.LATEST)
        while not req.test():
            pass
        self.assertEqual(req.wait(), 2)
        np.testing.assert_array_equal(dst, words(2, 0, N))
        self.assertEqual(m.stat("held_version"), 2)

    def test_one_operation_per_model(self):
        m, _ = self.reader("r0")
        req = m.ireplicate()
        with self.assertRaises(tensorhub.TensorHubError) as e:
            m.iupdate()
        self.assertEqual(e.exception.code, tensorhub.ERR_STATE)
        self.assertEqual(req.wait(), 1)

    def test_failure_comes_with_the_completion(self):
        m = self.ctx.open("never-published", "r0")
        m.register("w", np.zeros(4, dtype=np.uint32))
        req = m.ireplicate(3)
        with self.assertRaises(tensorhub.TensorHubError) as e:
            req.wait()
        self.assertEqual(e.exception.code, tensorhub.ERR_NOT_FOUND)
        with self.assertRaises(tensorhub.TensorHubError):
            req.test()  # the same outcome again

    def test_waitall(self):
        readers = [self.reader("r%d" % i) for i in range(3)]
        reqs = [m.ireplicate() for m, _ in readers]
        self.assertEqual(tensorhub.waitall(reqs), [1, 1, 1])
        for _, dst in readers:
            np.testing.assert_array_equal(dst, words(1, 0, N))
        self.assertTrue(all(r.done for r in reqs))
        self.assertEqual(tensorhub.waitall(reqs), [1, 1, 1])  # finished ones keep their result

    def test_waitall_raises_the_first_failure(self):
        m, _ = self.reader("r0")
        bad = self.ctx.open("never-published", "r1")
        bad.register("w", np.zeros(4, dtype=np.uint32))
        reqs = [m.ireplicate(), bad.ireplicate(9)]
        with self.assertRaises(tensorhub.TensorHubError) as e:
            tensorhub.waitall(reqs)
        self.assertEqual(e.exception.code, tensorhub.ERR_NOT_FOUND)
        self.assertEqual(reqs[0].wait(), 1)  # the other one completed

    def test_cancel(self):
        m, dst = self.reader("r0")
        req = m.ireplicate()
        req.cancel()
        try:
            self.assertEqual(req.wait(), 1)  # too late to cancel: it replicated
            np.testing.assert_array_equal(dst, words(1, 0, N))
        except tensorhub.TensorHubError as e:
            self.assertEqual(e.code, tensorhub.ERR_CANCELED)
            self.assertEqual(m.stat("held_version"), -1)


if __name__ == "__main__":
    unittest.main()
