"""An unmodified PyTorch-style training script (imports torch): run through `python -m tinytorch.compat`."""
import argparse
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--amp", action="store_true")
args = parser.parse_args()

assert torch.__name__ == "tinytorch", torch.__name__
assert nn is torch.nn and F is torch.nn.functional
import sys
assert sys.modules["torch.nn"] is torch.nn

torch.manual_seed(0)
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
torch.set_float32_matmul_precision("high")
ddp = int(os.environ.get("RANK", -1)) != -1
if ddp:
    dist.init_process_group(backend="gloo")
rank = dist.get_rank() if ddp else 0

model = nn.Sequential(nn.Linear(4, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 3))
model = torch.compile(model)
if ddp:
    model = DDP(model)
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
sched = StepLR(opt, step_size=2, gamma=0.5)
scaler = torch.amp.GradScaler("cpu", enabled=args.amp)
x = torch.randn(32, 4)
y = (x.sum(1) > 0).long() + (x[:, 0] > 1).long()
ds = TensorDataset(x, y)
loader = DataLoader(ds, batch_size=8, sampler=DistributedSampler(ds) if ddp else None)
ctx = torch.autocast("cpu", dtype=torch.bfloat16) if args.amp else torch.autocast("cpu", enabled=False)
losses = []
for step in range(args.steps):
    for xb, yb in loader:
        with ctx:
            logits = model(xb)
            loss = F.cross_entropy(logits, yb)
        assert loss.dtype == torch.float32
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    sched.step()
    losses.append(loss.item())
if ddp:
    dist.barrier()
    dist.destroy_process_group()
print(f"rank {rank} losses {' '.join(f'{v:.4f}' for v in losses)}")
assert losses[-1] < losses[0], losses
print(f"COMPAT_OK {rank}")  # one write: the two workers share the pipe, unbuffered (-u)
