"""What the core promises a reader, measured on the installed package.

    python dev/check_core.py

Prints, one line each:

* the code lines of ``SwinBlock.forward`` and of the method it runs
  (``residual_branches``), and whether either names the fast path;
* how many of a Swin-T's ``nn.Linear`` modules fire their forward hooks in a
  CPU ``inference_mode`` forward (1x3x800x1216, the fast path's setting);
* the named parameters of every public backbone constructor;
* what differs in torch's safe-load allow-list and mmengine's
  ``MODULE2PACKAGE`` after building every backbone (``import mmvisattn``
  has already run; ``tests/test_import_identity.py`` checks every function
  and class of the peers in a fresh interpreter).
"""
import inspect
import io
import logging
import tokenize

import torch
from mmengine.config.utils import MODULE2PACKAGE
from mmengine.logging import MMLogger

import mmvisattn
from mmvisattn.models.backbones import (
    TNT,
    RSWAttTransformer,
    RSWAttViT,
    SwinTransformer,
    SwinTransformerV2,
)
from mmvisattn.models.layers import SwinBlock

FAST_WORDS = ('fast', 'packed', 'chunk', 'backend')


def code_lines(fn) -> int:
    """Lines of ``fn`` holding code: no docstring, comment or blank line."""
    source = inspect.getsource(fn)
    lines = set()
    previous = None
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        is_doc = tok.type == tokenize.STRING and previous in (
            tokenize.INDENT, tokenize.NEWLINE)
        if tok.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE,
                            tokenize.INDENT, tokenize.DEDENT,
                            tokenize.ENDMARKER) and not is_doc:
            lines.update(range(tok.start[0], tok.end[0] + 1))
        if tok.type not in (tokenize.COMMENT, tokenize.NL):
            previous = tok.type
    return len(lines)


def hooks_fired() -> str:
    model = SwinTransformer(arch='tiny').eval()
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    fired = set()
    for m in linears:
        m.register_forward_hook(lambda mod, args, out: fired.add(id(mod)))
    with torch.inference_mode():
        model(torch.randn(1, 3, 800, 1216))
    return f'{len(fired)} of {len(linears)}'


def named_parameters(cls) -> int:
    return sum(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
               for name, p in inspect.signature(cls.__init__).parameters.items()
               if name != 'self')


def main():
    # init_weights logs every parameter at INFO
    MMLogger.get_current_instance().setLevel(logging.WARNING)
    for fn in (SwinBlock.forward, SwinBlock.residual_branches):
        source = inspect.getsource(fn)
        named = [w for w in FAST_WORDS if w in source]
        print(f'{fn.__qualname__}: {code_lines(fn)} code lines, fast-path '
              f'words: {named or "none"}')
    safe_before = set(torch.serialization.get_safe_globals())
    table_before = dict(MODULE2PACKAGE)
    print(f'Swin-T nn.Linear modules firing forward hooks (CPU '
          f'inference_mode, 1x3x800x1216): {hooks_fired()}')
    for cls in (SwinTransformer, SwinTransformerV2, TNT, RSWAttTransformer,
                RSWAttViT):
        print(f'{cls.__name__}.__init__: {named_parameters(cls)} named '
              'parameters')
        cls().init_weights()
    changed = [name for name, same in (
        ('torch.serialization.get_safe_globals()',
         set(torch.serialization.get_safe_globals()) == safe_before),
        ('mmengine MODULE2PACKAGE', dict(MODULE2PACKAGE) == table_before))
        if not same]
    print(f'after import {mmvisattn.__name__} and building every backbone, '
          f'changed: {changed or "nothing"} (safe globals '
          f'{len(safe_before)}, MODULE2PACKAGE has mmvisattn: '
          f'{"mmvisattn" in MODULE2PACKAGE})')


if __name__ == '__main__':
    main()
