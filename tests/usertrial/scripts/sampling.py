"""Char-level bigram model: train, then sample with topk/softmax/multinomial under no_grad."""
import torch
import torch.nn as nn
import torch.nn.functional as F

text = "hello world, hello ember, hello torch. "
chars = sorted(set(text))
stoi = {c: i for i, c in enumerate(chars)}
itos = {i: c for c, i in stoi.items()}
data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
vocab = len(chars)


class Bigram(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = nn.Embedding(vocab, vocab)

    def forward(self, idx, targets=None):
        logits = self.table(idx)
        loss = None
        if targets is not None:
            B, T, C = logits.shape
            loss = F.cross_entropy(logits.view(B * T, C), targets.view(B * T))
        return logits, loss

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, generator=None):
        for _ in range(max_new_tokens):
            logits, _ = self(idx)
            logits = logits[:, -1, :]
            v, _ = torch.topk(logits, 3)
            logits[logits < v[:, [-1]]] = -float("Inf")
            probs = F.softmax(logits, dim=-1)
            idx_next = torch.multinomial(probs, num_samples=1, generator=generator)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx


torch.manual_seed(1337)
model = sync_weights(Bigram())
optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
xs = torch.stack([data[i:i + 8] for i in range(0, 24, 4)])
ys = torch.stack([data[i + 1:i + 9] for i in range(0, 24, 4)])
losses = []
for step in range(8):
    logits, loss = model(xs, ys)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    losses.append(loss.item())

g = torch.Generator().manual_seed(42)
start = torch.zeros((2, 1), dtype=torch.long)
out = model.generate(start, max_new_tokens=10, generator=g)
samples = ["".join(itos[i] for i in row) for row in out.tolist()]
print(samples)
top_vals, top_idx = torch.topk(model.table.weight[stoi["h"]], k=2)
RESULT = {"losses": losses, "out_shape": list(out.shape), "in_vocab": bool((out < vocab).all()),
          "top_idx": top_idx.tolist(), "len": [len(s) for s in samples]}
