from .optim_constructor import LayerDecayOptimWrapperConstructor, layer_id

__all__ = ['LayerDecayOptimWrapperConstructor', 'layer_id']
