"""A small pre-norm transformer block (normalization, attention, MLP) at sizes a CPU runs in milliseconds: the
model `kernelwright optimize-model` is demonstrated on. KernelBench form, plus `get_input_sets()`: the shapes it is
served at, each with its weight (how often it runs).

Its proportions are the demo's, not LLaMA's: a narrow model (d_model 16) with a wide MLP (hidden 2048), so that
the SwiGLU between the MLP's two Linears is about a third of a forward on a CPU and a fused kernel for it moves the
whole model by more than a shared machine's noise (docs/optimize-model.md has the numbers). At LLaMA's proportions
(hidden about 2.7 x d_model, d_model in the thousands) the Linears dominate a CPU forward and SwiGLU is a few %."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

d_model = 16
heads = 2
hidden = 2048


class Attention(nn.Module):
    def __init__(self, d_model: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.softmax = nn.Softmax(dim=-1)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape
        q, k, v = self.qkv(x).view(batch, seq, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(dim // self.heads)
        mixed = torch.matmul(self.softmax(scores), v)
        return self.out(mixed.transpose(1, 2).reshape(batch, seq, dim))


class SwiGLU(nn.Module):
    """The gated activation of LLaMA-style MLPs: the input's two halves, silu(gate) * value."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, value = x.chunk(2, dim=-1)
        return F.silu(gate) * value


class Model(nn.Module):
    def __init__(self, d_model: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = Attention(d_model, heads)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 2 * hidden), SwiGLU(), nn.Linear(hidden, d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


def get_init_inputs():
    return [d_model, heads, hidden]


def get_input_sets():
    """(weight, inputs): a long prompt now and then, short requests most of the time."""
    return [(0.25, [torch.randn(2, 128, d_model)]), (0.75, [torch.randn(8, 32, d_model)])]


def get_inputs():
    return get_input_sets()[0][1]
