"""Pure tensor functions shared by every backbone: windows, masks, attention."""
from .attention import (
                        attend,
                        window_attention,
                        window_attention_recorded,
                        window_attention_weights,
)
from .backend import (
                        BACKENDS,
                        FAST_PARTS,
                        fast_part,
                        fast_part_allowed,
                        fast_path_allowed,
                        observed,
                        use_backend,
)
from .linear import packable_linear, packed_weights_scope
from .masks import MASK_VALUE, padding_key_mask, shifted_window_mask
from .neighborhood import (
                        halo,
                        halo_tiles,
                        inside_image,
                        outside_image_mask,
                        tile_index,
                        tile_queries_and_keys,
                        tiled_neighborhood_attention,
                        unfold_neighborhood,
                        untile,
)
from .performer import orthogonal_random_features, performer_attention
from .reconstructed import (
                        reconstructed_window_attention,
                        reweighted_window_attention,
                        window_log_membership,
)
from .relative_position import (
                        log_spaced_relative_coords,
                        relative_position_index,
                        resize_relative_position_table,
)
from .sliding import (
                        sliding_relative_index,
                        sliding_window_attention_blocked,
                        sliding_window_attention_naive,
)
from .symbolic import ceil_div, is_concrete, recording, size_tensor
from .windows import (
                        SHIFT_MODES,
                        WindowLayout,
                        check_shift,
                        check_window,
                        window_layout,
                        window_pair,
)

__all__ = [
    'BACKENDS', 'FAST_PARTS', 'fast_part', 'fast_part_allowed',
    'fast_path_allowed', 'observed',
    'use_backend',
    'window_pair', 'check_window', 'check_shift',
    'window_layout',
    'WindowLayout', 'SHIFT_MODES', 'shifted_window_mask', 'padding_key_mask',
    'MASK_VALUE', 'relative_position_index', 'log_spaced_relative_coords',
    'resize_relative_position_table',
    'window_attention', 'window_attention_recorded',
    'window_attention_weights', 'sliding_relative_index',
    'sliding_window_attention_naive', 'sliding_window_attention_blocked',
    'orthogonal_random_features', 'performer_attention', 'packable_linear',
    'packed_weights_scope',
    'reconstructed_window_attention', 'reweighted_window_attention',
    'window_log_membership', 'attend', 'halo', 'halo_tiles', 'inside_image',
    'outside_image_mask', 'tile_index', 'tile_queries_and_keys',
    'tiled_neighborhood_attention', 'unfold_neighborhood', 'untile',
    'recording', 'is_concrete', 'ceil_div', 'size_tensor'
]
