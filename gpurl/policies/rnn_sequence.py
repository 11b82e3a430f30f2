"""An LSTM or GRU layer over a sequence with resets, its backward written out
(`lstm_sequence`, `gru_sequence`).

Autograd records about twenty small nodes per LSTM step (the gate matmul, its split,
three sigmoids, two tanhs, the products, the state's concatenation and reset); on a CPU
with a batch of a few envs each node costs more to record and replay than to compute,
and a 32-step replay's backward took 2.7x its forward. Here the forward runs the steps
without recording (keeping the activated gates and the cell states), and the backward
walks the steps in reverse with a dozen tensor ops each, then forms the weight gradient
as one matmul over every step. The arithmetic is torch.nn.LSTM's (gate order i, f, g,
o) and torch.nn.GRU's (r, z, n), the same as RecurrentCore._cell's:
tests/test_recurrent.py checks the two agree, values and gradients.

Resets: `keep` [T, B, 1] is 0 after a step whose episode ended; the state that step
hands on is multiplied by it, so no gradient crosses the end.
"""

from __future__ import annotations

import torch
from torch import Tensor


class _LSTMSequence(torch.autograd.Function):
    @staticmethod
    def forward(ctx, xi: Tensor, h0: Tensor, c0: Tensor, w_hh: Tensor, keep: Tensor):
        T, B, G = xi.shape
        H = G // 4
        gates = xi.new_empty(T, B, G)  # activated: sigmoid(i, f), tanh(g), sigmoid(o)
        i_f, g, o = gates[..., : 2 * H], gates[..., 2 * H : 3 * H], gates[..., 3 * H :]
        hs, cs = xi.new_empty(T, B, H), xi.new_empty(T, B, H)  # after each step, pre-reset
        h_in, c_in = xi.new_empty(T, B, H), xi.new_empty(T, B, H)  # each step's input state
        w_t = w_hh.t()
        h, c = h0, c0
        for t in range(T):
            h_in[t], c_in[t] = h, c
            torch.addmm(xi[t], h, w_t, out=gates[t])
            i_f[t].sigmoid_()
            g[t].tanh_()
            o[t].sigmoid_()
            torch.addcmul(gates[t, :, H : 2 * H] * c, gates[t, :, :H], g[t], out=cs[t])
            torch.mul(o[t], torch.tanh(cs[t]), out=hs[t])
            h, c = hs[t] * keep[t], cs[t] * keep[t]
        ctx.save_for_backward(gates, cs, h_in, c_in, w_hh, keep)
        return hs, cs

    @staticmethod
    def backward(ctx, grad_hs: Tensor, grad_cs: Tensor):
        gates, cs, h_in, c_in, w_hh, keep = ctx.saved_tensors
        T, B, G = gates.shape
        H = G // 4
        # everything that does not depend on the gradient, for every step at once
        i, f, g, o = gates.split(H, -1)
        tc = torch.tanh(cs)
        o_dtc = o * (1 - tc * tc)  # d h / d c through h = o tanh(c)
        slope = gates * (1 - gates)  # the sigmoids' derivatives ...
        slope[..., 2 * H : 3 * H] = 1 - g * g  # ... and the tanh's
        d_gates = torch.empty_like(gates)
        d_i, d_f, d_g, d_o = d_gates.split(H, -1)
        dh_next = gates.new_zeros(B, H)  # the gradient into step t + 1's input state
        dc_next = gates.new_zeros(B, H)
        for t in range(T - 1, -1, -1):
            dh = torch.addcmul(grad_hs[t], dh_next, keep[t])
            dc = torch.addcmul(grad_cs[t], dc_next, keep[t])
            dc.addcmul_(dh, o_dtc[t])
            torch.mul(dc, g[t], out=d_i[t])
            torch.mul(dc, c_in[t], out=d_f[t])
            torch.mul(dc, i[t], out=d_g[t])
            torch.mul(dh, tc[t], out=d_o[t])
            d_gates[t].mul_(slope[t])
            dc_next = dc * f[t]
            dh_next = d_gates[t] @ w_hh
        d_w = d_gates.reshape(-1, G).t() @ h_in.reshape(-1, H)
        return d_gates, dh_next, dc_next, d_w, None


def lstm_sequence(
    xi: Tensor, h0: Tensor, c0: Tensor, w_hh: Tensor, keep: Tensor
) -> tuple[Tensor, Tensor]:
    """(h [T, B, H], c [T, B, H]) after each step, before its reset, of an LSTM whose
    input projections (biases included) are xi [T, B, 4H], from h0, c0 [B, H], with
    hidden-to-hidden weights w_hh [4H, H]; the state is multiplied by keep [T, B, 1]
    after each step."""
    return _LSTMSequence.apply(xi, h0, c0, w_hh, keep)


class _GRUSequence(torch.autograd.Function):
    @staticmethod
    def forward(ctx, xi: Tensor, h0: Tensor, w_hh: Tensor, b_hh: Tensor, keep: Tensor):
        T, B, G = xi.shape
        H = G // 3
        gates = xi.new_empty(T, B, G)  # r, z and n, activated
        hn = xi.new_empty(T, B, H)  # W_hn h + b_hn, which r scales inside n
        hs = xi.new_empty(T, B, H)  # after each step, pre-reset
        h_in = xi.new_empty(T, B, H)  # each step's input state
        w_t = w_hh.t()
        h = h0
        for t in range(T):
            h_in[t] = h
            hh = torch.addmm(b_hh, h, w_t)
            rz, n = gates[t, :, : 2 * H], gates[t, :, 2 * H :]
            torch.sigmoid(xi[t, :, : 2 * H] + hh[:, : 2 * H], out=rz)
            hn[t] = hh[:, 2 * H :]
            torch.tanh(torch.addcmul(xi[t, :, 2 * H :], rz[:, :H], hn[t]), out=n)
            torch.addcmul(n, rz[:, H:], h - n, out=hs[t])  # (1 - z) n + z h
            h = hs[t] * keep[t]
        ctx.save_for_backward(gates, hn, h_in, w_hh, keep)
        return hs

    @staticmethod
    def backward(ctx, grad_hs: Tensor):
        gates, hn, h_in, w_hh, keep = ctx.saved_tensors
        T, B, G = gates.shape
        H = G // 3
        r, z, n = gates.split(H, -1)
        one_minus_z, h_minus_n = 1 - z, h_in - n
        slope = gates * (1 - gates)  # the sigmoids' derivatives ...
        slope[..., 2 * H :] = 1 - n * n  # ... and the tanh's
        d_xi = torch.empty_like(gates)  # the gradient of each gate's input projection
        d_hh = torch.empty_like(gates)  # and of its hidden-to-hidden product
        dh_next = gates.new_zeros(B, H)
        for t in range(T - 1, -1, -1):
            dh = torch.addcmul(grad_hs[t], dh_next, keep[t])
            dn = d_xi[t, :, 2 * H :]
            torch.mul(dh * one_minus_z[t], slope[t, :, 2 * H :], out=dn)
            torch.mul(dn, r[t], out=d_hh[t, :, 2 * H :])
            torch.mul(dn * hn[t], slope[t, :, :H], out=d_xi[t, :, :H])
            torch.mul(dh * h_minus_n[t], slope[t, :, H : 2 * H], out=d_xi[t, :, H : 2 * H])
            d_hh[t, :, : 2 * H] = d_xi[t, :, : 2 * H]
            dh_next = torch.addmm(dh * z[t], d_hh[t], w_hh)
        d_w = d_hh.reshape(-1, G).t() @ h_in.reshape(-1, H)
        return d_xi, dh_next, d_w, d_hh.sum((0, 1)), None


def gru_sequence(xi: Tensor, h0: Tensor, w_hh: Tensor, b_hh: Tensor, keep: Tensor) -> Tensor:
    """h [T, B, H] after each step, before its reset, of a GRU whose input projections
    (input biases included) are xi [T, B, 3H], from h0 [B, H], with hidden-to-hidden
    weights w_hh [3H, H] and bias b_hh [3H]; the state is multiplied by keep [T, B, 1]
    after each step."""
    return _GRUSequence.apply(xi, h0, w_hh, b_hh, keep)
