"""The project's demo dataset, coloured shapes written deterministically
(``tools/make_demo_data.py`` is its command line): one set of scenes as COCO
instances (polygons) for detection and in the ADE20K layout (label PNGs,
0 = background/void) for semantic segmentation."""
import json
import os
import os.path as osp
from typing import Dict, List, Tuple

import cv2
import numpy as np

CLASSES = ('square', 'circle', 'triangle')
# BGR fill colours per class, jittered per instance.
_BASE_COLOURS = ((40, 200, 40), (40, 40, 220), (220, 140, 30))
PALETTE = [(0, 0, 0)] + [tuple(int(c) for c in col[::-1])
                         for col in _BASE_COLOURS]


def _polygon(kind: int, cx: float, cy: float, r: float,
             angle: float) -> np.ndarray:
    if kind == 0:
        n, start = 4, np.pi / 4 + angle
    elif kind == 1:
        n, start = 24, 0.
    else:
        n, start = 3, -np.pi / 2 + angle
    t = start + np.arange(n) * 2 * np.pi / n
    return np.stack([cx + r * np.cos(t), cy + r * np.sin(t)], 1)


def make_scene(rng: np.random.RandomState, size: Tuple[int, int]
               ) -> Tuple[np.ndarray, np.ndarray, List[Dict]]:
    """One image, its semantic label map and its instances."""
    h, w = size
    img = np.empty((h, w, 3), np.uint8)
    img[:] = rng.randint(20, 90, size=3)
    img = np.clip(img + rng.normal(0, 8, img.shape), 0, 255).astype(np.uint8)
    label = np.zeros((h, w), np.uint8)
    instances = []
    occupied = np.zeros((h, w), bool)
    for _ in range(rng.randint(1, 4)):
        kind = rng.randint(len(CLASSES))
        for _try in range(10):
            r = rng.uniform(0.12, 0.24) * min(h, w)
            cx, cy = rng.uniform(r, w - r), rng.uniform(r, h - r)
            poly = _polygon(kind, cx, cy, r, rng.uniform(0, np.pi / 2))
            mask = np.zeros((h, w), np.uint8)
            cv2.fillPoly(mask, [np.round(poly).astype(np.int32)], 1)
            mask = mask.astype(bool)
            if not (mask & occupied).any():
                break
        else:
            continue
        occupied |= mask
        colour = np.clip(
            np.array(_BASE_COLOURS[kind]) + rng.randint(-25, 26, 3), 0, 255)
        img[mask] = colour
        label[mask] = kind + 1
        x0, y0 = poly.min(0)
        x1, y1 = poly.max(0)
        x0, y0 = max(x0, 0.), max(y0, 0.)
        x1, y1 = min(x1, w - 1.), min(y1, h - 1.)
        instances.append(
            dict(
                category_id=kind + 1,
                bbox=[float(x0), float(y0), float(x1 - x0), float(y1 - y0)],
                area=float(mask.sum()),
                segmentation=[np.round(poly, 1).flatten().tolist()],
                iscrowd=0))
    return img, label, instances


def write_scenes(root: str, make_scene, classes, palette, num_train: int,
                 num_val: int, size: Tuple[int, int], seed: int) -> str:
    """Write ``make_scene(rng, size) -> (image, label map, instances)``'s
    scenes under ``root`` in the layout of :func:`generate_shapes` (also
    dev/make_rswatt_bench.py's): idempotent, same arguments, same files."""
    stamp = osp.join(root, f'.complete-{num_train}-{num_val}-{size[0]}x'
                     f'{size[1]}-{seed}')
    if osp.exists(stamp):
        return root
    rng = np.random.RandomState(seed)
    categories = [dict(id=i + 1, name=n) for i, n in enumerate(classes)]
    for split, count, ade_split in (('train', num_train, 'training'),
                                    ('val', num_val, 'validation')):
        img_dir = osp.join(root, 'images', split)
        ade_img_dir = osp.join(root, 'ade', 'images', ade_split)
        ade_ann_dir = osp.join(root, 'ade', 'annotations', ade_split)
        for d in (img_dir, ade_img_dir, ade_ann_dir,
                  osp.join(root, 'annotations')):
            os.makedirs(d, exist_ok=True)
        images, annotations = [], []
        for i in range(count):
            img, label, instances = make_scene(rng, size)
            name = f'{split}_{i:05d}.png'
            cv2.imwrite(osp.join(img_dir, name), img)
            cv2.imwrite(osp.join(ade_img_dir, name), img)
            cv2.imwrite(osp.join(ade_ann_dir, name), label)
            image_id = len(images) + 1
            images.append(
                dict(id=image_id, file_name=name, height=size[0],
                     width=size[1]))
            for inst in instances:
                annotations.append(
                    dict(id=len(annotations) + 1, image_id=image_id, **inst))
        with open(osp.join(root, 'annotations', f'instances_{split}.json'),
                  'w') as f:
            json.dump(
                dict(images=images, annotations=annotations,
                     categories=categories), f)
    with open(osp.join(root, 'classes.json'), 'w') as f:
        json.dump(dict(classes=list(classes), palette=palette), f)
    open(stamp, 'w').close()
    return root


def generate_shapes(root: str,
                    num_train: int = 240,
                    num_val: int = 40,
                    size: Tuple[int, int] = (160, 160),
                    seed: int = 0) -> str:
    """Write the dataset under ``root`` (idempotent: same seed, same files).

    Layout::

        root/images/{train,val}/*.png           (shared by both tasks)
        root/annotations/instances_{train,val}.json       COCO instances
        root/ade/images/{training,validation}/*.png        same images
        root/ade/annotations/{training,validation}/*.png   labels, 0 = void
    """
    return write_scenes(root, make_scene, CLASSES, PALETTE, num_train,
                        num_val, size, seed)
