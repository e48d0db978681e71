"""Pure tensor functions shared by every backbone: windows, masks, attention."""
from .attention import window_attention
from .masks import shifted_window_mask
from .relative_position import (relative_position_index,
                                resize_relative_position_table)
from .windows import pad_to_multiple, window_partition, window_reverse

__all__ = [
    'window_partition', 'window_reverse', 'pad_to_multiple',
    'shifted_window_mask', 'relative_position_index',
    'resize_relative_position_table', 'window_attention'
]
