from .checkpoint import extract_state_dict, load_pretrained
from .swin_convert import (swin_official_to_mmvisattn,
                           swin_openmmlab_to_mmvisattn, swin_to_mmdet,
                           swin_to_official)

__all__ = [
    'extract_state_dict', 'load_pretrained', 'swin_official_to_mmvisattn',
    'swin_to_official', 'swin_to_mmdet',
    'swin_openmmlab_to_mmvisattn'
]
