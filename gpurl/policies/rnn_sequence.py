"""An LSTM or GRU layer over a sequence with resets, its backward written out
(`lstm_sequence`, `gru_sequence`).

Autograd records about twenty small nodes per LSTM step (the gate matmul, its split,
three sigmoids, two tanhs, the products, the state's concatenation and reset); on a CPU
with a batch of a few envs each node costs more to record and replay than to compute,
and a 32-step replay's backward took 2.7x its forward. Here the forward runs the steps
without recording (keeping the activated gates and the states), and the backward walks
the steps in reverse with six or seven tensor ops each (the LSTM's, the GRU's), then
forms the weight gradient as one matmul over every step. The arithmetic is
torch.nn.LSTM's (gate order i, f, g, o) and torch.nn.GRU's (r, z, n), the same as
RecurrentCore._cell's: tests/test_recurrent.py checks the two agree, values and
gradients.

Resets: `keep` [T, B, 1] is 0 after a step whose episode ended; the state that step
hands on is multiplied by it, so no gradient crosses the end.
"""

from __future__ import annotations

import torch
from torch import Tensor


class _LSTMSequence(torch.autograd.Function):
    # The state is one [B, 2H] tensor, [h, c], as RecurrentCore keeps it, so a step's
    # reset is one multiply and the gradient into a state one buffer. Every per-step
    # view is made before the loop (one unbind per tensor): on a CPU a view costs as
    # much as a small op, and a step runs nine ops forward and six backward.
    @staticmethod
    def forward(ctx, xi: Tensor, state0: Tensor, w_hh: Tensor, keep: Tensor):
        T, B, G = xi.shape
        H = G // 4
        gates = xi.clone()  # activated in place: sigmoid(i, f), tanh(g), sigmoid(o)
        hc = xi.new_empty(T, B, 2 * H)  # [h, c] after each step, before its reset
        hc_in = xi.new_empty(T + 1, B, 2 * H)  # each step's input state
        hc_in[0] = state0
        tc = xi.new_empty(T, B, H)  # tanh(c), which the backward reuses
        w_t = w_hh.t()
        gate, i_f = gates.unbind(0), gates[..., : 2 * H].unbind(0)
        i, f, g, o = (gates[..., k * H : (k + 1) * H].unbind(0) for k in range(4))
        h_in, c_in = hc_in[..., :H].unbind(0), hc_in[..., H:].unbind(0)
        h_out, c_out = hc[..., :H].unbind(0), hc[..., H:].unbind(0)
        out, nxt, kp, tanh_c = hc.unbind(0), hc_in[1:].unbind(0), keep.unbind(0), tc.unbind(0)
        for t in range(T):
            gate[t].addmm_(h_in[t], w_t)
            i_f[t].sigmoid_()
            g[t].tanh_()
            o[t].sigmoid_()
            torch.addcmul(f[t] * c_in[t], i[t], g[t], out=c_out[t])
            torch.tanh(c_out[t], out=tanh_c[t])
            torch.mul(o[t], tanh_c[t], out=h_out[t])
            torch.mul(out[t], kp[t], out=nxt[t])
        ctx.save_for_backward(gates, tc, hc_in, w_hh, keep)
        return hc

    @staticmethod
    def backward(ctx, grad_hc: Tensor):
        gates, tc, hc_in, w_hh, keep = ctx.saved_tensors
        T, B, G = gates.shape
        H = G // 4
        # everything that does not depend on the gradient, for every step at once:
        # d c / d the inputs of i, f and g (contiguous, as their gradients are), d c / d
        # the input state's c (f), d h / d c (through h = o tanh(c)) and d h / d o's input
        i, f, g, o = gates.split(H, -1)
        dc_difg = gates.new_empty(T, B, 3, H)
        torch.mul(g, i * (1 - i), out=dc_difg[:, :, 0])
        torch.mul(hc_in[:T, :, H:], f * (1 - f), out=dc_difg[:, :, 1])
        torch.mul(i, 1 - g * g, out=dc_difg[:, :, 2])
        dh_dc = (o * (1 - tc * tc)).unsqueeze(2)
        dh_do = (tc * o * (1 - o)).unsqueeze(2)
        f = f.unsqueeze(2)
        d_gates = torch.empty_like(gates)
        d = gates.new_empty(T, B, 2, H)  # d loss / d [h, c] after each step
        d_next = gates.new_zeros(B, 2, H)  # d loss / d the state step t + 1 started from
        d_next_h, d_next_c = d_next[:, 0], d_next[:, 1:]
        grad, kp = grad_hc.reshape(T, B, 2, H).unbind(0), keep.unsqueeze(-1).unbind(0)
        d_t, dh, dc = d.unbind(0), d[:, :, :1].unbind(0), d[:, :, 1:].unbind(0)
        d_gate, d_o = d_gates.unbind(0), d_gates[..., 3 * H :].unsqueeze(2).unbind(0)
        d_ifg = d_gates[..., : 3 * H].view(T, B, 3, H).unbind(0)
        difg, hdc, hdo, ft = dc_difg.unbind(0), dh_dc.unbind(0), dh_do.unbind(0), f.unbind(0)
        for t in range(T - 1, -1, -1):
            torch.addcmul(grad[t], d_next, kp[t], out=d_t[t])
            dc[t].addcmul_(dh[t], hdc[t])
            torch.mul(dc[t], difg[t], out=d_ifg[t])
            torch.mul(dh[t], hdo[t], out=d_o[t])
            torch.mm(d_gate[t], w_hh, out=d_next_h)
            torch.mul(dc[t], ft[t], out=d_next_c)
        d_w = d_gates.reshape(-1, G).t() @ hc_in[:T, :, :H].reshape(-1, H)
        return d_gates, d_next.reshape(B, 2 * H), d_w, None


def lstm_sequence(xi: Tensor, state0: Tensor, w_hh: Tensor, keep: Tensor) -> Tensor:
    """The state [h, c] [T, B, 2H] after each step, before its reset, of an LSTM whose
    input projections (biases included) are xi [T, B, 4H], from state0 = [h0, c0]
    [B, 2H], with hidden-to-hidden weights w_hh [4H, H]; the state is multiplied by
    keep [T, B, 1] after each step."""
    return _LSTMSequence.apply(xi, state0, w_hh, keep)


class _GRUSequence(torch.autograd.Function):
    # As the LSTM's: the per-step views made before the loop, each step's state and
    # hidden-to-hidden product written into buffers the backward reads (seven ops a step
    # forward, seven backward).
    @staticmethod
    def forward(ctx, xi: Tensor, h0: Tensor, w_hh: Tensor, b_hh: Tensor, keep: Tensor):
        T, B, G = xi.shape
        H = G // 3
        gates = xi.new_empty(T, B, G)  # r, z and n, activated
        hh = xi.new_empty(T, B, G)  # W_hh h + b_hh; its n part is what r scales inside n
        hs = xi.new_empty(T, B, H)  # after each step, pre-reset
        h_in = xi.new_empty(T + 1, B, H)  # each step's input state
        h_in[0] = h0
        w_t = w_hh.t()
        x_rz, x_n = xi[..., : 2 * H].unbind(0), xi[..., 2 * H :].unbind(0)
        rz, n = gates[..., : 2 * H].unbind(0), gates[..., 2 * H :].unbind(0)
        r, z = gates[..., :H].unbind(0), gates[..., H : 2 * H].unbind(0)
        hh_t, hh_rz, hh_n = hh.unbind(0), hh[..., : 2 * H].unbind(0), hh[..., 2 * H :].unbind(0)
        h, out, kp = h_in.unbind(0), hs.unbind(0), keep.unbind(0)
        for t in range(T):
            torch.addmm(b_hh, h[t], w_t, out=hh_t[t])
            torch.add(x_rz[t], hh_rz[t], out=rz[t])
            rz[t].sigmoid_()
            torch.addcmul(x_n[t], r[t], hh_n[t], out=n[t])
            n[t].tanh_()
            torch.lerp(n[t], h[t], z[t], out=out[t])  # (1 - z) n + z h
            torch.mul(out[t], kp[t], out=h[t + 1])
        ctx.save_for_backward(gates, hh, h_in, w_hh, keep)
        return hs

    @staticmethod
    def backward(ctx, grad_hs: Tensor):
        gates, hh, h_in, w_hh, keep = ctx.saved_tensors
        T, B, G = gates.shape
        H = G // 3
        r, z, n = gates.split(H, -1)
        h = h_in[:T]
        # d h_after / d the inputs of n, z and r (r's through n), for every step at once
        dn_in = (1 - z) * (1 - n * n)
        dz_in = (h - n) * z * (1 - z)
        dr_of_dn = hh[..., 2 * H :] * r * (1 - r)
        d_xi = torch.empty_like(gates)  # the gradient of each gate's input projection
        d_hh = torch.empty_like(gates)  # and of its hidden-to-hidden product
        dh = gates.new_empty(B, H)
        dh_next = gates.new_zeros(B, H)  # the gradient into step t + 1's input state
        grad, kp, zt, rt = grad_hs.unbind(0), keep.unbind(0), z.unbind(0), r.unbind(0)
        dn, dz_, dr_ = dn_in.unbind(0), dz_in.unbind(0), dr_of_dn.unbind(0)
        d_n, d_hh_t = d_xi[..., 2 * H :].unbind(0), d_hh.unbind(0)
        d_hr, d_hz, d_hn = (d_hh[..., k * H : (k + 1) * H].unbind(0) for k in range(3))
        for t in range(T - 1, -1, -1):
            torch.addcmul(grad[t], dh_next, kp[t], out=dh)
            torch.mul(dh, dn[t], out=d_n[t])
            torch.mul(dh, dz_[t], out=d_hz[t])
            torch.mul(d_n[t], dr_[t], out=d_hr[t])
            torch.mul(d_n[t], rt[t], out=d_hn[t])
            dh_next = torch.addmm(dh * zt[t], d_hh_t[t], w_hh)
        d_xi[..., : 2 * H] = d_hh[..., : 2 * H]  # r's and z's inputs sum x and h parts
        d_w = d_hh.reshape(-1, G).t() @ h.reshape(-1, H)
        return d_xi, dh_next, d_w, d_hh.sum((0, 1)), None


def gru_sequence(xi: Tensor, h0: Tensor, w_hh: Tensor, b_hh: Tensor, keep: Tensor) -> Tensor:
    """h [T, B, H] after each step, before its reset, of a GRU whose input projections
    (input biases included) are xi [T, B, 3H], from h0 [B, H], with hidden-to-hidden
    weights w_hh [3H, H] and bias b_hh [3H]; the state is multiplied by keep [T, B, 1]
    after each step."""
    return _GRUSequence.apply(xi, h0, w_hh, b_hh, keep)
