"""A PyTorch training script, unchanged except for `import tinytorch as torch`, must train: the loss falls,
a checkpoint saved mid-run restores exactly, and with real PyTorch the same script reaches a similar loss."""
import json
import subprocess
import sys

import pytest

SCRIPT = r'''
import copy
import json
import sys

import numpy as np
import {lib} as torch
import {lib}.nn as nn
from {lib}.utils.data import DataLoader, TensorDataset

ckpt_path = sys.argv[1]
torch.set_num_threads(1)  # small matrices: threads only add overhead
torch.manual_seed(0)
rng = np.random.default_rng(0)
X = rng.standard_normal((512, 10)).astype(np.float32)
W = rng.standard_normal((10, 3)).astype(np.float32)
y = (X @ W + 0.3 * rng.standard_normal((512, 3)).astype(np.float32)).argmax(1).astype(np.int64)
Xt, yt = torch.from_numpy(X), torch.from_numpy(y)

g = torch.Generator()
g.manual_seed(0)
loader = DataLoader(TensorDataset(Xt, yt), batch_size=32, shuffle=True, generator=g, drop_last=True)


def make_model():
    return nn.Sequential(nn.Linear(10, 64), nn.GELU(), nn.Dropout(0.1), nn.Linear(64, 64), nn.ReLU(),
                         nn.LayerNorm(64), nn.Linear(64, 3))


def make_optim(model, steps):
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    warmup = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=10)
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps - 10, eta_min=1e-4)
    return opt, torch.optim.lr_scheduler.SequentialLR(opt, [warmup, cosine], milestones=[10])


def evaluate(model, loss_fn):
    model.eval()
    with torch.no_grad():
        logits = model(Xt)
        loss = loss_fn(logits, yt).item()
        acc = (logits.argmax(dim=1) == yt).float().mean().item()
    model.train()
    return loss, acc


epochs = 8
steps = epochs * len(loader)
model = make_model()
opt, sched = make_optim(model, steps)
loss_fn = nn.CrossEntropyLoss(label_smoothing=0.05)
initial_loss, _ = evaluate(model, loss_fn)
norms = []
snapshot = None
for epoch in range(epochs):
    for xb, yb in loader:
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)))
        opt.step()
        sched.step()
    if epoch == 3:
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                    "epoch": epoch}, ckpt_path)
        snapshot = copy.deepcopy(model.state_dict())
final_loss, final_acc = evaluate(model, loss_fn)

# Resume from the checkpoint into fresh objects: state must match the snapshot exactly.
ck = torch.load(ckpt_path, map_location="cpu", weights_only=True)
model2 = make_model()
opt2, sched2 = make_optim(model2, steps)
model2.load_state_dict(ck["model"])
opt2.load_state_dict(ck["optimizer"])
sched2.load_state_dict(ck["scheduler"])
restored = max(float((model2.state_dict()[k] - v).abs().max()) for k, v in snapshot.items())
for xb, yb in loader:
    opt2.zero_grad()
    loss_fn(model2(xb), yb).backward()
    opt2.step()
    sched2.step()
resumed_loss, _ = evaluate(model2, loss_fn)
print(json.dumps({"initial": initial_loss, "final": final_loss, "acc": final_acc, "restored_diff": restored,
                  "resumed": resumed_loss, "lr": sched.get_last_lr()[0], "resume_epoch": ck["epoch"],
                  "clipped": sum(n > 1.0 for n in norms), "steps": len(norms)}))
'''


def _run(lib: str, tmp_path) -> dict:
    script = tmp_path / f"train_{lib}.py"
    script.write_text(SCRIPT.replace("{lib}", lib))
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / f"{lib}.ckpt")], capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def ours(tmp_path_factory) -> dict:
    return _run("tinytorch", tmp_path_factory.mktemp("tinytorch"))


def test_training_script_loss_falls_and_checkpoint_resumes(ours):
    r = ours
    assert r["steps"] == 8 * 16
    assert r["final"] < 0.5 * r["initial"], r
    assert r["acc"] > 0.85, r
    assert r["restored_diff"] == 0.0
    assert r["resume_epoch"] == 3
    assert r["resumed"] < r["initial"], r
    assert r["lr"] == pytest.approx(1e-4, rel=1e-6)  # the cosine phase ended at eta_min


def test_same_script_with_torch_reaches_similar_loss(ours, tmp_path):
    pytest.importorskip("torch")
    theirs = _run("torch", tmp_path)
    assert theirs["final"] < 0.5 * theirs["initial"]
    assert abs(ours["final"] - theirs["final"]) < 0.1, (ours, theirs)
    assert abs(ours["acc"] - theirs["acc"]) < 0.06, (ours, theirs)
    assert ours["lr"] == pytest.approx(theirs["lr"], rel=1e-9)
