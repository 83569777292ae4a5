"""Embedding + LSTM / GRU text classifiers, packed-free, clip_grad_norm_, Adam."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class TextClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim, hidden, num_classes, cell="lstm"):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        rnn_cls = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = rnn_cls(embed_dim, hidden, num_layers=2, batch_first=True, bidirectional=(cell == "gru"))
        out_dim = hidden * (2 if cell == "gru" else 1)
        self.fc = nn.Linear(out_dim, num_classes)

    def forward(self, tokens):
        emb = self.embedding(tokens)
        output, hidden = self.rnn(emb)
        if isinstance(hidden, tuple):
            h_n = hidden[0][-1]
        else:
            h_n = torch.cat([hidden[-2], hidden[-1]], dim=1)
        return self.fc(h_n), output


tokens = torch.tensor([[(i * 5 + j * 3) % 19 + 1 for j in range(7)] for i in range(6)])
tokens[:, 5:] = 0
labels = torch.tensor([0, 1, 2, 0, 1, 2])
results = {}
for cell in ["lstm", "gru"]:
    torch.manual_seed(0)
    model = sync_weights(TextClassifier(20, 8, 6, 3, cell))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    losses, norms = [], []
    for step in range(5):
        model.train()
        optimizer.zero_grad()
        logits, output = model(tokens)
        loss = F.cross_entropy(logits, labels)
        loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)
        optimizer.step()
        losses.append(loss.item())
        norms.append(float(norm))
    results[cell] = {"losses": losses, "norms": norms, "out_shape": list(output.shape),
                     "pad_row": model.embedding.weight[0].abs().sum().item()}
    h0 = torch.zeros(2 * (2 if cell == "gru" else 1), 6, 6)
    with torch.no_grad():
        if cell == "lstm":
            out, (h, c) = model.rnn(model.embedding(tokens), (h0, torch.zeros_like(h0)))
        else:
            out, h = model.rnn(model.embedding(tokens), h0)
    results[cell]["h_shape"] = list(h.shape)
RESULT = results
