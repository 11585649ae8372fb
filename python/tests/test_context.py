"""tensorhub.Context and Context.open: info keys as keyword arguments, errors, closing."""
import re
import unittest

import tensorhub


class ContextTest(unittest.TestCase):
    def test_embedded_registry_and_a_second_context_on_it(self):
        with tensorhub.Context() as host:
            addr = host.registry_address
            self.assertRegex(addr, r"^[^:\s]+:\d+$")
            with tensorhub.Context(registry=addr) as client:
                self.assertEqual(client.registry_address, addr)
            self.assertTrue(client.closed)
            with tensorhub.Context(registry=[addr, "127.0.0.1:1"]) as client:  # with a backup
                self.assertEqual(client.registry_address, addr)
        self.assertTrue(host.closed)

    def test_info_values_are_converted(self):
        # bool -> "true"/"false", int -> str; None leaves a key unset.
        with tensorhub.Context(verify=True, timeout_ms=60000, auth_mutual=False, datacenter="dc1",
                               tls=None) as ctx:
            self.assertFalse(ctx.closed)
        with self.assertRaises(TypeError):
            tensorhub.Context(timeout_ms=1.5)

    def test_unknown_info_key_names_the_nearest(self):
        with self.assertRaises(tensorhub.TensorHubError) as e:
            tensorhub.Context(timeout_msec=10)
        self.assertEqual(e.exception.code, tensorhub.ERR_ARG)
        self.assertIs(type(e.exception.code), tensorhub.Status)
        self.assertIn("'timeout_msec'", e.exception.detail)
        self.assertIn("did you mean 'timeout_ms'", e.exception.detail)
        self.assertIn(e.exception.detail, str(e.exception))
        self.assertEqual(e.exception.function, "THUB_Init")

    def test_bad_info_value(self):
        with self.assertRaises(tensorhub.TensorHubError) as e:
            tensorhub.Context(chunk_size="a lot")
        self.assertEqual(e.exception.code, tensorhub.ERR_ARG)
        self.assertIn("chunk_size", e.exception.detail)

    def test_unreachable_registry(self):
        with self.assertRaises(tensorhub.TensorHubError) as e:
            tensorhub.Context(registry="127.0.0.1:1", reconnect_ms=0)
        self.assertEqual(e.exception.code, tensorhub.ERR_REGISTRY)
        self.assertIn("127.0.0.1:1", e.exception.detail)

    def test_open_info_keys(self):
        with tensorhub.Context() as ctx:
            with ctx.open("policy", "r0", retain=2, spot=False) as m:
                self.assertEqual((m.name, m.replica, m.shard, m.num_shards), ("policy", "r0", 0, 1))
            self.assertTrue(m.closed)
            with self.assertRaises(tensorhub.TensorHubError) as e:
                ctx.open("policy", "r1", retian=2)
            self.assertEqual(e.exception.code, tensorhub.ERR_ARG)
            self.assertIn("did you mean 'retain'", e.exception.detail)
            with self.assertRaises(tensorhub.TensorHubError) as e:
                ctx.open("policy", "r2", shard=2, num_shards=2)
            self.assertEqual(e.exception.code, tensorhub.ERR_ARG)
            with self.assertRaises(tensorhub.TensorHubError) as e:
                ctx.open("", "r3")
            self.assertEqual(e.exception.code, tensorhub.ERR_ARG)

    def test_use_after_close(self):
        ctx = tensorhub.Context()
        m = ctx.open("policy", "r0")
        m.close()
        m.close()  # twice: nothing
        for call in (lambda: m.publish(1), lambda: m.replicate(), lambda: m.update(), m.unpublish,
                     m.stat, m.ireplicate, lambda: m.register("w", bytearray(8))):
            with self.assertRaises(tensorhub.TensorHubError) as e:
                call()
            self.assertEqual(e.exception.code, tensorhub.ERR_ARG)
            self.assertIn("closed", e.exception.detail)
        m2 = ctx.open("policy", "r1")
        ctx.close()
        ctx.close()
        self.assertTrue(m2.closed)  # closing the context closed its models
        for call in (lambda: ctx.registry_address, lambda: ctx.open("policy", "r2"), lambda: m2.stat()):
            with self.assertRaises(tensorhub.TensorHubError) as e:
                call()
            self.assertEqual(e.exception.code, tensorhub.ERR_ARG)

    def test_library_state_errors_carry_the_detail(self):
        with tensorhub.Context() as ctx, ctx.open("policy", "r0") as m:
            with self.assertRaises(tensorhub.TensorHubError) as e:
                m.publish(1)  # nothing registered
            self.assertEqual(e.exception.code, tensorhub.ERR_STATE)
            self.assertTrue(e.exception.detail)
            self.assertEqual(e.exception.detail, ctx.last_error())
            with self.assertRaises(tensorhub.TensorHubError) as e:
                m.unpublish()  # nothing published
            self.assertEqual(e.exception.code, tensorhub.ERR_STATE)
            self.assertTrue(re.match(r"THUB_Unpublish: THUB_ERR_STATE: ", str(e.exception)), str(e.exception))


if __name__ == "__main__":
    unittest.main()
