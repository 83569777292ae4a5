"""The lr schedulers a training script uses, stepped as torch's docs step them."""
import torch
import torch.nn as nn
from torch.optim import lr_scheduler


def run(make_sched, steps=8, metric=None, opt_cls=torch.optim.SGD, **opt_kw):
    param = nn.Parameter(torch.ones(2))
    opt = opt_cls([param], lr=0.1, **opt_kw)
    sched = make_sched(opt)
    lrs = []
    for step in range(steps):
        opt.zero_grad()
        (param ** 2).sum().backward()
        opt.step()
        if metric is not None:
            sched.step(metric[step])
        else:
            sched.step()
        lrs.append(round(opt.param_groups[0]["lr"], 10))
    return lrs


plateau = [1.0, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.8]
RESULT = {
    "step": run(lambda o: lr_scheduler.StepLR(o, step_size=3, gamma=0.1)),
    "multistep": run(lambda o: lr_scheduler.MultiStepLR(o, milestones=[2, 5], gamma=0.5)),
    "exp": run(lambda o: lr_scheduler.ExponentialLR(o, gamma=0.9)),
    "cosine": run(lambda o: lr_scheduler.CosineAnnealingLR(o, T_max=5, eta_min=0.001)),
    "warm": run(lambda o: lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2)),
    "lambda": run(lambda o: lr_scheduler.LambdaLR(o, lr_lambda=lambda epoch: 0.95 ** epoch)),
    "onecycle": run(lambda o: lr_scheduler.OneCycleLR(o, max_lr=0.5, total_steps=8), momentum=0.9),
    "linear": run(lambda o: lr_scheduler.LinearLR(o, start_factor=0.25, total_iters=4)),
    "seq": run(lambda o: lr_scheduler.SequentialLR(o, [lr_scheduler.LinearLR(o, 0.1, total_iters=3),
                                                     lr_scheduler.ExponentialLR(o, 0.8)], milestones=[3])),
    "plateau": run(lambda o: lr_scheduler.ReduceLROnPlateau(o, mode="min", factor=0.5, patience=1), metric=plateau),
    "cyclic": run(lambda o: lr_scheduler.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=2), momentum=0.9),
    "poly": run(lambda o: lr_scheduler.PolynomialLR(o, total_iters=6, power=2.0)),
    "adam_onecycle": run(lambda o: lr_scheduler.OneCycleLR(o, max_lr=0.01, steps_per_epoch=4, epochs=2),
                         opt_cls=torch.optim.Adam),
}
sched_sd = lr_scheduler.StepLR(torch.optim.SGD([nn.Parameter(torch.ones(1))], lr=1.0), 2).state_dict()
RESULT["sd_keys"] = sorted(k for k in sched_sd if k in ("base_lrs", "last_epoch", "_step_count", "_last_lr", "step_size", "gamma"))
