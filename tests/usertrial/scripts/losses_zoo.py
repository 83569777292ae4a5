"""Every common loss against torch on the same inputs, forward and gradient."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.RandomState(5)
logits = torch.tensor(rng.randn(6, 4), dtype=torch.float32, requires_grad=True)
target = torch.tensor([0, 3, 1, 1, 2, -100])
probs_t = torch.softmax(torch.tensor(rng.randn(6, 4), dtype=torch.float32), dim=1)
reg = torch.tensor(rng.randn(6, 3), dtype=torch.float32, requires_grad=True)
reg_t = torch.tensor(rng.randn(6, 3), dtype=torch.float32)
bin_t = torch.tensor(rng.rand(6, 3) > 0.5).float()
a, b, c = (torch.tensor(rng.randn(6, 5), dtype=torch.float32) for _ in range(3))
sign = torch.tensor([1, -1, 1, -1, 1, 1], dtype=torch.float32)
losses = {
    "ce": nn.CrossEntropyLoss()(logits, target),
    "ce_w_ls": nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 0.5, 1.0]), label_smoothing=0.2)(logits, target),
    "ce_probs": F.cross_entropy(logits, probs_t),
    "ce_sum": F.cross_entropy(logits, target.clamp(min=0), reduction="sum", ignore_index=1),
    "nll": nn.NLLLoss()(F.log_softmax(logits, dim=1), target.clamp(min=0)),
    "mse": nn.MSELoss()(reg, reg_t),
    "l1": nn.L1Loss(reduction="sum")(reg, reg_t),
    "smoothl1": nn.SmoothL1Loss(beta=0.3)(reg, reg_t),
    "huber": nn.HuberLoss(delta=0.7)(reg, reg_t),
    "bce": nn.BCELoss()(torch.sigmoid(reg), bin_t),
    "bcel": nn.BCEWithLogitsLoss(pos_weight=torch.tensor([1.0, 3.0, 0.5]))(reg, bin_t),
    "kl": nn.KLDivLoss(reduction="batchmean")(F.log_softmax(logits, 1), probs_t),
    "cos_emb": nn.CosineEmbeddingLoss(margin=0.1)(a, b, sign),
    "margin": nn.MarginRankingLoss(margin=0.2)(a[:, 0], b[:, 0], sign),
    "triplet": nn.TripletMarginLoss(margin=1.0)(a, b, c),
    "hinge": nn.HingeEmbeddingLoss()(a[:, 0].abs(), sign),
    "soft_margin": nn.SoftMarginLoss()(reg[:, 0], sign),
    "multilabel": nn.MultiLabelSoftMarginLoss()(reg, bin_t),
    "poisson": nn.PoissonNLLLoss()(reg, reg_t.abs()),
    "gauss": nn.GaussianNLLLoss()(reg, reg_t, torch.ones(6, 3) * 0.5),
    "multi_margin": nn.MultiMarginLoss()(logits, target.clamp(min=0)),
    "cos_sim": F.cosine_similarity(a, b).mean(),
    "pdist": F.pairwise_distance(a, b).mean(),
}
total = sum(losses.values())
total.backward()
RESULT = {"values": {k: v.item() for k, v in losses.items()}, "grad_logits": logits.grad.tolist(),
          "grad_reg": reg.grad.tolist()}
