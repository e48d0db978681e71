from mmvisattn.checkpoint import extract_state_dict, load_pretrained

from .swin_convert import (
                           count_swin_stages,
                           detect_swin_layout,
                           hf_swin_config,
                           is_hf_swin,
                           is_official_swin,
                           is_openmmlab_swin,
                           is_timm_swin,
                           swin_any_to_mmvisattn,
                           swin_hf_to_mmvisattn,
                           swin_official_to_mmvisattn,
                           swin_openmmlab_to_mmvisattn,
                           swin_timm_to_mmvisattn,
                           swin_to_hf,
                           swin_to_mmdet,
                           swin_to_official,
)
from .tnt_convert import (
                           detect_tnt_layout,
                           tnt_any_to_mmvisattn,
                           tnt_mmpretrain_to_mmvisattn,
                           tnt_official_to_mmvisattn,
                           tnt_timm_to_mmvisattn,
)

__all__ = [
    'extract_state_dict', 'load_pretrained', 'swin_official_to_mmvisattn',
    'swin_to_official', 'swin_to_mmdet', 'swin_openmmlab_to_mmvisattn',
    'swin_timm_to_mmvisattn', 'swin_any_to_mmvisattn', 'detect_swin_layout',
    'count_swin_stages', 'is_official_swin', 'is_timm_swin',
    'is_openmmlab_swin', 'is_hf_swin', 'swin_hf_to_mmvisattn', 'swin_to_hf',
    'hf_swin_config', 'detect_tnt_layout',
    'tnt_any_to_mmvisattn', 'tnt_mmpretrain_to_mmvisattn',
    'tnt_official_to_mmvisattn', 'tnt_timm_to_mmvisattn'
]
