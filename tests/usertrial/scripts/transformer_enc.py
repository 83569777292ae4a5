"""nn.TransformerEncoder classifier with padding masks and a causal MultiheadAttention."""
import math

import torch
import torch.nn as nn


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=32):
        super().__init__()
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        return x + self.pe[: x.size(0)]


class Classifier(nn.Module):
    def __init__(self, vocab=16, d_model=8, nhead=2, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = PositionalEncoding(d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=16, dropout=0.0)
        self.encoder = nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False)
        self.attn = nn.MultiheadAttention(d_model, nhead, batch_first=True)
        self.head = nn.Linear(d_model, 2)

    def forward(self, src, pad_mask):
        x = self.pos(self.embed(src).transpose(0, 1) * math.sqrt(8))  # (S, N, E)
        x = self.encoder(x, src_key_padding_mask=pad_mask)
        x = x.permute(1, 0, 2)
        causal = nn.Transformer.generate_square_subsequent_mask(x.size(1))
        y, weights = self.attn(x, x, x, attn_mask=causal)
        keep = (~pad_mask).unsqueeze(-1).float()
        pooled = (y * keep).sum(1) / keep.sum(1)
        return self.head(pooled), weights


src = torch.tensor([[(3 * i + 2 * j) % 15 + 1 for j in range(6)] for i in range(4)])
pad_mask = torch.zeros(4, 6, dtype=torch.bool)
pad_mask[0, 4:] = True
pad_mask[2, 5] = True
labels = torch.tensor([0, 1, 1, 0])
torch.manual_seed(0)
model = sync_weights(Classifier())
opt = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.01)
losses = []
for step in range(5):
    logits, weights = model(src, pad_mask)
    loss = nn.functional.cross_entropy(logits, labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
model.eval()
with torch.no_grad():
    logits, weights = model(src, pad_mask)
    probs = torch.softmax(logits, dim=-1)
RESULT = {"losses": losses, "probs": probs.tolist(), "w_shape": list(weights.shape),
          "w_upper": weights[0, 0, 1:].abs().sum().item()}
