"""GPT-mini (the W3 reference workload): byte vocabulary, learned positions, pre-LayerNorm blocks with
causal self-attention and a GELU MLP. Written against PyTorch's API; `torch` is whichever module is
passed in (tinytorch, or PyTorch itself for side-by-side runs)."""
import math
from dataclasses import dataclass


@dataclass
class GPTConfig:
    vocab_size: int = 256
    context: int = 128
    width: int = 256
    heads: int = 4
    layers: int = 4
    dropout: float = 0.0


def build(torch, cfg: GPTConfig):
    """Return a GPT module class bound to `torch` (tinytorch or PyTorch) and an instance of it."""
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            d = cfg.width
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
            self.drop = nn.Dropout(cfg.dropout)

        def forward(self, x):
            B, T, C = x.shape
            # qkv's outputs are grouped by head, (q, k, v) inside each (Megatron-LM's layout): split column-wise
            # over t tensor-parallel ranks, each rank gets whole heads, and this code runs on its local heads.
            q, k, v = self.qkv(self.ln1(x)).view(B, T, -1, 3, C // cfg.heads).transpose(1, 2).unbind(3)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.drop(self.proj(y.transpose(1, 2).reshape(B, T, -1)))
            return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(cfg.vocab_size, cfg.width)
            self.pos = nn.Embedding(cfg.context, cfg.width)
            self.blocks = nn.Sequential(*[Block() for _ in range(cfg.layers)])
            self.ln = nn.LayerNorm(cfg.width)
            self.head = nn.Linear(cfg.width, cfg.vocab_size)

        def forward(self, idx):
            # A pipeline stage keeps some of the blocks; only the first keeps the embeddings and only the last the
            # final norm and head (the others are None): its input is then the previous stage's activations.
            x = idx if self.tok is None else self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
            for block in self.blocks.children():
                x = block(x)
            return x if self.head is None else self.head(self.ln(x))

        @torch.no_grad()
        def generate(self, idx, new_tokens: int, temperature: float = 0.8, generator=None):
            """Sample `new_tokens` bytes after the prompt `idx` (1, T)."""
            for _ in range(new_tokens):
                logits = self(idx[:, -cfg.context:])[:, -1, :] / temperature
                nxt = torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator)
                idx = torch.cat([idx, nxt], dim=1)
            return idx

    return GPT()


def uniform_loss(vocab_size: int = 256) -> float:
    """Cross-entropy of a model that knows nothing: ln(vocab)."""
    return math.log(vocab_size)
