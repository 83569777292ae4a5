"""Variable-length sequences: pad_sequence, pack_padded_sequence, LSTM, pad_packed_sequence."""
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence
from torch.utils.data import DataLoader, Dataset


class SeqData(Dataset):
    def __init__(self):
        self.seqs = [[(i * 3 + j) % 9 + 1 for j in range(2 + i % 4)] for i in range(12)]
        self.labels = [i % 2 for i in range(12)]

    def __len__(self):
        return len(self.seqs)

    def __getitem__(self, i):
        return torch.tensor(self.seqs[i]), self.labels[i]


def collate(batch):
    seqs, labels = zip(*batch)
    lengths = torch.tensor([len(s) for s in seqs])
    return pad_sequence(seqs, batch_first=True, padding_value=0), lengths, torch.tensor(labels)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 5, padding_idx=0)
        self.lstm = nn.LSTM(5, 7, batch_first=True)
        self.out = nn.Linear(7, 2)

    def forward(self, x, lengths):
        packed = pack_padded_sequence(self.emb(x), lengths.cpu(), batch_first=True, enforce_sorted=False)
        packed_out, (h, c) = self.lstm(packed)
        out, out_lengths = pad_packed_sequence(packed_out, batch_first=True)
        return self.out(h[-1]), out, out_lengths


torch.manual_seed(0)
model = sync_weights(Model())
loader = DataLoader(SeqData(), batch_size=4, collate_fn=collate)
opt = torch.optim.Adam(model.parameters(), lr=0.02)
losses = []
for epoch in range(3):
    for x, lengths, y in loader:
        logits, out, out_lengths = model(x, lengths)
        loss = nn.functional.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
RESULT = {"losses": losses, "out_shape": list(out.shape), "out_lengths": out_lengths.tolist(),
          "pad_zero": out[out_lengths.argmin(), -1].abs().sum().item()}
