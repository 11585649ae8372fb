"""The small policy of the Python examples (a torch.nn.Module), its generation and training
steps, and a digest of its weights. Nothing here knows TensorHub."""
import hashlib

import torch

VOCAB = 64


class Policy(torch.nn.Module):
    """Next-token logits from the current token: embedding, MLP, LayerNorm, output head."""

    def __init__(self, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.embed = torch.nn.Embedding(VOCAB, 64)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))
        self.norm = torch.nn.LayerNorm(64)
        self.head = torch.nn.Linear(64, VOCAB)

    def forward(self, tokens):
        x = self.embed(tokens)
        return self.head(self.norm(x + self.mlp(x)))


@torch.no_grad()
def generate(module, batch=16, length=12, seed=0):
    """Greedy continuations of `batch` random one-token prompts."""
    tokens = torch.randint(VOCAB, (batch, 1), generator=torch.Generator().manual_seed(seed))
    for _ in range(length):
        tokens = torch.cat([tokens, module(tokens[:, -1]).argmax(-1, keepdim=True)], 1)
    return tokens


def train(module, optimizer, samples):
    """One step towards "the next token is this one plus one" on the generated samples."""
    inputs = samples[:, :-1].reshape(-1)
    loss = torch.nn.functional.cross_entropy(module(inputs), (inputs + 1) % VOCAB)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()  # in place: the registered tensors keep their storage
    return float(loss)


def digest(module):
    """SHA-256 of every state-dict tensor's bytes, in order."""
    h = hashlib.sha256()
    for t in module.state_dict().values():
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]
