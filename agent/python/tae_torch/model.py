"""The ablation Transformer of docs/engine.md, in plain PyTorch.

Written from the document, not from tae-train's code; parameter names are tae-train's
(`block0.attention.qkv.weight`, ...), so weights move between the engines by name and the
equivalence test can load tae-train's initial weights. Modules are created in tae-train's order
and draw from torch's generator the same way, so the same seed gives the same initial weights.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

INIT_STD = 0.02
LAYER_NORM_EPS = 1e-5
RMS_NORM_EPS = 1e-6
SCALE_NORM_EPS = 1e-5
ROPE_BASE = 10000.0


class Norm(nn.Module):
    """layernorm (gain + bias), rmsnorm (gain), scalenorm (one scalar g = sqrt(d)), none."""

    def __init__(self, kind, dim, bias):
        super().__init__()
        self.kind = kind
        self.dim = dim
        if kind == "scalenorm":
            self.weight = nn.Parameter(torch.full((1,), math.sqrt(dim)))
        elif kind in ("layernorm", "rmsnorm"):
            self.weight = nn.Parameter(torch.ones(dim))
            if kind == "layernorm" and bias:
                self.bias = nn.Parameter(torch.zeros(dim))
            else:
                self.bias = None

    def forward(self, x):
        if self.kind == "none":
            return x
        if self.kind == "layernorm":
            return F.layer_norm(x, (self.dim,), self.weight, self.bias, LAYER_NORM_EPS)
        if self.kind == "rmsnorm":
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + RMS_NORM_EPS) * self.weight
        return x * (self.weight / x.norm(2, -1, keepdim=True).clamp_min(SCALE_NORM_EPS))


def alibi_slopes(heads):
    """Press et al.: 2^(-8i/n) for a power of two n; else the closest smaller power's slopes
    followed by every other slope of twice that."""
    def powers(n):
        return [2.0 ** (-8.0 * i / n) for i in range(1, n + 1)]
    closest = 1
    while closest * 2 <= heads:
        closest *= 2
    slopes = powers(closest)
    extra = powers(2 * closest)
    i = 0
    while len(slopes) < heads:
        slopes.append(extra[i])
        i += 2
    return slopes


def sinusoid_table(max_len, d_model):
    table = torch.zeros(max_len, d_model)
    position = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)
    even = torch.arange(0, d_model, 2, dtype=torch.float32)
    angle = position * torch.exp(even * (-math.log(10000.0) / d_model))
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle[:, :d_model // 2])
    return table


class Attention(nn.Module):
    """Self-attention of the kept query heads and the K/V heads they read (GQA/MQA)."""

    def __init__(self, m, layer, max_len):
        super().__init__()
        self.hd = m.hd()
        self.heads = m.heads
        self.causal = m.causal
        self.pos_encoding = m.pos_encoding
        self.dropout = m.dropout
        group = m.heads // m.kv()
        self.kept = m.kept_heads(layer)
        self.kept_kv = sorted({h // group for h in self.kept})
        self.n_q, self.n_kv = len(self.kept), len(self.kept_kv)
        self.kv_of_query = (torch.tensor([self.kept_kv.index(h // group) for h in self.kept])
                            if self.n_kv != self.n_q else None)
        d = m.d_model
        self.qkv = nn.Linear(d, (self.n_q + 2 * self.n_kv) * self.hd, bias=m.bias)
        self.out = nn.Linear(self.n_q * self.hd, d, bias=m.bias)
        self.gate = None  # [heads] by original index, or None
        if m.pos_encoding == "rope":
            inv_freq = torch.exp(torch.arange(0, self.hd // 2, dtype=torch.float64)
                                 * (-2.0 * math.log(ROPE_BASE) / self.hd))
            angle = torch.outer(torch.arange(max_len, dtype=torch.float64), inv_freq)
            self.register_buffer("rope_cos", torch.cos(angle).float())
            self.register_buffer("rope_sin", torch.sin(angle).float())
        elif m.pos_encoding == "alibi":
            slopes = alibi_slopes(m.heads)
            self.register_buffer("alibi_slopes",
                                 torch.tensor([slopes[h] for h in self.kept]).view(-1, 1, 1))

    def _rotate(self, x, time):
        half = self.hd // 2
        cos, sin = self.rope_cos[:time], self.rope_sin[:time]
        x1, x2 = x[..., :half], x[..., half:2 * half]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)

    def project(self, x):
        batch, time, _ = x.shape
        q, k, v = (self.qkv(x).view(batch, time, self.n_q + 2 * self.n_kv, self.hd)
                   .permute(0, 2, 1, 3).split([self.n_q, self.n_kv, self.n_kv], 1))
        if self.pos_encoding == "rope":
            q, k = self._rotate(q, time), self._rotate(k, time)
        if self.kv_of_query is not None:
            k = k.index_select(1, self.kv_of_query.to(k.device))
            v = v.index_select(1, self.kv_of_query.to(v.device))
        return q, k, v

    def probabilities(self, q, k):
        time = q.size(2)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.hd)
        if self.causal:
            future = torch.ones(time, time, dtype=torch.bool, device=q.device).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        if self.pos_encoding == "alibi":
            position = torch.arange(time, dtype=torch.float32, device=q.device)
            distance = (position.unsqueeze(1) - position.unsqueeze(0)).abs()
            scores = scores - self.alibi_slopes * distance
        return torch.softmax(scores, -1)

    def forward(self, x):
        batch, time, _ = x.shape
        q, k, v = self.project(x)
        probs = self.probabilities(q, k)
        if self.dropout > 0.0:
            probs = F.dropout(probs, self.dropout, self.training)
        mixed = torch.matmul(probs, v)
        if self.gate is not None:
            index = torch.tensor(self.kept, device=mixed.device)
            mixed = mixed * self.gate.to(mixed.device).index_select(0, index).view(1, -1, 1, 1)
        y = self.out(mixed.transpose(1, 2).reshape(batch, time, self.n_q * self.hd))
        return F.dropout(y, self.dropout, self.training) if self.dropout > 0.0 else y


class FeedForward(nn.Module):
    """down(act(up x)), or gated down(act(gate x) * up x); d_ff = ffn_mult * d_model."""

    def __init__(self, m):
        super().__init__()
        d, d_ff = m.d_model, m.ffn_mult * m.d_model
        self.activation = m.activation
        self.dropout = m.dropout
        if m.activation in ("swiglu", "geglu"):
            self.gate = nn.Linear(d, d_ff, bias=m.bias)
        self.up = nn.Linear(d, d_ff, bias=m.bias)
        self.down = nn.Linear(d_ff, d, bias=m.bias)

    def forward(self, x):
        h = self.up(x)
        if self.activation == "relu":
            h = F.relu(h)
        elif self.activation == "gelu":
            h = F.gelu(h)
        elif self.activation == "swiglu":
            h = F.silu(self.gate(x)) * h
        else:
            h = F.gelu(self.gate(x)) * h
        h = self.down(h)
        return F.dropout(h, self.dropout, self.training) if self.dropout > 0.0 else h


class Block(nn.Module):
    """pre: x + f(N(x)); post: N(x + f(x)); sandwich: x + N2(f(N1(x))); residual off drops x."""

    def __init__(self, m, layer, max_len):
        super().__init__()
        self.residual = m.residual
        self.position = m.norm_position
        sandwich = m.norm_position == "sandwich"
        self.attention = None
        self.ffn = None
        if layer not in m.drop_attention_layers:
            self.attention_norm = Norm(m.norm, m.d_model, m.bias)
            if sandwich:
                self.attention_out_norm = Norm(m.norm, m.d_model, m.bias)
            self.attention = Attention(m, layer, max_len)
        if layer not in m.drop_ffn_layers:
            self.ffn_norm = Norm(m.norm, m.d_model, m.bias)
            if sandwich:
                self.ffn_out_norm = Norm(m.norm, m.d_model, m.bias)
            self.ffn = FeedForward(m)

    def _sublayer(self, x, f, norm, out_norm):
        if self.position == "post":
            return norm(x + f(x) if self.residual else f(x))
        update = f(norm(x))
        if self.position == "sandwich":
            update = out_norm(update)
        return x + update if self.residual else update

    def forward(self, x):
        if self.attention is not None:
            x = self._sublayer(x, self.attention, self.attention_norm,
                               getattr(self, "attention_out_norm", None))
        if self.ffn is not None:
            x = self._sublayer(x, self.ffn, self.ffn_norm, getattr(self, "ffn_out_norm", None))
        return x


class TransformerLM(nn.Module):
    def __init__(self, m, vocab_size, max_len):
        super().__init__()
        self.config = m
        self.max_len = max_len
        self.token_embedding = nn.Embedding(vocab_size, m.d_model)
        if m.pos_encoding == "learned":
            self.position_embedding = nn.Embedding(max_len, m.d_model)
        elif m.pos_encoding == "sinusoidal":
            # Scaled by 1/sqrt(d_model): the original's ratio to N(0, 0.02) embeddings.
            self.register_buffer("sinusoid_table",
                                 sinusoid_table(max_len, m.d_model) / math.sqrt(m.d_model))
        self.blocks = []
        for i in range(m.layers):
            block = Block(m, i, max_len)
            self.add_module(f"block{i}", block)
            self.blocks.append(block)
        if m.norm_position != "post":
            self.final_norm = Norm(m.norm, m.d_model, m.bias)
        if not m.tie_embeddings:
            self.head = nn.Linear(m.d_model, vocab_size, bias=False)
        if m.init == "gpt2":
            self._init_gpt2()

    def _init_gpt2(self):
        """N(0, 0.02) for every matrix, zero biases, unit norm gains (scalenorm keeps sqrt(d))."""
        with torch.no_grad():
            for name, p in self.named_parameters():
                if p.dim() >= 2:
                    p.copy_(torch.randn(p.shape) * INIT_STD)
                elif name.endswith("bias"):
                    p.zero_()

    def forward(self, tokens):
        time = tokens.size(1)
        if time > self.max_len:
            raise ValueError(f"sequence of {time} tokens exceeds max_len {self.max_len}")
        x = self.token_embedding(tokens)
        if self.config.pos_encoding == "learned":
            x = x + self.position_embedding.weight[:time]
        elif self.config.pos_encoding == "sinusoidal":
            x = x + self.sinusoid_table[:time]
        if self.config.dropout > 0.0:
            x = F.dropout(x, self.config.dropout, self.training)
        for block in self.blocks:
            x = block(x)
        if hasattr(self, "final_norm"):
            x = self.final_norm(x)
        if self.config.tie_embeddings:
            return F.linear(x, self.token_embedding.weight)
        return self.head(x)

    def parameter_count(self):
        return sum(p.numel() for p in self.parameters())

    def non_embedding_parameter_count(self):
        count = self.parameter_count() - self.token_embedding.weight.numel()
        if hasattr(self, "position_embedding"):
            count -= self.position_embedding.weight.numel()
        if hasattr(self, "head"):
            count -= self.head.weight.numel()
        return count

    def set_head_gates(self, gates):
        """gates[l]: a [heads] tensor multiplying each head's output, or None."""
        for layer, block in enumerate(self.blocks):
            if block.attention is not None:
                block.attention.gate = gates[layer] if layer < len(gates) else None


def forward_flops_per_token(m, vocab_size, seq_len):
    """docs/engine.md's analytic forward FLOPs per token (multiply-adds count 2)."""
    d, hd = m.d_model, m.hd()
    d_ff = m.ffn_mult * d
    gated = m.activation in ("swiglu", "geglu")
    group = m.heads // m.kv()
    flops = 2.0 * d * vocab_size
    for layer in range(m.layers):
        if layer not in m.drop_attention_layers:
            kept = m.kept_heads(layer)
            n_q, n_kv = len(kept), len({h // group for h in kept})
            flops += 2.0 * d * (n_q + 2.0 * n_kv) * hd
            flops += 2.0 * 2.0 * seq_len * n_q * hd
            flops += 2.0 * n_q * hd * d
        if layer not in m.drop_ffn_layers:
            flops += (3.0 if gated else 2.0) * 2.0 * d * d_ff
    return flops
