"""Window attention, and :func:`attend`, the softmax attention that most
kernels of :mod:`mmvisattn.ops` end in.

Which kernels end in :func:`attend` (``softmax(q k^T * scale + mask) v``):
:func:`window_attention` and, through
:func:`~mmvisattn.ops.neighborhood.tiled_neighborhood_attention`,
:func:`~mmvisattn.ops.sliding.sliding_window_attention_blocked` and
:func:`~mmvisattn.ops.reconstructed.reconstructed_window_attention` (and,
outside ``ops``, RSWAtt's global tokens and Swin's ``GlobalAttention``).
Spelled out on their own: the window and sliding kernels with ``use_content=False`` (no q.k term:
``softmax(mask) v``),
:func:`~mmvisattn.ops.sliding.sliding_window_attention_naive` (the naive
unfold, kept as the reference the blocked kernel is tested against),
:func:`~mmvisattn.ops.reconstructed.reweighted_window_attention` (cosine
attention whose probabilities an MLP re-weights, so it needs them) and
:func:`window_attention_weights` (returns the probabilities);
:func:`~mmvisattn.ops.performer.performer_attention` approximates softmax
attention with random features and has no softmax at all.
"""
import contextlib
from typing import Optional

import torch
import torch.nn.functional as F

from .symbolic import recording


def window_attention(q: torch.Tensor,
                     k: torch.Tensor,
                     v: torch.Tensor,
                     bias: Optional[torch.Tensor] = None,
                     mask: Optional[torch.Tensor] = None,
                     scale: Optional[float] = None,
                     dropout_p: float = 0.,
                     use_content: bool = True) -> torch.Tensor:
    """Multi-head self-attention inside each window.

    Args:
        q, k, v: (B, num_windows, heads, N, head_dim).
        bias: (heads, N, N) added to every window's logits (relative position).
        mask: (num_windows, N or 1, N) additive mask, one per window position
            (shared across the batch), e.g. from ``shifted_window_mask``.
        scale: logit scale, ``head_dim ** -0.5`` by default.
        use_content: False drops the q.k term: softmax(bias + mask) v, the
            "relative position without appearance" row of Table 4.

    Returns:
        (B, num_windows, heads, N, head_dim).

    Ends in :func:`attend`: ``F.scaled_dot_product_attention`` (which fuses
    softmax(QK^T+B)V and never keeps the (N, N) logits for backward on fused
    backends) when neither bias nor mask needs a gradient, e.g. at inference;
    a learned bias that needs one (training with a relative position table)
    takes :func:`attend`'s spelled-out path, which keeps the logits.
    ``use_content=False`` is spelled out here (softmax of bias + mask).
    """
    B, nW, heads, N, d = q.shape
    if mask is not None and (mask.dim() != 3 or mask.shape[0] != nW
                             or mask.shape[1] not in (1, N)
                             or mask.shape[2] != N):
        raise ValueError(f'window_attention: mask of shape {tuple(mask.shape)} '
                         f'does not fit {nW} windows of {N} tokens')
    if not use_content:
        probs = _window_logits(q, k, bias, mask, scale, False).softmax(-1)
        return F.dropout(probs, dropout_p) @ v
    if mask is None:
        # Windows are independent: fold them into the batch, bias broadcasts.
        attn_mask = None if bias is None else bias.to(q.dtype).unsqueeze(0)
        out = attend(q.reshape(B * nW, heads, N, d),
                      k.reshape(B * nW, heads, N, d),
                      v.reshape(B * nW, heads, N, d), attn_mask, dropout_p,
                      scale)
        return out.view(B, nW, heads, N, d)
    attn_mask = mask.unsqueeze(1)
    if bias is not None:
        attn_mask = attn_mask + bias.unsqueeze(0)
    # Masks differ per window position: fold windows into the head axis so
    # one (1, nW*heads, N, N) mask broadcasts over the batch.
    attn_mask = attn_mask.to(q.dtype).expand(nW, heads, N, N).reshape(
        1, nW * heads, N, N)
    q, k, v = (t.reshape(B, nW * heads, N, d) for t in (q, k, v))
    return attend(q, k, v, attn_mask, dropout_p, scale).view(
        B, nW, heads, N, d)


def window_attention_recorded(q: torch.Tensor,
                              k: torch.Tensor,
                              v: torch.Tensor,
                              bias: Optional[torch.Tensor] = None,
                              mask: Optional[torch.Tensor] = None,
                              scale: Optional[float] = None,
                              dropout_p: float = 0.,
                              use_content: bool = True) -> torch.Tensor:
    """:func:`window_attention` for recorded graphs (exporters, tracers,
    compilers), whose window count may be a traced value; q, k, v and the
    result are laid out heads first, (B, heads, num_windows, N, head_dim).

    The attention runs as one 4-D call with images x heads as its batch and
    the windows in the heads' place (the ONNX attention op takes 4-D
    tensors). The eager layout, windows folded into the batch or into the
    heads, does not survive ``torch.export`` with dynamic sizes: the fused
    kernel's checks and a reshape of the window count next to the heads
    are specialised to the count seen when it is 1 (a map of one window),
    and the exported graph then fails at any other size. Without content
    the queries are zeros: softmax(bias + mask) v exactly, in the same one
    call.
    """
    B, heads, nW, N, d = q.shape
    if not use_content:
        q = torch.zeros_like(q)
    attn_mask = None
    if mask is not None:  # (nW, N or 1, N) -> (1, nW, N or 1, N)
        attn_mask = mask.to(q.dtype).unsqueeze(0)
    if bias is not None:  # (heads, N, N) -> (heads, 1, N, N)
        per_head = bias.to(q.dtype).unsqueeze(1)
        # spelled out to every window: broadcasting a mask of size 1 against
        # the traced window count is another check specialised to it
        attn_mask = per_head.expand(-1, nW, -1, -1) if attn_mask is None \
            else attn_mask + per_head
        # one mask per image and head, as the batch of the call
        attn_mask = attn_mask.unsqueeze(0).expand(B, -1, -1, -1, -1).reshape(
            B * heads, nW, N, N)
    out = attend(q.reshape(B * heads, nW, N, d),
                 k.reshape(B * heads, nW, N, d),
                 v.reshape(B * heads, nW, N, d), attn_mask, dropout_p, scale)
    return out.view(B, heads, nW, N, d)


def window_attention_weights(q: torch.Tensor,
                             k: torch.Tensor,
                             bias: Optional[torch.Tensor] = None,
                             mask: Optional[torch.Tensor] = None,
                             scale: Optional[float] = None,
                             use_content: bool = True) -> torch.Tensor:
    """The probabilities :func:`window_attention` applies to ``v``,
    softmax(q k^T * scale + bias + mask), spelled out: the fused kernel never
    returns them, and analysis tools need them.

    Takes :func:`window_attention`'s ``q``, ``k``, ``bias``, ``mask``,
    ``scale`` and ``use_content``; returns (B, num_windows, heads, N, N),
    each row summing to 1 (a masked key gets about exp(MASK_VALUE),
    below 1e-43).
    """
    B, nW, heads, N, _ = q.shape
    return _window_logits(q, k, bias, mask, scale,
                          use_content).softmax(-1).expand(B, nW, heads, N, N)


def _window_logits(q, k, bias, mask, scale, use_content):
    """q k^T * scale + bias + mask, spelled out; without content a
    (1, 1 or nW, 1, N, N) tensor that broadcasts over batch and heads."""
    N, d = q.shape[-2:]
    if use_content:
        scale = d**-0.5 if scale is None else scale
        logits = (q * scale) @ k.transpose(-2, -1)
    else:
        logits = torch.zeros(1, 1, 1, N, N, dtype=q.dtype, device=q.device)
    if bias is not None:
        logits = logits + bias.to(q.dtype)
    if mask is not None:
        logits = logits + mask.to(q.dtype)[None, :, None]
    return logits


# keys per query up to which bf16 CPU attention is spelled out (window and
# tile attention: 49 to a few hundred keys); longer rows keep SDPA's fused
# kernel, which never materialises the (queries x keys) weights
_SPELLED_OUT_MAX_KEYS = 256


def _low_precision_on_cpu(q: torch.Tensor, k: torch.Tensor) -> bool:
    return (q.dtype == torch.bfloat16 and q.device.type == 'cpu'
            and k.shape[-2] <= _SPELLED_OUT_MAX_KEYS and not recording())


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
           attn_mask: Optional[torch.Tensor] = None, dropout_p: float = 0.,
           scale: Optional[float] = None) -> torch.Tensor:
    """``scaled_dot_product_attention``, spelled out when the mask needs a
    gradient or when short bf16 rows run on the CPU. The kernels listed in
    this module's docstring end here; the others (naive sliding window,
    re-weighted and position-only attention, Performer) compute their own
    weights."""
    # bf16 on the CPU: torch's fused CPU kernel is barely faster in bf16
    # than in fp32 on window-sized rows, while bf16 GEMMs are ~2.8x
    # (dev/benchmark_bf16_kernels.py, docs/benchmarks.md);
    # spelled out, logits, mask and softmax stay bf16 (the CPU softmax
    # accumulates in fp32), no autocast round trip through fp32.
    low_precision = _low_precision_on_cpu(q, k)
    # A learned bias needs its gradient, which the fused CPU kernels do not
    # give; spelled out, this skips the math fallback's all-masked row
    # checks (our masks never block a whole row).
    if not low_precision and (attn_mask is None
                              or not attn_mask.requires_grad):
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, scale=scale)
    scale = q.shape[-1]**-0.5 if scale is None else scale
    logits = (q * scale) @ k.transpose(-2, -1)
    if attn_mask is not None:
        logits = logits + (attn_mask.to(logits.dtype) if low_precision
                           else attn_mask)
    with torch.autocast('cpu', enabled=False) if low_precision else \
            contextlib.nullcontext():
        attn = logits.softmax(-1)
    return F.dropout(attn, dropout_p) @ v
