from .attention import GlobalAttention, PerformerAttention, SelfAttention
from .corner_pool import CornerPoolBlock
from .linear import PackedLinear
from .mlp import Mlp
from .patch import PatchEmbed, PatchMerging
from .position import PixelPositionEncoding
from .rswatt import (
                     ReconstructedWindowAttention,
                     RSWAttBlock,
                     RSWAttOutput,
                     build_rswatt_attention,
)
from .rswatt_parts import (
                     AnchorExtents,
                     ConcatFusion,
                     DirectExtents,
                     EnhancedAnchorExtents,
                     GateFusion,
                     MLPReweighting,
                     OffsetExtents,
                     ScaleFusion,
                     SoftWindows,
                     WindowPredictor,
                     WindowReconstruction,
)
from .swin_v2 import (
                     CosineWindowAttention,
                     PostNormPatchMerging,
                     ResPostNormSwinBlock,
)
from .transformer import TransformerLayer
from .window_msa import (
                     HaloSlidingWindowAttention,
                     SlidingWindowAttention,
                     SwinAttention,
                     SwinBlock,
                     WindowAttention,
                     build_swin_attention,
)

__all__ = [
    'CornerPoolBlock', 'PackedLinear', 'Mlp', 'PatchEmbed', 'PatchMerging',
    'SelfAttention', 'SwinAttention',
    'WindowAttention', 'SlidingWindowAttention',
    'HaloSlidingWindowAttention', 'PerformerAttention', 'GlobalAttention',
    'build_swin_attention', 'SwinBlock',
    'TransformerLayer', 'ReconstructedWindowAttention', 'RSWAttBlock',
    'RSWAttOutput', 'build_rswatt_attention', 'WindowPredictor',
    'DirectExtents', 'OffsetExtents', 'AnchorExtents',
    'EnhancedAnchorExtents', 'WindowReconstruction', 'SoftWindows',
    'MLPReweighting', 'ScaleFusion', 'GateFusion', 'ConcatFusion',
    'PixelPositionEncoding', 'CosineWindowAttention',
    'ResPostNormSwinBlock', 'PostNormPatchMerging'
]
