"""nn.Transformer encoder-decoder (copy task): masks, key padding, greedy decoding under no_grad."""
import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, BOS, V, D = 0, 1, 9, 8


class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.src_emb = nn.Embedding(V, D, padding_idx=PAD)
        self.tgt_emb = nn.Embedding(V, D, padding_idx=PAD)
        self.transformer = nn.Transformer(d_model=D, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                                          dim_feedforward=16, dropout=0.0, batch_first=True)
        self.out = nn.Linear(D, V)

    def forward(self, src, tgt):
        tgt_mask = self.transformer.generate_square_subsequent_mask(tgt.size(1))
        h = self.transformer(self.src_emb(src), self.tgt_emb(tgt), tgt_mask=tgt_mask,
                             src_key_padding_mask=src == PAD, tgt_key_padding_mask=tgt == PAD,
                             memory_key_padding_mask=src == PAD)
        return self.out(h)


src = torch.tensor([[2, 3, 4, 5], [6, 7, 8, PAD], [3, 3, 5, PAD]])
tgt_in = torch.cat([torch.full((3, 1), BOS), src[:, :-1]], dim=1)
torch.manual_seed(0)
model = sync_weights(Seq2Seq())
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
losses = []
for step in range(6):
    logits = model(src, tgt_in)
    loss = F.cross_entropy(logits.reshape(-1, V), src.reshape(-1), ignore_index=PAD)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
model.eval()
with torch.no_grad():
    ys = torch.full((3, 1), BOS, dtype=torch.long)
    for _ in range(4):
        nxt = model(src, ys)[:, -1].argmax(-1, keepdim=True)
        ys = torch.cat([ys, nxt], dim=1)
    q = torch.randn(3, 2, 5, 4, generator=torch.Generator().manual_seed(0))
    sdpa = F.scaled_dot_product_attention(q, q, q, is_causal=True)
RESULT = {"losses": losses, "decoded": ys.tolist(), "sdpa_shape": list(sdpa.shape),
          "sdpa_first": (sdpa[:, :, 0] - q[:, :, 0]).abs().max().item() < 1e-5}
