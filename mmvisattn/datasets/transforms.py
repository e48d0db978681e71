"""InstaBoost that works with today's numpy.

instaboostfast 0.1.2 (its only release, unmaintained) builds polygons with
``np.subtract(contours, 1)`` on a list of contours of different lengths,
which numpy >= 1.24 refuses ("inhomogeneous shape"): about half of COCO's
images then crash the data loader. ``mmvisattn.InstaBoost`` is mmdet's
transform with that one function replaced by a per-contour version, so a
plain ``pip install instaboostfast`` is enough.

Use ``custom_imports=dict(imports=['mmvisattn', 'mmvisattn.datasets.transforms'])``
and ``dict(type='mmvisattn.InstaBoost', ...)`` in a pipeline.
"""
import numpy as np
from mmdet.datasets.transforms import InstaBoost as MMDetInstaBoost
from mmengine.registry import TRANSFORMS as MMENGINE_TRANSFORMS
from mmengine.registry import Registry

TRANSFORMS = Registry(
    'transform',
    parent=MMENGINE_TRANSFORMS,
    scope='mmvisattn',
    locations=['mmvisattn.datasets.transforms'])


def _binary_mask_to_polygon(binary_mask, tolerance=0):
    """instaboostfast's ``binary_mask_to_polygon``, one contour at a time."""
    from instaboostfast.pycococreater import close_contour
    from skimage import measure
    padded = np.pad(binary_mask, pad_width=1, mode='constant',
                    constant_values=0)
    polygons = []
    for contour in measure.find_contours(padded, 0.5):
        contour = close_contour(np.subtract(contour, 1))
        contour = measure.approximate_polygon(contour, tolerance)
        if len(contour) < 3:
            continue
        segmentation = np.flip(contour, axis=1).ravel().tolist()
        # padding then subtracting 1 can leave -0.5 coordinates
        polygons.append([max(0, v) for v in segmentation])
    return polygons


def patch_instaboostfast():
    """Swap the fixed function into instaboostfast (idempotent); only when
    an ``mmvisattn.InstaBoost`` is built."""
    import instaboostfast.affine_transform as affine_transform
    import instaboostfast.pycococreater as pycococreater
    for module in (pycococreater, affine_transform):
        module.binary_mask_to_polygon = _binary_mask_to_polygon


@TRANSFORMS.register_module()
class InstaBoost(MMDetInstaBoost):
    """mmdet's ``InstaBoost`` on a numpy-compatible instaboostfast."""

    def __init__(self, *args, **kwargs):
        try:
            patch_instaboostfast()
        except ImportError as e:
            raise ImportError(
                'mmvisattn.InstaBoost needs instaboostfast: pip install '
                'instaboostfast (requirements/htcpp.txt)') from e
        super().__init__(*args, **kwargs)
