"""torch tensors and torch.nn.Module weights (register_module), updated in place."""
import unittest

import tensorhub
from thubtest import optional

torch = optional("torch")
needs_torch = unittest.skipIf(torch is None, "torch is not importable by this python (apt install python3-torch)")

if torch is not None:
    class Policy(torch.nn.Module):
        """Parameters, a tied weight and buffers (BatchNorm's float running stats and int64 count)."""

        def __init__(self, seed):
            super().__init__()
            torch.manual_seed(seed)
            self.embed = torch.nn.Embedding(50, 16)
            self.body = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.BatchNorm1d(32), torch.nn.Tanh())
            self.head = torch.nn.Linear(32, 50, bias=True)
            self.out = torch.nn.Linear(16, 50, bias=False)
            self.out.weight = self.embed.weight  # tied: one tensor, two state-dict names

        def forward(self, tokens):
            return self.head(self.body(self.embed(tokens))) + self.out(self.embed(tokens))


def train_step(module):
    opt = torch.optim.SGD(module.parameters(), lr=0.1)
    module.train()
    loss = module(torch.arange(50) % 50).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()  # in place, as every optimizer


@needs_torch
class TorchTest(unittest.TestCase):
    def setUp(self):
        self.ctx = tensorhub.Context(timeout_ms=60000)
        self.addCleanup(self.ctx.close)

    def test_tensors(self):
        src = {"w": torch.randn(1000, 64), "ids": torch.arange(100, dtype=torch.int64),
               "mask": torch.rand(33) > 0.5, "p": torch.nn.Parameter(torch.randn(7, 7))}
        dst = {name: torch.zeros_like(t).detach() for name, t in src.items()}
        trainer, rollout = self.ctx.open("t", "trainer"), self.ctx.open("t", "rollout")
        for name in src:
            trainer.register(name, src[name])
            rollout.register(name, dst[name])
        trainer.publish(3)
        self.assertEqual(rollout.replicate(), 3)
        for name in src:
            self.assertTrue(torch.equal(dst[name], src[name].detach()), name)

    def test_refusals(self):
        m = self.ctx.open("t", "refused")
        with self.assertRaises(ValueError) as e:
            m.register("w", torch.zeros(8, 4).t())
        self.assertIn("contiguous", str(e.exception))
        with self.assertRaises(TypeError):
            m.register("s", torch.zeros(4, 4).to_sparse())

    def test_module_takes_new_weights_in_place(self):
        trainer_module, rollout_module = Policy(seed=1), Policy(seed=2)
        rollout_module.eval()
        trainer = self.ctx.open("policy", "trainer")
        rollout = self.ctx.open("policy", "rollout-0")
        names = trainer.register_module(trainer_module)
        self.assertEqual(tensorhub.register_module(rollout, rollout_module), names)
        state_names = list(trainer_module.state_dict())
        self.assertEqual(names, [n for n in state_names if n != "out.weight"])  # the tie, once
        self.assertIn("body.1.num_batches_tracked", names)
        self.assertEqual(list(rollout.tensors), names)

        storage = {n: t.data_ptr() for n, t in rollout_module.state_dict(keep_vars=True).items()}
        tokens = torch.arange(20) % 50
        for version in (1, 2, 3):
            train_step(trainer_module)
            trainer.publish(version)
            got = rollout.replicate() if version == 1 else rollout.update()
            self.assertEqual(got, version)
            self.assertIsNone(rollout.update())  # nothing newer
            expected = trainer_module.state_dict()
            for n, t in rollout_module.state_dict(keep_vars=True).items():
                self.assertEqual(t.data_ptr(), storage[n], "%s moved" % n)  # the same storage
                self.assertTrue(torch.equal(t.detach(), expected[n]), "%s at version %d" % (n, version))
            trainer_module.eval()
            with torch.no_grad():
                self.assertTrue(torch.equal(rollout_module(tokens), trainer_module(tokens)))
            self.assertIs(rollout_module.out.weight, rollout_module.embed.weight)
            trainer.unpublish()
        self.assertEqual(int(rollout_module.body[1].num_batches_tracked), 3)

    @unittest.skipIf(torch is None or not torch.cuda.is_available(), "no CUDA device for torch")
    def test_cuda_tensors(self):
        src = torch.randn(1 << 20, device="cuda")
        dst = torch.zeros_like(src)
        trainer, rollout = self.ctx.open("cuda", "trainer"), self.ctx.open("cuda", "rollout")
        trainer.register("w", src)
        rollout.register("w", dst)
        src.mul_(3)  # queued on the stream: publish synchronizes it first
        trainer.publish(1)
        self.assertEqual(rollout.replicate(), 1)
        self.assertTrue(torch.equal(dst, src))


if __name__ == "__main__":
    unittest.main()
