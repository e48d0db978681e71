"""Checks every backbone makes the same way, so that the same mistake gets
the same error (type and wording) from Swin, TNT and RSWAtt."""
from typing import Dict, Optional, Sequence


def resolve_arch(owner: str, arch_zoo: Dict[str, dict], arch,
                 keys: Sequence[str],
                 require_keys: bool = True) -> dict:
    """The preset named ``arch`` (case-insensitive) or a custom dict.

    An unknown name, a custom dict with other keys, or one without all of
    ``keys`` (when ``require_keys``) is a ``ValueError`` naming the
    backbone, the value and the choices.
    """
    if isinstance(arch, str):
        if arch.lower() not in arch_zoo:
            raise ValueError(
                f'{owner}: unknown arch {arch!r}; choose from '
                f'{sorted(arch_zoo)} or pass a dict with keys '
                f'{", ".join(keys)}')
        return dict(arch_zoo[arch.lower()])
    if not isinstance(arch, dict) or set(arch) - set(keys) or (
            require_keys and set(keys) - set(arch)):
        raise ValueError(f'{owner}: a custom arch is a dict with keys '
                         f'{", ".join(keys)}; got {arch!r}')
    return dict(arch)


def check_stages(owner: str, num_stages: int, out_indices: Sequence[int],
                 frozen_stages: Optional[int] = None) -> None:
    """``out_indices`` within the stages, ``frozen_stages`` at most their
    number; ``ValueError`` naming the field otherwise."""
    bad = [i for i in out_indices if not 0 <= i < num_stages]
    if bad:
        raise ValueError(f'{owner}: out_indices {bad} out of range for '
                         f'{num_stages} stages (0..{num_stages - 1})')
    if frozen_stages is not None and frozen_stages > num_stages:
        raise ValueError(f'{owner}: frozen_stages={frozen_stages} exceeds '
                         f'the {num_stages} stages')
