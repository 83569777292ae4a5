"""An inference script: load weights, eval(), inference_mode, softmax/topk/argmax, batched predictions to numpy."""
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(6, 12), nn.BatchNorm1d(12), nn.ReLU(), nn.Dropout(0.3))
        self.head = nn.Linear(12, 4)

    def forward(self, x):
        return self.head(self.features(x))


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
trained = sync_weights(Classifier())
trained.features[1].running_mean.fill_(0.1)
trained.features[1].running_var.fill_(2.0)
path = os.path.join(tempfile.mkdtemp(), "classifier.pt")
torch.save(trained.state_dict(), path)

model = Classifier().to(device)
model.load_state_dict(torch.load(path, map_location=device))
model.eval()
rng = np.random.RandomState(11)
batch = torch.from_numpy(rng.randn(7, 6).astype(np.float32)).to(device)
with torch.inference_mode():
    logits = model(batch)
    probs = F.softmax(logits, dim=-1)
    top_p, top_i = torch.topk(probs, k=2, dim=1)
    preds = probs.argmax(dim=1)
with torch.set_grad_enabled(False):
    again = model(batch)
labels = ["cat", "dog", "bird", "fish"]
RESULT = {"probs": probs.cpu().numpy().round(6).tolist(), "top_i": top_i.tolist(), "top_p": top_p.tolist(),
          "names": [labels[i] for i in preds.tolist()], "same": torch.allclose(logits, again),
          "no_grad": again.requires_grad, "np_dtype": str(probs.cpu().numpy().dtype),
          "rows_sum": probs.sum(dim=1).tolist()}
