"""FAVOR+ linear attention (Performer, Choromanski et al., ICLR 2021).

softmax(q k^T / sqrt(d)) is approximated by phi(q) phi(k)^T with positive
random features phi(x) = exp(w x - |x|^2 / 2) / sqrt(m), w drawn from
orthogonal Gaussian blocks; attention then costs O(L m d) instead of O(L^2 d).
The Swin paper's Table 5 uses it as the fast global-attention baseline.
"""
import math
from typing import Optional

import torch


def orthogonal_random_features(num_features: int,
                               dim: int,
                               generator: Optional[torch.Generator] = None
                               ) -> torch.Tensor:
    """(num_features, dim) rows: orthogonal within each block of ``dim``
    rows, with the norms of Gaussian vectors (FAVOR+'s variance reduction)."""
    blocks = []
    for _ in range(math.ceil(num_features / dim)):
        gaussian = torch.randn(dim, dim, generator=generator)
        q, _ = torch.linalg.qr(gaussian)
        blocks.append(q.T)
    rows = torch.cat(blocks)[:num_features]
    norms = torch.randn(num_features, dim, generator=generator).norm(dim=1)
    return rows * norms[:, None]


def _positive_features(x: torch.Tensor, projection: torch.Tensor,
                       is_query: bool, eps: float = 1e-6) -> torch.Tensor:
    """phi(x) for x (..., L, d) already scaled by d^-1/4."""
    proj = x @ projection.T.to(x.dtype)  # (..., L, m)
    sq_norm = x.pow(2).sum(-1, keepdim=True) / 2
    # Subtracting a max keeps exp() finite; it cancels in the normalisation
    # (per query row for queries, one constant per head for keys).
    stab = proj.amax(-1, keepdim=True) if is_query else proj.amax(
        (-1, -2), keepdim=True)
    m = projection.shape[0]
    return (torch.exp(proj - sq_norm - stab.detach()) + eps) / math.sqrt(m)


def performer_attention(q: torch.Tensor,
                        k: torch.Tensor,
                        v: torch.Tensor,
                        projection: torch.Tensor,
                        scale: Optional[float] = None) -> torch.Tensor:
    """Approximate softmax(scale * q k^T) v over all tokens.

    Args:
        q, k, v: (B, heads, L, d).
        projection: (m, d) random features, e.g. from
            :func:`orthogonal_random_features`.
        scale: logit scale, ``d ** -0.5`` by default.
    """
    d = q.shape[-1]
    root = math.sqrt(d**-0.5 if scale is None else scale)
    # Features in fp32: exp() of the random projections overflows fp16.
    dtype = q.dtype
    q, k, v = q.float() * root, k.float() * root, v.float()
    q_feat = _positive_features(q, projection, is_query=True)
    k_feat = _positive_features(k, projection, is_query=False)
    context = k_feat.transpose(-1, -2) @ v  # (B, h, m, d)
    normaliser = q_feat @ k_feat.sum(-2, keepdim=True).transpose(-1, -2)
    return ((q_feat @ context) / normaliser).to(dtype)
